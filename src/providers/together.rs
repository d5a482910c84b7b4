//! Together AI image generation (FLUX models) through its OpenAI-style
//! `POST /v1/images/generations`, Bearer key.
//!
//! Together's body is not OpenAI's: the size goes as `width` and `height` in pixels, `n` is 1–4 a
//! call (the gateway fans out beyond), `response_format` is `url` or `base64` (the caller's choice
//! passed on), `output_format` is `jpeg` or `png`, and a FLUX.1 Kontext reference image goes as
//! `image_url` (the caller's URL, or a data URL for base64). Its own diffusion controls (`steps`,
//! `guidance_scale`, `seed`, `disable_safety_checker`) pass through where the family lists them.
//! FLUX has no negative prompt, so none is offered.
//!
//! The answer is OpenAI's shape (`{"id", "model", "object": "list", "data": [{"index", "url" |
//! "b64_json", "type"}]}`), read by [`crate::providers::openai::images::image_response`]; errors
//! are OpenAI's envelope (`{"error": {"message", "type", "code"}}`), read by
//! [`crate::providers::openai::error_response`], plus Together's own codes for a model it does not
//! serve (`model_not_available`, `dedicated_endpoint_not_running`).

use serde::Serialize;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::native::{json_with_extra, NativeRequest};
use crate::providers::registry::Kind;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const IMAGES_PATH: &str = "/v1/images/generations";

/// Where Together links its results (`api.together.ai/v1/images/...`, its own host, is always
/// allowed; its storage hosts too).
const RESULT_HOSTS: &[&str] = &["*.together.ai", "*.together.xyz"];

/// Error codes (besides OpenAI's `model_not_found`) that mean the configured model is not served
/// on the account's serverless API.
const UNKNOWN_MODEL_CODES: &[&str] = &["model_not_available", "dedicated_endpoint_not_running"];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct ImagesBody<'a> {
    model: &'a str,
    prompt: &'a str,
    width: u32,
    height: u32,
    n: u64,
    response_format: &'static str,
    output_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_url: Option<&'a str>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    if n == 0 || n > req.caps.per_call_n {
        return Err(GatewayError::Internal(format!(
            "together asked for {n} images in one call; the family allows {}",
            req.caps.per_call_n
        )));
    }
    let (width, height) = pixels(&req.size).ok_or_else(|| {
        GatewayError::field(
            "size",
            format!(
                "model {} takes WIDTHxHEIGHT sizes, not {}",
                req.model.name, req.size
            ),
        )
    })?;
    let image = req.image.as_ref().map(|i| i.url_or_data_url());
    let body = ImagesBody {
        model: &target.native_model,
        prompt: req.prompt.as_str(),
        width,
        height,
        n,
        response_format: if req.response_format == "b64_json" {
            "base64"
        } else {
            "url"
        },
        output_format: if req.output_format == "jpg" {
            "jpeg"
        } else {
            "png"
        },
        image_url: image.as_deref(),
    };
    Ok(NativeRequest::post_json(
        IMAGES_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// `WxH` as numbers.
fn pixels(size: &str) -> Option<(u32, u32)> {
    let (w, h) = size.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let mut err = crate::providers::openai::error_response(provider, status, body);
    let code = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/code")
                .and_then(|c| c.as_str().map(str::to_string))
        });
    if code
        .as_deref()
        .is_some_and(|c| UNKNOWN_MODEL_CODES.contains(&c))
    {
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Together kind: Bearer key, images only.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    crate::providers::openai::images::compatible_kind(
        key,
        image_request,
        error_response,
        RESULT_HOSTS,
    )
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "tgp-together-secret-5";

    fn provider() -> Arc<Provider> {
        support::provider_at("together", KEY, "https://api.together.ai")
    }

    fn request<'a>(family: &str, native: &str, body: &'a [u8]) -> ImageRequest<'a> {
        let t = support::target(provider(), native);
        support::image_request("m", family, t, body)
    }

    fn native(req: &ImageRequest<'_>, n: u64) -> serde_json::Value {
        let native = image_request(&req.model.targets[0], req, n).unwrap();
        assert_eq!(native.path, IMAGES_PATH);
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_requests() {
        let req = request(
            "together-flux",
            "black-forest-labs/FLUX.1-schnell",
            br#"{"model":"m","prompt":"a fox","size":"1440x768","n":3,"output_format":"jpg",
                "response_format":"b64_json","steps":4,"seed":9}"#,
        );
        assert_eq!(
            native(&req, 3),
            json!({"model": "black-forest-labs/FLUX.1-schnell", "prompt": "a fox",
                "width": 1440, "height": 768, "n": 3, "response_format": "base64",
                "output_format": "jpeg", "steps": 4, "seed": 9})
        );
        assert!(image_request(&req.model.targets[0], &req, 5).is_err());
        let req = request(
            "together-flux-kontext",
            "black-forest-labs/FLUX.1-kontext-pro",
            br#"{"model":"m","prompt":"make it blue","aspect_ratio":"16:9","image":"https://img.example/a.jpg"}"#,
        );
        assert_eq!(
            native(&req, 1),
            json!({"model": "black-forest-labs/FLUX.1-kontext-pro", "prompt": "make it blue",
                "width": 1344, "height": 768, "n": 1, "response_format": "url",
                "output_format": "png", "image_url": "https://img.example/a.jpg"})
        );
    }

    #[test]
    fn refuses_what_flux_cannot_do() {
        let t = || support::target(provider(), "black-forest-labs/FLUX.1-schnell");
        let refused = support::image_refusal(
            "m",
            "together-flux",
            t(),
            br#"{"model":"m","prompt":"p","negative_prompt":"x","image":"https://a.example/i.png","size":"1450x768","output_format":"webp"}"#,
        );
        for field in ["negative_prompt", "image", "size", "output_format"] {
            assert!(refused.get(field).is_some(), "{field}: {refused}");
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        for (status, code) in [
            (404, "model_not_found"),
            (400, "model_not_available"),
            (400, "dedicated_endpoint_not_running"),
        ] {
            let body = format!(
                r#"{{"error":{{"message":"Unable to access model x ({KEY})","type":"invalid_request_error","param":null,"code":"{code}"}}}}"#
            );
            let e = error_response(&p, status, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::UnknownModel, "{code}");
            assert!(!e.message.contains(KEY));
        }
        let e = error_response(
            &p,
            401,
            br#"{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        let e = error_response(
            &p,
            400,
            br#"{"error":{"message":"width must be at most 1440","type":"invalid_request_error"}}"#,
        );
        assert_eq!(
            (e.kind, e.message.as_str()),
            (
                UpstreamErrorKind::InvalidRequest,
                "width must be at most 1440"
            )
        );
        let e = error_response(&p, 503, b"upstream busy");
        assert!(e.retryable());
    }
}
