//! Recraft image generation (Recraft V4.1, V4 and V3, raster and vector) through its
//! OpenAI-compatible `POST /v1/images/generations` at `external.api.recraft.ai`, Bearer key.
//!
//! The body is OpenAI's shape with Recraft's own values: `model` (`recraftv4_1`,
//! `recraftv4_1_vector`, `recraftv4_pro`, `recraftv3`, …), `prompt`, `n` (1–6 a call; the gateway
//! fans out beyond), `size` as `WxH` from the model's own table (each model generation has its
//! sizes: V4 about 1 MP, V4 Pro about 4 MP, V3 its 15), `response_format` (`url` or `b64_json`,
//! the caller's choice passed on: vector models answer SVG, which the gateway neither downloads
//! nor hosts, so a link stays Recraft's and base64 comes from Recraft), and, where the family
//! allows them, `style` (the public `style_preset`; V3's base styles) and `negative_prompt`
//! (V3 only; V4 refuses it), plus the caller's pass-through fields (`controls`, `style_id`,
//! `substyle`, `text_layout`).
//!
//! The answer is OpenAI's (`{"created", "data": [{"url" | "b64_json", "image_id",
//! "revised_prompt"}]}`), read by [`crate::providers::openai::images::image_response`]. Errors
//! are JSON with a `code` and a `message` (read leniently, also OpenAI's `{"error": {…}}`); they
//! are classified by HTTP status, and a model Recraft does not know by its `code`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::native::{json_with_extra, NativeRequest};
use crate::providers::formats::errors::status_error;
use crate::providers::registry::Kind;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const IMAGES_PATH: &str = "/v1/images/generations";

/// Where Recraft links its results.
const RESULT_HOSTS: &[&str] = &["*.recraft.ai"];

/// Error `code`s that mean the configured model is not one Recraft serves (unconfirmed: see the
/// ledger).
const UNKNOWN_MODEL_CODES: &[&str] = &["invalid_model", "model_not_found", "unknown_model"];

/// Error `code`s that mean the account cannot pay.
const NO_CREDITS_CODES: &[&str] = &["not_enough_credits", "insufficient_credits"];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct ImagesBody<'a> {
    model: &'a str,
    prompt: &'a str,
    n: u64,
    size: &'a str,
    response_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    style: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    negative_prompt: Option<&'a str>,
}

/// An error body: Recraft's `{"code", "message"}`, or OpenAI's `{"error": {"code", "message"}}`.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    if n == 0 || n > req.caps.per_call_n {
        return Err(GatewayError::Internal(format!(
            "recraft asked for {n} images in one call; the family allows {}",
            req.caps.per_call_n
        )));
    }
    let body = ImagesBody {
        model: &target.native_model,
        prompt: req.prompt.as_str(),
        n,
        size: &req.size,
        response_format: if req.response_format == "b64_json" {
            "b64_json"
        } else {
            "url"
        },
        style: req.style_preset,
        negative_prompt: req.negative_prompt.as_ref().map(|p| p.as_str()),
    };
    Ok(NativeRequest::post_json(
        IMAGES_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let (code, message) = match parsed {
        Some(ErrorBody {
            code,
            message,
            error,
        }) => {
            let nested = error.as_ref().and_then(Value::as_object);
            let code = code
                .or_else(|| nested.and_then(|e| e.get("code").cloned()))
                .and_then(|c| c.as_str().map(str::to_string));
            let message = message
                .or_else(|| {
                    nested
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .or_else(|| error.as_ref().and_then(Value::as_str).map(str::to_string));
            (code, message)
        }
        None => (None, None),
    };
    let mut err = status_error(provider, status, message.as_deref().map(str::trim));
    match code.as_deref() {
        Some(c) if UNKNOWN_MODEL_CODES.contains(&c) => err.kind = UpstreamErrorKind::UnknownModel,
        // Out of API units: a retry does not help, and it is the operator's to fix.
        Some(c) if NO_CREDITS_CODES.contains(&c) => err.kind = UpstreamErrorKind::Failure,
        _ => {}
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Recraft kind: Bearer key, images only.
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

    const KEY: &str = "rk-recraft-secret-77";

    fn provider() -> Arc<Provider> {
        support::provider_at("recraft", KEY, "https://external.api.recraft.ai")
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
    fn builds_v4_and_v3_requests() {
        let req = request(
            "recraft-v4",
            "recraftv4_1",
            br#"{"model":"m","prompt":"a fox","aspect_ratio":"14:10","n":3,
                "response_format":"b64_json","controls":{"no_text":true}}"#,
        );
        assert_eq!(
            native(&req, 3),
            json!({"model": "recraftv4_1", "prompt": "a fox", "n": 3, "size": "1280x896",
                "response_format": "b64_json", "controls": {"no_text": true}})
        );
        let req = request(
            "recraft-v3",
            "recraftv3",
            br#"{"model":"m","prompt":"a fox","size":"1820x1024","style_preset":"digital_illustration",
                "negative_prompt":"text","substyle":"pixel_art"}"#,
        );
        assert_eq!(
            native(&req, 1),
            json!({"model": "recraftv3", "prompt": "a fox", "n": 1, "size": "1820x1024",
                "response_format": "url", "style": "digital_illustration",
                "negative_prompt": "text", "substyle": "pixel_art"})
        );
        assert!(image_request(&req.model.targets[0], &req, 7).is_err());
    }

    #[test]
    fn families_refuse_what_their_models_cannot_do() {
        let t = || support::target(provider(), "recraftv4_1");
        let refused = support::image_refusal(
            "m",
            "recraft-v4",
            t(),
            br#"{"model":"m","prompt":"p","negative_prompt":"x","style_preset":"icon","size":"1820x1024","output_format":"svg"}"#,
        );
        for field in ["negative_prompt", "style_preset", "size", "output_format"] {
            assert!(refused.get(field).is_some(), "{field}: {refused}");
        }
        let refused = support::image_refusal(
            "m",
            "recraft-v4-pro",
            t(),
            br#"{"model":"m","prompt":"p","size":"1024x1024"}"#,
        );
        assert!(refused.get("size").is_some(), "{refused}");
        // Vector models make SVG only.
        let req = request(
            "recraft-v4-vector",
            "recraftv4_1_vector",
            br#"{"model":"m","prompt":"p"}"#,
        );
        assert_eq!(req.output_format, "svg");
        let refused = support::image_refusal(
            "m",
            "recraft-v4-vector",
            t(),
            br#"{"model":"m","prompt":"p","output_format":"png"}"#,
        );
        assert!(refused.get("output_format").is_some(), "{refused}");
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            400,
            format!(r#"{{"code":"invalid_model","message":"unknown model {KEY}"}}"#).as_bytes(),
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert!(!e.message.contains(KEY));
        let e = error_response(
            &p,
            400,
            br#"{"code":"not_enough_credits","message":"Not enough credits"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());
        let e = error_response(&p, 401, br#"{"error":{"message":"bad token"}}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (UpstreamErrorKind::AuthRejected, "bad token")
        );
        let e = error_response(&p, 429, b"{}");
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        let e = error_response(&p, 502, b"<html>bad gateway</html>");
        assert_eq!(
            (e.kind, e.message.as_str()),
            (UpstreamErrorKind::Failure, "HTTP 502")
        );
        let e = error_response(&p, 400, br#"{"code":"invalid_size","message":"bad size"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
    }
}
