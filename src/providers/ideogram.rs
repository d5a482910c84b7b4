//! Ideogram 3.0 image generation through `POST /v1/ideogram-v3/generate` (the target's native
//! model names the endpoint: `/v1/{model}/generate`), key in the `Api-Key` header, body
//! `multipart/form-data`.
//!
//! Form fields: `prompt`; `resolution` (the public `size`: every family size is one of Ideogram's
//! own resolutions, and a public `aspect_ratio` means one of them, so `aspect_ratio` is never
//! sent); `num_images` (1–8 a call, the gateway fans out beyond); `rendering_speed` from the public
//! `quality` (`low` → `TURBO`, `medium` → `DEFAULT`, `high` → `QUALITY`; absent: Ideogram's
//! default); `style_type` from `style_preset` (upper-cased); `negative_prompt`; the reference
//! image as a `character_reference_images` file part (Ideogram takes one, as bytes: the gateway
//! downloads a URL first); and the caller's pass-through fields (`seed`, `magic_prompt`,
//! `style_codes`, `color_palette`) as text parts.
//!
//! The answer is `{"created", "data": [{"url", "prompt", "resolution", "is_image_safe", "seed",
//! "style_type"}]}` with links that expire; an image Ideogram marks unsafe comes without a link
//! and fails the request as a content-policy refusal. Errors are JSON (`{"error": "…"}`, or
//! FastAPI's `{"detail": …}`); 422 is Ideogram's safety check, 404 an endpoint (model) it does not
//! have.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::image_input;
use crate::common::images::{ImageData, NativeImage, NativeImages};
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::multipart::Form;
use crate::providers::parse_answer;
use crate::providers::registry::{images, images_kind, keyed, no_checks, ImageFns, Kind};
use crate::upstream::provider::{bad_answer, Auth, Provider};

// ---- constants -------------------------------------------------------------------------------

/// Where Ideogram links its results (`ideogram.ai/api/images/ephemeral/…`).
const RESULT_HOSTS: &[&str] = &["ideogram.ai", "*.ideogram.ai"];

/// The native models this adapter speaks to (each is its own endpoint).
const MODELS: &[&str] = &["ideogram-v3"];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    data: Option<Vec<AnswerItem>>,
}

#[derive(Deserialize)]
struct AnswerItem {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    is_image_safe: Option<bool>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    if n == 0 || n > req.caps.per_call_n {
        return Err(GatewayError::Internal(format!(
            "ideogram asked for {n} images in one call; the family allows {}",
            req.caps.per_call_n
        )));
    }
    let model = target.native_model.as_str();
    if !MODELS.contains(&model) {
        return Err(GatewayError::Internal(format!(
            "ideogram native model `{model}` is not one of {}",
            MODELS.join(", ")
        )));
    }
    let reference = match &req.image {
        None => None,
        Some(input) => Some(input.bytes().ok_or_else(|| {
            GatewayError::Internal("ideogram reference image was not downloaded".into())
        })?),
    };
    let reference_name =
        reference.map(|(_, mime)| format!("character.{}", image_input::extension(mime)));
    let num_images = n.to_string();
    let style_type = req.style_preset.map(str::to_ascii_uppercase);
    let extra: Vec<(&str, Cow<'_, str>)> = req
        .passthrough
        .iter()
        .map(|(k, v)| (k.as_str(), form_value(v)))
        .collect();

    let mut form = Form::new();
    form.text("prompt", req.prompt.as_str())
        .text("resolution", &req.size)
        .text("num_images", &num_images);
    if let Some(speed) = req.quality.and_then(rendering_speed) {
        form.text("rendering_speed", speed);
    }
    if let Some(style) = &style_type {
        form.text("style_type", style);
    }
    if let Some(np) = &req.negative_prompt {
        form.text("negative_prompt", np.as_str());
    }
    if let (Some((bytes, mime)), Some(name)) = (reference, &reference_name) {
        form.file("character_reference_images", name, mime, bytes);
    }
    for (k, v) in &extra {
        form.text(k, v);
    }
    Ok(form.request(format!("/v1/{model}/generate")))
}

/// Ideogram's `rendering_speed` for a public `quality`.
fn rendering_speed(quality: &str) -> Option<&'static str> {
    match quality {
        "low" => Some("TURBO"),
        "medium" => Some("DEFAULT"),
        "high" => Some("QUALITY"),
        _ => None,
    }
}

