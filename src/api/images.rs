//! `POST /api/v1/images/generations`: the request, its validation against the model's capabilities,
//! and the public result shape.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::api::common;
use crate::caps::schema::{BACKGROUNDS, OUTPUT_FORMATS, QUALITIES};
use crate::caps::{Caps, ImageCaps};
use crate::catalog::{Catalog, Model};
use crate::common::error::GatewayError;
use crate::common::image_input::ImageInput;
use crate::common::images::AnswerFacts;
use crate::common::images::ImageLayer;
use crate::common::json::{Fields, Str};
use crate::common::Operation;

/// Most images one request may ask for (spec: bound not shown; families may allow fewer).
pub use crate::caps::schema::MAX_N;
const RESPONSE_FORMATS: &[&str] = &["url", "b64_json"];

/// A validated image generation request; strings borrow from the request body.
#[derive(Debug)]
pub struct ImageRequest<'a> {
    /// The public model asked for (its name, capabilities and targets).
    #[doc(hidden)]
    pub model: Arc<Model>,
    /// The model's capabilities, which the request was validated against.
    #[doc(hidden)]
    pub caps: &'static ImageCaps,
    /// The prompt, decoded.
    pub prompt: Str<'a>,
    /// What to keep out of the image (only for families with `negative_prompt`).
    pub negative_prompt: Option<Str<'a>>,
    /// The reference image; a URL is fetched by the gateway only for providers that need the bytes.
    pub image: Option<ImageInput>,
    /// Further reference images (`image` given as an array), only for families whose
    /// `max_images` allows them; empty otherwise, so adapters that take one never see any.
    pub more_images: Vec<ImageInput>,
    /// Only set when `image` is and the family honours it (the spec's default 0.5 applies then).
    pub strength: Option<f64>,
    /// The caller's `size`, or the size its `aspect_ratio` means, or the family's default. Borrowed
    /// from the capabilities, except a `WxH` only the family's size rule allows (the caller's own).
    pub size: Cow<'a, str>,
    /// Whether the caller chose the size (`size` or `aspect_ratio`) rather than the default.
    pub size_given: bool,
    /// Images asked for in all (the engine fans out per the family's `per_call_n`).
    pub n: u64,
    /// One of the family's `qualities`, or its default.
    pub quality: Option<&'static str>,
    /// One of the family's `style_presets`.
    pub style_preset: Option<&'static str>,
    /// `url` or `b64_json`: what the caller gets, whatever the provider answers.
    pub response_format: &'static str,
    /// Public name: `png`, `jpg` or `webp`.
    pub output_format: &'static str,
    /// Whether the caller spelled JPEG `jpeg` (OpenAI's spelling, what its SDKs send): the
    /// answer's `output_format` then says `jpeg` too.
    pub jpeg_spelled_jpeg: bool,
    /// The edit mask (only for families with `mask`).
    pub mask: Option<ImageInput>,
    /// Whether to watermark (the caller's `watermark`; false when not given).
    pub watermark: bool,
    /// Whether the caller named `watermark` (either value) rather than taking the default, for
    /// providers whose own default differs and whose `false` needs an account privilege (Zhipu).
    pub watermark_given: bool,
    /// One of the family's `backgrounds`.
    pub background: Option<&'static str>,
    /// `extra_body` keys, validated against the family's list.
    pub extra_body: Vec<(Str<'a>, &'a RawValue)>,
    /// Retries the caller allows (already bounded by the configuration's `retries.max`).
    pub retries: u32,
    /// `async: true`: answer at once with a task id; the result is read from
    /// `GET /api/v1/images/{task_id}`.
    pub is_async: bool,
    /// The family's `native_fields` the caller sent, as raw JSON, for the native body.
    pub passthrough: Vec<(Str<'a>, &'a RawValue)>,
}

