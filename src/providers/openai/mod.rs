//! OpenAI: speech (`/audio/speech`, and the Realtime API for the models it alone serves) and image
//! generation, sharing one error envelope.

pub(crate) mod discovery;
pub(crate) mod images;
pub(crate) mod realtime;
pub(crate) mod speech;

use std::sync::Arc;

use serde::Deserialize;

use crate::api::adapter::Adapters;
use crate::api::adapter::SpeechAdapter;
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::common::native::Prepared;
use crate::providers::registry::{ImageFns, Kind};
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Auth;
use crate::upstream::provider::Provider;

/// The OpenAI kind: Bearer key; speech (the body is the audio) and images.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // Where DALL·E (retired 12 May 2026) linked its images; GPT image models answer base64,
        // so this matters only for an answer that still carries a link.
        result_hosts: &["*.blob.core.windows.net"],
        adapters: Adapters {
            speech: Some(Box::new(Speech)),
            images: Some(Box::new(ImageFns {
                request: images::image_request,
                validate: |_, req| images::check(req),
                response: |p, r, h, b| {
                    crate::providers::registry::images(images::image_response(p, r, h, b))
                },
                input_as_bytes: true,
                tasks: None,
            })),
            rerank: None,
        },
    })
}

/// OpenAI's speech: the speech endpoint, whose body is the audio itself (passed through), or the
/// Realtime API for the models of its family (`realtime.rs`).
struct Speech;

impl SpeechAdapter for Speech {
    fn request(&self, target: &Target, req: &SpeechRequest<'_>) -> Result<Prepared, GatewayError> {
        if realtime::serves(req) {
            realtime::socket_request(target, req).map(Prepared::Socket)
        } else {
            speech::speech_request(target, req).map(Prepared::Http)
        }
    }

    fn decoding(&self, provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
        if realtime::serves(req) {
            realtime::decoding(provider, req)
        } else {
            SpeechDecoding::Passthrough
        }
    }
}

// ---- error envelope --------------------------------------------------------------------------

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

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
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
    } else if code == "model_not_found" || (status == 403 && verification_needed(&err.message)) {
        // 404 `invalid_request_error` "The model `x` does not exist or you do not have access to
        // it." (a retired model such as dall-e-3, or one the account may not use); 403
        // `model_not_found` "Project `proj_…` does not have access to model `x`"; 403 (code
        // null) "Your organization must be verified to use the model `x`". Each refuses one
        // model, not the key: the account's other models keep serving.
        err.kind = UpstreamErrorKind::UnknownModel;
    } else if code == "insufficient_quota" || code == "billing_hard_limit_reached" {
        // The gateway's account is out of quota or budget (images report the latter with a 400):
        // not the caller's fault or rate limit, and retrying won't help.
        err.kind = UpstreamErrorKind::Failure;
    }
    err
}

/// Whether a 403's message says the organization must be verified to use the model (image
/// models require it): the model is refused to this account, its key is good.
fn verification_needed(message: &str) -> bool {
    message.contains("must be verified to use the model")
}

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

        let body = br#"{"error":{"message":"The model `dall-e-3` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        let e = error_response(&p, 404, body);
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        // A model refused to the project or the unverified organization: the model, not the key.
        let body = br#"{"error":{"message":"Project `proj_abc` does not have access to model `gpt-image-2`","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        assert_eq!(
            error_response(&p, 403, body).kind,
            UpstreamErrorKind::UnknownModel
        );
        let body = br#"{"error":{"message":"Your organization must be verified to use the model `gpt-image-2`. Please go to: https://platform.openai.com/settings/organization/general and click on Verify Organization.","type":"invalid_request_error","param":null,"code":null}}"#;
        assert_eq!(
            error_response(&p, 403, body).kind,
            UpstreamErrorKind::UnknownModel
        );
        // Any other 403 is still the account's (every model is refused alike).
        let body = br#"{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","param":null,"code":"unsupported_country_region_territory"}}"#;
        assert_eq!(
            error_response(&p, 403, body).kind,
            UpstreamErrorKind::AuthRejected
        );
        assert!(e.message.contains("dall-e-3"));

        let e = error_response(&p, 503, b"<html>oops</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        assert_eq!(e.message, "HTTP 503");
    }
}
