//! Amazon Bedrock image generation: Stability AI's models on Bedrock through the runtime's
//! `InvokeModel` (`POST https://bedrock-runtime.<region>.amazonaws.com/model/{modelId}/invoke`),
//! signed with AWS Signature Version 4 (signing name `bedrock`; credentials and region from the
//! account, `providers/formats/aws.rs`).
//!
//! The target's model is the Bedrock model id (`stability.stable-image-ultra-v1:1`,
//! `stability.stable-image-core-v1:1`, `stability.sd3-5-large-v1:0`) or an inference profile or
//! ARN, sent percent-encoded in the path (`:` as `%3A`; SigV4 signs it encoded once more). The
//! JSON body is Stability's own text-to-image fields: `prompt` (at most 10,000 characters),
//! `aspect_ratio` (the ratio the public size means in the family table), `negative_prompt`,
//! `output_format` (`png` or `jpeg`) and the caller's `seed` (native). One call makes one image;
//! the gateway fans out for `n > 1`. Image-to-image is not offered here.
//!
//! The answer is `{"seeds": [...], "finish_reasons": [null | "Filter reason: …" | "Inference
//! error"], "images": ["<base64>"]}`: a non-null finish reason fails the request (a filter as a
//! content-policy refusal). Errors are Bedrock runtime REST-JSON, classified as Bedrock rerank
//! classifies them (`bedrock::error_response`: a model the account or region cannot use is the
//! "no such model" signal), plus a 408 `ModelTimeoutException` (a timeout), a 429
//! `ModelNotReadyException` (retried) and content-filter messages (a content-policy refusal).
//!
//! Amazon's own image models on Bedrock (Titan Image Generator v1/v2, Nova Canvas) are retired
//! (`caps/families.yaml`, `retired:`); see `docs/providers/bedrock.md`.

use serde::{Deserialize, Serialize};

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::images::{ImageData, NativeImage, NativeImages};
use crate::common::native::{json_with_extra, NativeRequest};
use crate::providers::bedrock;
use crate::providers::formats::aws;
use crate::providers::parse_answer;
use crate::providers::registry::{images, images_kind, ImageFns, Kind};
use crate::upstream::provider::{bad_answer, Provider};

// ---- constants -------------------------------------------------------------------------------

/// SigV4's signing name for the Bedrock runtime (its endpoint prefix is `bedrock-runtime`).
const SIGNING_NAME: &str = "bedrock";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct Body<'a> {
    prompt: &'a str,
    aspect_ratio: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    negative_prompt: Option<&'a str>,
    output_format: &'static str,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    images: Option<Vec<String>>,
    #[serde(default)]
    finish_reasons: Option<Vec<Option<String>>>,
}

// ---- translation to native -------------------------------------------------------------------

/// Refusals the family table cannot express: only text-to-image, so a size the family's rule
/// allows must still be one of Stability's ratios.
fn check(_target: &Target, req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    req.required_aspect_ratio().map(|_| ())
}

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    // The family's `per_call_n` is 1, so the gateway never asks one call for more.
    if n != 1 {
        return Err(GatewayError::Internal(format!(
            "bedrock-image makes one image per call, asked for {n}"
        )));
    }
    if req.image.is_some() {
        // The family takes no reference image: validation refused it already.
        return Err(GatewayError::Internal(
            "bedrock-image was given a reference image".into(),
        ));
    }
    let body = Body {
        prompt: req.prompt.as_str(),
        aspect_ratio: req.required_aspect_ratio()?,
        negative_prompt: req.negative_prompt.as_ref().map(|s| s.as_str()),
        output_format: match req.output_format {
            "jpg" => "jpeg",
            _ => "png",
        },
    };
    let mut native = NativeRequest::post_json(
        invoke_path(&target.native_model),
        json_with_extra(&body, &req.passthrough)?,
    );
    native.headers.push((
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json"),
    ));
    Ok(native)
}