impl ImageRequest<'_> {
    /// The aspect ratio `size` means for this family (`None` when the table has no entry).
    pub fn aspect_ratio(&self) -> Option<&'static str> {
        self.caps
            .aspect_ratios
            .iter()
            .find(|(_, s)| *s == self.size.as_ref())
            .map(|(r, _)| *r)
    }

    /// The aspect ratio a provider that takes only ratios is sent for `size`. A size the family's
    /// own list holds always has one; a size a configured size rule allows may not, and that is the
    /// caller's 400 naming the sizes that work, not a failure of the gateway.
    pub fn required_aspect_ratio(&self) -> Result<&'static str, GatewayError> {
        self.aspect_ratio().ok_or_else(|| {
            let sizes: Vec<&str> = self.caps.aspect_ratios.iter().map(|(_, s)| *s).collect();
            GatewayError::field(
                "size",
                format!(
                    "model {} takes only an aspect ratio, and {} has none of its ratios; sizes: {}",
                    self.model.name,
                    self.size,
                    sizes.join(", ")
                ),
            )
        })
    }

    /// MIME type of `output_format`.
    pub fn output_mime(&self) -> &'static str {
        match self.output_format {
            "jpg" => "image/jpeg",
            "webp" => "image/webp",
            "svg" => "image/svg+xml",
            _ => "image/png",
        }
    }
}

/// The public image generation result (also what `GET /api/v1/images/{task_id}` answers).
#[derive(Debug, Serialize)]
pub struct ImageResult {
    /// Unix time in seconds.
    pub created: i64,
    /// The images (empty until the task succeeds).
    pub data: Vec<ImageItem>,
    /// The id to read the task by at `GET /api/v1/images/{task_id}`.
    pub task_id: String,
    /// `pending`, `running`, `succeed` or `failed`.
    pub task_status: &'static str,
    /// Why a task failed (`failed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<TaskFailure>,
    /// What the provider reported about the answer (`usage`, `output_format`, `size`, `quality`,
    /// `background`), each only when it did: additive top-level fields.
    /// Boxed: rare, and results travel through the engine's futures.
    #[serde(flatten)]
    pub facts: Option<Box<AnswerFacts>>,
    /// What each native call of the generation delivered, for its cost (never in the answer):
    /// the calls of one fan-out may be served by different targets, each at its own price.
    #[serde(skip)]
    pub served: Vec<Served>,
}

/// What one native call delivered: the target that served it, its images and what its provider
/// reported of them.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// The serving target's index in the model's `targets`.
    pub target: usize,
    /// Images it delivered.
    pub images: u64,
    /// What its provider reported (token usage, size, quality).
    pub facts: Option<Box<AnswerFacts>>,
}

/// The Error object of a failed task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TaskFailure {
    /// The error code, as in the API's Error object (e.g. `upstream_timeout`).
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
    /// Per-field problems, for a `validation_error` found while the task ran.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub details: std::collections::BTreeMap<String, String>,
}

/// One image of an answer: a link or base64 bytes, as `response_format` asked.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ImageItem {
    /// Link to the image (hosted by the gateway, or the provider's), for `response_format: url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The image, base64-encoded, for `response_format: b64_json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b64_json: Option<crate::common::images::Base64Text>,
    /// The prompt the provider actually used, when it rewrote the request's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revised_prompt: Option<String>,
    /// For one layer of a decomposed image (Seedream's `extra_body.layer_decomposition`): its
    /// stacking order, bounding box, name and description, as the provider gave them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<ImageLayer>,
}

/// Unix time in seconds, for `created` when the provider gives none.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Pick `value` from `allowed`, recording `field`'s problem when it is not there.
fn pick(
    f: &mut Fields<'_>,
    field: &str,
    value: Option<Str<'_>>,
    public: &[&'static str],
    allowed: &[&'static str],
    model: &str,
) -> Option<&'static str> {
    let v = value?;
    let Some(found) = public.iter().find(|p| **p == v.as_str()) else {
        let alias = if field == "output_format" {
            " (jpeg is the same as jpg)"
        } else {
            ""
        };
        f.error(
            field,
            format!("must be one of {}{alias}", public.join(", ")),
        );
        return None;
    };
    if allowed.contains(found) {
        Some(found)
    } else if allowed.is_empty() {
        f.error(field, format!("model {model} does not support {field}"));
        None
    } else {
        f.error(
            field,
            format!("model {model} accepts: {}", allowed.join(", ")),
        );
        None
    }
}

/// `image`: one reference image as a string, or several as an array of strings (each a URL or
/// base64 data); an empty list is none. Problems are recorded on `image`, the first bad item named.
fn reference_images(f: &mut Fields<'_>) -> Vec<ImageInput> {
    let Some(raw) = f.take_raw("image") else {
        return Vec::new();
    };
    // Read straight into the shape the first byte announces (an untagged enum would buffer a
    // base64 image once more before choosing).
    let values: Result<Vec<String>, _> = if raw.get().starts_with('[') {
        serde_json::from_str(raw.get())
    } else {
        serde_json::from_str(raw.get()).map(|v| vec![v])
    };
    let Ok(values) = values else {
        f.error("image", "must be a string or an array of strings");
        return Vec::new();
    };
    let many = values.len() > 1;
    let mut out = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        match ImageInput::parse(v) {
            Ok(input) => out.push(input),
            Err(m) if many => f.error("image", format!("item {i} {m}")),
            Err(m) => f.error("image", m),
        }
    }
    out
}