/// A pass-through JSON value as form text: a string unquoted, anything else as its JSON text.
fn form_value(raw: &RawValue) -> Cow<'_, str> {
    match serde_json::from_str::<String>(raw.get()) {
        Ok(s) => Cow::Owned(s),
        Err(_) => Cow::Borrowed(raw.get().trim()),
    }
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let answer: Answer = parse_answer(provider, body)?;
    let items = answer.data.unwrap_or_default();
    if items.is_empty() {
        return Err(bad_answer(provider, "answer holds no images"));
    }
    let count = items.len();
    let images = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item.url.filter(|u| !u.is_empty()) {
            Some(url) => Ok(NativeImage::new(ImageData::Url(url))),
            // Ideogram withholds an image its safety check refused.
            None if item.is_image_safe == Some(false) => Err(UpstreamError::new(
                UpstreamErrorKind::ContentPolicy,
                &provider.name,
                format!("image {} of {count} failed Ideogram's safety check", i + 1),
            )),
            None => Err(bad_answer(
                provider,
                format!("image {} of {count} has no url", i + 1),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // `created` is an ISO 8601 string, not Unix seconds: the gateway uses its own clock.
    Ok(NativeImages {
        created: None,
        images,
        ..Default::default()
    })
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let message = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        let text = |f: &str| match v.get(f) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        text("error")
            .or_else(|| text("detail"))
            .or_else(|| text("message"))
    });
    let mut err = status_error(provider, status, message.as_deref().map(str::trim));
    match status {
        // "Prompt or provided image failed the safety checks".
        422 => err.kind = UpstreamErrorKind::ContentPolicy,
        // The model is the endpoint: a 404 means Ideogram has no such model.
        404 => err.kind = UpstreamErrorKind::UnknownModel,
        _ => {}
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Ideogram kind: key in `Api-Key`, images only.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    Ok(images_kind(
        keyed(key, |k| Auth::header("api-key", k))?,
        error_response,
        RESULT_HOSTS,
        ImageFns {
            request: image_request,
            validate: no_checks,
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

    use base64::Engine;
    use serde_json::json;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "ideogram-secret-key-31";
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

    fn provider() -> Arc<Provider> {
        support::provider_at("ideogram", KEY, "https://api.ideogram.ai")
    }

    fn request(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(provider(), "ideogram-v3");
        support::image_request("m", "ideogram-v3", t, body)
    }

    /// The text parts of a form, and the file part names (parsed loosely: enough for asserts).
    fn parts(native: &NativeRequest) -> (Vec<(String, String)>, Vec<String>) {
        let ct = native.content_type.to_string();
        let boundary = ct.split("boundary=").nth(1).unwrap().to_string();
        let body = String::from_utf8_lossy(&native.body).into_owned();
        let mut texts = Vec::new();
        let mut files = Vec::new();
        for part in body.split(&format!("--{boundary}")) {
            let Some((head, value)) = part.split_once("\r\n\r\n") else {
                continue;
            };
            let name = head
                .split("name=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap()
                .to_string();
            if head.contains("filename=") {
                files.push(name);
            } else {
                texts.push((name, value.trim_end_matches("\r\n").to_string()));
            }
        }
        (texts, files)
    }

    #[test]
    fn builds_a_form() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
        let body = format!(
            r#"{{"model":"m","prompt":"a poster","aspect_ratio":"16:9","n":3,"quality":"high",
                "style_preset":"design","negative_prompt":"blur","image":"{b64}","seed":7,
                "magic_prompt":"OFF","style_codes":["AAAAAAAA"]}}"#
        );
        let req = request(body.as_bytes());
        let native = image_request(&req.model.targets[0], &req, 3).unwrap();
        assert_eq!(native.path, "/v1/ideogram-v3/generate");
        let (texts, files) = parts(&native);
        let text = |n: &str| texts.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(text("prompt"), Some("a poster"));
        assert_eq!(text("resolution"), Some("1312x736"));
        assert_eq!(text("num_images"), Some("3"));
        assert_eq!(text("rendering_speed"), Some("QUALITY"));
        assert_eq!(text("style_type"), Some("DESIGN"));
        assert_eq!(text("negative_prompt"), Some("blur"));
        assert_eq!(text("seed"), Some("7"));
        assert_eq!(text("magic_prompt"), Some("OFF"));
        assert_eq!(text("style_codes"), Some(r#"["AAAAAAAA"]"#));
        assert_eq!(text("aspect_ratio"), None);
        assert_eq!(files, ["character_reference_images"]);
        assert!(image_request(&req.model.targets[0], &req, 9).is_err());
        // No quality: Ideogram's default speed.
        let req = request(br#"{"model":"m","prompt":"p"}"#);
        let native = image_request(&req.model.targets[0], &req, 1).unwrap();
        let (texts, files) = parts(&native);
        assert!(texts.iter().all(|(k, _)| k != "rendering_speed"));
        assert!(files.is_empty());
    }

    #[test]
    fn reads_answers() {
        let p = provider();
        let req = request(br#"{"model":"m","prompt":"p"}"#);
        let ok = json!({"created": "2026-11-27T08:00:00Z", "data": [
            {"url": "https://ideogram.ai/api/images/ephemeral/a.png", "prompt": "p",
             "resolution": "1024x1024", "is_image_safe": true, "seed": 1, "style_type": "GENERAL"}]});
        let got =
            image_response(&p, &req, &http::HeaderMap::new(), ok.to_string().as_bytes()).unwrap();
        assert_eq!(got.images.len(), 1);
        let unsafe_ = json!({"created": "x", "data": [{"is_image_safe": false, "prompt": "p"}]});
        let e = image_response(
            &p,
            &req,
            &http::HeaderMap::new(),
            unsafe_.to_string().as_bytes(),
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        let e = image_response(&p, &req, &http::HeaderMap::new(), br#"{"data":[]}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            422,
            br#"{"error":"Prompt or provided image failed the safety checks"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(
            e.message,
            "Prompt or provided image failed the safety checks"
        );
        let e = error_response(&p, 404, br#"{"detail":"Not Found"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        let e = error_response(
            &p,
            401,
            format!(r#"{{"error":"bad key {KEY}"}}"#).as_bytes(),
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY));
        let e = error_response(
            &p,
            400,
            br#"{"detail":[{"loc":["body","resolution"],"msg":"bad"}]}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert!(e.message.contains("resolution"), "{}", e.message);
        let e = error_response(&p, 429, b"");
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
    }
}
