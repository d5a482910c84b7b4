//! Azure OpenAI: speech through a deployment.
//!
//! Azure serves OpenAI's own request and answer shapes, so the body is the OpenAI adapter's and
//! audio and SSE pass through untouched. What differs is where and how: the key goes in an
//! `api-key` header, and the URL is either the deployment URL
//! (`/openai/deployments/{deployment}/audio/speech?api-version=…`, when the provider has an
//! `api_version`; the target's model names the deployment) or the v1 URL
//! (`/openai/v1/audio/speech`, with the deployment name as `model`). Errors use OpenAI's envelope;
//! content-filter refusals say `content_filter` in `code` (or in `innererror`).

use serde::Deserialize;

use super::{NativeRequest, Provider};
use crate::api::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;

// ---- constants -------------------------------------------------------------------------------

const V1_SPEECH_PATH: &str = "/openai/v1/audio/speech";

// ---- wire types ------------------------------------------------------------------------------

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
    #[serde(default, alias = "inner_error")]
    innererror: Option<InnerError>,
}

#[derive(Deserialize)]
struct InnerError {
    #[serde(default)]
    code: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    // Same body as OpenAI's (the deployment name stands in for the model).
    let mut native = super::openai::speech_request(target, req)?;
    native.path = match &target.provider.options.api_version {
        Some(version) => format!(
            "/openai/deployments/{}/audio/speech?api-version={}",
            path_segment(&target.native_model),
            path_segment(version)
        ),
        None => V1_SPEECH_PATH.to_string(),
    };
    Ok(native)
}

/// Percent-encode what is not safe in a path segment or query value (deployment names are
/// usually plain, but nothing from config should be able to change the URL's shape).
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

// ---- error mapping ---------------------------------------------------------------------------

pub fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorEnvelope>(body).ok();
    let message = parsed
        .as_ref()
        .map(|e| provider.redact(&e.error.message))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    let Some(e) = parsed else { return err };
    let code = e
        .error
        .code
        .as_ref()
        .and_then(|c| c.as_str())
        .unwrap_or_default();
    let inner = e.error.innererror.and_then(|i| i.code).unwrap_or_default();
    if code == "content_filter" || inner == "ResponsibleAIPolicyViolation" {
        err.kind = UpstreamErrorKind::ContentPolicy;
    } else if code == "insufficient_quota" {
        err.kind = UpstreamErrorKind::Failure;
    } else if code == "DeploymentNotFound" {
        // The operator's deployment name is wrong: not the caller's fault, not worth retrying.
        err.kind = UpstreamErrorKind::Failure;
    }
    err
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{test_support as support, ProviderKind};

    #[test]
    fn encodes_path_parts() {
        assert_eq!(path_segment("tts-prod_1.0"), "tts-prod_1.0");
        assert_eq!(path_segment("a/b?c"), "a%2Fb%3Fc");
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("azure", ProviderKind::AzureOpenAi, "azure-secret-key");
        let body = br#"{"error":{"code":"content_filter","message":"The response was filtered","innererror":{"code":"ResponsibleAIPolicyViolation"}}}"#;
        let e = error_response(&p, 400, body);
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(e.message, "The response was filtered");

        let body = br#"{"error":{"code":"400","message":"x","inner_error":{"code":"ResponsibleAIPolicyViolation"}}}"#;
        assert_eq!(
            error_response(&p, 400, body).kind,
            UpstreamErrorKind::ContentPolicy
        );

        let body = br#"{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}"#;
        let e = error_response(&p, 404, body);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let body = br#"{"error":{"code":"401","message":"Access denied due to invalid subscription key azure-secret-key"}}"#;
        let e = error_response(&p, 401, body);
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains("azure-secret-key"));

        let e = error_response(
            &p,
            429,
            br#"{"error":{"code":"429","message":"Rate limit"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
    }
}
