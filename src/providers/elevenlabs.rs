//! ElevenLabs: speech through `POST /v1/text-to-speech/{voice_id}/stream`, or the non-streaming
//! `POST /v1/text-to-speech/{voice_id}` for WAV.
//!
//! The voice is a voice id in the URL path and the audio format is the `output_format` query
//! parameter; the body carries the text, the target's native model (`model_id`) and the caller's
//! pass-through fields (`language_code`, `seed`, `voice_settings`, …) verbatim. The streaming
//! endpoint is used for both public stream formats, so audio starts flowing before synthesis ends:
//! its body is the audio itself, copied as is or wrapped in the gateway's SSE events. Its
//! `output_format` list has no `wav_*` value (those exist only on the non-streaming endpoint), so
//! WAV comes whole from the non-streaming one and the families offer no WAV over SSE.
//!
//! Speed is never sent: ElevenLabs accepts only 0.7–1.2, so the family allows only the public
//! speed 1, which is ElevenLabs' own default. Errors come as FastAPI-style `detail` bodies: a
//! validation list on 422, or `{"status": …, "message": …}` whose `status` says what went wrong.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::providers::formats::fastapi::detail_text;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/v1/text-to-speech";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    text: &'a str,
    model_id: &'a str,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    #[serde(default)]
    detail: Value,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let output_format = output_format(req.response_format)?;
    let body = SpeechBody {
        text: req.input.as_str(),
        model_id: &target.native_model,
    };
    // `wav_*` is accepted only by the non-streaming endpoint; its body is the same raw audio.
    let endpoint = if output_format.starts_with("wav_") {
        ""
    } else {
        "/stream"
    };
    let path = format!(
        "{SPEECH_PATH}/{}{endpoint}?output_format={output_format}",
        path_segment(req.voice.as_str())
    );
    Ok(NativeRequest::post_json(
        path,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// The native `output_format` for a public format. PCM is 24 kHz to match OpenAI's `pcm`
/// (16-bit mono, headerless); WAV uses the same rate.
fn output_format(format: &str) -> Result<&'static str, GatewayError> {
    Ok(match format {
        "mp3" => "mp3_44100_128",
        "opus" => "opus_48000_128",
        "wav" => "wav_24000",
        "pcm" => "pcm_24000",
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "elevenlabs cannot produce `{other}`"
            )))
        }
    })
}

