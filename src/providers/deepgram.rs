//! Deepgram Aura-2: speech through `POST /v1/speak?model=…`, whose body is the audio itself,
//! streamed as it is synthesised.
//!
//! Deepgram names a voice and its model together (`aura-2-thalia-en`), so the target's native
//! model is the model part (`aura-2`) and the public `voice` is the rest (`thalia-en`): the query
//! carries `model={native}-{voice}`, the voice percent-encoded so a caller cannot add a query
//! parameter. The output format is the `encoding` (and `container`, `sample_rate`) query
//! parameters; the JSON body carries only `text`. Both public stream formats use the same answer:
//! copied as is, or wrapped in the gateway's SSE events (not WAV, whose header is written for a
//! whole file).
//!
//! Speed is never sent: Aura's `speed` takes 0.7–1.5, so of the public speeds only 1, its
//! default. Errors come as `{err_code, err_msg, request_id}` (older) or `{category, message,
//! details, request_id}` (newer) JSON, or plain text; a voice that is not a voice of the model is
//! a 400 saying "No such model/version combination found", which is the voice's fault here.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::NativeRequest;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::{Auth, Provider};

// ---- constants -------------------------------------------------------------------------------

const SPEAK_PATH: &str = "/v1/speak";

/// What Deepgram answers when the model and voice do not name one of its voices.
const NO_SUCH_MODEL: &str = "no such model";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeakBody<'a> {
    text: &'a str,
}

/// Either error shape Deepgram answers (the SDK's `ErrorResponseLegacyError` and
/// `ErrorResponseModernError`).
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    err_code: Option<String>,
    #[serde(default)]
    err_msg: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    details: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let format = output_query(req.response_format)?;
    let mut path = String::with_capacity(SPEAK_PATH.len() + 64 + req.voice.as_str().len());
    path.push_str(SPEAK_PATH);
    path.push_str("?model=");
    push_encoded(&mut path, &target.native_model);
    path.push('-');
    push_encoded(&mut path, req.voice.as_str());
    path.push('&');
    path.push_str(format);
    let body = serde_json::to_vec(&SpeakBody {
        text: req.input.as_str(),
    })
    .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    Ok(NativeRequest::post_json(path, body))
}

/// The output query parameters for a public format. Linear PCM is 16-bit at 24 kHz (Deepgram's
/// REST default, and OpenAI's `pcm`); the compressed encodings have fixed rates Deepgram picks.
fn output_query(format: &str) -> Result<&'static str, GatewayError> {
    Ok(match format {
        "mp3" => "encoding=mp3",
        "opus" => "encoding=opus&container=ogg",
        "aac" => "encoding=aac",
        "flac" => "encoding=flac",
        "wav" => "encoding=linear16&container=wav&sample_rate=24000",
        "pcm" => "encoding=linear16&container=none&sample_rate=24000",
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "deepgram cannot produce `{other}`"
            )))
        }
    })
}

