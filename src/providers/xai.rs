//! xAI text to speech: `POST https://api.x.ai/v1/tts` with `Authorization: Bearer <key>`, whose
//! body is the audio itself (xAI's official SDK reads it as binary unless `with_timestamps` asks
//! for JSON, which the gateway never does).
//!
//! The body: `text`, `language` (required by xAI: a BCP-47 code or `auto`; the caller may send
//! one as a pass-through field, else the gateway sends `auto`), `voice_id` (a built-in voice such
//! as `eve`, or a custom voice id), and `output_format: {codec, sample_rate}`: MP3 at xAI's
//! default rate (24 kHz), WAV and raw PCM (16-bit little-endian) at 24 kHz, OpenAI's `pcm` rate.
//! The endpoint takes no model: the target's native model is a name in the configuration only.
//! `speed` is never sent (its range is not the public API's; docs/providers/xai.md). Both public
//! stream formats use the same answer: copied as is, or wrapped in the gateway's SSE events.
//!
//! Errors are JSON whose message is `error.message` or `error` (a string), as xAI's official SDK
//! reads them, classified by status (401/403 the operator's key, 429 a rate limit, 5xx and 529
//! "overloaded" retried).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::native::{json_with_extra, NativeRequest};
use crate::providers::formats::errors::status_error;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const TTS_PATH: &str = "/v1/tts";

/// WAV and PCM are 16-bit mono at 24 kHz, like OpenAI's `pcm` (xAI's default rate too).
const PCM_SAMPLE_RATE: u32 = 24_000;

/// The language sent when the caller gives none: xAI's automatic detection.
const AUTO_LANGUAGE: &str = "auto";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct TtsBody<'a> {
    text: &'a str,
    /// `None` when the caller sends its own `language` (a pass-through field, written after).
    #[serde(skip_serializing_if = "Option::is_none")]
    language: Option<&'static str>,
    voice_id: &'a str,
    output_format: OutputFormat,
}

#[derive(Serialize)]
struct OutputFormat {
    codec: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_rate: Option<u32>,
}

/// `{"error": {"message", "code", "type"}}` or `{"error": "…", "code": "…"}`.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

impl ErrorBody {
    fn text(self) -> Option<String> {
        let nested = match &self.error {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Object(o)) => o.get("message").and_then(Value::as_str).map(str::to_string),
            _ => None,
        };
        nested.or(self.message).filter(|m| !m.trim().is_empty())
    }
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    _target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let output_format = output_format(req.response_format)?;
    let own_language = req
        .passthrough
        .iter()
        .any(|(name, _)| name.as_str() == "language");
    let body = TtsBody {
        text: req.input.as_str(),
        language: (!own_language).then_some(AUTO_LANGUAGE),
        voice_id: req.voice.as_str(),
        output_format,
    };
    Ok(NativeRequest::post_json(
        TTS_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// The native `output_format` for a public format.
fn output_format(format: &str) -> Result<OutputFormat, GatewayError> {
    let (codec, sample_rate) = match format {
        // xAI's default MP3 (24 kHz, 128 kbps).
        "mp3" => ("mp3", None),
        "wav" => ("wav", Some(PCM_SAMPLE_RATE)),
        "pcm" => ("pcm", Some(PCM_SAMPLE_RATE)),
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "xai cannot produce `{other}`"
            )))
        }
    };
    Ok(OutputFormat { codec, sample_rate })
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // The answer body is the audio itself.
    SpeechDecoding::raw_audio(provider, req.sse)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let message = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => e.text(),
        // A plain-text answer (the SDK reads one as the message too); never an HTML page.
        Err(_) => std::str::from_utf8(body)
            .ok()
            .map(str::trim)
            .filter(|t| !t.is_empty() && !t.starts_with('<') && t.len() <= 1000)
            .map(str::to_string),
    };
    status_error(provider, status, message.as_deref())
}

// ---- registration ----------------------------------------------------------------------------

/// The xAI kind: `Authorization: Bearer`, speech.
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
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;
    use serde_json::json;

    const KEY: &str = "xai-secret-key-42";

    fn catalog() -> Catalog {
        let p = support::provider("xai", KEY);
        support::catalog(
            "grok-tts",
            "xai-tts",
            support::target(p, "default"),
            15_000,
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
            r#"{"model":"grok-tts","input":"Hello \"world\"","voice":"ara","response_format":"pcm","language":"pt-BR","text_normalization":true}"#,
        );
        assert_eq!(n.path, "/v1/tts");
        assert_eq!(n.content_type, "application/json");
        assert!(n.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"text":"Hello \"world\"","voice_id":"ara","output_format":{"codec":"pcm","sample_rate":24000},"language":"pt-BR","text_normalization":true}"#
        );
    }

    #[test]
    fn maps_formats_and_the_default_voice_and_language() {
        for (format, sample_rate) in [("mp3", None), ("wav", Some(24000)), ("pcm", Some(24000))] {
            let n = native(&format!(
                r#"{{"model":"grok-tts","input":"hi","response_format":"{format}"}}"#
            ));
            let body: Value = serde_json::from_slice(&n.body).unwrap();
            let mut output = json!({"codec": format});
            if let Some(rate) = sample_rate {
                output["sample_rate"] = json!(rate);
            }
            assert_eq!(
                body,
                json!({"text": "hi", "language": "auto", "voice_id": "eve", "output_format": output}),
                "{format}"
            );
        }
        assert!(output_format("opus").is_err());
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("xai", KEY);
        let cases: &[(u16, String, UpstreamErrorKind, &str)] = &[
            (
                400,
                r#"{"code":"Client specified an invalid argument","error":"language is required"}"#
                    .into(),
                UpstreamErrorKind::InvalidRequest,
                "language is required",
            ),
            (
                401,
                format!(
                    r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"invalid_request_error"}}}}"#
                ),
                UpstreamErrorKind::AuthRejected,
                "",
            ),
            (
                403,
                r#"{"error":"Your team does not have permission"}"#.into(),
                UpstreamErrorKind::AuthRejected,
                "Your team does not have permission",
            ),
            (
                429,
                r#"{"error":"Rate limit exceeded"}"#.into(),
                UpstreamErrorKind::RateLimited,
                "Rate limit exceeded",
            ),
            (
                529,
                "Service overloaded".into(),
                UpstreamErrorKind::Failure,
                "Service overloaded",
            ),
            (
                500,
                "<html>oops</html>".into(),
                UpstreamErrorKind::Failure,
                "HTTP 500",
            ),
        ];
        for (status, body, kind, message) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
            assert!(!e.message.contains(KEY), "{}", e.message);
            if !message.is_empty() {
                assert_eq!(e.message, *message, "{status}");
            }
        }
        assert!(error_response(&p, 529, b"").retryable());
        assert!(error_response(&p, 503, b"").retryable());
    }
}