/// Percent-encode everything outside the unreserved set, so a voice id from the caller can never
/// change the URL's shape (add a path segment or a query parameter).
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // The stream endpoint's body is the audio itself.
    SpeechDecoding::raw_audio(provider, req.sse)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorEnvelope>(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|e| detail_text(&e.detail))
        .map(|m| provider.redact(&m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    let code = parsed
        .as_ref()
        .and_then(|e| e.detail.get("status"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    match code {
        "invalid_api_key" => err.kind = UpstreamErrorKind::AuthRejected,
        // The operator's character quota is used up (ElevenLabs says so with a 401): not the
        // caller's fault, and repeating the request will not help, so a kept 402 stops retries.
        "quota_exceeded" => {
            err.kind = UpstreamErrorKind::Failure;
            err.status = Some(402);
        }
        // The target's `model_id` is unknown or not open to this account ("A model with model ID
        // … does not exist"): the operator's configuration, not the caller's request.
        "model_not_found" => err.kind = UpstreamErrorKind::UnknownModel,
        // The same answer without its status (older answers): its message names the model.
        _ if err.message.starts_with("A model with model ID") => {
            err.kind = UpstreamErrorKind::UnknownModel
        }
        // A 404 (400 in older answers) for a voice id that does not exist or was retired: the
        // caller's when it named the voice, the operator's when it is the configured default.
        "voice_not_found" => err.kind = UpstreamErrorKind::UnknownVoice,
        "max_character_limit_exceeded" => err.kind = UpstreamErrorKind::InvalidRequest,
        "too_many_concurrent_requests" | "system_busy" => err.kind = UpstreamErrorKind::RateLimited,
        _ => {}
    }
    err
}

// ---- what the account serves -----------------------------------------------------------------

/// `GET /v1/models` (a JSON array of `{model_id, name, …}`) and `GET /v1/voices` (`{"voices":
/// [{voice_id, name, …}]}`, every voice of the account's library, legacy premade voices left out
/// unless `show_legacy` is asked). Neither is paginated.
pub(crate) const DISCOVERY: crate::api::discovery::Discovery = crate::api::discovery::Discovery {
    models: Some(crate::api::discovery::ListFns {
        request: |_| NativeRequest::get("/v1/models"),
        response: read_models,
    }),
    voices: Some(crate::api::discovery::ListFns {
        request: |_| NativeRequest::get("/v1/voices"),
        response: read_voices,
    }),
};

#[derive(Deserialize)]
struct ListedModel {
    model_id: String,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct VoiceList {
    voices: Vec<ListedVoice>,
}

#[derive(Deserialize)]
struct ListedVoice {
    voice_id: String,
    #[serde(default)]
    name: Option<String>,
}

fn read_models(body: &[u8]) -> Result<crate::api::discovery::Page, String> {
    let models: Vec<ListedModel> = serde_json::from_slice(body)
        .map_err(|e| format!("model list is not the expected JSON: {e}"))?;
    Ok(crate::api::discovery::Page {
        items: models
            .into_iter()
            .map(|m| crate::api::discovery::Listed::new(m.model_id, m.name))
            .collect(),
        next: None,
    })
}

fn read_voices(body: &[u8]) -> Result<crate::api::discovery::Page, String> {
    let list: VoiceList = serde_json::from_slice(body)
        .map_err(|e| format!("voice list is not the expected JSON: {e}"))?;
    Ok(crate::api::discovery::Page {
        items: list
            .voices
            .into_iter()
            .map(|v| crate::api::discovery::Listed::new(v.voice_id, v.name))
            .collect(),
        next: None,
    })
}

// ---- registration ----------------------------------------------------------------------------

/// The ElevenLabs kind: `xi-api-key`, speech only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, |k| {
        crate::upstream::provider::Auth::header("xi-api-key", k)
    })?;
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
    use crate::stream::audio::Finished;
    use bytes::Bytes;

    const KEY: &str = "xi-secret-key-42";

    fn catalog() -> Catalog {
        let p = support::provider("elevenlabs", KEY);
        support::catalog(
            "eleven",
            "elevenlabs-tts",
            support::target(p, "eleven_multilingual_v2"),
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
    fn reads_the_model_and_voice_lists() {
        let models = read_models(
            br#"[{"model_id":"eleven_multilingual_v2","name":"Eleven Multilingual v2","can_do_text_to_speech":true}]"#,
        )
        .unwrap();
        assert_eq!(models.items[0].id, "eleven_multilingual_v2");
        let voices = read_voices(
            br#"{"voices":[{"voice_id":"JBFqnCBsd6RMkjVDRZzb","name":"George","category":"premade"}]}"#,
        )
        .unwrap();
        assert_eq!(voices.items[0].id, "JBFqnCBsd6RMkjVDRZzb");
        assert_eq!(voices.items[0].name.as_deref(), Some("George"));
        assert!(read_voices(b"[]").is_err());
    }

    #[test]
    fn builds_the_native_request() {
        let n = native(
            r#"{"model":"eleven","input":"Hello \"world\"","voice":"pNInz6obpgDQGcFmaJgB","response_format":"pcm","speed":1,"previous_text":"Before.","seed":7,"voice_settings":{"stability":0.5,"speed":1.1}}"#,
        );
        assert_eq!(
            n.path,
            "/v1/text-to-speech/pNInz6obpgDQGcFmaJgB/stream?output_format=pcm_24000"
        );
        assert_eq!(n.content_type, "application/json");
        assert!(n.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"text":"Hello \"world\"","model_id":"eleven_multilingual_v2","previous_text":"Before.","seed":7,"voice_settings":{"stability":0.5,"speed":1.1}}"#
        );
    }

    #[test]
    fn maps_formats_and_defaults() {
        for (format, native_format, endpoint) in [
            ("mp3", "mp3_44100_128", "/stream"),
            ("opus", "opus_48000_128", "/stream"),
            // The streaming endpoint has no `wav_*` format: WAV is the non-streaming endpoint's.
            ("wav", "wav_24000", ""),
            ("pcm", "pcm_24000", "/stream"),
        ] {
            let n = native(&format!(
                r#"{{"model":"eleven","input":"hi","response_format":"{format}"}}"#
            ));
            assert_eq!(
                n.path,
                format!(
                    "/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb{endpoint}?output_format={native_format}"
                )
            );
            let body: Value = serde_json::from_slice(&n.body).unwrap();
            assert_eq!(
                body,
                serde_json::json!({"text": "hi", "model_id": "eleven_multilingual_v2"})
            );
        }
        assert!(output_format("aac").is_err());
    }

    #[test]
    fn voice_ids_cannot_reshape_the_url() {
        let n = native(r#"{"model":"eleven","input":"hi","voice":"a/../b?x=1&y#z é"}"#);
        assert_eq!(
            n.path,
            "/v1/text-to-speech/a%2F..%2Fb%3Fx%3D1%26y%23z%20%C3%A9/stream?output_format=mp3_44100_128"
        );
        assert_eq!(path_segment("Az09-_.~"), "Az09-_.~");
    }

    #[test]
    fn sse_wraps_raw_audio_split_anywhere() {
        let catalog = catalog();
        let req = parse(
            br#"{"model":"eleven","input":"hi","stream_format":"sse"}"#,
            &catalog,
            3,
        )
        .unwrap();
        let p = req.model.targets[0].provider.clone();
        let SpeechDecoding::Decode(mut d) = speech_decoding(&p, &req) else {
            panic!("SSE needs a decoder");
        };
        let audio: Vec<u8> = (0..=255u8).collect();
        let mut out = Vec::new();
        for piece in [&audio[..1], &audio[1..1], &audio[1..200], &audio[200..]] {
            d.push(&Bytes::copy_from_slice(piece), &mut out).unwrap();
        }
        assert!(matches!(d.finish(&mut out).unwrap(), Finished::Done(_)));
        assert_eq!(out.concat(), audio);

        let req = parse(br#"{"model":"eleven","input":"hi"}"#, &catalog, 3).unwrap();
        assert!(matches!(
            speech_decoding(&p, &req),
            SpeechDecoding::Passthrough
        ));
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("elevenlabs", KEY);

        let body = br#"{"detail":[{"loc":["body","text"],"msg":"field required","type":"value_error.missing"}]}"#;
        let e = error_response(&p, 422, body);
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "body.text: field required");

        let body = br#"{"detail":{"status":"invalid_api_key","message":"Invalid API key: xi-secret-key-42"}}"#;
        let e = error_response(&p, 401, body);
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);
        assert!(e.message.contains("[redacted]"));

        let body = br#"{"detail":{"status":"quota_exceeded","message":"This request exceeds your quota. You have 3 credits remaining."}}"#;
        let e = error_response(&p, 401, body);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.status, Some(402));
        assert!(!e.retryable());

        for (status, kind) in [
            ("voice_not_found", UpstreamErrorKind::UnknownVoice),
            (
                "max_character_limit_exceeded",
                UpstreamErrorKind::InvalidRequest,
            ),
        ] {
            let body = format!(r#"{{"detail":{{"status":"{status}","message":"nope"}}}}"#);
            let e = error_response(&p, 400, body.as_bytes());
            assert_eq!(e.kind, kind, "{status}");
            assert_eq!(e.message, "nope");
        }
        // Today's answer for a voice id that does not exist (or was retired) is a 404.
        let e = error_response(
            &p,
            404,
            br#"{"detail":{"status":"voice_not_found","message":"A voice with the voice_id 21m00Tcm4TlvDq8ikWAM was not found."}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownVoice);
        assert!(!e.retryable());

        // Both the older `{status, message}` detail and the newer one (`type`, `code`, …) carry
        // `status`.
        for body in [
            &br#"{"detail":{"status":"model_not_found","message":"A model with model ID eleven_v0 does not exist or is not available to you."}}"#[..],
            br#"{"detail":{"type":"invalid_request","code":"model_not_found","status":"model_not_found","message":"A model with model ID eleven_v0 does not exist.","request_id":"r"}}"#,
            // Without its status, the message still names the model.
            br#"{"detail":{"message":"A model with model ID eleven_v0 does not exist."}}"#,
        ] {
            let e = error_response(&p, 400, body);
            assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
            assert!(e.message.contains("eleven_v0 does not exist"), "{}", e.message);
            assert!(!e.retryable());
        }

        let e = error_response(
            &p,
            400,
            br#"{"detail":{"status":"something_new","message":"bad"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);

        for status in ["too_many_concurrent_requests", "system_busy"] {
            let body = format!(r#"{{"detail":{{"status":"{status}","message":"busy"}}}}"#);
            let e = error_response(&p, 429, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::RateLimited, "{status}");
            assert!(e.retryable());
        }

        let e = error_response(&p, 503, b"<html>Service Unavailable</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        assert_eq!(e.message, "HTTP 503");

        let e = error_response(&p, 500, br#"{"detail":""}"#);
        assert_eq!(e.message, "HTTP 500");
    }
}
