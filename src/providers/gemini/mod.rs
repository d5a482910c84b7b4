//! Google's Gemini image models ("Nano Banana": Gemini 3 Pro Image, Gemini 3.1 Flash Image) through
//! the Gemini API's `POST /v1beta/models/{model}:generateContent`, keyed by `x-goog-api-key`. The
//! same kind serves Gemini speech (`speech.rs`) and lists its models and voices (`discovery.rs`).
//!
//! Gemini takes no pixel size: `generationConfig.imageConfig` carries an `aspectRatio` (`16:9`…)
//! and an `imageSize` tier (`512`, `1K`, `2K`, `4K`). A public `WxH` is sent as the Gemini ratio it
//! is (to within 3%) and the tier its pixel count falls in; a tier keyword (`2K`) is sent alone, so
//! the model keeps its own shape (square, or that of the reference image). Families that list no
//! tier (Gemini 2.5 Flash Image, 1K only) are sent the ratio alone. Which sizes a model takes is its
//! family's list, so a size it cannot make is the caller's 400 naming the ones it can.
//!
//! One image per call (image models take no `candidateCount` above 1): the gateway fans `n` out.
//! Reference images travel as `inlineData` parts after the prompt, as bytes (the gateway downloads a
//! URL first); Gemini reads PNG, JPEG and WebP (HEIC and HEIF too, which callers cannot send), so a
//! GIF is refused here rather than sent to fail.
//!
//! The answer's image is a base64 `inlineData` part; thought parts (interim images of the thinking
//! models) are skipped. Gemini cannot be asked for a format and Gemini 3 Pro Image sometimes
//! answers JPEG (labelled PNG or not), so the format is read from the bytes and reported as the
//! answer's `output_format`. A blocked prompt (`promptFeedback.blockReason`) or an image withheld
//! for safety (`finishReason` `IMAGE_SAFETY`, `PROHIBITED_CONTENT`…) is a content-policy refusal;
//! no image for any other reason (the model answered in text) is a bad answer, not retried.
//! `usageMetadata` becomes the answer's `usage`. Errors use Google's `{"error": {"code",
//! "message", "status", "details"}}`.

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::images::ImageRequest;
use crate::caps::schema::parse_size;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::image_input::{sniff, ImageInput};
use crate::common::images::{AnswerFacts, ImageData, ImageUsage, NativeImage, NativeImages};
use crate::common::native::NativeRequest;
use crate::providers::formats::google as google_errors;
use crate::upstream::provider::{bad_answer, Provider};

pub(crate) mod discovery;
pub(crate) mod speech;

// ---- constants -------------------------------------------------------------------------------

/// The Gemini API's image tiers (`imageConfig.imageSize`), smallest first, with the largest pixel
/// count each is taken to cover: the geometric mean of its nominal size (0.26, 1.05, 4.2, 16.8
/// megapixels) and the next one's.
const TIERS: &[(&str, u64)] = &[
    ("512", 520_000),
    ("1K", 2_100_000),
    ("2K", 8_400_000),
    ("4K", u64::MAX),
];

/// Gemini's aspect ratios (3.1 Flash Image takes them all; the families list what each model
/// takes) as `(name, width, height)`.
const RATIOS: &[(&str, u32, u32)] = &[
    ("1:1", 1, 1),
    ("2:3", 2, 3),
    ("3:2", 3, 2),
    ("3:4", 3, 4),
    ("4:3", 4, 3),
    ("4:5", 4, 5),
    ("5:4", 5, 4),
    ("9:16", 9, 16),
    ("16:9", 16, 9),
    ("21:9", 21, 9),
    ("1:4", 1, 4),
    ("4:1", 4, 1),
    ("1:8", 1, 8),
    ("8:1", 8, 1),
];

/// How far (relative) a pixel size's shape may be from a Gemini ratio and still be sent as it.
/// Google's pixel tables round each ratio (2.5 Flash Image's 4:3 is 1184x864, 2.7% off); the two
/// closest ratios (4:5 and 3:4, 5:4 and 4:3) are 6.7% apart, so 3% never matches two.
const RATIO_TOLERANCE: f64 = 0.03;

/// Reference image types Gemini reads that a caller can send (of PNG, JPEG, WebP and GIF).
const INPUT_TYPES: &[&str] = &["image/png", "image/jpeg", "image/webp"];

/// `finishReason` values that mean the image was withheld for what it shows (or would copy):
/// the caller's content, not a failure.
const REFUSALS: &[&str] = &[
    "SAFETY",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "RECITATION",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];

