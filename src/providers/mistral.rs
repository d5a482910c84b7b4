//! Mistral Voxtral TTS: speech through `POST /v1/audio/speech` (docs/providers/mistral.md).
//!
//! The body is `{model, input, voice_id, response_format}`: the voice goes out as `voice_id` (a
//! preset such as `gb_jane_neutral`, or a voice saved in the Mistral workspace), not OpenAI's
//! `voice`. The answer is one JSON document with the whole audio base64-encoded in `audio_data`,
//! so it is buffered, decoded and written out at once.
//!
//! What the family does not offer, and why: Voxtral takes no speed (pace is steered with inline
//! tags in the text), so only speed 1; its `pcm` is 32-bit float samples (what the public `pcm`,
//! 16-bit integers, is not), so `pcm` is refused; its `stream: true` answer (SSE) is not wired, so
//! no SSE. Errors are Mistral's `{"object": "error", "message", "type", "code"}` envelope, or
//! FastAPI's `{"detail": …}` on a 422; `type: invalid_model` is the "no such model" signal.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::fastapi::detail_text;
use crate::providers::parse_answer;
use crate::stream::audio::{base64_audio, Finished, SpeechDecoding, SpeechUsage, Whole};
use crate::upstream::provider::{bad_answer, Provider};

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/v1/audio/speech";

/// The `type` of Mistral's error envelope for a model it does not serve.
const INVALID_MODEL: &str = "invalid_model";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model: &'a str,
    input: &'a str,
    voice_id: &'a str,
    response_format: &'static str,
}

#[derive(Deserialize)]
struct SpeechAnswer {
    #[serde(default)]
    audio_data: Option<String>,
}

/// Mistral's error envelope; `message` is usually a string but may be an object, and a request
/// that fails validation answers FastAPI's `detail` instead.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<Value>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    detail: Option<Value>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = SpeechBody {
        model: &target.native_model,
        input: req.input.as_str(),
        voice_id: req.voice.as_str(),
        response_format: output_format(req.response_format)?,
    };
    Ok(NativeRequest::post_json(
        SPEECH_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// The native `response_format` for a public format.
fn output_format(format: &str) -> Result<&'static str, GatewayError> {
    Ok(match format {
        "mp3" => "mp3",
        "opus" => "opus",
        "flac" => "flac",
        "wav" => "wav",
        // Validation refuses every other format for this family (`pcm` included: Mistral's is
        // float samples), so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "mistral cannot produce `{other}`"
            )))
        }
    })
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(
    provider: &Arc<Provider>,
    _req: &SpeechRequest<'_>,
) -> SpeechDecoding {
    // The whole audio arrives in one JSON document; SSE never gets here (validation refuses it).
    SpeechDecoding::Decode(Box::new(Whole::new(provider, decode_answer)))
}

