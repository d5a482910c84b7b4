//! OpenAI speech (`/audio/speech`) and the error mapping OpenAI-style providers share (images are
//! in `openai_images.rs`).
//!
//! The public API follows OpenAI's conventions, so translation is mostly renaming and filling in
//! defaults: speech audio and SSE pass through untouched; image answers gain the gateway's
//! `task_id`/`task_status`.

use serde::{Deserialize, Serialize};

use crate::common::error::GatewayError;

use crate::common::error::UpstreamError;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/audio/speech";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model: &'a str,
    input: &'a str,
    voice: &'a str,
    response_format: &'a str,
    speed: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_format: Option<&'a str>,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = SpeechBody {
        model: &target.native_model,
        input: req.input.as_str(),
        voice: req.voice.as_str(),
        response_format: req.response_format,
        speed: req.speed,
        instructions: req.instructions.as_ref().map(|s| s.as_str()),
        stream_format: req.sse.then_some("sse"),
    };
    Ok(NativeRequest::post_json(
        SPEECH_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

// ---- error mapping ---------------------------------------------------------------------------

pub fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorEnvelope>(body).ok();
    let message = parsed
        .as_ref()
        .map(|e| provider.redact(&e.error.message))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let code = parsed
        .as_ref()
        .and_then(|e| e.error.code.as_ref())
        .and_then(|c| c.as_str().map(str::to_string))
        .unwrap_or_default();
    let kind_str = parsed
        .as_ref()
        .and_then(|e| e.error.kind.clone())
        .unwrap_or_default();
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    if code == "content_policy_violation"
        || code == "moderation_blocked"
        || kind_str == "image_generation_user_error" && code.contains("policy")
    {
        err.kind = UpstreamErrorKind::ContentPolicy;
    } else if code == "insufficient_quota" || code == "billing_hard_limit_reached" {
        // The gateway's account is out of quota or budget (images report the latter with a 400):
        // not the caller's fault or rate limit, and retrying won't help.
        err.kind = UpstreamErrorKind::Failure;
    }
    err
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;

    #[test]
    fn maps_errors() {
        let p = support::provider_at("openai", "sk-secret-123456", "http://127.0.0.1:1/v1");
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-secret-123456","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        let e = error_response(&p, 401, body);
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains("sk-secret"));

        let body = br#"{"error":{"message":"Your request was rejected by our safety system","type":"invalid_request_error","code":"content_policy_violation"}}"#;
        assert_eq!(
            error_response(&p, 400, body).kind,
            UpstreamErrorKind::ContentPolicy
        );

        let body = br#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        let e = error_response(&p, 429, body);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let body = br#"{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","code":"billing_hard_limit_reached"}}"#;
        let e = error_response(&p, 400, body);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = error_response(&p, 503, b"<html>oops</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        assert_eq!(e.message, "HTTP 503");
    }
}