/// The `details` for a size `caps` does not accept: the listed sizes and the rule, if any.
fn size_choices(caps: &ImageCaps, model: &str) -> String {
    match caps.size_rule {
        None => format!("model {model} accepts: {}", caps.sizes.join(", ")),
        Some(rule) if caps.sizes.is_empty() => format!("model {model} accepts {rule}"),
        Some(rule) => format!(
            "model {model} accepts: {}, or {rule}",
            caps.sizes.join(", ")
        ),
    }
}

/// The request's fields as read, in the order they are read (each read records its own type
/// problem), before the model's capabilities judge them.
struct Read<'a> {
    prompt: Option<Str<'a>>,
    negative_prompt: Option<Str<'a>>,
    image: Option<ImageInput>,
    more_images: Vec<ImageInput>,
    /// Reference images given in all (`image` and `more_images`).
    image_count: usize,
    strength: Option<f64>,
    n: Option<u64>,
    mask: Option<ImageInput>,
    mask_given: bool,
    watermark: Option<bool>,
    is_async: Option<bool>,
    retries: u32,
}

/// The fields whose values must be among the model's (sizes, qualities, formats, …), as read.
struct Choices<'a> {
    size: Option<Str<'a>>,
    aspect_ratio: Option<Str<'a>>,
    quality: Option<Str<'a>>,
    style_preset: Option<Str<'a>>,
    response_format: Option<Str<'a>>,
    output_format: Option<Str<'a>>,
    background: Option<Str<'a>>,
    extra_body: Option<&'a RawValue>,
}

/// What the model's capabilities made of [`Choices`].
struct Chosen<'a> {
    size: Cow<'a, str>,
    size_given: bool,
    quality: Option<&'static str>,
    style_preset: Option<&'static str>,
    response_format: &'static str,
    output_format: &'static str,
    jpeg_spelled_jpeg: bool,
    background: Option<&'static str>,
    extra_body: Vec<(Str<'a>, &'a RawValue)>,
}

/// Read every field of the request (the model aside), in the order their problems are reported.
fn read<'a>(f: &mut Fields<'a>, max_retries: u32) -> (Read<'a>, Choices<'a>) {
    let prompt = f.required_string("prompt");
    let negative_prompt = f.string("negative_prompt");
    let images = reference_images(f);
    let image_count = images.len();
    let mut images = images.into_iter();
    let image = images.next();
    let more_images: Vec<ImageInput> = images.collect();
    let strength = f.number("strength");
    let size = f.string("size");
    let aspect_ratio = f.string("aspect_ratio");
    let n = f.unsigned("n");
    let quality = f.string("quality");
    let style_preset = f.string("style_preset");
    let response_format = f.string("response_format");
    let output_format = f.string("output_format");
    let mask = f.string("mask");
    let mask_given = mask.is_some();
    let mask = mask.and_then(|v| match ImageInput::parse(v.as_str()) {
        Ok(i) => Some(i),
        Err(m) => {
            f.error("mask", m);
            None
        }
    });
    let watermark = f.boolean("watermark");
    let background = f.string("background");
    let extra_body = f.take_raw("extra_body");
    let is_async = f.boolean("async");
    let retries = common::retries(f, max_retries);
    let read = Read {
        prompt,
        negative_prompt,
        image,
        more_images,
        image_count,
        strength,
        n,
        mask,
        mask_given,
        watermark,
        is_async,
        retries,
    };
    let choices = Choices {
        size,
        aspect_ratio,
        quality,
        style_preset,
        response_format,
        output_format,
        background,
        extra_body,
    };
    (read, choices)
}

