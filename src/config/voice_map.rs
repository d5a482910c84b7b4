//! A speech model's `voice_map`: the voice names clients send (OpenAI's `alloy`, `nova`, …) mapped
//! to the provider's own voices, so that an unchanged OpenAI client works on every speech model.
//! Checked at load: only speech models take one, every name and voice is non-empty, and where the
//! model lists its voices (`capabilities.voices`) every mapped voice must be one of them.

use std::collections::BTreeMap;

use crate::caps::Caps;

/// The model's map as the catalog keeps it (names and voices trimmed); problems are pushed to
/// `errors` with their key path under `at` (`switchyard.models.<name>`).
pub(crate) fn check(
    map: &BTreeMap<String, String>,
    caps: Caps,
    at: &str,
    errors: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if map.is_empty() {
        return out;
    }
    let Caps::Speech(speech) = caps else {
        errors.push(format!(
            "{at}.voice_map: only speech models take a voice map (this is a {} model)",
            caps.operation().as_str()
        ));
        return out;
    };
    for (name, voice) in map {
        let (name_t, voice_t) = (name.trim(), voice.trim());
        if name_t.is_empty() {
            errors.push(format!("{at}.voice_map: a voice name must not be empty"));
            continue;
        }
        if voice_t.is_empty() {
            errors.push(format!(
                "{at}.voice_map.{name}: must name the provider's voice that `{name_t}` stands for"
            ));
            continue;
        }
        if !speech.voices.is_empty() && !speech.voices.contains(&voice_t) {
            errors.push(format!(
                "{at}.voice_map.{name}: `{voice_t}` is not one of the model's voices ({})",
                speech.voices.join(", ")
            ));
            continue;
        }
        if out
            .insert(name_t.to_string(), voice_t.to_string())
            .is_some()
        {
            errors.push(format!("{at}.voice_map.{name}: `{name_t}` is mapped twice"));
        }
    }
    out
}