/// The most of the model's own text quoted in an error.
const QUOTED_TEXT: usize = 300;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: [Content<'a>; 1],
    generation_config: GenerationConfig,
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<PartOut<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum PartOut<'a> {
    Text {
        text: &'a str,
    },
    Inline {
        #[serde(rename = "inlineData")]
        inline_data: BlobOut,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BlobOut {
    mime_type: &'static str,
    data: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    response_modalities: [&'static str; 1],
    #[serde(skip_serializing_if = "ImageConfig::is_empty")]
    image_config: ImageConfig,
}

#[derive(Serialize, Debug, PartialEq, Eq, Default, Clone, Copy)]
#[serde(rename_all = "camelCase")]
struct ImageConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    aspect_ratio: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_size: Option<&'static str>,
}

impl ImageConfig {
    fn is_empty(&self) -> bool {
        self.aspect_ratio.is_none() && self.image_size.is_none()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    usage_metadata: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<ContentIn>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct ContentIn {
    #[serde(default)]
    parts: Vec<PartIn>,
}

/// One answer part: text, an image, or either marked as the model's thought. Gemini answers in
/// camelCase; the snake_case spellings its SDKs also read are taken too.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartIn {
    #[serde(default)]
    text: Option<String>,
    #[serde(default, alias = "inline_data")]
    inline_data: Option<BlobIn>,
    #[serde(default)]
    thought: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlobIn {
    #[serde(default, alias = "mime_type")]
    mime_type: Option<String>,
    #[serde(default)]
    data: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
    #[serde(default)]
    block_reason_message: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

/// The native request for one image (`n` is 1: the family's `per_call_n`; Gemini has no count).
pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    _n: u64,
) -> Result<NativeRequest, GatewayError> {
    Ok(NativeRequest::post_json(
        format!(
            "/v1beta/models/{}:generateContent",
            target.native_model.trim_start_matches("models/")
        ),
        image_body(req)?,
    ))
}

/// The `generateContent` body for one image: the same on the Gemini API and on Vertex AI
/// (`providers::vertex`), which reads the same `contents`/`generationConfig` JSON.
pub(crate) fn image_body(req: &ImageRequest<'_>) -> Result<Vec<u8>, GatewayError> {
    let image_config = image_config(req)?;
    let mut parts = Vec::with_capacity(1 + req.more_images.len() + 1);
    parts.push(PartOut::Text {
        text: req.prompt.as_str(),
    });
    for (i, image) in req.image.iter().chain(&req.more_images).enumerate() {
        parts.push(PartOut::Inline {
            inline_data: inline(req, image, i)?,
        });
    }
    let body = Body {
        contents: [Content {
            role: "user",
            parts,
        }],
        generation_config: GenerationConfig {
            response_modalities: ["IMAGE"],
            image_config,
        },
    };
    serde_json::to_vec(&body)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))
}

/// A reference image as an `inlineData` part. The engine has fetched URLs by now
/// (`input_as_bytes`); one still a URL is a gateway bug, not the caller's.
fn inline(
    req: &ImageRequest<'_>,
    image: &ImageInput,
    index: usize,
) -> Result<BlobOut, GatewayError> {
    let Some((bytes, mime)) = image.bytes() else {
        return Err(GatewayError::Internal(
            "gemini reference image was not downloaded".into(),
        ));
    };
    if !INPUT_TYPES.contains(&mime) {
        let which = if req.more_images.is_empty() {
            String::new()
        } else {
            format!("item {index} ")
        };
        return Err(GatewayError::field(
            "image",
            format!(
                "{which}is {mime}; model {} takes PNG, JPEG or WebP reference images",
                req.model.name
            ),
        ));
    }
    Ok(BlobOut {
        mime_type: mime,
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

/// The caller's size as Gemini's `imageConfig`: a tier keyword alone, or a pixel size as its
/// ratio and (for families with tiers) its tier. A size the family lists always maps; one a
/// configured override adds may not, and that is the caller's 400 naming the sizes that work.
fn image_config(req: &ImageRequest<'_>) -> Result<ImageConfig, GatewayError> {
    let size = req.size.as_ref();
    if let Some((tier, _)) = TIERS.iter().find(|(t, _)| *t == size) {
        return Ok(ImageConfig {
            aspect_ratio: None,
            image_size: Some(tier),
        });
    }
    let refusal = |why: &str| {
        GatewayError::field(
            "size",
            format!(
                "{why}; model {} accepts: {}",
                req.model.name,
                req.caps.sizes.join(", ")
            ),
        )
    };
    let Some((w, h)) = parse_size(size) else {
        return Err(refusal(&format!("{size} is not a size Gemini can be sent")));
    };
    let ratio = nearest_ratio(w, h).ok_or_else(|| {
        refusal(&format!(
            "{size} is none of Gemini's aspect ratios ({})",
            RATIOS.iter().map(|r| r.0).collect::<Vec<_>>().join(", ")
        ))
    })?;
    // A ratio Gemini has but this model does not take (an override's size) would be Gemini's 400.
    if !req.caps.aspect_ratios.iter().any(|(r, _)| *r == ratio) {
        let ratios: Vec<&str> = req.caps.aspect_ratios.iter().map(|(r, _)| *r).collect();
        return Err(refusal(&format!(
            "{size} is a {ratio} image, and this model takes {}",
            ratios.join(", ")
        )));
    }
    let takes_tiers = req
        .caps
        .sizes
        .iter()
        .any(|s| TIERS.iter().any(|(t, _)| t == s));
    let image_size = if takes_tiers {
        let pixels = u64::from(w) * u64::from(h);
        let tier = TIERS
            .iter()
            .find(|(_, most)| pixels <= *most)
            .map(|(t, _)| *t)
            .unwrap_or("4K");
        if !req.caps.sizes.contains(&tier) {
            return Err(refusal(&format!(
                "{size} is a {tier} image, which this model does not make"
            )));
        }
        Some(tier)
    } else {
        None
    };
    Ok(ImageConfig {
        aspect_ratio: Some(ratio),
        image_size,
    })
}

/// The Gemini ratio `w`×`h` is, to within [`RATIO_TOLERANCE`].
fn nearest_ratio(w: u32, h: u32) -> Option<&'static str> {
    let shape = f64::from(w) / f64::from(h);
    RATIOS
        .iter()
        .map(|(name, rw, rh)| {
            (
                *name,
                (shape / (f64::from(*rw) / f64::from(*rh)) - 1.0).abs(),
            )
        })
        .filter(|(_, off)| *off <= RATIO_TOLERANCE)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(name, _)| name)
}

/// Gemini's own checks, before anything is sent: the size must map (see [`image_config`]).
pub(crate) fn validate(_target: &Target, req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    image_config(req).map(|_| ())
}

// ---- translation back ------------------------------------------------------------------------

/// A 2xx answer: its one image, or why there is none.
pub(crate) fn image_response(
    provider: &Provider,
    req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let answer: Answer = crate::providers::parse_answer(provider, body)?;
    let usage = answer.usage_metadata.as_ref().and_then(usage);
    let Some(candidate) = answer.candidates.first() else {
        return Err(no_candidate(provider, answer.prompt_feedback.as_ref()));
    };
    let parts = candidate
        .content
        .as_ref()
        .map(|c| c.parts.as_slice())
        .unwrap_or_default();
    // The first image that is not a thought: one call makes one image (a prompt asking for
    // several does not change `n`).
    let image = parts
        .iter()
        .filter(|p| !p.thought)
        .find_map(|p| p.inline_data.as_ref().filter(|b| !b.data.is_empty()));
    let Some(image) = image else {
        return Err(no_image(provider, candidate, parts));
    };
    let mime = format_of(image);
    let output_format = match mime {
        "image/jpeg" if req.jpeg_spelled_jpeg => Some("jpeg"),
        "image/jpeg" => Some("jpg"),
        "image/png" => Some("png"),
        "image/webp" => Some("webp"),
        _ => None,
    };
    let facts = AnswerFacts {
        usage,
        output_format: output_format.map(str::to_string),
        ..AnswerFacts::default()
    };
    Ok(NativeImages {
        created: None,
        images: vec![NativeImage::new(ImageData::Base64(
            image.data.clone().into(),
        ))],
        facts: Some(Box::new(facts)),
    })
}

/// The image's type as its bytes say (Gemini 3 Pro Image has labelled JPEG bytes `image/png`),
/// else as labelled.
fn format_of(image: &BlobIn) -> &'static str {
    // 16 base64 characters are 12 bytes: enough for every signature `sniff` knows.
    let head = image.data.get(..16).unwrap_or(&image.data);
    let sniffed = base64::engine::general_purpose::STANDARD
        .decode(head)
        .ok()
        .and_then(|b| sniff(&b));
    sniffed.unwrap_or(match image.mime_type.as_deref() {
        Some("image/jpeg") => "image/jpeg",
        Some("image/webp") => "image/webp",
        Some("image/png") => "image/png",
        _ => "",
    })
}

/// An answer without candidates: the prompt was blocked (the caller's content), or something
/// the adapter cannot read.
fn no_candidate(provider: &Provider, feedback: Option<&PromptFeedback>) -> UpstreamError {
    match feedback.and_then(|f| f.block_reason.as_deref().map(|r| (r, f))) {
        Some((reason, f)) => {
            let detail = f
                .block_reason_message
                .as_deref()
                .map(|m| format!(": {}", provider.redact(m)))
                .unwrap_or_default();
            UpstreamError::new(
                UpstreamErrorKind::ContentPolicy,
                &provider.name,
                format!("Gemini blocked the prompt ({reason}){detail}"),
            )
        }
        None => bad_answer(provider, "answer holds no candidate"),
    }
}

/// A candidate without an image: withheld for its content, or the model answered otherwise
/// (in text, or not at all). The model's text, when it gave some, says why.
fn no_image(provider: &Provider, candidate: &Candidate, parts: &[PartIn]) -> UpstreamError {
    let reason = candidate.finish_reason.as_deref().unwrap_or("none given");
    let text: String = parts
        .iter()
        .filter(|p| !p.thought)
        .filter_map(|p| p.text.as_deref())
        .chain(candidate.finish_message.as_deref())
        .collect::<Vec<_>>()
        .join(" ");
    let text = text.trim();
    let quoted = if text.is_empty() {
        String::new()
    } else {
        let cut: String = text.chars().take(QUOTED_TEXT).collect();
        let more = if cut.len() < text.len() { "…" } else { "" };
        format!(": {}{more}", provider.redact(&cut))
    };
    if REFUSALS.contains(&reason) {
        UpstreamError::new(
            UpstreamErrorKind::ContentPolicy,
            &provider.name,
            format!("Gemini withheld the image ({reason}){quoted}"),
        )
    } else {
        // Sending the same prompt again would pay again for the same refusal in words.
        bad_answer(
            provider,
            format!("Gemini answered no image (finishReason {reason}){quoted}"),
        )
    }
}

/// `usageMetadata` as the answer's `usage`: the prompt (text and reference images) in, the image
/// and any thinking out. Counts that are not non-negative integers are left out.
fn usage(meta: &Value) -> Option<ImageUsage> {
    let count = |name: &str| meta.get(name).and_then(Value::as_u64);
    let prompt = count("promptTokenCount");
    let candidates = count("candidatesTokenCount");
    let thoughts = count("thoughtsTokenCount");
    let total = count("totalTokenCount");
    if prompt.is_none() && candidates.is_none() && total.is_none() {
        return None;
    }
    let input_tokens = prompt.unwrap_or(0);
    let output_tokens = candidates.unwrap_or(0) + thoughts.unwrap_or(0);
    let mut output_tokens_details = modalities(meta.get("candidatesTokensDetails"));
    if let Some(t) = thoughts.filter(|t| *t > 0) {
        output_tokens_details.insert("reasoning_tokens".into(), t);
    }
    Some(ImageUsage {
        input_tokens,
        output_tokens,
        total_tokens: total.unwrap_or(input_tokens + output_tokens),
        input_tokens_details: modalities(meta.get("promptTokensDetails")),
        output_tokens_details,
    })
}

/// A `[{modality, tokenCount}]` list as `{"<modality>_tokens": count}` (`image_tokens`…).
fn modalities(list: Option<&Value>) -> BTreeMap<String, u64> {
    list.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| {
                    let modality = item.get("modality")?.as_str()?.to_ascii_lowercase();
                    let count = item.get("tokenCount")?.as_u64()?;
                    Some((format!("{modality}_tokens"), count))
                })
                .collect()
        })
        .unwrap_or_default()
}