/// The checks that need no model: `strength`'s range, `strength` and `mask` only with an image,
/// `n`'s bounds.
fn check_alone(f: &mut Fields<'_>, r: &Read<'_>) {
    if let Some(s) = r.strength {
        if !(0.0..=1.0).contains(&s) {
            f.error("strength", "must be between 0 and 1");
        } else if r.image.is_none() && !f.has_error("image") {
            f.error("strength", "applies only together with `image`");
        }
    }
    if r.mask_given && r.image.is_none() && !f.has_error("image") {
        f.error("mask", "applies only together with `image`");
    }
    match r.n {
        Some(0) => f.error("n", format!("must be from 1 to {MAX_N}")),
        Some(v) if v > MAX_N => f.error("n", format!("must be from 1 to {MAX_N}")),
        _ => {}
    }
}

/// What model `name`'s capabilities allow of the request's features: its flags, the number of
/// reference images, a required image, the prompt's length, `n`.
fn check_features(f: &mut Fields<'_>, caps: &ImageCaps, name: &str, r: &Read<'_>) {
    let check_flag = |f: &mut Fields<'_>, field: &str, present: bool, supported: bool| {
        if present && !supported {
            f.error(field, format!("model {name} does not support {field}"));
        }
    };
    check_flag(
        f,
        "negative_prompt",
        r.negative_prompt.is_some(),
        caps.negative_prompt,
    );
    check_flag(f, "image", r.image.is_some(), caps.reference_image);
    if caps.reference_image && r.image_count as u64 > caps.max_images {
        f.error(
            "image",
            format!(
                "model {name} takes at most {} reference image(s); {} were given",
                caps.max_images, r.image_count
            ),
        );
    }
    check_flag(f, "mask", r.mask_given, caps.mask);
    check_flag(f, "strength", r.strength.is_some(), caps.strength);
    if caps.image_required && r.image.is_none() && !f.has_error("image") {
        f.error(
            "image",
            format!("is required: model {name} edits a reference image"),
        );
    }
    check_flag(f, "watermark", r.watermark == Some(true), caps.watermark);
    if let Some(p) = &r.prompt {
        if let Some(length) = common::over_limit(p.as_str(), caps.prompt_limit) {
            f.error(
                "prompt",
                format!(
                    "is {length} {}; model {name} accepts at most {}",
                    caps.prompt_limit.unit.as_str(),
                    caps.prompt_limit.max
                ),
            );
        }
    }
    if let Some(v) = r.n {
        if v > caps.max_n && v <= MAX_N {
            f.error(
                "n",
                format!(
                    "model {name} generates at most {} image(s) per request",
                    caps.max_n
                ),
            );
        }
    }
}

/// [`Choices`] judged by model `name`'s lists, in the order their problems are reported.
fn choose<'a>(f: &mut Fields<'_>, caps: &ImageCaps, name: &str, c: Choices<'a>) -> Chosen<'a> {
    let size_given = c.size.is_some() || c.aspect_ratio.is_some();
    let size = size(f, caps, name, c.size, c.aspect_ratio.as_ref());
    let quality =
        pick(f, "quality", c.quality, QUALITIES, caps.qualities, name).or(caps.default_quality);
    let style_preset = style_preset(f, caps, name, c.style_preset);
    // Every family answers both ways: the gateway downloads or hosts images as needed.
    let response_format = pick(
        f,
        "response_format",
        c.response_format,
        RESPONSE_FORMATS,
        RESPONSE_FORMATS,
        name,
    )
    .unwrap_or("url");
    // `jpeg` (OpenAI's spelling, what its SDK sends) is `jpg`.
    let jpeg_spelled_jpeg = c
        .output_format
        .as_ref()
        .is_some_and(|v| v.as_str() == "jpeg");
    let output_format = match c.output_format {
        Some(v) if v.as_str() == "jpeg" => Some(Str(Cow::Borrowed("jpg"))),
        other => other,
    };
    // `caps` works the default out: the spec's `png`, or the family's own first format when it
    // cannot make PNG, unless the data names one.
    let output_format = pick(
        f,
        "output_format",
        output_format,
        OUTPUT_FORMATS,
        caps.output_formats,
        name,
    )
    .unwrap_or(caps.default_output_format);
    let background = pick(
        f,
        "background",
        c.background,
        BACKGROUNDS,
        caps.backgrounds,
        name,
    );
    Chosen {
        size,
        size_given,
        quality,
        style_preset,
        response_format,
        output_format,
        jpeg_spelled_jpeg,
        background,
        extra_body: extra_body(f, caps, name, c.extra_body),
    }
}