fn decode_answer(
    provider: &Provider,
    body: &[u8],
    out: &mut Vec<Bytes>,
) -> Result<Finished, UpstreamError> {
    let answer: SpeechAnswer = parse_answer(provider, body)?;
    let text = answer
        .audio_data
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| bad_answer(provider, "answer carries no audio_data"))?;
    let audio = base64_audio(provider, &text)?;
    if audio.is_empty() {
        return Err(bad_answer(provider, "answer carries no audio"));
    }
    out.push(audio);
    // The JSON answer reports no usage; the gateway counts the input's characters.
    Ok(Finished::Done(SpeechUsage::default()))
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let message = parsed.as_ref().and_then(|e| {
        e.detail
            .as_ref()
            .and_then(detail_text)
            .or_else(|| match &e.message {
                Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
                // `message` may itself hold a FastAPI `detail`.
                Some(Value::Object(o)) => o.get("detail").and_then(detail_text),
                _ => None,
            })
    });
    let mut err = status_error(provider, status, message.as_deref());
    let invalid_model = parsed
        .as_ref()
        .and_then(|e| e.kind.as_deref())
        .is_some_and(|k| k == INVALID_MODEL);
    if invalid_model && (400..500).contains(&status) && status != 429 {
        // The native model in the gateway's config: an operator problem.
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Mistral kind: `Authorization: Bearer`, speech only.
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
    use crate::stream::audio::AudioDecoder;
    use base64::Engine;
    use serde_json::json;

    const KEY: &str = "mistral-secret-key-42";

    fn provider() -> Arc<Provider> {
        support::provider("mistral", KEY)
    }

    fn catalog() -> Catalog {
        support::catalog(
            "voxtral-mini-tts",
            "voxtral-tts",
            support::target(provider(), "voxtral-mini-tts-2603"),
            5_000,
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
            r#"{"model":"voxtral-mini-tts","input":"Hello \"world\"","voice":"voice_478","response_format":"flac"}"#,
        );
        assert_eq!(n.path, "/v1/audio/speech");
        assert_eq!(n.content_type, "application/json");
        assert!(n.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"model":"voxtral-mini-tts-2603","input":"Hello \"world\"","voice_id":"voice_478","response_format":"flac"}"#
        );
    }

    #[test]
    fn maps_formats_and_the_default_voice() {
        for format in ["mp3", "opus", "flac", "wav"] {
            let n = native(&format!(
                r#"{{"model":"voxtral-mini-tts","input":"hi","response_format":"{format}"}}"#
            ));
            let body: Value = serde_json::from_slice(&n.body).unwrap();
            assert_eq!(
                body,
                json!({
                    "model": "voxtral-mini-tts-2603",
                    "input": "hi",
                    "voice_id": "gb_jane_neutral",
                    "response_format": format,
                })
            );
        }
        assert!(output_format("pcm").is_err());
        assert!(output_format("aac").is_err());
    }

    fn decoder() -> Box<dyn AudioDecoder> {
        let catalog = catalog();
        let req = parse(br#"{"model":"voxtral-mini-tts","input":"hi"}"#, &catalog, 3).unwrap();
        match speech_decoding(&provider(), &req) {
            SpeechDecoding::Decode(d) => d,
            SpeechDecoding::Passthrough => panic!("Mistral answers need decoding"),
        }
    }

    #[test]
    fn decodes_the_answer_split_anywhere() {
        let audio: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&audio);
        let answer = format!(r#"{{"audio_data": "{b64}"}}"#).into_bytes();
        for cuts in [vec![1, 7, 40, answer.len() - 1], vec![0, 15, 16, 600]] {
            let mut d = decoder();
            let mut out = Vec::new();
            let mut from = 0;
            for &to in cuts.iter().chain(std::iter::once(&answer.len())) {
                d.push(&Bytes::copy_from_slice(&answer[from..to]), &mut out)
                    .unwrap();
                from = to;
            }
            assert!(out.is_empty(), "nothing before the answer is whole");
            d.finish(&mut out).unwrap();
            assert_eq!(out.concat(), audio);
        }
        for bad in [
            &br#"{"audio_data": ""}"#[..],
            br#"{}"#,
            br#"{"audio_data": "!!"}"#,
            b"<html>",
        ] {
            let mut d = decoder();
            let mut out = Vec::new();
            d.push(&Bytes::copy_from_slice(bad), &mut out).unwrap();
            let e = d.finish(&mut out).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{bad:?}");
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();

        let body = format!(
            r#"{{"object":"error","message":"Invalid API key {KEY}","type":"invalid_request_error","param":null,"code":null}}"#
        );
        let e = error_response(&p, 401, body.as_bytes());
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);

        let e = error_response(
            &p,
            400,
            br#"{"object":"error","message":"Invalid model: voxtral-nope","type":"invalid_model","param":null,"code":"1500"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert_eq!(e.message, "Invalid model: voxtral-nope");

        let e = error_response(
            &p,
            422,
            br#"{"detail":[{"type":"missing","loc":["body","input"],"msg":"Field required"}]}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert!(e.message.contains("Field required"), "{}", e.message);

        let e = error_response(
            &p,
            422,
            br#"{"object":"error","message":{"detail":[{"loc":["body","response_format"],"msg":"Input should be 'pcm', 'wav', 'mp3', 'flac' or 'opus'"}]},"type":"invalid_request_error"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert!(e.message.contains("Input should be"), "{}", e.message);

        let e = error_response(
            &p,
            429,
            br#"{"object":"error","message":"Requests rate limit exceeded","type":"rate_limited"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        let e = error_response(&p, 502, b"<html>Bad Gateway</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 502");
        assert!(e.retryable());
    }
}
