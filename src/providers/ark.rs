//! Volcengine Ark images: Seedream and SeedEdit through `POST /images/generations`.
//!
//! Ark speaks an OpenAI-like JSON dialect. A reference image goes as the caller gave it (a URL,
//! or a `data:` URL for bytes): one as a string, several (Seedream 4.0–5.0 fuse up to 14) as an
//! array. The caller's `response_format` is asked for natively (Ark answers both `url` and
//! `b64_json`), and `watermark` is always sent because Ark's default is on while the gateway's is
//! off. Ark has no `n`: each call makes one image and the gateway fans out, unless the caller asks
//! Ark for a set with `extra_body.sequential_image_generation: auto`, whose images all come back
//! from the one call. The `extra_body` settings sit at the top level of the native body.
//!
//! Seedream 5.0 Pro's `extra_body.layer_decomposition` splits the one reference image into a
//! background plate and transparent layers, all in one answer; each `data[]` item then says where it
//! sits (`z_index`, `bounding_box`, `name`, `description`), which reaches the caller as the item's
//! `layer`. Ark's rules for it (one reference image, a resolution tier as the size, no set) are
//! checked in `check_extra_body` with the other values only this adapter knows, before anything
//! is sent.
//!
//! A set can come back partly refused, with an `error` in place of some `data[]` items. The gateway
//! cannot answer with part of a set, so any such item fails the whole call: a moderation code is a
//! content-policy refusal, anything else a non-retryable failure (retrying would pay again for
//! every image that did succeed). Whole-request errors use `{"error": {"code", "message"}}`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::common::native::json_with_extra;

use crate::common::native::NativeRequest;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::error::ValidationErrors;
use crate::common::images::BoundingBox;
use crate::common::images::ImageData;
use crate::common::images::ImageLayer;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::json::Str;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const IMAGES_PATH: &str = "/images/generations";

/// Most images in one sequential set, reference images included.
const MAX_SET_IMAGES: u64 = 15;

/// The `extra_body` key that asks Seedream 5.0 Pro to decompose the reference image into layers.
const LAYER_DECOMPOSITION: &str = "layer_decomposition";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct ImageBody<'a> {
    model: &'a str,
    prompt: &'a str,
    size: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<References<'a>>,
    response_format: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_format: Option<&'static str>,
    watermark: bool,
}