/// Percent-encode everything outside the unreserved set, so a voice from the caller can never
/// change the query's shape.
fn push_encoded(out: &mut String, s: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{b:02X}");
        }
    }
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // The answer body is the audio itself.
    SpeechDecoding::raw_audio(provider, req.sse)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let message = match &parsed {
        Some(e) => [&e.err_msg, &e.message, &e.details]
            .into_iter()
            .flatten()
            .find(|m| !m.trim().is_empty())
            .cloned(),
        // Deepgram documents plain-text errors too (the SDK's `ErrorResponseTextError`).
        None => std::str::from_utf8(body)
            .ok()
            .map(str::trim)
            .filter(|t| !t.is_empty() && !t.starts_with('<') && t.len() <= 1000)
            .map(str::to_string),
    };
    let message = message
        .map(|m| provider.redact(&m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let no_such_model = message.to_ascii_lowercase().contains(NO_SUCH_MODEL);
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    let code = parsed
        .as_ref()
        .and_then(|e| e.err_code.as_deref().or(e.category.as_deref()))
        .unwrap_or_default();
    if no_such_model && (400..500).contains(&status) {
        // The model part is the operator's and the voice the caller's (or the model's default):
        // a combination Deepgram does not serve is the voice's, which the speech path makes the
        // caller's 400 or, for the default voice, the operator's 503.
        err.kind = UpstreamErrorKind::UnknownVoice;
    } else if code.eq_ignore_ascii_case("INVALID_AUTH") {
        err.kind = UpstreamErrorKind::AuthRejected;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Deepgram kind: `Authorization: Token <key>`, speech only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, |k| {
        Auth::headers(&[(http::header::AUTHORIZATION, format!("Token {k}"))])
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

    const KEY: &str = "dg-secret-key-42";

    fn catalog() -> Catalog {
        let p = support::provider("deepgram", KEY);
        support::catalog(
            "aura-2",
            "deepgram-aura-2",
            support::target(p, "aura-2"),
            2_000,
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
        let n = native(r#"{"model":"aura-2","input":"Hello \"world\"","voice":"luna-en"}"#);
        assert_eq!(n.path, "/v1/speak?model=aura-2-luna-en&encoding=mp3");
        assert_eq!(n.content_type, "application/json");
        assert!(n.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"text":"Hello \"world\""}"#
        );
    }

    #[test]
    fn maps_formats_and_the_default_voice() {
        for (format, query) in [
            ("mp3", "encoding=mp3"),
            ("opus", "encoding=opus&container=ogg"),
            ("aac", "encoding=aac"),
            ("flac", "encoding=flac"),
            ("wav", "encoding=linear16&container=wav&sample_rate=24000"),
            ("pcm", "encoding=linear16&container=none&sample_rate=24000"),
        ] {
            let n = native(&format!(
                r#"{{"model":"aura-2","input":"hi","response_format":"{format}"}}"#
            ));
            assert_eq!(n.path, format!("/v1/speak?model=aura-2-thalia-en&{query}"));
        }
        assert!(output_query("ogg").is_err());
    }

    #[test]
    fn voices_cannot_reshape_the_query() {
        let n = native(r#"{"model":"aura-2","input":"hi","voice":"x&speed=1.5#é"}"#);
        assert_eq!(
            n.path,
            "/v1/speak?model=aura-2-x%26speed%3D1.5%23%C3%A9&encoding=mp3"
        );
    }

    #[test]
    fn sends_the_key_as_a_token() {
        let kind = kind(KEY).unwrap();
        let Auth::Headers(h) = kind.auth else {
            panic!("a keyed kind has headers");
        };
        assert_eq!(h[0].0, http::header::AUTHORIZATION);
        assert_eq!(h[0].1.to_str().unwrap(), format!("Token {KEY}"));
        assert!(h[0].1.is_sensitive());
        assert!(matches!(super::kind("").unwrap().auth, Auth::Missing));
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("deepgram", KEY);

        let e = error_response(
            &p,
            400,
            br#"{"err_code":"INVALID_QUERY_PARAMETER","err_msg":"No such model/version combination found.","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownVoice);
        assert!(!e.retryable());

        let e = error_response(
            &p,
            400,
            br#"{"category":"INVALID_QUERY_PARAMETER","message":"No such model/version combination found","details":"","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownVoice);

        let e = error_response(
            &p,
            400,
            br#"{"err_code":"Bad Request","err_msg":"Text must not be empty.","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Text must not be empty.");

        let body = format!(
            r#"{{"err_code":"INVALID_AUTH","err_msg":"Invalid credentials: {KEY}","request_id":"r"}}"#
        );
        let e = error_response(&p, 401, body.as_bytes());
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);

        let e = error_response(
            &p,
            402,
            br#"{"err_code":"ASR_PAYMENT_REQUIRED","err_msg":"Project does not have enough credits.","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = error_response(
            &p,
            429,
            br#"{"err_code":"TOO_MANY_REQUESTS","err_msg":"Too many requests.","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        let e = error_response(&p, 413, b"Payload too large");
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Payload too large");

        let e = error_response(&p, 503, b"<html>Service Unavailable</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 503");
        assert!(e.retryable());
    }
}
