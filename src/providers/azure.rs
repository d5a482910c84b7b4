//! Azure OpenAI: speech and images through a deployment.
//!
//! Azure serves OpenAI's own request and answer shapes, so the bodies are the OpenAI adapters'
//! (`openai.rs`, `openai_images.rs`) and audio and SSE pass through untouched. What differs is
//! where and how: the key goes in an `api-key` header, and the URL is either the deployment URL
//! (`/openai/deployments/{deployment}/{operation}?api-version=…`, when the provider has an
//! `api_version`; the target's model names the deployment) or the v1 URL
//! (`/openai/v1/{operation}`, with the deployment name as `model`). Errors use OpenAI's envelope;
//! content-filter refusals say `content_filter`/`contentFilter` in `code`, or
//! `ResponsibleAIPolicyViolation` in `innererror`. Image answers add per-image
//! `content_filter_results`; an image the filter withheld comes back without data.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use crate::api::images::ImageRequest;
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::images::ImageAnswer;
use crate::common::images::NativeImages;
use crate::common::native::{NativeRequest, Prepared};
use crate::providers::openai::images as openai_images;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH: &str = "audio/speech";

/// Error codes Azure uses for a refusal by its content filter or OpenAI's moderation.
const CONTENT_POLICY_CODES: &[&str] = &[
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

/// The filter verdicts of an image answer, read only when it holds an image without data.
#[derive(Deserialize)]
struct FilteredAnswer {
    #[serde(default)]
    data: Vec<FilteredItem>,
    #[serde(default)]
    prompt_filter_results: Vec<FilteredItem>,
}

#[derive(Deserialize)]
struct FilteredItem {
    /// Category → verdict (`{"filtered": bool, "severity": …}`); kept loose because the
    /// categories and their extra fields vary with the api-version.
    #[serde(default)]
    content_filter_results: BTreeMap<String, Value>,
    /// Why the image is missing, when the answer says so itself.
    #[serde(default)]
    error: Option<ErrorBody>,
}

// ---- translation to native -------------------------------------------------------------------

pub fn speech_request(
    api_version: Option<&str>,
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    // Same body as OpenAI's (the deployment name stands in for the model).
    let mut native = crate::providers::openai::speech::speech_request(target, req)?;
    native.path = operation_path(api_version, target, SPEECH);
    Ok(native)
}

pub fn image_request(
    api_version: Option<&str>,
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    let path = operation_path(api_version, target, openai_images::operation(req));
    openai_images::build(&target.native_model, req, n, path)
}

/// Where `operation` (`audio/speech`, `images/generations`, …) is served for `target`: its
/// deployment URL when the account has an `api_version`, else the v1 URL.
fn operation_path(api_version: Option<&str>, target: &Target, operation: &str) -> String {
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

// ---- translation back ------------------------------------------------------------------------

/// OpenAI's answer shape; an image missing from it is explained by the content filter when the
/// answer's verdicts say so.
pub fn image_response(
    provider: &Provider,
    req: &ImageRequest<'_>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    // Verdicts are read only on failure, so a successful answer (megabytes of base64) is
    // parsed once.
    openai_images::image_response(provider, req, headers, body).map_err(|e| match e.kind {
        UpstreamErrorKind::BadResponse => filtered(provider, body).unwrap_or(e),
        _ => e,
    })
}

/// A content-policy error naming the filtered categories, when the answer's verdicts (per image
/// or for the prompt) filtered anything.
fn filtered(provider: &Provider, body: &[u8]) -> Option<UpstreamError> {
    let answer: FilteredAnswer = serde_json::from_slice(body).ok()?;
    let refusal = answer
        .data
        .iter()
        .filter_map(|item| item.error.as_ref())
        .find(|e| {
            let code = e.code.as_ref().and_then(Value::as_str).unwrap_or_default();
            CONTENT_POLICY_CODES.contains(&code)
        });
    if let Some(e) = refusal {
        let message = match provider.redact(&e.message) {
            m if m.is_empty() => "the image was withheld by Azure's content filter".to_string(),
            m => m,
        };
        return Some(UpstreamError::new(
            UpstreamErrorKind::ContentPolicy,
            &provider.name,
            message,
        ));
    }
    // A set: several images may be withheld for the same reason.
    let categories: BTreeSet<&str> = answer
        .data
        .iter()
        .chain(&answer.prompt_filter_results)
        .flat_map(|item| &item.content_filter_results)
        .filter(|(_, verdict)| verdict.get("filtered").and_then(Value::as_bool) == Some(true))
        .map(|(category, _)| category.as_str())
        .collect();
    if categories.is_empty() {
        return None;
    }
    Some(UpstreamError::new(
        UpstreamErrorKind::ContentPolicy,
        &provider.name,
        format!(
            "the image was withheld by Azure's content filter ({})",
            categories.into_iter().collect::<Vec<_>>().join(", ")
        ),
    ))
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
    if CONTENT_POLICY_CODES.contains(&code) || inner == "ResponsibleAIPolicyViolation" {
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

// ---- registration ----------------------------------------------------------------------------

/// Settings only Azure OpenAI takes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
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
        speech_request(self.api_version.as_deref(), target, req).map(Prepared::Http)
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
        image_request(self.api_version.as_deref(), target, req, n).map(Prepared::Http)
    }

    fn response(
        &self,
        provider: &Provider,
        req: &ImageRequest<'_>,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<ImageAnswer, UpstreamError> {
        image_response(provider, req, headers, body).map(ImageAnswer::Images)
    }

    fn input_as_bytes(&self) -> bool {
        true
    }
}

/// The Azure OpenAI kind: `api-key` header; speech and images through a deployment.
pub fn kind(settings: &Settings, key: &str) -> Result<crate::providers::registry::Kind, String> {
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
        // DALL·E answers link to Azure blob storage (`oaidalleapiprodscus.blob.core.windows.net`).
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
    use std::sync::Arc;

    use base64::Engine;
    use serde_json::json;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "azure-secret-key";

    /// An Azure account (its `api_version` is passed to each call).
    fn azure() -> Arc<Provider> {
        support::provider("azure", KEY)
    }

    fn image_req<'a>(
        family: &str,
        deployment: &str,
        _api_version: Option<&str>,
        body: &'a str,
    ) -> ImageRequest<'a> {
        let target = support::target(azure(), deployment);
        support::image_request("pub-model", family, target, body.as_bytes())
    }

    #[test]
    fn images_go_to_the_deployment_or_v1_url() {
        let req = image_req(
            "dall-e-3",
            "dalle3 prod",
            Some("2024-10-21"),
            r#"{"model":"pub-model","prompt":"a fox","quality":"hd","response_format":"b64_json"}"#,
        );
        let n = image_request(Some("2024-10-21"), &req.model.targets[0], &req, 1).unwrap();
        assert_eq!(
            n.path,
            "/openai/deployments/dalle3%20prod/images/generations?api-version=2024-10-21"
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&n.body).unwrap(),
            json!({"model":"dalle3 prod","prompt":"a fox","n":1,"size":"1024x1024","quality":"hd","response_format":"b64_json"})
        );

        let req = image_req(
            "gpt-image",
            "gpt-image-deployment",
            None,
            r#"{"model":"pub-model","prompt":"p","n":2,"output_format":"jpg"}"#,
        );
        let n = image_request(None, &req.model.targets[0], &req, 2).unwrap();
        assert_eq!(n.path, "/openai/v1/images/generations");
        assert_eq!(
            serde_json::from_slice::<Value>(&n.body).unwrap(),
            json!({"model":"gpt-image-deployment","prompt":"p","n":2,"size":"1024x1024","output_format":"jpeg"})
        );
    }

    #[test]
    fn edits_are_forms_at_the_edits_url() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x04\0\0\0\x04\0";
        let b64 = base64::engine::general_purpose::STANDARD.encode(png);
        let body = format!(r#"{{"model":"pub-model","prompt":"p","image":"{b64}"}}"#);
        for (version, path) in [
            (
                Some("2025-04-01-preview"),
                "/openai/deployments/gpt-image-deployment/images/edits?api-version=2025-04-01-preview",
            ),
            (None, "/openai/v1/images/edits"),
        ] {
            let req = image_req("gpt-image", "gpt-image-deployment", version, &body);
            let n = image_request(version, &req.model.targets[0], &req, 1).unwrap();
            assert_eq!(n.path, path);
            assert!(n.content_type.starts_with("multipart/form-data; boundary="));
            let text = String::from_utf8_lossy(&n.body);
            assert!(text.contains("name=\"image\"; filename=\"image.png\""));
            assert!(text.contains("name=\"model\"\r\n\r\ngpt-image-deployment\r\n"));
            assert!(n.body.windows(png.len()).any(|w| w == png));
        }
    }

    fn answer(body: &str) -> Result<NativeImages, UpstreamError> {
        let req = image_req(
            "dall-e-3",
            "d",
            None,
            r#"{"model":"pub-model","prompt":"p"}"#,
        );
        let p = req.model.targets[0].provider.clone();
        image_response(&p, &req, &http::HeaderMap::new(), body.as_bytes())
    }

    #[test]
    fn filter_verdicts_beside_images_are_ignored() {
        let got = answer(
            r#"{"created":1700000000,"data":[{"url":"https://dalleprod.blob.core.windows.net/x.png","revised_prompt":"a fox",
                "content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"low"}}}],
                "prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"jailbreak":{"filtered":false,"detected":false}}}]}"#,
        )
        .unwrap();
        assert_eq!(got.created, Some(1700000000));
        assert_eq!(
            got.images[0].data,
            crate::common::images::ImageData::Url(
                "https://dalleprod.blob.core.windows.net/x.png".into()
            )
        );
        assert_eq!(got.images[0].revised_prompt.as_deref(), Some("a fox"));
    }

    #[test]
    fn a_filtered_image_is_a_content_policy_error() {
        let e = answer(
            r#"{"created":1,"data":[{"b64_json":"AAAA"},{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},
                "violence":{"filtered":true,"severity":"high"},"sexual":{"filtered":true,"severity":"medium"}}}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(
            e.message,
            "the image was withheld by Azure's content filter (sexual, violence)"
        );

        let e = answer(
            r#"{"created":1,"data":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"jailbreak":{"filtered":true,"detected":true}}}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);

        let e = answer(
            r#"{"created":1,"data":[{"error":{"code":"contentFilter","message":"Your task failed as a result of our safety system."}}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(
            e.message,
            "Your task failed as a result of our safety system."
        );

        // Missing data the filter does not explain stays a bad answer.
        for body in [
            r#"{"created":1,"data":[{"content_filter_results":{"hate":{"filtered":false}}}]}"#,
            r#"{"created":1,"data":[]}"#,
            "<html>",
        ] {
            assert_eq!(
                answer(body).unwrap_err().kind,
                UpstreamErrorKind::BadResponse,
                "{body}"
            );
        }
    }

    #[test]
    fn image_refusals_are_content_policy() {
        let p = azure();
        for body in [
            r#"{"error":{"code":"contentFilter","message":"Your task failed as a result of our safety system."}}"#,
            r#"{"error":{"code":"content_policy_violation","message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error",
                "inner_error":{"code":"ResponsibleAIPolicyViolation","content_filter_results":{"violence":{"filtered":true,"severity":"high"}},"revised_prompt":"x"}}}"#,
            r#"{"error":{"code":"moderation_blocked","message":"blocked","type":"image_generation_user_error"}}"#,
        ] {
            let e = error_response(&p, 400, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy, "{body}");
            assert!(!e.retryable());
        }
        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":"invalid_size","message":"The size is not supported by this model."}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
    }

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