// ---- error mapping ---------------------------------------------------------------------------

/// A non-2xx answer. Google's status names refine the HTTP status: a bad key (400 with
/// `API_KEY_INVALID`) and 403 are the operator's credentials, 404 the configured model,
/// `FAILED_PRECONDITION` the account (billing, or a region the API is not offered in), 429
/// `RESOURCE_EXHAUSTED` a rate or quota to retry later, 500/503/504 failures to retry.
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let (mut err, detail) = google_errors::classify(provider, status, body);
    if let Some(detail) = detail {
        match detail.status.as_str() {
            // "models/gemini-x is not found for API version v1beta, or is not supported for
            // generateContent": the model the configuration names.
            "NOT_FOUND" => err.kind = UpstreamErrorKind::UnknownModel,
            // "User location is not supported for the API use", a free tier without image
            // output: the account's, and it repeats.
            "FAILED_PRECONDITION" if !detail.bad_key() => err.kind = UpstreamErrorKind::Failure,
            _ => {}
        }
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Gemini kind: an API key in `x-goog-api-key`, images and speech, answered inline (no result
/// hosts).
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, |k| {
        crate::upstream::provider::Auth::header("x-goog-api-key", k)
    })?;
    let images = crate::providers::registry::ImageFns {
        request: image_request,
        validate,
        response: |p, r, h, b| crate::providers::registry::images(image_response(p, r, h, b)),
        input_as_bytes: true,
        tasks: None,
    };
    let mut kind = crate::providers::registry::images_kind(auth, error_response, &[], images);
    kind.adapters.speech = Some(Box::new(crate::providers::registry::SpeechFns {
        request: speech::speech_request,
        decoding: Some(speech::speech_decoding),
    }));
    Ok(kind)
}

#[cfg(test)]
mod tests;
