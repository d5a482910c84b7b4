//! Azure OpenAI images: OpenAI's bodies at the deployment's (or v1) URLs, and the content filter's
//! verdicts read when an answer lacks an image.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::{operation_path, ErrorBody, CONTENT_POLICY_CODES};
use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::images::NativeImages;
use crate::common::native::NativeRequest;
use crate::providers::openai::images as openai_images;
use crate::upstream::provider::Provider;

/// The filter verdicts of an image answer, read only when it holds an image without data.
#[derive(Deserialize)]
struct FilteredAnswer {
    #[serde(default)]
    data: Vec<FilteredItem>,
}

/// One `data[]` item: Azure puts both verdicts on each image (`ImageResult`), not beside `data`.
#[derive(Deserialize)]
struct FilteredItem {
    /// Category → verdict (`{"filtered": bool, "severity": …}`) on the image; kept loose because
    /// the categories and their extra fields vary with the api-version.
    #[serde(default)]
    content_filter_results: BTreeMap<String, Value>,
    /// Category → verdict on the prompt that made this image (`jailbreak`, `hate`, …).
    #[serde(default)]
    prompt_filter_results: BTreeMap<String, Value>,
    /// Why the image is missing, when the answer says so itself.
    #[serde(default)]
    error: Option<ErrorBody>,
}

pub(crate) fn image_request(
    api_version: Option<&str>,
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    let path = operation_path(api_version, target, openai_images::operation(req));
    openai_images::build(&target.native_model, req, n, path)
}

/// OpenAI's answer shape; an image missing from it is explained by the content filter when the
/// answer's verdicts say so.
pub(crate) fn image_response(
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
        .flat_map(|item| {
            item.content_filter_results
                .iter()
                .chain(&item.prompt_filter_results)
        })
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use base64::Engine;
    use serde_json::json;

    use super::*;
    use crate::providers::azure::error_response;
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
            "gpt-image-2",
            "image prod",
            Some("2025-04-01-preview"),
            r#"{"model":"pub-model","prompt":"a fox","quality":"high","size":"2048x1152"}"#,
        );
        let n = image_request(Some("2025-04-01-preview"), &req.model.targets[0], &req, 1).unwrap();
        assert_eq!(
            n.path,
            "/openai/deployments/image%20prod/images/generations?api-version=2025-04-01-preview"
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&n.body).unwrap(),
            json!({"model":"image prod","prompt":"a fox","n":1,"size":"2048x1152","quality":"high","output_format":"png"})
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
            "gpt-image-2",
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
            r#"{"created":1700000000,"data":[{"b64_json":"iVBORw0KGgo=","revised_prompt":"a fox",
                "content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"low"}},
                "prompt_filter_results":{"jailbreak":{"filtered":false,"detected":false}}}]}"#,
        )
        .unwrap();
        assert_eq!(got.created, Some(1700000000));
        assert_eq!(
            got.images[0].data,
            crate::common::images::ImageData::Base64("iVBORw0KGgo=".into())
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

        // The prompt's verdicts sit on the image item, beside the image's own.
        let e = answer(
            r#"{"created":1,"data":[{"prompt_filter_results":{"jailbreak":{"filtered":true,"detected":true},
                "hate":{"filtered":false,"severity":"safe"}}}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(
            e.message,
            "the image was withheld by Azure's content filter (jailbreak)"
        );

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
}