/// The size: the caller's `size` (one of the model's, or one its size rule allows), else the size
/// its `aspect_ratio` means (the two must agree when both are given), else the model's default.
fn size<'a>(
    f: &mut Fields<'_>,
    caps: &ImageCaps,
    name: &str,
    size: Option<Str<'a>>,
    aspect_ratio: Option<&Str<'_>>,
) -> Cow<'a, str> {
    let size_v: Option<Cow<'a, str>> = match size {
        None => None,
        Some(s) => match caps.sizes.iter().find(|x| **x == s.as_str()) {
            Some(found) => Some(Cow::Borrowed(*found)),
            // Only the one spelling `parse_size` reads passes, so adapters can send it on.
            None if caps.accepts_size(s.as_str()) => Some(s.0),
            None => {
                f.error("size", size_choices(caps, name));
                None
            }
        },
    };
    let ratio_size = aspect_ratio.and_then(|r| ratio(f, caps, name, r));
    if let (Some(s), Some(r)) = (&size_v, ratio_size) {
        if s != r {
            f.error(
                "aspect_ratio",
                format!("conflicts with size {s} (aspect_ratio means {r} for model {name})"),
            );
        }
    }
    size_v
        .or(ratio_size.map(Cow::Borrowed))
        .unwrap_or(Cow::Borrowed(caps.default_size))
}

/// The size `aspect_ratio` means for the model (`None` when it has no such ratio: recorded).
fn ratio(f: &mut Fields<'_>, caps: &ImageCaps, name: &str, r: &Str<'_>) -> Option<&'static str> {
    match caps.aspect_ratios.iter().find(|(k, _)| *k == r.as_str()) {
        Some((_, s)) => Some(*s),
        None if caps.aspect_ratios.is_empty() => {
            f.error(
                "aspect_ratio",
                format!("model {name} does not support aspect_ratio; use size"),
            );
            None
        }
        None => {
            let list: Vec<&str> = caps.aspect_ratios.iter().map(|(k, _)| *k).collect();
            f.error(
                "aspect_ratio",
                format!("model {name} accepts: {}", list.join(", ")),
            );
            None
        }
    }
}

/// `style_preset`: one of the model's presets.
fn style_preset(
    f: &mut Fields<'_>,
    caps: &ImageCaps,
    name: &str,
    value: Option<Str<'_>>,
) -> Option<&'static str> {
    let s = value?;
    match caps.style_presets.iter().find(|x| **x == s.as_str()) {
        Some(found) => Some(*found),
        None if caps.style_presets.is_empty() => {
            f.error(
                "style_preset",
                format!("model {name} does not support style_preset"),
            );
            None
        }
        None => {
            f.error(
                "style_preset",
                format!("model {name} accepts: {}", caps.style_presets.join(", ")),
            );
            None
        }
    }
}

/// `extra_body`: an object of the model's `extra_body_keys` only; each other key is recorded.
fn extra_body<'a>(
    f: &mut Fields<'_>,
    caps: &ImageCaps,
    name: &str,
    raw: Option<&'a RawValue>,
) -> Vec<(Str<'a>, &'a RawValue)> {
    let Some(raw) = raw else {
        return Vec::new();
    };
    let nested = match Fields::nested(raw, "extra_body") {
        Err(msg) => {
            f.error("extra_body", msg);
            return Vec::new();
        }
        Ok(nested) => nested,
    };
    let (rest, _) = nested.into_rest();
    let mut keep = Vec::new();
    for (k, v) in rest {
        if caps.extra_body_keys.contains(&k.as_str()) {
            keep.push((k, v));
        } else if caps.extra_body_keys.is_empty() {
            f.error(
                &format!("extra_body.{}", k.as_str()),
                format!("model {name} accepts no extra_body settings"),
            );
        } else {
            f.error(
                &format!("extra_body.{}", k.as_str()),
                format!("model {name} accepts: {}", caps.extra_body_keys.join(", ")),
            );
        }
    }
    keep
}

