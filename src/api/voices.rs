//! A speech model's voices: the voice map a request's `voice` goes through (config `voice_map`:
//! names clients send, such as OpenAI's `alloy`, → the provider's voice), and the public shape of
//! `GET /api/v1/audio/voices?model=…`:
//!
//! ```json
//! {"object": "list", "model": "eleven-multilingual-v2", "default_voice": "JBFqnCBsd6RMkjVDRZzb",
//!  "provider_voices": "listed",
//!  "data": [{"id": "JBFqnCBsd6RMkjVDRZzb", "name": "George", "source": "builtin", "default": true},
//!           {"id": "alloy", "name": "alloy", "source": "mapping", "voice": "JBFqnCBsd6RMkjVDRZzb"},
//!           {"id": "EXAVITQu4vr4xnSDxMaL", "name": "Sarah", "source": "provider"}]}
//! ```
//!
//! `source` says where a voice comes from: the capability data (`builtin`: the model's default
//! and its listed voices), the operator's `voice_map` (`mapping`, with the provider's `voice` it
//! stands for), or the provider's own voice list (`provider`). `provider_voices` says whether the
//! provider's list is in it: `listed`, `unavailable` (the provider could not be asked just now;
//! the rest is listed), or `not_offered` (the provider has no voice-list endpoint).

use std::borrow::Cow;

use serde::Serialize;

use crate::api::discovery::Listed;
use crate::caps::SpeechCaps;
use crate::catalog::Model;
use crate::common::json::Str;

/// The voice the provider receives for `voice`: the mapped one when the model maps the name,
/// else `voice` itself.
pub(crate) fn resolve<'a>(model: &Model, voice: Str<'a>) -> Str<'a> {
    match model.voice_map.get(voice.as_str()) {
        Some(mapped) => Str(Cow::Owned(mapped.clone())),
        None => voice,
    }
}

/// Whether the model maps `voice` to a provider voice.
pub(crate) fn is_mapped(model: &Model, voice: &str) -> bool {
    model.voice_map.contains_key(voice)
}

/// Every voice name a model with a fixed voice list accepts: its voices, then its mapped names.
pub(crate) fn accepted(model: &Model, caps: &SpeechCaps) -> String {
    caps.voices
        .iter()
        .copied()
        .chain(model.voice_map.keys().map(String::as_str))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where a listed voice comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Source {
    Builtin,
    Mapping,
    Provider,
}

/// Whether the provider's own voice list is part of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProviderVoices {
    Listed,
    Unavailable,
    NotOffered,
}

/// One voice of a listing.
#[derive(Debug, Serialize)]
pub(crate) struct Voice {
    /// What a request's `voice` names.
    pub id: String,
    /// The provider's name for it when known, else the id.
    pub name: String,
    pub source: Source,
    /// For a mapping: the provider's voice the name stands for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// The voice used when a request names none.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
}

/// `GET /api/v1/audio/voices`'s answer.
#[derive(Debug, Serialize)]
pub(crate) struct VoiceList {
    pub object: &'static str,
    pub model: String,
    /// `null` for a model with no default voice (its requests must name one).
    pub default_voice: Option<String>,
    pub provider_voices: ProviderVoices,
    pub data: Vec<Voice>,
}

/// The listing of `model`'s voices: its default and listed voices, its mapped names, then the
/// provider's voices (`provider`, when asked) not already there, unless the model lists its
/// voices (then the provider's list only names them).
pub(crate) fn list(
    model: &Model,
    caps: &SpeechCaps,
    provider: &[Listed],
    provider_voices: ProviderVoices,
) -> VoiceList {
    let name_of = |id: &str| {
        provider
            .iter()
            .find(|l| l.id == id)
            .and_then(|l| l.name.clone())
            .unwrap_or_else(|| id.to_string())
    };
    let mut data: Vec<Voice> = Vec::new();
    let default = caps.default_voice.unwrap_or_default();
    // A default that is itself a mapped name is listed as the mapping.
    if caps.default_voice.is_some() && !is_mapped(model, default) {
        data.push(Voice {
            id: default.to_string(),
            name: name_of(default),
            source: Source::Builtin,
            voice: None,
            default: true,
        });
    }
    for v in caps.voices.iter().filter(|v| **v != default) {
        data.push(Voice {
            id: v.to_string(),
            name: name_of(v),
            source: Source::Builtin,
            voice: None,
            default: false,
        });
    }
    for (name, voice) in &model.voice_map {
        data.push(Voice {
            id: name.clone(),
            name: name.clone(),
            source: Source::Mapping,
            voice: Some(voice.clone()),
            default: name == default,
        });
    }
    for l in provider {
        // A model with a voice list takes no other voice: the provider's others are not offered.
        if !caps.voices.is_empty() || data.iter().any(|v| v.id == l.id) {
            continue;
        }
        data.push(Voice {
            id: l.id.clone(),
            name: l.name.clone().unwrap_or_else(|| l.id.clone()),
            source: Source::Provider,
            voice: None,
            default: false,
        });
    }
    VoiceList {
        object: "list",
        model: model.name.clone(),
        default_voice: caps.default_voice.map(str::to_string),
        provider_voices,
        data,
    }
}
