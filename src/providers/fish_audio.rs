//! Fish Audio: speech through its native `POST /v1/tts`, whose body is the audio itself, streamed
//! as it is synthesised.
//!
//! The native endpoint is used rather than the OpenAI-compatible one because its contract is the
//! one Fish Audio documents field by field (JSON or MessagePack body, the model in a `model`
//! header) and it takes the speed the public API offers (`prosody.speed` 0.5–2.0). The body
//! carries the text, the voice as `reference_id`, the `format`, and the 24 kHz `sample_rate` for
//! PCM and WAV (OpenAI's `pcm` rate); the caller's pass-through fields follow verbatim. Both public
//! stream formats use the same answer: copied as is, or wrapped in the gateway's SSE events (not
//! WAV, whose header is written for a whole file).
//!
//! Fish Audio falls back to its default model when the `model` header names one it does not know,
//! so a misspelt native model cannot be detected from the answer (docs/providers/fish-audio.md).
//! Errors are `{"message", "status"}` JSON (plain text when the body could not be parsed).

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const TTS_PATH: &str = "/v1/tts";

/// PCM and WAV are 16-bit mono at 24 kHz, like OpenAI's `pcm` (Fish Audio's own default is
/// 44.1 kHz).
const PCM_SAMPLE_RATE: u32 = 24_000;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct TtsBody<'a> {
    text: &'a str,
    reference_id: &'a str,
    format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_rate: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prosody: Option<Prosody>,
}

#[derive(Serialize)]
struct Prosody {
    speed: f64,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let (format, sample_rate) = output_format(req.response_format)?;
    let body = TtsBody {
        text: req.input.as_str(),
        reference_id: req.voice.as_str(),
        format,
        sample_rate,
        // 1 is Fish Audio's default: only another speed is sent.
        prosody: (req.speed != 1.0).then_some(Prosody { speed: req.speed }),
    };
    let model = HeaderValue::from_str(&target.native_model).map_err(|_| {
        GatewayError::Internal(format!(
            "fish-audio model `{}` cannot be sent in a header",
            target.native_model
        ))
    })?;
    let mut native = NativeRequest::post_json(TTS_PATH, json_with_extra(&body, &req.passthrough)?);
    native
        .headers
        .push((HeaderName::from_static("model"), model));
    Ok(native)
}

