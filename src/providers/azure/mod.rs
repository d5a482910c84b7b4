//! Azure OpenAI: speech and images through a deployment.
//!
//! Azure serves OpenAI's own request and answer shapes, so the bodies are the OpenAI adapters'
//! (`providers/openai/`) and audio and SSE pass through untouched. What differs is where and how:
//! the key goes in an `api-key` header, and the URL is either the deployment URL
//! (`/openai/deployments/{deployment}/{operation}?api-version=…`, when the account has an
//! `api_version`; the target's model names the deployment) or the v1 URL
//! (`/openai/v1/{operation}`, with the deployment name as `model`). Errors use OpenAI's envelope;
//! content-filter refusals say `content_filter`/`contentFilter` in `code`, or
//! `ResponsibleAIPolicyViolation` in `innererror`. Image answers add per-image
//! `content_filter_results`; an image the filter withheld comes back without data (`images.rs`).

pub(crate) mod images;
pub(crate) mod speech;

use serde::Deserialize;

use crate::api::images::ImageRequest;
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::images::ImageAnswer;
use crate::common::native::Prepared;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// Error codes Azure uses for a refusal by its content filter or OpenAI's moderation.
pub(super) const CONTENT_POLICY_CODES: &[&str] = &[
    "content_filter",
    "contentFilter",
    "content_policy_violation",
    "moderation_blocked",
];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
pub(super) struct ErrorBody {
    #[serde(default)]
    pub(super) message: String,
    #[serde(default)]
    pub(super) code: Option<serde_json::Value>,
    #[serde(default, alias = "inner_error")]
    innererror: Option<InnerError>,
}

#[derive(Deserialize)]
struct InnerError {
    #[serde(default)]
    code: Option<String>,
}

// ---- URLs ------------------------------------------------------------------------------------

/// Where `operation` (`audio/speech`, `images/generations`, …) is served for `target`: its
/// deployment URL when the account has an `api_version`, else the v1 URL.
pub(super) fn operation_path(
    api_version: Option<&str>,
    target: &Target,
    operation: &str,
) -> String {
    match api_version {
        Some(version) => format!(
            "/openai/deployments/{}/{operation}?api-version={}",
            path_segment(&target.native_model),
            path_segment(version)
        ),
        None => format!("/openai/v1/{operation}"),
    }
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

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
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
    if CONTENT_POLICY_CODES.contains(&code) || inner == "ResponsibleAIPolicyViolation" {
        err.kind = UpstreamErrorKind::ContentPolicy;
    } else if code == "insufficient_quota" {
        err.kind = UpstreamErrorKind::Failure;
    } else if code == "DeploymentNotFound" || code == "model_not_found" {
        // 404 "The API deployment for this resource does not exist": the deployment the target
        // names is gone (a retired model's deployment, or a wrong name). Not the caller's fault,
        // not worth retrying, and the engine names the model. `model_not_found` is OpenAI's own
        // code, which the v1 URL may answer with.
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// Settings only Azure OpenAI takes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// `api-version` for deployment URLs (absent: the v1 URL).
    #[serde(default)]
    pub api_version: Option<String>,
}

/// An Azure OpenAI account's adapter: its URLs depend on the account's `api_version`.
struct Azure {
    api_version: Option<String>,
}

impl crate::api::adapter::SpeechAdapter for Azure {
    fn request(&self, target: &Target, req: &SpeechRequest<'_>) -> Result<Prepared, GatewayError> {
        speech::speech_request(self.api_version.as_deref(), target, req).map(Prepared::Http)
    }

    fn decoding(
        &self,
        _provider: &std::sync::Arc<Provider>,
        _req: &SpeechRequest<'_>,
    ) -> SpeechDecoding {
        // The body is the audio itself, as OpenAI's.
        SpeechDecoding::Passthrough
    }
}

impl crate::api::adapter::ImageAdapter for Azure {
    fn request(
        &self,
        target: &Target,
        req: &ImageRequest<'_>,
        n: u64,
    ) -> Result<Prepared, GatewayError> {
        images::image_request(self.api_version.as_deref(), target, req, n).map(Prepared::Http)
    }

    fn validate(&self, _target: &Target, req: &ImageRequest<'_>) -> Result<(), GatewayError> {
        // OpenAI's bodies, so OpenAI's refusals.
        crate::providers::openai::images::check(req)
    }

    fn response(
        &self,
        provider: &Provider,
        req: &ImageRequest<'_>,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<ImageAnswer, UpstreamError> {
        images::image_response(provider, req, headers, body).map(ImageAnswer::Images)
    }

    fn input_as_bytes(&self) -> bool {
        true
    }
}

/// The Azure OpenAI kind: `api-key` header; speech and images through a deployment.
pub(crate) fn kind(
    settings: &Settings,
    key: &str,
) -> Result<crate::providers::registry::Kind, String> {
    let api_version = settings
        .api_version
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let adapter = || Azure {
        api_version: api_version.map(str::to_string),
    };
    Ok(crate::providers::registry::Kind {
        auth: crate::providers::registry::keyed(key, |k| {
            crate::upstream::provider::Auth::header("api-key", k)
        })?,
        errors: error_response,
        remote: true,
        // Where DALL·E (retired 12 May 2026) linked its images; GPT image models answer base64,
        // so this matters only for an answer that still carries a link.
        result_hosts: &["*.blob.core.windows.net"],
        adapters: crate::api::adapter::Adapters {
            speech: Some(Box::new(adapter())),
            images: Some(Box::new(adapter())),
            rerank: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "azure-secret-key";

    #[test]
    fn encodes_path_parts() {
        assert_eq!(path_segment("tts-prod_1.0"), "tts-prod_1.0");
        assert_eq!(path_segment("a/b?c"), "a%2Fb%3Fc");
    }
    #[test]
    fn maps_errors() {
        let p = support::provider("azure", KEY);
        let body = br#"{"error":{"code":"content_filter","message":"The response was filtered","innererror":{"code":"ResponsibleAIPolicyViolation"}}}"#;
        let e = error_response(&p, 400, body);
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(e.message, "The response was filtered");

        let body = br#"{"error":{"code":"400","message":"x","inner_error":{"code":"ResponsibleAIPolicyViolation"}}}"#;
        assert_eq!(
            error_response(&p, 400, body).kind,
            UpstreamErrorKind::ContentPolicy
        );

        let body = br#"{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}"#;
        let e = error_response(&p, 404, body);
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
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
