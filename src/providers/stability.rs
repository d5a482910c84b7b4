//! Stability AI Stable Image v2beta: `POST /v2beta/stable-image/generate/{ultra|core|sd3}`.
//!
//! Stability takes only `multipart/form-data`, even without files, so every field travels as a form
//! part: the prompt and options as text, a reference image as a file part (the gateway has already
//! downloaded URL inputs, see `ImageAdapter::input_as_bytes`). The target's native
//! model picks the endpoint: `ultra`, `core`, or any `sd3*` model, which goes to `/sd3` with the
//! model named in a `model` field and `mode` saying whether an image is edited.
//!
//! Stability has no `size`: text-to-image sends the `aspect_ratio` the public size means in the
//! family table, and image-to-image keeps the input's shape, so a size chosen together with an
//! image is refused rather than silently ignored. The public `strength` (the reference image's
//! influence) is sent inverted, as Stability's own `strength` is how far to move away from the image.
//! One call makes one image; the gateway fans out
//! for `n > 1`. `Accept: application/json` makes the answer base64 JSON whose `finish_reason`
//! reports a filtered result: that image is a blurred placeholder and is never delivered.
//!
//! Errors are `{"id", "name", "errors": ["field: reason", …]}`. A 403 `content_moderation` is a
//! content refusal; a 400 faulting the `model` field (set only from the configuration) or
//! Stability's own 404 `not_found` means the configured model is not served (an unknown model).
//! The provider ledger (`docs/providers/stability.md`) lists each fact and its source.

use http::header::{ACCEPT, CONTENT_TYPE};
use http::HeaderValue;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::image_input;
use crate::common::images::ImageData;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::native::NativeRequest;
use crate::providers::formats::multipart::Form;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const GENERATE_PATH: &str = "/v2beta/stable-image/generate";
/// The finish reason of a result the safety filter replaced with a blurred image.
const FILTERED: &str = "CONTENT_FILTERED";
const SUCCESS: &str = "SUCCESS";
/// Stability requires `strength` with `image`; the spec's default, should a family ever allow an
/// image without honouring strength.
const DEFAULT_STRENGTH: f64 = 0.5;

/// Stability's `strength` for the public one. The public `strength` is the reference image's
/// influence (1 = follow it closely, as Kling's `image_fidelity`); Stability's runs the other way
/// (0 = an image identical to the input, 1 = as if no image were given), so it gets `1 − strength`,
/// rounded to six decimals so that `0.7` goes as `0.3`, not `0.30000000000000004`.
fn stability_strength(public: f64) -> String {
    (((1.0 - public) * 1e6).round() / 1e6).to_string()
}

/// The generate endpoint a native model is served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Ultra,
    Core,
    /// SD3 / SD3.5 models, named in the form's `model` field.
    Sd3,
}

impl Endpoint {
    fn of(native_model: &str) -> Option<Endpoint> {
        match native_model {
            "ultra" => Some(Endpoint::Ultra),
            "core" => Some(Endpoint::Core),
            m if m.starts_with("sd3") => Some(Endpoint::Sd3),
            _ => None,
        }
    }

    fn path(self) -> String {
        let name = match self {
            Endpoint::Ultra => "ultra",
            Endpoint::Core => "core",
            Endpoint::Sd3 => "sd3",
        };
        format!("{GENERATE_PATH}/{name}")
    }
}

// ---- wire types ------------------------------------------------------------------------------

/// The JSON answer (`Accept: application/json`).
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// `{"id": …, "name": "bad_request", "errors": ["…"]}`.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    name: String,
    #[serde(default)]
    errors: Vec<Value>,
    #[serde(default)]
    message: Option<String>,
}

