//! OpenAI image generation with the GPT image models, through `POST /images/generations` (JSON)
//! or, when the caller gives a reference `image`, `POST /images/edits` (multipart/form-data, image
//! and mask as file parts).
//!
//! GPT image models refuse `response_format` and always answer base64 (the gateway hosts the
//! images when the caller wants URLs); they take `output_format` and `background` instead. DALL·E
//! 2 and 3, which answered links, were removed from the API on 12 May 2026 and are no longer
//! served (their families are retired). Azure OpenAI serves the same bodies at its own URLs, so
//! `azure/images.rs` builds its requests and reads its answers with `build` and
//! [`image_response`].

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::common::error::GatewayError;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::UpstreamError;
use crate::common::image_input;
use crate::common::image_input::ImageInput;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::images::{AnswerFacts, ImageUsage};
use crate::common::images::{Base64Text, ImageData};
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::providers::formats::multipart::Form;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// Operation paths below the provider's base URL (OpenAI's ends in `/v1`).
const GENERATIONS: &str = "images/generations";
const EDITS: &str = "images/edits";

/// What GPT image models accept as the image to edit.
const GPT_IMAGE_EDIT_TYPES: &[&str] = &["image/png", "image/jpeg", "image/webp"];

/// The catalog families this adapter serves (all GPT image models: one wire shape).
const FAMILIES: &[&str] = &[
    "gpt-image",
    "gpt-image-mini",
    "gpt-image-2",
    "gpt-image-2.6",
];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct GenerationBody<'a> {
    model: &'a str,
    prompt: &'a str,
    n: u64,
    size: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    quality: Option<&'a str>,
    /// Never `response_format`: GPT image models refuse it and always answer base64.
    output_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    background: Option<&'static str>,
}

#[derive(Deserialize)]
struct ImagesAnswer {
    #[serde(default)]
    created: Option<i64>,
    #[serde(default)]
    data: Option<Vec<AnswerItem>>,
    /// GPT image models' token usage; read leniently (see [`ImageUsage::from_json`]).
    #[serde(default)]
    usage: Option<serde_json::Value>,
    /// What the model made: `png`/`jpeg`/`webp`, `WxH`, `low`…`high`, `transparent`/`opaque`.
    #[serde(default)]
    output_format: Option<serde_json::Value>,
    #[serde(default)]
    size: Option<serde_json::Value>,
    #[serde(default)]
    quality: Option<serde_json::Value>,
    #[serde(default)]
    background: Option<serde_json::Value>,
}

