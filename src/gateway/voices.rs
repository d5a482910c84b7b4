//! `GET /api/v1/audio/voices?model=…`: a speech model's voices, authenticated like the other
//! endpoints. The capability data and the operator's voice map are in the settings; the voices of
//! a provider with a voice-list endpoint come from that endpoint through the state's cache
//! (`engine::discovery::VoiceCache`), so the provider is asked at most once per TTL. The answer's
//! shape is `api::voices`'s.

use std::collections::HashSet;

use bytes::Bytes;

use super::models::percent_decoded;
use super::outcome::{Call, Outcome};
use crate::api::voices::{self, ProviderVoices};
use crate::caps::Caps;
use crate::common::error::GatewayError;

/// Answer a voice listing.
pub(crate) async fn serve(call: &mut Call<'_>) -> Outcome {
    let mut out = Outcome::new();
    match listing(call, &mut out).await {
        Ok(body) => call.json(out, body, &[]).await,
        Err(e) => {
            out.result = Err(e.into());
            out
        }
    }
}

/// The listing's JSON for the model the query names (noted in `out`).
async fn listing(call: &Call<'_>, out: &mut Outcome) -> Result<Bytes, GatewayError> {
    let (state, settings, region) = (call.state, call.settings, call.region);
    let query = call.session.req_header().uri.query().unwrap_or_default();
    let name = match param(query, "model") {
        None => {
            return Err(GatewayError::field(
                "model",
                "required: the speech model whose voices to list (`?model=…`)",
            ))
        }
        Some(None) => {
            return Err(GatewayError::field(
                "model",
                "is not a valid percent-encoded name",
            ))
        }
        Some(Some(name)) if name.is_empty() => {
            return Err(GatewayError::field(
                "model",
                "required: the speech model whose voices to list (`?model=…`)",
            ))
        }
        Some(Some(name)) => name,
    };
    let model = settings
        .catalog
        .get(&name)
        .cloned()
        .ok_or(GatewayError::ModelNotFound)?;
    out.model = Some(model.clone());
    let Caps::Speech(caps) = model.caps else {
        return Err(GatewayError::field(
            "model",
            format!(
                "model `{name}` is a {} model; only speech models have voices",
                model.operation().as_str()
            ),
        ));
    };

    // Each account behind the model that can list its voices, once.
    let mut from_provider = Vec::new();
    let mut status = ProviderVoices::NotOffered;
    let mut asked = HashSet::new();
    for target in model.enabled_targets() {
        let provider = &target.provider;
        if !asked.insert(provider.name.as_str()) {
            continue;
        }
        let Some(fns) = settings.adapters.discovery(provider).voices else {
            continue;
        };
        match state
            .voices
            .voices(&state.upstream, provider, region, fns)
            .await
        {
            Ok(listed) => {
                if status == ProviderVoices::NotOffered {
                    status = ProviderVoices::Listed;
                }
                from_provider.extend(listed.iter().cloned());
            }
            Err(e) => {
                log::warn!(
                    "voices of {}: {}'s voice list is unavailable: {e}",
                    model.name,
                    provider.name
                );
                status = ProviderVoices::Unavailable;
            }
        }
    }
    let listing = voices::list(&model, caps, &from_provider, status);
    let body = serde_json::to_vec(&listing)
        .map_err(|e| GatewayError::Internal(format!("serializing voices: {e}")))?;
    Ok(body.into())
}

/// The value of query parameter `key`: `None` when absent, `Some(None)` when its escapes are
/// malformed. `+` is a space, as forms encode it.
fn param(query: &str, key: &str) -> Option<Option<String>> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| percent_decoded(&v.replace('+', " ")))
    })
}

#[cfg(test)]
mod tests {
    use super::param;

    #[test]
    fn the_model_is_read_from_the_query() {
        assert_eq!(param("model=tts-1", "model"), Some(Some("tts-1".into())));
        assert_eq!(param("x=1&model=a%2Fb", "model"), Some(Some("a/b".into())));
        assert_eq!(param("x=1", "model"), None);
        assert_eq!(param("model=%zz", "model"), Some(None));
        assert_eq!(param("model", "model"), Some(Some(String::new())));
    }
}