impl ErrorBody {
    /// The human text: the `errors` list joined, else `message`, else the error's name.
    fn text(&self) -> Option<String> {
        let joined = self
            .errors
            .iter()
            .map(|e| match e {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .filter(|s| !s.trim().is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        [Some(joined), self.message.clone(), Some(self.name.clone())]
            .into_iter()
            .flatten()
            .find(|s| !s.trim().is_empty())
    }
}

// ---- translation to native -------------------------------------------------------------------

/// Stability's refusals that the family table cannot express, in one place: the adapter's
/// validation step runs them before anything is started, and [`image_request`] again.
fn check(target: &Target, req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    if req.image.is_none() {
        req.required_aspect_ratio()?;
        return Ok(());
    }
    // A config pairing `core` with an image-capable family: Core has no image-to-image.
    if Endpoint::of(&target.native_model) == Some(Endpoint::Core) {
        return Err(GatewayError::field(
            "image",
            format!("model {} does not support image", req.model.name),
        ));
    }
    if req.size_given {
        return Err(GatewayError::field(
            "size",
            "cannot be chosen together with `image`: the result keeps the reference image's \
             aspect ratio; omit size and aspect_ratio",
        ));
    }
    Ok(())
}

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    // The families' `per_call_n` is 1, so the gateway never asks one call for more.
    if n != 1 {
        return Err(GatewayError::Internal(format!(
            "stability makes one image per call, asked for {n}"
        )));
    }
    let endpoint = Endpoint::of(&target.native_model).ok_or_else(|| {
        GatewayError::Internal(format!(
            "stability native model `{}` is none of ultra, core, sd3*",
            target.native_model
        ))
    })?;
    let image = match &req.image {
        None => None,
        Some(input) => Some(input.bytes().ok_or_else(|| {
            GatewayError::Internal("stability reference image was not downloaded".into())
        })?),
    };
    check(target, req)?;
    let aspect_ratio = match image {
        Some(_) => None,
        None => Some(req.required_aspect_ratio()?),
    };
    let strength = image.map(|_| stability_strength(req.strength.unwrap_or(DEFAULT_STRENGTH)));
    let filename = image.map(|(_, mime)| format!("image.{}", image_input::extension(mime)));
    let extra: Vec<(&str, String)> = req
        .passthrough
        .iter()
        .map(|(k, v)| (k.as_str(), form_value(v)))
        .collect();

    let mut form = Form::new();
    form.text("prompt", req.prompt.as_str());
    if let Some(np) = &req.negative_prompt {
        form.text("negative_prompt", np.as_str());
    }
    if endpoint == Endpoint::Sd3 {
        form.text("model", &target.native_model).text(
            "mode",
            if image.is_some() {
                "image-to-image"
            } else {
                "text-to-image"
            },
        );
    }
    if let Some(ratio) = aspect_ratio {
        form.text("aspect_ratio", ratio);
    }
    if let (Some((bytes, mime)), Some(name), Some(strength)) = (image, &filename, &strength) {
        form.file("image", name, mime, bytes)
            .text("strength", strength);
    }
    if let Some(style) = req.style_preset {
        form.text("style_preset", style);
    }
    form.text("output_format", output_format(req.output_format));
    for (k, v) in &extra {
        form.text(k, v);
    }
    let mut native = form.request(endpoint.path());
    native
        .headers
        .push((ACCEPT, HeaderValue::from_static("application/json")));
    Ok(native)
}

/// The native `output_format` for a public one.
fn output_format(public: &str) -> &'static str {
    match public {
        "jpg" => "jpeg",
        "webp" => "webp",
        _ => "png",
    }
}

/// A pass-through JSON value as form text: a string unquoted, anything else as its JSON text.
fn form_value(raw: &RawValue) -> String {
    serde_json::from_str::<String>(raw.get()).unwrap_or_else(|_| raw.get().trim().to_string())
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let one = |data| NativeImages {
        created: None,
        images: vec![NativeImage::new(data)],
        ..Default::default()
    };
    // Stability answers raw bytes (finish reason in a header) when `Accept` is not honoured.
    let is_image = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("image/"));
    if is_image {
        let reason = headers.get("finish-reason").and_then(|v| v.to_str().ok());
        check_finish(provider, reason)?;
        if body.is_empty() {
            return Err(crate::upstream::provider::bad_answer(
                provider,
                "answer has no image",
            ));
        }
        return Ok(one(ImageData::Bytes(bytes::Bytes::copy_from_slice(body))));
    }
    let answer: Answer = crate::providers::parse_answer(provider, body)?;
    check_finish(provider, answer.finish_reason.as_deref())?;
    let image = answer
        .image
        .filter(|s| !s.is_empty())
        .ok_or_else(|| crate::upstream::provider::bad_answer(provider, "answer has no image"))?;
    Ok(one(ImageData::Base64(image.into())))
}