impl ImagesAnswer {
    /// The answer's own facts; a value that is not a non-empty string is left out. OpenAI's
    /// `jpeg` is said as the caller said it: `jpg` (the API's name), or `jpeg` when the caller
    /// asked for `jpeg` (as OpenAI's SDKs do).
    fn facts(&self, req: &ImageRequest<'_>) -> AnswerFacts {
        let text = |v: &Option<serde_json::Value>| {
            v.as_ref()
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        AnswerFacts {
            usage: self.usage.as_ref().and_then(ImageUsage::from_json),
            output_format: text(&self.output_format).map(|f| match f.as_str() {
                "jpeg" if !req.jpeg_spelled_jpeg => "jpg".to_string(),
                _ => f,
            }),
            size: text(&self.size),
            quality: text(&self.quality),
            background: text(&self.background),
        }
    }
}

#[derive(Deserialize)]
struct AnswerItem {
    #[serde(default)]
    url: Option<String>,
    /// Kept as its literal: about 1.5 MB for one 1024×1024 PNG, passed to the caller with no
    /// escaping pass (`common::base64_text`).
    #[serde(default)]
    b64_json: Option<Box<RawValue>>,
    #[serde(default)]
    revised_prompt: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    build(&target.native_model, req, n, format!("/{}", operation(req)))
}

/// Every refusal of a GPT image request that the family table cannot express, in one place: the
/// adapter's validation step (run before a synchronous call is sent and before an asynchronous
/// task is accepted) and [`build`] (which sees downloaded references) both run it. A reference or
/// mask given as a URL is checked once its bytes are in hand; the rest is checked at once.
pub(crate) fn check(req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    check_family(req)?;
    if req.background == Some("transparent") && req.output_format == "jpg" {
        // OpenAI: "When using `transparent`, set the output format to `png` or `webp`."
        return Err(GatewayError::field(
            "background",
            format!(
                "`transparent` needs output_format png or webp for model {} (JPEG has no alpha)",
                req.model.name
            ),
        ));
    }
    for input in req.image.iter().chain(&req.more_images) {
        if let Some((_, mime)) = input.bytes() {
            check_edit_image(&req.model.name, mime)?;
        }
    }
    if let Some((_, mime)) = req.mask.as_ref().and_then(ImageInput::bytes) {
        if mime != "image/png" {
            return Err(GatewayError::field(
                "mask",
                format!(
                    "must be a PNG image for model {} (this one is {mime})",
                    req.model.name
                ),
            ));
        }
    }
    Ok(())
}

/// The operation `req` needs, [`GENERATIONS`] or [`EDITS`] (callers put it in their own URLs).
pub(crate) fn operation(req: &ImageRequest<'_>) -> &'static str {
    if req.image.is_some() {
        EDITS
    } else {
        GENERATIONS
    }
}

/// The native request for `req` asking `model` for `n` images, sent to `path` (which must be the
/// URL of [`operation`]`(req)`): a JSON body for generations, a form for edits.
pub(crate) fn build(
    model: &str,
    req: &ImageRequest<'_>,
    n: u64,
    path: String,
) -> Result<NativeRequest, GatewayError> {
    check(req)?;
    match &req.image {
        None => {
            let body = GenerationBody {
                model,
                prompt: req.prompt.as_str(),
                n,
                size: &req.size,
                quality: req.quality,
                output_format: native_output_format(req.output_format),
                background: req.background,
            };
            Ok(NativeRequest::post_json(
                path,
                json_with_extra(&body, &req.passthrough)?,
            ))
        }
        Some(image) => edit_request(model, req, image, n, path),
    }
}

/// Refuse a model configured with a family this adapter does not serve (by the built-in family
/// its capabilities come from, whatever the public model is called or the config overrides).
fn check_family(req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    if FAMILIES.contains(&req.caps.family) {
        return Ok(());
    }
    Err(GatewayError::Internal(format!(
        "model {} is configured with an image family OpenAI does not serve",
        req.model.name
    )))
}

/// OpenAI's name for a public `output_format`.
fn native_output_format(public: &'static str) -> &'static str {
    match public {
        "jpg" => "jpeg",
        other => other,
    }
}

fn edit_request(
    model: &str,
    req: &ImageRequest<'_>,
    image: &ImageInput,
    n: u64,
    path: String,
) -> Result<NativeRequest, GatewayError> {
    // One image is OpenAI's `image`; several (up to 16) are `image[]` parts, as its SDKs send them.
    let mut images = Vec::with_capacity(1 + req.more_images.len());
    for (i, input) in std::iter::once(image).chain(&req.more_images).enumerate() {
        // [`check`] has refused the types the edits endpoint does not take.
        let (bytes, mime) = downloaded(input, "image")?;
        let suffix = if i == 0 {
            String::new()
        } else {
            format!("-{}", i + 1)
        };
        let name = format!("image{suffix}.{}", image_input::extension(mime));
        images.push((bytes, mime, name));
    }
    let image_field = if images.len() > 1 { "image[]" } else { "image" };
    let mask = match &req.mask {
        Some(mask) => Some(downloaded(mask, "mask")?),
        None => None,
    };
    let mask_name = mask.map(|(_, mime)| format!("mask.{}", image_input::extension(mime)));
    let n = n.to_string();
    let extra: Vec<(&str, Cow<'_, str>)> = req
        .passthrough
        .iter()
        .map(|(k, v)| (k.as_str(), form_value(v)))
        .collect();

    let mut form = Form::new();
    for (bytes, mime, name) in &images {
        form.file(image_field, name, mime, bytes);
    }
    if let (Some((bytes, mime)), Some(name)) = (mask, &mask_name) {
        form.file("mask", name, mime, bytes);
    }
    form.text("prompt", req.prompt.as_str())
        .text("model", model)
        .text("n", &n)
        .text("size", &req.size);
    if let Some(q) = req.quality {
        form.text("quality", q);
    }
    form.text("output_format", native_output_format(req.output_format));
    if let Some(b) = req.background {
        form.text("background", b);
    }
    for (k, v) in &extra {
        form.text(k, v);
    }
    Ok(form.request(path))
}

/// The bytes of an image input; the gateway downloads URLs for this provider before the adapter
/// runs, so a URL here is a gateway bug.
fn downloaded<'i>(
    input: &'i ImageInput,
    field: &str,
) -> Result<(&'i [u8], &'static str), GatewayError> {
    input
        .bytes()
        .map(|(b, mime)| (b.as_ref(), mime))
        .ok_or_else(|| GatewayError::Internal(format!("{field} URL was not downloaded")))
}

/// Refuse an image type the edits endpoint would refuse, with a message that says why (checked
/// here because the family table cannot express input file types).
fn check_edit_image(model: &str, mime: &str) -> Result<(), GatewayError> {
    if GPT_IMAGE_EDIT_TYPES.contains(&mime) {
        return Ok(());
    }
    Err(GatewayError::field(
        "image",
        format!("model {model} edits PNG, JPEG or WebP images (this one is {mime})"),
    ))
}

/// A pass-through field as form text: a JSON string as its value, anything else as its JSON text.
fn form_value(raw: &RawValue) -> Cow<'_, str> {
    match serde_json::from_str::<String>(raw.get()) {
        Ok(s) => Cow::Owned(s),
        Err(_) => Cow::Borrowed(raw.get()),
    }
}

// ---- translation back ------------------------------------------------------------------------

/// An image provider that takes a Bearer key and answers in OpenAI's image-answer shape
/// (Recraft, Together): only its native request, its error map and its result hosts are its own.
pub(crate) fn compatible_kind(
    key: &str,
    request: fn(&Target, &ImageRequest<'_>, u64) -> Result<NativeRequest, GatewayError>,
    errors: crate::upstream::provider::ErrorMap,
    result_hosts: &'static [&'static str],
) -> Result<crate::providers::registry::Kind, String> {
    use crate::providers::registry::{images, images_kind, keyed, no_checks, ImageFns};
    Ok(images_kind(
        keyed(key, crate::upstream::provider::Auth::bearer)?,
        errors,
        result_hosts,
        ImageFns {
            request,
            validate: no_checks,
            response: |p, r, h, b| images(image_response(p, r, h, b)),
            input_as_bytes: false,
            tasks: None,
        },
    ))
}

pub(crate) fn image_response(
    provider: &Provider,
    req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let answer: ImagesAnswer = crate::providers::parse_answer(provider, body)?;
    let facts = answer.facts(req);
    let items = answer.data.unwrap_or_default();
    if items.is_empty() {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            "answer holds no images",
        ));
    }
    let count = items.len();
    let images = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let b64 = match item.b64_json.map(Base64Text::from_literal) {
                Some(None) => {
                    return Err(crate::upstream::provider::bad_answer(
                        provider,
                        format!("image {} of {count}: b64_json is not a string", i + 1),
                    ))
                }
                Some(Some(b64)) => Some(b64),
                None => None,
            };
            let data = match (item.url, b64) {
                (_, Some(b64)) if !b64.is_empty() => ImageData::Base64(b64),
                (Some(url), _) if !url.is_empty() => ImageData::Url(url),
                _ => {
                    return Err(crate::upstream::provider::bad_answer(
                        provider,
                        format!("image {} of {count} has neither url nor b64_json", i + 1),
                    ))
                }
            };
            Ok(NativeImage {
                data,
                revised_prompt: item.revised_prompt.filter(|p| !p.is_empty()),
                layer: None,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NativeImages {
        created: answer.created,
        images,
        facts: facts.boxed(),
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use base64::Engine;
    use serde_json::json;

    use super::*;
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-test-openai-000";

    fn target(native: &str) -> Target {
        let p = support::provider_at("openai", KEY, "http://127.0.0.1:1/v1");
        support::target(p, native)
    }

    fn request<'a>(family: &str, native: &str, body: &'a str) -> ImageRequest<'a> {
        support::image_request("pub-model", family, target(native), body.as_bytes())
    }

    fn native(family: &str, native_model: &str, body: &str) -> NativeRequest {
        let req = request(family, native_model, body);
        let n = req.n.min(req.caps.per_call_n);
        image_request(&req.model.targets[0], &req, n).unwrap()
    }

    fn json_of(n: &NativeRequest) -> serde_json::Value {
        assert_eq!(n.content_type, "application/json");
        serde_json::from_slice(&n.body).unwrap()
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn details(e: GatewayError) -> serde_json::Value {
        serde_json::from_slice::<serde_json::Value>(&e.body()).unwrap()["details"].clone()
    }

    #[test]
    fn gpt_image_2_takes_any_size_its_rule_allows() {
        let req = request(
            "gpt-image-2",
            "gpt-image-2",
            r#"{"model":"pub-model","prompt":"a fox","n":7,"size":"3840x1280","quality":"high"}"#,
        );
        let n = image_request(&req.model.targets[0], &req, 3).unwrap();
        assert_eq!(
            json_of(&n),
            json!({"model":"gpt-image-2","prompt":"a fox","n":3,"size":"3840x1280","quality":"high",
                   "output_format":"png"})
        );
        // 2.6 takes `complexity` natively.
        let n = native(
            "gpt-image-2.6",
            "gpt-image-2.6-sunburst",
            r#"{"model":"pub-model","prompt":"p","aspect_ratio":"16:9","complexity":"low"}"#,
        );
        assert_eq!(
            json_of(&n),
            json!({"model":"gpt-image-2.6-sunburst","prompt":"p","n":1,"size":"2048x1152",
                   "output_format":"png","complexity":"low"})
        );
    }

    #[test]
    fn gpt_image_generation_never_sends_response_format() {
        let n = native(
            "gpt-image",
            "gpt-image-1",
            r#"{"model":"pub-model","prompt":"a cat","n":2,"aspect_ratio":"3:2","quality":"high",
                "response_format":"url","output_format":"jpg","background":"opaque",
                "output_compression":80,"moderation":"low"}"#,
        );
        assert_eq!(n.path, "/images/generations");
        assert_eq!(
            json_of(&n),
            json!({"model":"gpt-image-1","prompt":"a cat","n":2,"size":"1536x1024","quality":"high",
                   "output_format":"jpeg","background":"opaque","output_compression":80,"moderation":"low"})
        );
        // Defaults: the family's size, PNG, no quality or background.
        let n = native(
            "gpt-image",
            "gpt-image-1",
            r#"{"model":"pub-model","prompt":"p"}"#,
        );
        assert_eq!(
            json_of(&n),
            json!({"model":"gpt-image-1","prompt":"p","n":1,"size":"1024x1024","output_format":"png"})
        );
    }

    /// The parts of a form body, as (headers, value) pairs, split at the boundary in its type.
    fn form_parts(n: &NativeRequest) -> Vec<(String, Vec<u8>)> {
        let boundary = n
            .content_type
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap();
        let body = n.body.as_ref();
        let delim = format!("--{boundary}");
        let end = format!("\r\n--{boundary}--\r\n");
        assert!(body.starts_with(delim.as_bytes()));
        assert!(body.ends_with(end.as_bytes()));
        let inner = &body[delim.len() + 2..body.len() - end.len()];
        let sep = format!("\r\n--{boundary}\r\n");
        let mut parts = Vec::new();
        let mut rest = inner;
        loop {
            let cut = rest
                .windows(sep.len())
                .position(|w| w == sep.as_bytes())
                .unwrap_or(rest.len());
            let part = &rest[..cut];
            let head_end = part.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
            parts.push((
                String::from_utf8(part[..head_end].to_vec()).unwrap(),
                part[head_end + 4..].to_vec(),
            ));
            if cut == rest.len() {
                break;
            }
            rest = &rest[cut + sep.len()..];
        }
        parts
    }

    fn text_part(name: &str) -> String {
        format!("Content-Disposition: form-data; name=\"{name}\"")
    }

    fn file_part(name: &str, file: &str, mime: &str) -> String {
        format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\nContent-Type: {mime}")
    }

    #[test]
    fn gpt_image_edit_sends_output_format_and_background() {
        let jpeg = [&[0xFF, 0xD8, 0xFF, 0xE0][..], &[7u8; 64][..]].concat();
        let body = format!(
            r#"{{"model":"pub-model","prompt":"p","image":"data:image/jpeg;base64,{}","quality":"low",
                "output_format":"webp","background":"transparent","size":"auto","input_fidelity":"high",
                "output_compression":50}}"#,
            b64(&jpeg)
        );
        let n = native("gpt-image", "gpt-image-1", &body);
        assert_eq!(n.path, "/images/edits");
        let t = |v: &str| v.as_bytes().to_vec();
        assert_eq!(
            form_parts(&n),
            vec![
                (file_part("image", "image.jpg", "image/jpeg"), jpeg),
                (text_part("prompt"), t("p")),
                (text_part("model"), t("gpt-image-1")),
                (text_part("n"), t("1")),
                (text_part("size"), t("auto")),
                (text_part("quality"), t("low")),
                (text_part("output_format"), t("webp")),
                (text_part("background"), t("transparent")),
                (text_part("input_fidelity"), t("high")),
                (text_part("output_compression"), t("50")),
            ]
        );
    }

    #[test]
    fn edits_refuse_what_openai_would() {
        let build = |family: &str, body: String| {
            let req = request(family, "m", &body);
            image_request(&req.model.targets[0], &req, 1).map(|_| ())
        };
        let jpeg = b64(&[0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3]);
        let gif = b64(b"GIF89a......");

        let e = build(
            "gpt-image",
            format!(r#"{{"model":"pub-model","prompt":"p","image":"{gif}"}}"#),
        )
        .unwrap_err();
        assert!(details(e)["image"].as_str().unwrap().contains("image/gif"));

        let e = build(
            "gpt-image",
            format!(r#"{{"model":"pub-model","prompt":"p","image":"{jpeg}","mask":"{jpeg}"}}"#),
        )
        .unwrap_err();
        assert!(details(e)["mask"].as_str().unwrap().contains("PNG"));

        // JPEG, PNG and WebP are all edited.
        assert!(build(
            "gpt-image-2",
            format!(r#"{{"model":"pub-model","prompt":"p","image":"{jpeg}"}}"#),
        )
        .is_ok());
    }

    #[test]
    fn a_transparent_background_needs_an_alpha_channel() {
        let build = |body: &str| {
            let req = request("gpt-image-2", "gpt-image-2", body);
            image_request(&req.model.targets[0], &req, 1)
        };
        let e = build(r#"{"model":"pub-model","prompt":"p","background":"transparent","output_format":"jpg"}"#)
            .unwrap_err();
        assert!(details(e)["background"]
            .as_str()
            .unwrap()
            .contains("png or webp"));
        for ok in ["png", "webp"] {
            let body = format!(
                r#"{{"model":"pub-model","prompt":"p","background":"transparent","output_format":"{ok}"}}"#
            );
            assert!(build(&body).is_ok(), "{ok}");
        }
        assert!(build(
            r#"{"model":"pub-model","prompt":"p","background":"opaque","output_format":"jpg"}"#
        )
        .is_ok());
    }

    #[test]
    fn an_undownloaded_url_is_a_gateway_bug() {
        let req = request(
            "gpt-image",
            "gpt-image-1",
            r#"{"model":"pub-model","prompt":"p","image":"https://img.example/a.png"}"#,
        );
        let e = image_request(&req.model.targets[0], &req, 1).unwrap_err();
        assert!(matches!(e, GatewayError::Internal(_)), "{e:?}");
    }

    #[test]
    fn a_foreign_family_is_refused() {
        let req = request(
            "cogview",
            "cogview-4",
            r#"{"model":"pub-model","prompt":"p"}"#,
        );
        let e = image_request(&req.model.targets[0], &req, 1).unwrap_err();
        assert!(matches!(e, GatewayError::Internal(_)), "{e:?}");
    }

    fn answer(body: &str) -> Result<NativeImages, UpstreamError> {
        let req = request(
            "gpt-image-2",
            "gpt-image-2",
            r#"{"model":"pub-model","prompt":"p"}"#,
        );
        let p = req.model.targets[0].provider.clone();
        image_response(&p, &req, &http::HeaderMap::new(), body.as_bytes())
    }

    #[test]
    fn reads_url_and_base64_answers() {
        let got = answer(
            r#"{"created":1713833628,"data":[{"url":"https://x.blob.core.windows.net/a.png","revised_prompt":"a red fox"},
                {"b64_json":"iVBORw0KGgo=","revised_prompt":""}],"usage":{"total_tokens":3}}"#,
        )
        .unwrap();
        assert_eq!(
            got,
            NativeImages {
                created: Some(1713833628),
                images: vec![
                    NativeImage {
                        data: ImageData::Url("https://x.blob.core.windows.net/a.png".into()),
                        revised_prompt: Some("a red fox".into()),
                        layer: None,
                    },
                    NativeImage::new(ImageData::Base64("iVBORw0KGgo=".into())),
                ],
                facts: Some(Box::new(AnswerFacts {
                    usage: Some(ImageUsage {
                        total_tokens: 3,
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
            }
        );
        let got = answer(r#"{"data":[{"b64_json":"AAAA"}]}"#).unwrap();
        assert_eq!(got.created, None);
        assert!(got.facts.is_none());
    }

    #[test]
    fn the_answers_usage_and_output_are_read() {
        let got = answer(
            r#"{"data":[{"b64_json":"AAAA"}],"output_format":"jpeg","size":"1536x1024","quality":"medium",
                "background":"opaque","usage":{"input_tokens":50,"output_tokens":1056,"total_tokens":1106,
                "input_tokens_details":{"text_tokens":10,"image_tokens":40}}}"#,
        )
        .unwrap();
        let f = got.facts.unwrap();
        assert_eq!(f.output_format.as_deref(), Some("jpg"));
        assert_eq!(f.size.as_deref(), Some("1536x1024"));
        assert_eq!(f.quality.as_deref(), Some("medium"));
        assert_eq!(f.background.as_deref(), Some("opaque"));
        let u = f.usage.unwrap();
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.total_tokens),
            (50, 1056, 1106)
        );
        assert_eq!(u.input_tokens_details["image_tokens"], 40);
        // Odd values are left out, never a failed answer.
        let got =
            answer(r#"{"data":[{"b64_json":"AAAA"}],"size":7,"quality":"","usage":"x"}"#).unwrap();
        assert!(got.facts.is_none());
    }

    #[test]
    fn unreadable_answers_are_bad_responses() {
        for body in [
            r#"{"created":1,"data":[]}"#,
            r#"{"created":1}"#,
            r#"{"created":1,"data":[{"url":"https://a/x.png"},{"revised_prompt":"x"}]}"#,
            r#"{"data":[{"url":""}]}"#,
            "not json",
        ] {
            let e = answer(body).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{body}");
        }
    }

    #[test]
    fn moderation_errors_are_content_policy() {
        let p = target("gpt-image-1").provider;
        for body in [
            r#"{"error":{"message":"Your request was rejected by the safety system.","type":"image_generation_user_error","param":null,"code":"moderation_blocked"}}"#,
            r#"{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","code":"content_policy_violation"}}"#,
        ] {
            let e = crate::providers::openai::error_response(&p, 400, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy, "{body}");
        }
        let body = r#"{"error":{"message":"Invalid size","type":"invalid_request_error","param":"size","code":null}}"#;
        let e = crate::providers::openai::error_response(&p, 400, body.as_bytes());
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Invalid size");
    }

    #[test]
    fn form_values_unwrap_json_strings() {
        let raw = |s: &str| RawValue::from_string(s.to_string()).unwrap();
        assert_eq!(form_value(&raw(r#""a\"b""#)), "a\"b");
        assert_eq!(form_value(&raw("80")), "80");
        assert_eq!(form_value(&raw("true")), "true");
        assert_eq!(form_value(&raw(r#"{"a":1}"#)), r#"{"a":1}"#);
    }
}