/// Ark's `image`: a string for one reference image, an array for several.
#[derive(Serialize)]
#[serde(untagged)]
enum References<'a> {
    One(Cow<'a, str>),
    Many(Vec<Cow<'a, str>>),
}

#[derive(Deserialize)]
struct ImagesAnswer {
    #[serde(default)]
    created: Option<i64>,
    #[serde(default)]
    data: Vec<AnswerItem>,
}

/// One `data[]` item: an image, or the reason it was not made. Layer-decomposition items also say
/// where the layer sits; those fields are read leniently (a shape Ark may change must not fail a
/// paid generation), and what cannot be read is left out.
#[derive(Deserialize)]
struct AnswerItem {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    b64_json: Option<String>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    z_index: Option<Value>,
    #[serde(default)]
    bounding_box: Option<Value>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    description: Option<Value>,
}

impl AnswerItem {
    /// The layer metadata the item carries, if any.
    fn layer(&self) -> Option<ImageLayer> {
        let text = |v: &Option<Value>| {
            v.as_ref()
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let layer = ImageLayer {
            z_index: self.z_index.as_ref().and_then(Value::as_i64),
            bounding_box: self
                .bounding_box
                .clone()
                .and_then(|v| serde_json::from_value::<BoundingBox>(v).ok())
                .filter(|b| b.absolute.is_some() || b.normalized.is_some()),
            name: text(&self.name),
            description: text(&self.description),
        };
        (!layer.is_empty()).then_some(layer)
    }
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    param: String,
}

// ---- translation to native -------------------------------------------------------------------

/// The native request for one call. `n` is always 1 here (the family's `per_call_n`): Ark has no
/// count field, so it is not sent.
pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    _n: u64,
) -> Result<NativeRequest, GatewayError> {
    check_extra_body(req)?;
    let image = req.image.as_ref().map(|first| {
        if req.more_images.is_empty() {
            References::One(first.url_or_data_url())
        } else {
            References::Many(
                std::iter::once(first)
                    .chain(&req.more_images)
                    .map(|i| i.url_or_data_url())
                    .collect(),
            )
        }
    });
    let body = ImageBody {
        model: &target.native_model,
        prompt: req.prompt.as_str(),
        size: &req.size,
        image,
        response_format: req.response_format,
        output_format: output_format(req)?,
        watermark: req.watermark,
    };
    let extra: Vec<(Str<'_>, &RawValue)> = req
        .extra_body
        .iter()
        .chain(&req.passthrough)
        .cloned()
        .collect();
    Ok(NativeRequest::post_json(
        IMAGES_PATH,
        json_with_extra(&body, &extra)?,
    ))
}

/// Ark's `output_format`, sent only by families that can choose (5.0); the others make JPEG and
/// have no such field.
fn output_format(req: &ImageRequest<'_>) -> Result<Option<&'static str>, GatewayError> {
    if req.caps.output_formats.len() < 2 {
        return Ok(None);
    }
    match req.output_format {
        "jpg" => Ok(Some("jpeg")),
        "png" => Ok(Some("png")),
        // Validation refuses formats the family does not list, so this is a catalog bug.
        other => Err(GatewayError::Internal(format!(
            "ark cannot produce `{other}`"
        ))),
    }
}

/// Ark's own rules for what `extra_body` asks, in a request the public validation accepted: the
/// settings' values (validation only checked their names against the family), a sequential set not
/// combined with a public `n` above 1 and holding at most 15 images with the references, and
/// layer decomposition's conditions. A refusal here is the caller's 400 with `details`; it needs
/// nothing but the request, so it can run before an asynchronous task is accepted.
fn check_extra_body(req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    let mut errors = ValidationErrors::default();
    let mut sequential = false;
    let mut layers = false;
    // Every reference image counts towards Ark's limit on a set.
    let refs = req.image.iter().count() as u64 + req.more_images.len() as u64;
    for (key, raw) in &req.extra_body {
        let key = key.as_str();
        let field = format!("extra_body.{key}");
        let value: Value = match serde_json::from_str(raw.get()) {
            Ok(v) => v,
            Err(_) => {
                errors.add(field, "is not valid JSON");
                continue;
            }
        };
        match key {
            "sequential_image_generation" => match value.as_str() {
                Some("auto") => sequential = true,
                Some("disabled") => {}
                _ => errors.add(field, "must be `auto` or `disabled`"),
            },
            "sequential_image_generation_options" => {
                let Some(options) = value.as_object() else {
                    errors.add(field, "must be an object such as {\"max_images\": 4}");
                    continue;
                };
                if let Some(max) = options.get("max_images") {
                    let top = MAX_SET_IMAGES.saturating_sub(refs);
                    if !max.as_u64().is_some_and(|m| (1..=top).contains(&m)) {
                        let why = if refs > 0 {
                            " (a set holds at most 15 images, the reference images included)"
                        } else {
                            ""
                        };
                        errors.add(
                            format!("{field}.max_images"),
                            format!("must be an integer from 1 to {top}{why}"),
                        );
                    }
                }
            }
            LAYER_DECOMPOSITION => match value.as_bool() {
                Some(on) => layers = on,
                None => errors.add(field, "must be a boolean"),
            },
            _ => {}
        }
    }
    if layers {
        check_layers(req, refs, sequential, &mut errors);
    }
    if sequential && req.n > 1 {
        errors.add(
            "n",
            "cannot be combined with extra_body.sequential_image_generation `auto`, which makes \
             one set of images in a single call; set its size with \
             extra_body.sequential_image_generation_options.max_images instead",
        );
    }
    errors.into_result()
}

/// Seedream 5.0 Pro's conditions for layer decomposition: it splits exactly one reference image,
/// takes its size only as a resolution tier (`1K`, `1.5K`, `2K`), and makes no sequential set.
fn check_layers(
    req: &ImageRequest<'_>,
    refs: u64,
    sequential: bool,
    errors: &mut ValidationErrors,
) {
    let field = format!("extra_body.{LAYER_DECOMPOSITION}");
    if refs != 1 {
        errors.add(
            field.clone(),
            format!(
                "needs exactly one reference `image` (layer decomposition splits that image into \
                 layers); {refs} were given"
            ),
        );
    }
    if crate::caps::schema::parse_size(&req.size).is_some() {
        let tiers: Vec<&str> = req
            .caps
            .sizes
            .iter()
            .copied()
            .filter(|s| crate::caps::schema::parse_size(s).is_none())
            .collect();
        // On `size`, so that a request wrong in both ways hears of both.
        errors.add(
            "size",
            format!(
                "must be a resolution tier ({}) with extra_body.{LAYER_DECOMPOSITION}, not the \
                 pixel size {} (an `aspect_ratio` means a pixel size; leave it out)",
                tiers.join(", "),
                req.size
            ),
        );
    }
    if sequential {
        errors.add(
            field,
            "cannot be combined with extra_body.sequential_image_generation `auto`",
        );
    }
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let answer: ImagesAnswer = crate::providers::parse_answer(provider, body)?;
    let total = answer.data.len();
    let mut images = Vec::with_capacity(total);
    for (i, item) in answer.data.into_iter().enumerate() {
        if let Some(e) = &item.error {
            return Err(item_error(provider, e, i + 1, total));
        }
        let layer = item.layer();
        let data = match (item.b64_json, item.url) {
            (Some(b64), _) => ImageData::Base64(b64.into()),
            (None, Some(url)) => ImageData::Url(url),
            (None, None) => {
                return Err(crate::upstream::provider::bad_answer(
                    provider,
                    format!("image {} of {total} has neither url nor b64_json", i + 1),
                ))
            }
        };
        images.push(NativeImage {
            layer,
            ..NativeImage::new(data)
        });
    }
    if images.is_empty() {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            "answer holds no images",
        ));
    }
    Ok(NativeImages {
        created: answer.created,
        images,
        ..Default::default()
    })
}

/// The error for a `data[]` item Ark could not make. Moderation is the caller's content; anything
/// else fails the call without a retry, which would regenerate (and bill) the whole set.
fn item_error(provider: &Provider, e: &ErrorBody, index: usize, total: usize) -> UpstreamError {
    let reason = provider.redact(&e.message);
    let message = format!("image {index} of {total} failed ({}): {reason}", e.code);
    let kind = if is_moderation(&e.code) {
        UpstreamErrorKind::ContentPolicy
    } else {
        UpstreamErrorKind::BadResponse
    };
    UpstreamError::new(kind, &provider.name, message)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorEnvelope>(body).ok();
    let message = parsed
        .as_ref()
        .filter(|e| !e.error.message.is_empty())
        .map(|e| {
            let m = &e.error.message;
            let p = &e.error.param;
            if p.is_empty() || m.contains(p.as_str()) {
                provider.redact(m)
            } else {
                provider.redact(&format!("{m} (param: {p})"))
            }
        })
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    if let Some(kind) = parsed.and_then(|e| code_kind(&e.error.code)) {
        err.kind = kind;
    }
    err
}

/// What an Ark error code means, when the code says more than the HTTP status. Failures keep
/// their 4xx status, so quota and configuration problems are not retried.
fn code_kind(code: &str) -> Option<UpstreamErrorKind> {
    let starts = |p: &str| code.starts_with(p);
    Some(if is_moderation(code) {
        UpstreamErrorKind::ContentPolicy
    } else if starts("MissingParameter") || starts("InvalidParameter") {
        UpstreamErrorKind::InvalidRequest
    } else if starts("AuthenticationError") {
        UpstreamErrorKind::AuthRejected
    } else if starts("RateLimitExceeded") || starts("ServerOverloaded") {
        UpstreamErrorKind::RateLimited
    } else if starts("InvalidEndpointOrModel")
        || starts("ModelNotOpen")
        || code == "InvalidEndpoint.NotFound"
        || code == "OperationDenied.ServiceNotOpen"
    {
        // 404 "The model or endpoint … does not exist or you do not have access to it" (also
        // what a shut-down model answers), "Your account … has not activated the model …",
        // "Accessing the model via Model ID is not allowed", 404 "The request targeted an
        // endpoint that does not exist", 403 "the model service is unavailable, please … activate
        // the corresponding model service": the configured model, not the caller's request nor
        // the account's key (the account's other models keep serving).
        UpstreamErrorKind::UnknownModel
    } else if starts("QuotaExceeded")
        || starts("AccountOverdue")
        || starts("SetLimitExceeded")
        || starts("InternalServiceError")
    {
        UpstreamErrorKind::Failure
    } else {
        return None;
    })
}

/// Ark's moderation codes: `InputTextSensitiveContentDetected`, `OutputImageSensitiveContentDetected`,
/// `InputTextRiskDetection` and their kin.
fn is_moderation(code: &str) -> bool {
    code.contains("Sensitive") || code.contains("Risk")
}

// ---- registration ----------------------------------------------------------------------------

/// The Ark kind: Bearer key (unlike Volcengine speech), images only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, crate::upstream::provider::Auth::bearer)?;
    let images = crate::providers::registry::ImageFns {
        request: image_request,
        validate: |_, req| check_extra_body(req),
        response: |p, r, h, b| crate::providers::registry::images(image_response(p, r, h, b)),
        input_as_bytes: false,
        tasks: None,
    };
    // Seedream links to TOS buckets (`ark-content-generation-*.tos-cn-beijing.volces.com`;
    // BytePlus: `*.bytepluses.com`).
    Ok(crate::providers::registry::images_kind(
        auth,
        error_response,
        &["*.volces.com", "*.bytepluses.com"],
        images,
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;
    use base64::Engine;
    use serde_json::json;

    const KEY: &str = "ark-secret-key-123";
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    fn ark() -> std::sync::Arc<Provider> {
        support::provider_at("ark", KEY, "https://ark.cn-beijing.volces.com/api/v3")
    }

    fn target(native: &str) -> Target {
        support::target(ark(), native)
    }

    const SEEDREAM_4: &str = "doubao-seedream-4-0-250828";
    const SEEDEDIT_3: &str = "doubao-seededit-3-0-i2i-250628";

    /// The native JSON body for a public body of `family`.
    fn native(family: &str, native_model: &str, body: &Value) -> Value {
        let bytes = serde_json::to_vec(body).unwrap();
        let req = support::image_request("m", family, target(native_model), &bytes);
        let out = image_request(&req.model.targets[0], &req, 1).unwrap();
        assert_eq!(out.path, "/images/generations");
        assert_eq!(out.content_type, "application/json");
        serde_json::from_slice(&out.body).unwrap()
    }

    /// The 400 `details` `image_request` gives for a public body the validation accepted.
    fn refusal(family: &str, body: &Value) -> Value {
        let bytes = serde_json::to_vec(body).unwrap();
        let req = support::image_request("m", family, target(SEEDREAM_4), &bytes);
        let err = image_request(&req.model.targets[0], &req, 1).unwrap_err();
        assert_eq!(err.status(), 400);
        serde_json::from_slice::<Value>(&err.body()).unwrap()["details"].clone()
    }

    fn answer(body: &Value) -> Result<NativeImages, UpstreamError> {
        let req = support::image_request(
            "m",
            "seedream",
            target(SEEDREAM_4),
            br#"{"model":"m","prompt":"p"}"#,
        );
        let bytes = serde_json::to_vec(body).unwrap();
        image_response(&ark(), &req, &http::HeaderMap::new(), &bytes)
    }

    #[test]
    fn full_seedream_request() {
        let body = native(
            "seedream",
            SEEDREAM_4,
            &json!({
                "model": "m",
                "prompt": "a lighthouse",
                "image": "https://img.example/ref.png",
                "aspect_ratio": "16:9",
                "response_format": "b64_json",
                "watermark": true,
                "extra_body": {
                    "sequential_image_generation": "auto",
                    "sequential_image_generation_options": {"max_images": 4}
                },
                "optimize_prompt_options": {"mode": "fast"}
            }),
        );
        assert_eq!(
            body,
            json!({
                "model": SEEDREAM_4,
                "prompt": "a lighthouse",
                "size": "2560x1440",
                "image": "https://img.example/ref.png",
                "response_format": "b64_json",
                "watermark": true,
                "sequential_image_generation": "auto",
                "sequential_image_generation_options": {"max_images": 4},
                "optimize_prompt_options": {"mode": "fast"}
            })
        );
    }

    #[test]
    fn defaults_turn_the_watermark_off_and_send_no_count_or_stream() {
        let body = native(
            "seedream",
            SEEDREAM_4,
            &json!({"model": "m", "prompt": "p", "n": 3}),
        );
        assert_eq!(
            body,
            json!({
                "model": SEEDREAM_4,
                "prompt": "p",
                "size": "2048x2048",
                "response_format": "url",
                "watermark": false
            })
        );
    }

    #[test]
    fn keyword_sizes_pass_through() {
        let body = native(
            "seedream",
            SEEDREAM_4,
            &json!({"model": "m", "prompt": "p", "size": "4K"}),
        );
        assert_eq!(body["size"], "4K");
    }

    #[test]
    fn seededit_sends_the_image_as_a_data_url_with_native_fields() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
        let body = native(
            "seededit",
            SEEDEDIT_3,
            &json!({
                "model": "m",
                "prompt": "make it snow",
                "image": b64,
                "seed": 42,
                "guidance_scale": 5.5
            }),
        );
        assert_eq!(
            body,
            json!({
                "model": SEEDEDIT_3,
                "prompt": "make it snow",
                "size": "adaptive",
                "image": format!("data:image/png;base64,{b64}"),
                "response_format": "url",
                "watermark": false,
                "seed": 42,
                "guidance_scale": 5.5
            })
        );
    }

    #[test]
    fn output_format_only_where_the_family_can_choose() {
        let five = "doubao-seedream-5-0-260128";
        let body = native("seedream-5", five, &json!({"model": "m", "prompt": "p"}));
        assert_eq!(body["output_format"], "png");
        let body = native(
            "seedream-5",
            five,
            &json!({"model": "m", "prompt": "p", "output_format": "jpg", "size": "3K"}),
        );
        assert_eq!(body["output_format"], "jpeg");
        assert_eq!(body["size"], "3K");
        let body = native(
            "seedream",
            SEEDREAM_4,
            &json!({"model": "m", "prompt": "p", "output_format": "jpg"}),
        );
        assert!(body.get("output_format").is_none());
    }

    #[test]
    fn seedream_3_takes_seed_and_guidance() {
        let body = native(
            "seedream-3",
            "doubao-seedream-3-0-t2i-250415",
            &json!({"model": "m", "prompt": "p", "aspect_ratio": "3:2", "seed": 7,
                    "guidance_scale": 2.5}),
        );
        assert_eq!(body["size"], "1248x832");
        assert_eq!(body["seed"], 7);
        assert_eq!(body["guidance_scale"], 2.5);
    }

    #[test]
    fn family_tables_refuse_what_ark_cannot_do() {
        let t = || target(SEEDREAM_4);
        let d = support::image_refusal(
            "m",
            "seedream",
            t(),
            br#"{"model":"m","prompt":"p","seed":1,"negative_prompt":"x"}"#,
        );
        assert!(
            d.get("seed").is_some() && d.get("negative_prompt").is_some(),
            "{d}"
        );
        let d = support::image_refusal("m", "seededit", t(), br#"{"model":"m","prompt":"p"}"#);
        assert!(d.get("image").is_some(), "{d}");
        let d = support::image_refusal(
            "m",
            "seedream",
            t(),
            br#"{"model":"m","prompt":"p","extra_body":{"layer_decomposition":true}}"#,
        );
        assert!(d.get("extra_body.layer_decomposition").is_some(), "{d}");
        // Seedream 5.0 lite has no layer decomposition (5.0 Pro has), and Pro makes no sets.
        let d = support::image_refusal(
            "m",
            "seedream-5",
            t(),
            br#"{"model":"m","prompt":"p","image":"https://img.example/a.png","extra_body":{"layer_decomposition":true}}"#,
        );
        assert!(d.get("extra_body.layer_decomposition").is_some(), "{d}");
        let d = support::image_refusal(
            "m",
            "seedream-5-pro",
            t(),
            br#"{"model":"m","prompt":"p","tools":[{"type":"web_search"}],"extra_body":{"sequential_image_generation":"auto"}}"#,
        );
        assert!(
            d.get("extra_body.sequential_image_generation").is_some() && d.get("tools").is_some(),
            "{d}"
        );
        let d = support::image_refusal(
            "m",
            "seedream-3",
            t(),
            br#"{"model":"m","prompt":"p","image":"https://img.example/a.png"}"#,
        );
        assert!(d.get("image").is_some(), "{d}");
    }

    #[test]
    fn sequential_sets_conflict_with_n() {
        let d = refusal(
            "seedream",
            &json!({"model": "m", "prompt": "p", "n": 2,
                    "extra_body": {"sequential_image_generation": "auto"}}),
        );
        assert!(d["n"].as_str().unwrap().contains("max_images"), "{d}");
        // `disabled` is one image per call, so fanning out is fine.
        let body = native(
            "seedream",
            SEEDREAM_4,
            &json!({"model": "m", "prompt": "p", "n": 2,
                    "extra_body": {"sequential_image_generation": "disabled"}}),
        );
        assert_eq!(body["sequential_image_generation"], "disabled");
    }

    #[test]
    fn extra_body_values_are_checked() {
        let d = refusal(
            "seedream",
            &json!({"model": "m", "prompt": "p", "extra_body": {
                "sequential_image_generation": "always",
                "sequential_image_generation_options": {"max_images": 16}
            }}),
        );
        assert_eq!(
            d,
            json!({
                "extra_body.sequential_image_generation": "must be `auto` or `disabled`",
                "extra_body.sequential_image_generation_options.max_images":
                    "must be an integer from 1 to 15"
            })
        );
        for bad in [json!(0), json!(2.5), json!("3")] {
            let d = refusal(
                "seedream",
                &json!({"model": "m", "prompt": "p", "extra_body": {
                    "sequential_image_generation_options": {"max_images": bad}
                }}),
            );
            assert!(
                d.get("extra_body.sequential_image_generation_options.max_images")
                    .is_some(),
                "{d}"
            );
        }
        let d = refusal(
            "seedream",
            &json!({"model": "m", "prompt": "p", "image": "https://img.example/a.png",
                    "extra_body": {"sequential_image_generation_options": {"max_images": 15}}}),
        );
        assert!(
            d["extra_body.sequential_image_generation_options.max_images"]
                .as_str()
                .unwrap()
                .contains("1 to 14")
        );
        let d = refusal(
            "seedream",
            &json!({"model": "m", "prompt": "p",
                    "extra_body": {"sequential_image_generation_options": [4]}}),
        );
        assert!(d
            .get("extra_body.sequential_image_generation_options")
            .is_some());
        let d = refusal(
            "seedream-5-pro",
            &json!({"model": "m", "prompt": "p", "extra_body": {"layer_decomposition": "yes"}}),
        );
        assert_eq!(d["extra_body.layer_decomposition"], "must be a boolean");
    }

    const PRO: &str = "doubao-seedream-5-0-pro-260628";

    #[test]
    fn seedream_5_pro_decomposes_one_image_at_a_resolution_tier() {
        let body = native(
            "seedream-5-pro",
            PRO,
            &json!({"model": "m", "prompt": "separate every element", "image": "https://img.example/poster.png",
                    "size": "1K", "response_format": "b64_json",
                    "extra_body": {"layer_decomposition": true}}),
        );
        assert_eq!(
            body,
            json!({
                "model": PRO,
                "prompt": "separate every element",
                "size": "1K",
                "image": "https://img.example/poster.png",
                "response_format": "b64_json",
                "output_format": "png",
                "watermark": false,
                "layer_decomposition": true
            })
        );
        // Pro's default size is the `2K` tier, so a request naming no size decomposes too.
        let body = native(
            "seedream-5-pro",
            PRO,
            &json!({"model": "m", "prompt": "p", "image": "https://img.example/poster.png",
                    "extra_body": {"layer_decomposition": true}}),
        );
        assert_eq!(body["size"], "2K");
        // Without layers Pro takes pixel sizes and up to 10 references, like any Seedream.
        let body = native(
            "seedream-5-pro",
            PRO,
            &json!({"model": "m", "prompt": "p", "aspect_ratio": "16:9",
                    "image": ["https://img.example/a.png", "https://img.example/b.png"],
                    "extra_body": {"layer_decomposition": false}}),
        );
        assert_eq!(body["size"], "2816x1584");
        assert_eq!(
            body["image"],
            json!(["https://img.example/a.png", "https://img.example/b.png"])
        );
    }

    #[test]
    fn layer_decomposition_refuses_what_pro_refuses() {
        let layer = |extra: Value| {
            let mut body = json!({"model": "m", "prompt": "p",
                                  "extra_body": {"layer_decomposition": true}});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            refusal("seedream-5-pro", &body)["extra_body.layer_decomposition"]
                .as_str()
                .unwrap_or_else(|| panic!("accepted: {extra}"))
                .to_string()
        };
        let m = layer(json!({}));
        assert!(
            m.contains("exactly one reference `image`") && m.contains("0 were given"),
            "{m}"
        );
        let m = layer(json!({"image": ["https://img.example/a.png", "https://img.example/b.png"]}));
        assert!(m.contains("2 were given"), "{m}");
        for (sized, pixels) in [
            (json!({"size": "2048x2048"}), "2048x2048"),
            (json!({"aspect_ratio": "16:9"}), "2816x1584"),
        ] {
            let mut body = json!({"model": "m", "prompt": "p", "image": "https://img.example/a.png",
                                  "extra_body": {"layer_decomposition": true}});
            for (k, v) in sized.as_object().unwrap() {
                body[k] = v.clone();
            }
            let d = refusal("seedream-5-pro", &body);
            let m = d["size"].as_str().unwrap_or_else(|| panic!("{sized}: {d}"));
            assert!(
                m.contains("resolution tier (1K, 1.5K, 2K)") && m.contains(pixels),
                "{sized}: {m}"
            );
            assert!(d.get("extra_body.layer_decomposition").is_none(), "{d}");
        }
        // Wrong in both ways: both are named.
        let d = refusal(
            "seedream-5-pro",
            &json!({"model": "m", "prompt": "p", "size": "2048x2048",
                    "extra_body": {"layer_decomposition": true}}),
        );
        assert!(
            d.get("size").is_some() && d.get("extra_body.layer_decomposition").is_some(),
            "{d}"
        );
    }

    #[test]
    fn several_references_go_as_an_array_and_count_towards_a_set() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
        let body = native(
            "seedream",
            SEEDREAM_4,
            &json!({"model": "m", "prompt": "p",
                    "image": ["https://img.example/a.png", b64]}),
        );
        assert_eq!(
            body["image"],
            json!([
                "https://img.example/a.png",
                format!("data:image/png;base64,{b64}")
            ])
        );
        // One reference stays a string, as before.
        let body = native(
            "seedream-5",
            "doubao-seedream-5-0-260128",
            &json!({"model": "m", "prompt": "p", "image": ["https://img.example/a.png"]}),
        );
        assert_eq!(body["image"], "https://img.example/a.png");
        // 14 references leave room for one generated image in a set; 15 are too many.
        let refs: Vec<String> = (0..14)
            .map(|i| format!("https://img.example/{i}.png"))
            .collect();
        let d = refusal(
            "seedream",
            &json!({"model": "m", "prompt": "p", "image": refs,
                    "extra_body": {"sequential_image_generation": "auto",
                                   "sequential_image_generation_options": {"max_images": 2}}}),
        );
        assert_eq!(
            d["extra_body.sequential_image_generation_options.max_images"],
            "must be an integer from 1 to 1 (a set holds at most 15 images, the reference \
             images included)"
        );
        let mut fifteen = refs.clone();
        fifteen.push("https://img.example/14.png".into());
        let d = support::image_refusal(
            "m",
            "seedream",
            target(SEEDREAM_4),
            &serde_json::to_vec(&json!({"model": "m", "prompt": "p", "image": fifteen})).unwrap(),
        );
        assert!(d["image"].as_str().unwrap().contains("at most 14"), "{d}");
    }

    #[test]
    fn reads_urls_and_base64() {
        let got = answer(&json!({
            "model": SEEDREAM_4,
            "created": 1757469067,
            "data": [
                {"url": "https://ark-content-generation.tos-cn-beijing.volces.com/a.jpeg",
                 "size": "2048x2048"},
                {"b64_json": "aGVsbG8=", "size": "2048x2048"}
            ],
            "usage": {"generated_images": 2, "output_tokens": 32768, "total_tokens": 32768}
        }))
        .unwrap();
        assert_eq!(
            got,
            NativeImages {
                created: Some(1757469067),
                images: vec![
                    NativeImage::new(ImageData::Url(
                        "https://ark-content-generation.tos-cn-beijing.volces.com/a.jpeg".into()
                    )),
                    NativeImage::new(ImageData::Base64("aGVsbG8=".into())),
                ],
                ..Default::default()
            }
        );
    }

    #[test]
    fn layer_metadata_is_kept_per_image() {
        let got = answer(&json!({
            "created": 1,
            "data": [
                {"url": "https://x.volces.com/base.png", "size": "2048x2048", "output_format": "png",
                 "z_index": 0, "name": "background", "description": "the beach, inpainted",
                 "bounding_box": {"absolute": [0, 0, 2048, 2048], "normalized": [0, 0, 1000, 1000]}},
                {"url": "https://x.volces.com/l1.png", "size": "2048x2048", "z_index": 1,
                 "name": "sky", "description": "the sky",
                 "bounding_box": {"absolute": [0, 0, 2048, 600]}},
                // A shape this adapter does not know is left out, not a failed answer.
                {"url": "https://x.volces.com/l2.png", "z_index": 2, "bounding_box": [1, 2, 3, 4]}
            ]
        }))
        .unwrap();
        let layers: Vec<Option<ImageLayer>> = got.images.iter().map(|i| i.layer.clone()).collect();
        assert_eq!(
            layers,
            vec![
                Some(ImageLayer {
                    z_index: Some(0),
                    bounding_box: Some(BoundingBox {
                        absolute: Some(vec![0, 0, 2048, 2048]),
                        normalized: Some(vec![0, 0, 1000, 1000]),
                    }),
                    name: Some("background".into()),
                    description: Some("the beach, inpainted".into()),
                }),
                Some(ImageLayer {
                    z_index: Some(1),
                    bounding_box: Some(BoundingBox {
                        absolute: Some(vec![0, 0, 2048, 600]),
                        normalized: None,
                    }),
                    name: Some("sky".into()),
                    description: Some("the sky".into()),
                }),
                Some(ImageLayer {
                    z_index: Some(2),
                    ..ImageLayer::default()
                }),
            ]
        );
        assert_eq!(
            got.images[1].data,
            ImageData::Url("https://x.volces.com/l1.png".into())
        );
    }

    #[test]
    fn an_item_error_fails_the_whole_answer() {
        let e = answer(&json!({
            "created": 1,
            "data": [
                {"url": "https://x.volces.com/a.jpeg"},
                {"error": {"code": "OutputImageSensitiveContentDetected",
                           "message": "The generated image may contain sensitive content."}}
            ]
        }))
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert!(!e.retryable());
        assert!(e.message.contains("image 2 of 2"), "{}", e.message);
        assert!(e.message.contains("sensitive content"));

        let e = answer(&json!({
            "data": [{"error": {"code": "InternalServiceError",
                                "message": "failed with key ark-secret-key-123"}}]
        }))
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        assert!(!e.retryable());
        assert!(!e.message.contains(KEY));
    }

    #[test]
    fn unreadable_answers_are_bad_responses() {
        for body in [
            json!({"data": []}),
            json!({"created": 1}),
            json!({"data": [{"size": "1024x1024"}]}),
            json!({"data": "nope"}),
        ] {
            assert_eq!(
                answer(&body).unwrap_err().kind,
                UpstreamErrorKind::BadResponse,
                "{body}"
            );
        }
    }

    #[test]
    fn maps_errors() {
        use UpstreamErrorKind as K;
        let p = ark();
        let e = |status, code: &str| {
            let body = json!({"error": {"code": code, "message": format!("{code} happened"),
                                        "param": "size", "type": "BadRequest"}});
            error_response(&p, status, &serde_json::to_vec(&body).unwrap())
        };
        let cases = [
            (400, "InvalidParameter", K::InvalidRequest, false),
            (400, "MissingParameter", K::InvalidRequest, false),
            (
                400,
                "InputTextSensitiveContentDetected",
                K::ContentPolicy,
                false,
            ),
            (
                400,
                "InputImageSensitiveContentDetected",
                K::ContentPolicy,
                false,
            ),
            (
                400,
                "OutputImageSensitiveContentDetected",
                K::ContentPolicy,
                false,
            ),
            (400, "InputTextRiskDetection", K::ContentPolicy, false),
            (401, "AuthenticationError", K::AuthRejected, false),
            (
                404,
                "InvalidEndpointOrModel.NotFound",
                K::UnknownModel,
                false,
            ),
            (
                404,
                "InvalidEndpointOrModel.ModelIDAccessDisabled",
                K::UnknownModel,
                false,
            ),
            (404, "ModelNotOpen", K::UnknownModel, false),
            (
                429,
                "RateLimitExceeded.EndpointRPMExceeded",
                K::RateLimited,
                true,
            ),
            (429, "QuotaExceeded", K::Failure, false),
            (403, "AccountOverdueError", K::Failure, false),
            (500, "InternalServiceError", K::Failure, true),
            (503, "SomethingNew", K::Failure, true),
        ];
        for (status, code, kind, retryable) in cases {
            let err = e(status, code);
            assert_eq!((err.kind, err.retryable()), (kind, retryable), "{code}");
            assert_eq!(err.status, Some(status));
        }
    }

    #[test]
    fn error_messages_name_the_param_and_hide_the_key() {
        let p = ark();
        let body = json!({"error": {"code": "InvalidParameter", "message": "InvalidParameter happened",
                                    "param": "size", "type": "BadRequest"}});
        assert_eq!(
            error_response(&p, 400, &serde_json::to_vec(&body).unwrap()).message,
            "InvalidParameter happened (param: size)"
        );

        let body = br#"{"error":{"code":"AuthenticationError","message":"the API key ark-secret-key-123 is invalid. Request id: 0217"}}"#;
        let err = error_response(&p, 401, body);
        assert_eq!(
            err.message,
            "the API key [redacted] is invalid. Request id: 0217"
        );

        let err = error_response(&p, 502, b"<html>bad gateway</html>");
        assert_eq!(
            (err.kind, err.message.as_str()),
            (UpstreamErrorKind::Failure, "HTTP 502")
        );
    }
}