/// A filtered result is a content-policy refusal; any reason besides success is a failure.
fn check_finish(provider: &Provider, reason: Option<&str>) -> Result<(), UpstreamError> {
    match reason {
        None | Some(SUCCESS) => Ok(()),
        Some(FILTERED) => Err(UpstreamError::new(
            UpstreamErrorKind::ContentPolicy,
            &provider.name,
            "the generated image was blocked by the provider's content filter",
        )),
        Some(other) => Err(UpstreamError::new(
            UpstreamErrorKind::Failure,
            &provider.name,
            format!("generation finished with {}", provider.redact(other)),
        )),
    }
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let message = parsed
        .as_ref()
        .and_then(ErrorBody::text)
        .map(|m| provider.redact(&m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    match parsed {
        // Moderation comes as a 403, which would otherwise read as the gateway's key being refused.
        Some(e) if e.name == "content_moderation" => err.kind = UpstreamErrorKind::ContentPolicy,
        Some(e) if names_the_model(status, &e) => err.kind = UpstreamErrorKind::UnknownModel,
        _ => {}
    }
    err
}

/// Whether Stability refused the model the configuration names: a 400 `bad_request` whose
/// `errors` (written `field: reason`) fault the `model` form field, which only the gateway's
/// configuration sets (the SD3 endpoint's native model); or Stability's own 404 `not_found`
/// for the generate path the native model picks (`ultra`, `core`, `sd3`), which is how a
/// retired endpoint answers.
fn names_the_model(status: u16, body: &ErrorBody) -> bool {
    match status {
        400 => body.errors.iter().any(|e| {
            e.as_str()
                .map(str::trim_start)
                .is_some_and(|t| t.starts_with("model:") || t.starts_with("model "))
        }),
        404 => body.name == "not_found",
        _ => false,
    }
}

// ---- registration ----------------------------------------------------------------------------

/// The Stability kind: Bearer key, images only, reference images sent as bytes in its forms.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, crate::upstream::provider::Auth::bearer)?;
    let images = crate::providers::registry::ImageFns {
        request: image_request,
        validate: check,
        response: |p, r, h, b| crate::providers::registry::images(image_response(p, r, h, b)),
        input_as_bytes: true,
        tasks: None,
    };

    Ok(crate::providers::registry::images_kind(
        auth,
        error_response,
        &[],
        images,
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;
    use base64::Engine;

    const KEY: &str = "sk-stability-secret-1234";
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

    /// One part of a multipart body.
    #[derive(Debug)]
    struct Part {
        name: String,
        filename: Option<String>,
        content_type: Option<String>,
        data: Vec<u8>,
    }

    /// A minimal RFC 7578 reader for the bodies this adapter writes.
    fn parts(n: &NativeRequest) -> Vec<Part> {
        let boundary = n
            .content_type
            .strip_prefix("multipart/form-data; boundary=")
            .expect("multipart content type");
        let delim = format!("--{boundary}");
        let body = n.body.as_ref();
        let mut out = Vec::new();
        let mut pos = find(body, delim.as_bytes(), 0).expect("first boundary");
        loop {
            pos += delim.len();
            if body[pos..].starts_with(b"--") {
                break;
            }
            pos += 2; // CRLF after the boundary
            let head_end = find(body, b"\r\n\r\n", pos).expect("part headers");
            let head = std::str::from_utf8(&body[pos..head_end]).unwrap();
            let next = find(body, format!("\r\n{delim}").as_bytes(), head_end).expect("part end");
            let mut lines = head.split("\r\n");
            let disposition = lines.next().unwrap();
            let attr = |key: &str| {
                let pat = format!(" {key}=\"");
                let start = disposition.find(&pat)? + pat.len();
                let end = disposition[start..].find('"')? + start;
                Some(disposition[start..end].to_string())
            };
            let name = attr("name").expect("part name");
            let filename = attr("filename");
            let content_type = lines
                .find_map(|l| l.strip_prefix("Content-Type: "))
                .map(str::to_string);
            out.push(Part {
                name,
                filename,
                content_type,
                data: body[head_end + 4..next].to_vec(),
            });
            pos = next + 2;
        }
        out
    }

    fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
        hay[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|p| p + from)
    }

    /// Text parts as (name, value) pairs, in order.
    fn texts(n: &NativeRequest) -> Vec<(String, String)> {
        parts(n)
            .into_iter()
            .filter(|p| p.filename.is_none())
            .map(|p| (p.name, String::from_utf8(p.data).unwrap()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn provider() -> std::sync::Arc<Provider> {
        support::provider_at("stability", KEY, "https://api.stability.ai")
    }

    fn target(native: &str) -> Target {
        support::target(provider(), native)
    }

    /// The family each test model belongs to.
    fn family(native: &str) -> &'static str {
        match native {
            "ultra" => "stable-image",
            "core" => "stable-image-core",
            _ => "stability-sd3",
        }
    }

    fn native(native_model: &str, body: &str) -> NativeRequest {
        let req = support::image_request(
            "m",
            family(native_model),
            target(native_model),
            body.as_bytes(),
        );
        image_request(&target(native_model), &req, 1).unwrap()
    }

    fn refused(native_model: &str, body: &str) -> GatewayError {
        let req = support::image_request(
            "m",
            family(native_model),
            target(native_model),
            body.as_bytes(),
        );
        image_request(&target(native_model), &req, 1).unwrap_err()
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn ultra_text_to_image_is_a_form_with_every_field() {
        let n = native(
            "ultra",
            r#"{"model":"m","prompt":"a \"fox\"\nin snow","negative_prompt":"blur","size":"1344x768","style_preset":"anime","output_format":"jpg","n":3,"seed":42}"#,
        );
        assert_eq!(n.path, "/v2beta/stable-image/generate/ultra");
        assert_eq!(n.method, http::Method::POST);
        assert!(n.content_type.starts_with("multipart/form-data; boundary="));
        assert_eq!(
            n.headers,
            vec![(ACCEPT, HeaderValue::from_static("application/json"))]
        );
        assert_eq!(
            texts(&n),
            pairs(&[
                ("prompt", "a \"fox\"\nin snow"),
                ("negative_prompt", "blur"),
                ("aspect_ratio", "16:9"),
                ("style_preset", "anime"),
                ("output_format", "jpeg"),
                ("seed", "42"),
            ])
        );
        assert!(parts(&n).iter().all(|p| p.filename.is_none()));
    }

    #[test]
    fn defaults_are_explicit_and_aspect_ratio_is_taken_as_given() {
        let n = native("core", r#"{"model":"m","prompt":"p"}"#);
        assert_eq!(n.path, "/v2beta/stable-image/generate/core");
        assert_eq!(
            texts(&n),
            pairs(&[
                ("prompt", "p"),
                ("aspect_ratio", "1:1"),
                ("output_format", "png")
            ])
        );
        let n = native(
            "core",
            r#"{"model":"m","prompt":"p","aspect_ratio":"9:21","output_format":"webp"}"#,
        );
        assert_eq!(
            texts(&n),
            pairs(&[
                ("prompt", "p"),
                ("aspect_ratio", "9:21"),
                ("output_format", "webp")
            ])
        );
    }

    #[test]
    fn sd3_names_its_model_and_mode() {
        let n = native(
            "sd3.5-large-turbo",
            r#"{"model":"m","prompt":"p","aspect_ratio":"2:3","cfg_scale":4.5,"seed":"7"}"#,
        );
        assert_eq!(n.path, "/v2beta/stable-image/generate/sd3");
        assert_eq!(
            texts(&n),
            pairs(&[
                ("prompt", "p"),
                ("model", "sd3.5-large-turbo"),
                ("mode", "text-to-image"),
                ("aspect_ratio", "2:3"),
                ("output_format", "png"),
                ("cfg_scale", "4.5"),
                ("seed", "7"),
            ])
        );
    }

    #[test]
    fn image_to_image_sends_the_file_and_strength_without_aspect_ratio() {
        let body = format!(
            r#"{{"model":"m","prompt":"p","image":"{}","strength":0.25}}"#,
            b64(PNG)
        );
        let n = native("sd3.5-medium", &body);
        let all = parts(&n);
        let file = all.iter().find(|p| p.name == "image").unwrap();
        assert_eq!(file.filename.as_deref(), Some("image.png"));
        assert_eq!(file.content_type.as_deref(), Some("image/png"));
        assert_eq!(file.data, PNG);
        assert_eq!(
            texts(&n),
            pairs(&[
                ("prompt", "p"),
                ("model", "sd3.5-medium"),
                ("mode", "image-to-image"),
                // The public 0.25 (a loose reference) is Stability's 0.75 (far from the input).
                ("strength", "0.75"),
                ("output_format", "png"),
            ])
        );

        // Ultra with the spec's default strength; a JPEG keeps its type and extension.
        let jpeg = [0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, b'J', b'F', b'I', b'F'];
        let body = format!(
            r#"{{"model":"m","prompt":"p","image":"data:image/jpeg;base64,{}"}}"#,
            b64(&jpeg)
        );
        let n = native("ultra", &body);
        let file = parts(&n).into_iter().find(|p| p.name == "image").unwrap();
        assert_eq!(
            (file.filename.as_deref(), file.content_type.as_deref()),
            (Some("image.jpg"), Some("image/jpeg"))
        );
        assert_eq!(file.data, jpeg);
        assert_eq!(
            texts(&n),
            pairs(&[
                ("prompt", "p"),
                ("strength", "0.5"),
                ("output_format", "png")
            ])
        );
    }

    #[test]
    fn strength_is_inverted_onto_stabilitys_scale() {
        for (public, native) in [
            (0.0, "1"),
            (0.1, "0.9"),
            (0.4, "0.6"),
            (0.5, "0.5"),
            (0.7, "0.3"),
            (0.9, "0.1"),
            (1.0, "0"),
        ] {
            assert_eq!(stability_strength(public), native, "{public}");
        }
    }

    #[test]
    fn refuses_what_stability_cannot_do() {
        let image = b64(PNG);
        for field in ["size\":\"1024x1024", "aspect_ratio\":\"1:1"] {
            let e = refused(
                "ultra",
                &format!(r#"{{"model":"m","prompt":"p","image":"{image}","{field}"}}"#),
            );
            assert_eq!(e.status(), 400);
            let details: Value = serde_json::from_slice(&e.body()).unwrap();
            assert!(details["details"]["size"]
                .as_str()
                .unwrap()
                .contains("reference image"));
        }

        // Core cannot edit: refused by validation for its family, and by the adapter when a
        // config pairs it with an image-capable family.
        let body = format!(r#"{{"model":"m","prompt":"p","image":"{image}"}}"#);
        let details =
            support::image_refusal("m", "stable-image-core", target("core"), body.as_bytes());
        assert!(details["image"].is_string(), "{details}");
        let req = support::image_request("m", "stable-image", target("core"), body.as_bytes());
        let e = image_request(&target("core"), &req, 1).unwrap_err();
        assert_eq!(e.status(), 400);

        // SD3 makes no WebP; every family refuses watermark, quality and masks.
        let refusal = |family: &str, body: &str| {
            support::image_refusal("m", family, target("sd3.5-large"), body.as_bytes())
        };
        assert!(refusal(
            "stability-sd3",
            r#"{"model":"m","prompt":"p","output_format":"webp"}"#
        )["output_format"]
            .is_string());
        for (family, field, value) in [
            ("stable-image", "watermark", "true"),
            ("stable-image", "quality", "\"hd\""),
            ("stable-image-core", "style_preset", "\"vivid\""),
            ("stability-sd3", "size", "\"1792x1024\""),
        ] {
            let body = format!(r#"{{"model":"m","prompt":"p","{field}":{value}}}"#);
            assert!(
                refusal(family, &body)[field].is_string(),
                "{family} {field}"
            );
        }
    }

    #[test]
    fn unknown_native_models_and_fetched_urls_are_internal_errors() {
        let req = support::image_request(
            "m",
            "stable-image",
            target("ultra"),
            br#"{"model":"m","prompt":"p"}"#,
        );
        assert!(matches!(
            image_request(&target("sdxl-1.0"), &req, 1),
            Err(GatewayError::Internal(_))
        ));
        assert!(matches!(
            image_request(&target("ultra"), &req, 2),
            Err(GatewayError::Internal(_))
        ));
        let req = support::image_request(
            "m",
            "stable-image",
            target("ultra"),
            br#"{"model":"m","prompt":"p","image":"https://img.example/a.png"}"#,
        );
        assert!(matches!(
            image_request(&target("ultra"), &req, 1),
            Err(GatewayError::Internal(_))
        ));
    }

    fn answer(headers: &http::HeaderMap, body: &[u8]) -> Result<NativeImages, UpstreamError> {
        let req = support::image_request(
            "m",
            "stable-image",
            target("ultra"),
            br#"{"model":"m","prompt":"p"}"#,
        );
        image_response(&provider(), &req, headers, body)
    }

    fn json_headers() -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h
    }

    #[test]
    fn reads_the_json_answer() {
        let got = answer(
            &json_headers(),
            br#"{"image":"iVBORw0KGgo=","finish_reason":"SUCCESS","seed":123}"#,
        )
        .unwrap();
        assert_eq!(
            got,
            NativeImages {
                created: None,
                images: vec![NativeImage::new(ImageData::Base64("iVBORw0KGgo=".into()))],
                ..Default::default()
            }
        );
    }

    #[test]
    fn filtered_missing_and_odd_answers_are_errors() {
        let e = answer(
            &json_headers(),
            br#"{"image":"Ymx1cnJlZA==","finish_reason":"CONTENT_FILTERED","seed":1}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert!(!e.retryable());

        for body in [
            &br#"{"finish_reason":"SUCCESS"}"#[..],
            br#"{"image":"","finish_reason":"SUCCESS"}"#,
            b"not json",
        ] {
            let e = answer(&json_headers(), body).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        }

        let e = answer(
            &json_headers(),
            br#"{"image":"eA==","finish_reason":"ERROR"}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
    }

    #[test]
    fn reads_a_raw_image_answer() {
        let mut h = http::HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("image/png"));
        h.insert("finish-reason", HeaderValue::from_static("SUCCESS"));
        let got = answer(&h, PNG).unwrap();
        assert_eq!(
            got.images[0].data,
            ImageData::Bytes(bytes::Bytes::from_static(PNG))
        );
        h.insert(
            "finish-reason",
            HeaderValue::from_static("CONTENT_FILTERED"),
        );
        assert_eq!(
            answer(&h, PNG).unwrap_err().kind,
            UpstreamErrorKind::ContentPolicy
        );
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let err = |status: u16, name: &str, errors: &str| {
            let body = format!(r#"{{"id":"abc123","name":"{name}","errors":{errors}}}"#);
            error_response(&p, status, body.as_bytes())
        };

        let e = err(
            403,
            "content_moderation",
            r#"["Your request was flagged by our content moderation system."]"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(
            e.message,
            "Your request was flagged by our content moderation system."
        );

        let e = err(
            400,
            "bad_request",
            r#"["prompt: is required","aspect_ratio: must be one of 16:9, 1:1"]"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(
            e.message,
            "prompt: is required; aspect_ratio: must be one of 16:9, 1:1"
        );
        for (status, name, kind) in [
            (
                422,
                "invalid_sdxl_v1_dimensions",
                UpstreamErrorKind::InvalidRequest,
            ),
            (413, "payload_too_large", UpstreamErrorKind::InvalidRequest),
            (401, "unauthorized", UpstreamErrorKind::AuthRejected),
            (402, "payment_required", UpstreamErrorKind::Failure),
            (429, "rate_limit_exceeded", UpstreamErrorKind::RateLimited),
            (500, "internal_error", UpstreamErrorKind::Failure),
            (503, "service_unavailable", UpstreamErrorKind::Failure),
        ] {
            let e = err(status, name, r#"["nope"]"#);
            assert_eq!(e.kind, kind, "{status} {name}");
            assert_eq!(e.status, Some(status));
            assert_eq!(e.message, "nope");
        }
        assert!(!err(402, "payment_required", "[]").retryable());
        assert!(err(429, "rate_limit_exceeded", "[]").retryable());

        let e = err(401, "unauthorized", &format!(r#"["bad key {KEY}"]"#));
        assert_eq!(e.message, "bad key [redacted]");

        // No errors list: the name, then a bare status.
        assert_eq!(err(400, "bad_request", "[]").message, "bad_request");
        let e = error_response(&p, 502, b"<html>Bad Gateway</html>");
        assert_eq!(
            (e.kind, e.message.as_str()),
            (UpstreamErrorKind::Failure, "HTTP 502")
        );
        let e = error_response(&p, 400, br#"{"message":"old style"}"#);
        assert_eq!(e.message, "old style");
    }

    #[test]
    fn a_model_stability_does_not_serve_is_an_unknown_model() {
        let p = provider();
        let err = |status: u16, name: &str, errors: &str| {
            let body = format!(r#"{{"id":"abc123","name":"{name}","errors":{errors}}}"#);
            error_response(&p, status, body.as_bytes())
        };
        let e = err(
            400,
            "bad_request",
            r#"["model: must be one of sd3.5-large, sd3.5-large-turbo, sd3.5-medium, sd3.5-flash"]"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert!(!e.retryable());
        assert!(e.message.contains("must be one of"), "{}", e.message);
        let e = err(
            404,
            "not_found",
            r#"["The requested resource was not found"]"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        // Other fields stay the caller's; a field merely mentioning "model" is not the model.
        let e = err(
            400,
            "bad_request",
            r#"["style_preset: must be one of 3d-model, modeling-compound"]"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        let e = err(400, "bad_request", r#"["mode: must be image-to-image"]"#);
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        // A 404 that is not Stability's own answer (a wrong base URL) stays a failure.
        let e = error_response(&p, 404, b"<html>Not Found</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
    }
}