/// `/model/{modelId}/invoke` with the id percent-encoded (an ARN's `/` and a version's `:`
/// included), so no model id can reshape the path.
fn invoke_path(model: &str) -> String {
    let mut path = String::with_capacity(16 + model.len() * 3);
    path.push_str("/model/");
    for b in model.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            path.push(b as char);
        } else {
            path.push_str(&format!("%{b:02X}"));
        }
    }
    path.push_str("/invoke");
    path
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let answer: Answer = parse_answer(provider, body)?;
    // A non-null finish reason: the request or its result was filtered, or inference failed.
    if let Some(reason) = answer.finish_reasons.iter().flatten().flatten().next() {
        let kind = if reason.to_ascii_lowercase().contains("filter") {
            UpstreamErrorKind::ContentPolicy
        } else {
            UpstreamErrorKind::Failure
        };
        return Err(UpstreamError::new(
            kind,
            &provider.name,
            format!("Bedrock returned no image: {reason}"),
        ));
    }
    let images: Vec<NativeImage> = answer
        .images
        .unwrap_or_default()
        .into_iter()
        .filter(|b| !b.is_empty())
        .map(|b| NativeImage::new(ImageData::Base64(b.into())))
        .collect();
    if images.is_empty() {
        return Err(bad_answer(provider, "answer holds no images"));
    }
    Ok(NativeImages {
        created: None,
        images,
        ..Default::default()
    })
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let mut err = bedrock::error_response(provider, status, body);
    let parsed = aws::ErrorBody::parse(body);
    let lower = parsed
        .message()
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if status == 400 && lower.contains("content filter") {
        err.kind = UpstreamErrorKind::ContentPolicy;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Bedrock image kind: SigV4-signed, images only, base64 answers (no result hosts).
pub(crate) fn kind(settings: &aws::Settings, key: &str) -> Result<Kind, String> {
    let auth = aws::auth("bedrock-image", settings, key, SIGNING_NAME)?;
    Ok(images_kind(
        auth,
        error_response,
        &[],
        ImageFns {
            request: image_request,
            validate: check,
            response: |p, r, h, b| images(image_response(p, r, h, b)),
            input_as_bytes: true,
            tasks: None,
        },
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const MODEL: &str = "stability.stable-image-ultra-v1:1";

    fn provider() -> Arc<Provider> {
        support::provider_at(
            "bedrock-image",
            "AKIDEXAMPLE",
            "https://bedrock-runtime.us-west-2.amazonaws.com",
        )
    }

    fn request(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(provider(), MODEL);
        support::image_request("m", "bedrock-stability", t, body)
    }

    fn json(n: &NativeRequest) -> serde_json::Value {
        serde_json::from_slice(&n.body).unwrap()
    }

    #[test]
    fn builds_the_invoke_request() {
        let req = request(
            br#"{"model":"m","prompt":"a fox","size":"1344x768","negative_prompt":"blur","output_format":"jpg","seed":42}"#,
        );
        let n = image_request(&req.model.targets[0], &req, 1).unwrap();
        assert_eq!(n.path, "/model/stability.stable-image-ultra-v1%3A1/invoke");
        assert_eq!(n.method, http::Method::POST);
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"prompt":"a fox","aspect_ratio":"16:9","negative_prompt":"blur","output_format":"jpeg","seed":42}"#
        );
        assert_eq!(n.headers[0].1, "application/json");
        assert!(image_request(&req.model.targets[0], &req, 2).is_err());
        let req = request(br#"{"model":"m","prompt":"p"}"#);
        let n = image_request(&req.model.targets[0], &req, 1).unwrap();
        assert_eq!(
            json(&n),
            serde_json::json!({"prompt": "p", "aspect_ratio": "1:1", "output_format": "png"})
        );
    }

    #[test]
    fn model_ids_and_arns_are_encoded_into_the_path() {
        assert_eq!(
            invoke_path("arn:aws:bedrock:us-west-2::foundation-model/stability.sd3-5-large-v1:0"),
            "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A%3Afoundation-model%2Fstability.sd3-5-large-v1%3A0/invoke"
        );
        assert_eq!(invoke_path("x/../y?z"), "/model/x%2F..%2Fy%3Fz/invoke");
    }

    #[test]
    fn reads_answers_and_filtered_results() {
        let p = provider();
        let req = request(br#"{"model":"m","prompt":"p"}"#);
        let h = http::HeaderMap::new();
        let ok = br#"{"seeds":[2130420379],"finish_reasons":[null],"images":["iVBORw0KGgo="]}"#;
        let got = image_response(&p, &req, &h, ok).unwrap();
        assert_eq!(got.images.len(), 1);
        let e = image_response(
            &p,
            &req,
            &h,
            br#"{"finish_reasons":["Filter reason: prompt"]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        let e = image_response(
            &p,
            &req,
            &h,
            br#"{"seeds":[1],"finish_reasons":["Inference error"],"images":[]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        let e = image_response(&p, &req, &h, br#"{"images":[]}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let cases: &[(u16, &str, UpstreamErrorKind)] = &[
            (
                400,
                r#"{"message":"Malformed input request: #: extraneous key [quality] is not permitted"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                400,
                r#"{"message":"This request has been blocked by our content filters."}"#,
                UpstreamErrorKind::ContentPolicy,
            ),
            (
                400,
                r#"{"message":"The provided model identifier is invalid."}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                403,
                r#"{"message":"You don't have access to the model with the specified model ID."}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                404,
                r#"{"message":"This model version has reached the end of its life."}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                408,
                r#"{"message":"Model has timed out in processing the request."}"#,
                UpstreamErrorKind::Timeout,
            ),
            (
                429,
                r#"{"message":"Too many requests, please wait before trying again."}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                424,
                r#"{"message":"Received client error (400) from primary","originalStatusCode":400}"#,
                UpstreamErrorKind::Failure,
            ),
            (
                503,
                r#"{"message":"Bedrock is unable to process your request."}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (status, body, kind) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
        }
    }
}