/// Parse and validate an image generation request body.
pub fn parse<'a>(
    body: &'a [u8],
    catalog: &Catalog,
    max_retries: u32,
) -> Result<ImageRequest<'a>, GatewayError> {
    let mut f = Fields::parse(body)?;
    let model = common::model(&mut f, catalog, Operation::Images);
    let caps = match model.as_ref().map(|m| m.caps) {
        Some(Caps::Images(c)) => Some(c),
        _ => None,
    };
    let name = model.as_ref().map(|m| m.name.clone()).unwrap_or_default();
    let (r, choices) = read(&mut f, max_retries);
    check_alone(&mut f, &r);
    let chosen = caps.map(|caps| {
        check_features(&mut f, caps, &name, &r);
        choose(&mut f, caps, &name, choices)
    });

    let (rest, mut errors) = f.into_rest();
    let native = caps.map(|c| c.native_fields).unwrap_or(&[]);
    let passthrough = common::undeclared(rest, native, model.as_deref(), &mut errors);
    errors.into_result()?;

    let (Some(model), Some(caps), Some(prompt), Some(c)) = (model, caps, r.prompt, chosen) else {
        return Err(GatewayError::Internal("image validation incomplete".into()));
    };
    Ok(ImageRequest {
        model,
        caps,
        prompt,
        negative_prompt: r.negative_prompt,
        strength: r
            .image
            .as_ref()
            .filter(|_| caps.strength)
            .map(|_| r.strength.unwrap_or(0.5)),
        image: r.image,
        more_images: r.more_images,
        size: c.size,
        size_given: c.size_given,
        n: r.n.unwrap_or(1),
        quality: c.quality,
        style_preset: c.style_preset,
        response_format: c.response_format,
        output_format: c.output_format,
        jpeg_spelled_jpeg: c.jpeg_spelled_jpeg,
        mask: r.mask,
        watermark: r.watermark.unwrap_or(false),
        watermark_given: r.watermark.is_some(),
        background: c.background,
        extra_body: c.extra_body,
        retries: r.retries,
        is_async: r.is_async.unwrap_or(false),
        passthrough,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A catalog of one model, `m`, of the built-in family `family` with `overrides` (YAML).
    fn catalog(family: &str, overrides: &str) -> Catalog {
        let overrides: serde_yaml::Value = serde_yaml::from_str(overrides).unwrap();
        let caps = crate::caps::builtin()
            .unwrap()
            .with_overrides(family, &overrides, "m")
            .unwrap_or_else(|e| panic!("{e:?}"));
        let mut c = Catalog::default();
        c.insert(Model::new("m", caps, Vec::new()));
        c
    }

    fn refusal(body: &str, catalog: &Catalog) -> String {
        match parse(body.as_bytes(), catalog, 0) {
            Ok(r) => panic!("accepted: {r:?}"),
            Err(e) => String::from_utf8_lossy(&e.body()).into_owned(),
        }
    }

    #[test]
    fn model_defaults_apply_when_the_request_names_none() {
        let c = catalog(
            "gpt-image",
            "{default_quality: high, default_output_format: webp}",
        );
        let r = parse(br#"{"model": "m", "prompt": "p"}"#, &c, 0).unwrap();
        assert_eq!((r.quality, r.output_format), (Some("high"), "webp"));
        let r = parse(
            br#"{"model": "m", "prompt": "p", "quality": "low", "output_format": "png"}"#,
            &c,
            0,
        )
        .unwrap();
        assert_eq!((r.quality, r.output_format), (Some("low"), "png"));
        // Without them, as before: no quality, `png` when the family makes it.
        let c = catalog("gpt-image", "{}");
        let r = parse(br#"{"model": "m", "prompt": "p"}"#, &c, 0).unwrap();
        assert_eq!((r.quality, r.output_format), (None, "png"));
    }

    #[test]
    fn a_rule_size_is_the_callers_and_aspect_ratios_still_map() {
        let c = catalog(
            "flux",
            "{sizes: {min_side: 256, max_side: 1440, multiple_of: 32}}",
        );
        let r = parse(
            br#"{"model": "m", "prompt": "p", "size": "1440x256"}"#,
            &c,
            0,
        )
        .unwrap();
        assert_eq!(r.size, "1440x256");
        assert!(r.size_given);
        assert!(matches!(r.size, Cow::Borrowed(_)), "borrowed from the body");
        let r = parse(
            br#"{"model": "m", "prompt": "p", "aspect_ratio": "16:9"}"#,
            &c,
            0,
        )
        .unwrap();
        assert_eq!(r.size, "1344x768");
        assert_eq!(r.aspect_ratio(), Some("16:9"));
        let msg = refusal(
            r#"{"model": "m", "prompt": "p", "size": "1344x768", "aspect_ratio": "1:1"}"#,
            &c,
        );
        assert!(msg.contains("conflicts with size 1344x768"), "{msg}");
    }

    #[test]
    fn image_is_one_or_as_many_as_the_family_takes() {
        let png = "iVBORw0KGgoAAAANSUhEUg==";
        let c = catalog("gpt-image", "{max_images: 2}");
        let body = format!(
            r#"{{"model": "m", "prompt": "p", "image": ["{png}", "https://x.example/b.png"]}}"#
        );
        let r = parse(body.as_bytes(), &c, 0).unwrap();
        assert!(r.image.as_ref().is_some_and(|i| !i.is_url()));
        assert!(matches!(r.more_images.as_slice(), [i] if i.is_url()));
        let msg = refusal(
            &format!(r#"{{"model": "m", "prompt": "p", "image": ["{png}", "{png}", "{png}"]}}"#),
            &c,
        );
        assert!(
            msg.contains("model m takes at most 2 reference image(s); 3 were given"),
            "{msg}"
        );
        let msg = refusal(
            &format!(r#"{{"model": "m", "prompt": "p", "image": ["{png}", "nope!"]}}"#),
            &c,
        );
        assert!(msg.contains(r#""image":"item 1 must be"#), "{msg}");
        let msg = refusal(r#"{"model": "m", "prompt": "p", "image": [1]}"#, &c);
        assert!(
            msg.contains("must be a string or an array of strings"),
            "{msg}"
        );
        // Families that take one: a list of two is refused, naming the bound.
        let c = catalog("kolors", "{}");
        let msg = refusal(
            &format!(r#"{{"model": "m", "prompt": "p", "image": ["{png}", "{png}"]}}"#),
            &c,
        );
        assert!(msg.contains("takes at most 1 reference image(s)"), "{msg}");
    }

    #[test]
    fn jpeg_is_jpg() {
        let c = catalog("gpt-image", "{}");
        let r = parse(
            br#"{"model": "m", "prompt": "p", "output_format": "jpeg"}"#,
            &c,
            0,
        )
        .unwrap();
        assert_eq!((r.output_format, r.output_mime()), ("jpg", "image/jpeg"));
        let msg = refusal(
            r#"{"model": "m", "prompt": "p", "output_format": "gif"}"#,
            &c,
        );
        assert!(
            msg.contains("must be one of png, jpg, webp, svg (jpeg is the same as jpg)"),
            "{msg}"
        );
        // A family without JPEG refuses both spellings, listing what it makes.
        let c = catalog("gpt-image", "{output_formats: [png, webp]}");
        let msg = refusal(
            r#"{"model": "m", "prompt": "p", "output_format": "jpeg"}"#,
            &c,
        );
        assert!(msg.contains("model m accepts: png, webp"), "{msg}");
    }

    #[test]
    fn a_prompt_limit_counts_in_its_unit() {
        let c = catalog("gpt-image-2", "{prompt_limit: {max: 4, unit: bytes}}");
        assert!(parse(br#"{"model": "m", "prompt": "caf\u00e9"}"#, &c, 0).is_err());
        let msg = refusal(r#"{"model": "m", "prompt": "café"}"#, &c);
        assert!(
            msg.contains("is 5 bytes; model m accepts at most 4"),
            "{msg}"
        );
        assert!(parse(r#"{"model": "m", "prompt": "cafe"}"#.as_bytes(), &c, 0).is_ok());
        let c = catalog("gpt-image-2", "{prompt_limit: {max: 2, unit: tokens}}");
        let msg = refusal(r#"{"model": "m", "prompt": "one two three"}"#, &c);
        assert!(
            msg.contains("is 3 tokens; model m accepts at most 2"),
            "{msg}"
        );
    }
}