/// The native `format` (and sample rate) for a public format.
fn output_format(format: &str) -> Result<(&'static str, Option<u32>), GatewayError> {
    Ok(match format {
        "mp3" => ("mp3", None),
        "opus" => ("opus", None),
        "wav" => ("wav", Some(PCM_SAMPLE_RATE)),
        "pcm" => ("pcm", Some(PCM_SAMPLE_RATE)),
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "fish-audio cannot produce `{other}`"
            )))
        }
    })
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // The answer body is the audio itself.
    SpeechDecoding::raw_audio(provider, req.sse)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let message = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => e.message.filter(|m| !m.trim().is_empty()),
        // A body Fish Audio could not parse is answered as plain text.
        Err(_) => std::str::from_utf8(body)
            .ok()
            .map(str::trim)
            .filter(|t| !t.is_empty() && !t.starts_with('<') && t.len() <= 1000)
            .map(str::to_string),
    };
    let message = message
        .map(|m| provider.redact(&m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let unknown_voice = status == 404 || (status == 400 && names_a_missing_voice(&message));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    if unknown_voice {
        // A 404 is a voice model id Fish Audio does not have (an unknown `model` header falls
        // back to the default model instead); the caller's when it named the voice.
        err.kind = UpstreamErrorKind::UnknownVoice;
    }
    err
}

/// Whether a 400's message says the `reference_id` does not exist (Fish Audio documents that a
/// 400 may mean so, without its wording).
fn names_a_missing_voice(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    (m.contains("reference") || m.contains("voice"))
        && (m.contains("not found") || m.contains("not exist") || m.contains("doesn't exist"))
}

// ---- registration ----------------------------------------------------------------------------

/// The Fish Audio kind: `Authorization: Bearer`, speech only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, crate::upstream::provider::Auth::bearer)?;
    let speech = crate::providers::registry::SpeechFns {
        request: speech_request,
        decoding: Some(speech_decoding),
    };
    Ok(crate::providers::registry::speech_kind(
        auth,
        error_response,
        speech,
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::speech::parse;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;
    use serde_json::{json, Value};

    const KEY: &str = "fish-secret-key-42";

    fn catalog() -> Catalog {
        let p = support::provider("fish-audio", KEY);
        support::catalog(
            "s2.1-pro",
            "fish-audio-tts",
            support::target(p, "s2.1-pro"),
            10_000,
            1,
        )
    }

    fn native(body: &str) -> NativeRequest {
        let catalog = catalog();
        let req = parse(body.as_bytes(), &catalog, 3).unwrap();
        speech_request(&req.model.targets[0], &req).unwrap()
    }

    #[test]
    fn builds_the_native_request() {
        let n = native(
            r#"{"model":"s2.1-pro","input":"Hello \"world\"","voice":"v1","response_format":"pcm","speed":2,"temperature":0.5,"latency":"normal"}"#,
        );
        assert_eq!(n.path, "/v1/tts");
        assert_eq!(n.content_type, "application/json");
        assert_eq!(n.headers.len(), 1);
        assert_eq!(n.headers[0].0.as_str(), "model");
        assert_eq!(n.headers[0].1, "s2.1-pro");
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"text":"Hello \"world\"","reference_id":"v1","format":"pcm","sample_rate":24000,"prosody":{"speed":2.0},"temperature":0.5,"latency":"normal"}"#
        );
    }

    #[test]
    fn maps_formats_speeds_and_the_default_voice() {
        for (format, sample_rate) in [
            ("mp3", None),
            ("opus", None),
            ("wav", Some(24000)),
            ("pcm", Some(24000)),
        ] {
            let n = native(&format!(
                r#"{{"model":"s2.1-pro","input":"hi","response_format":"{format}"}}"#
            ));
            let body: Value = serde_json::from_slice(&n.body).unwrap();
            let mut expected = json!({
                "text": "hi",
                "reference_id": "802e3bc2b27e49c2995d23ef70e6ac89",
                "format": format,
            });
            if let Some(rate) = sample_rate {
                expected["sample_rate"] = json!(rate);
            }
            // Speed 1 is Fish Audio's default: no `prosody`.
            assert_eq!(body, expected, "{format}");
        }
        let n = native(r#"{"model":"s2.1-pro","input":"hi","speed":0.5}"#);
        let body: Value = serde_json::from_slice(&n.body).unwrap();
        assert_eq!(body["prosody"], json!({"speed": 0.5}));
        assert!(output_format("aac").is_err());
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("fish-audio", KEY);

        let body = format!(r#"{{"message":"Invalid Token {KEY}","status":401}}"#);
        let e = error_response(&p, 401, body.as_bytes());
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);

        let e = error_response(
            &p,
            402,
            br#"{"message":"Insufficient credits","status":402}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        for (status, body) in [
            (
                404,
                &br#"{"message":"Voice model not found","status":404}"#[..],
            ),
            (
                400,
                br#"{"message":"Reference id abc does not exist","status":400}"#,
            ),
        ] {
            let e = error_response(&p, status, body);
            assert_eq!(e.kind, UpstreamErrorKind::UnknownVoice, "{status}");
            assert!(!e.retryable());
        }

        let e = error_response(
            &p,
            422,
            br#"{"message":"chunk_length must be at least 100","status":422}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "chunk_length must be at least 100");

        // An unparsable body is answered in plain text.
        let e = error_response(&p, 400, b"Failed to parse the request body as JSON");
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Failed to parse the request body as JSON");

        let e = error_response(
            &p,
            429,
            br#"{"message":"Rate limit exceeded","status":429}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        let e = error_response(&p, 502, b"<html>Bad Gateway</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 502");
        assert!(e.retryable());
    }
}
