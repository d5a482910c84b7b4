//! Images between the provider and the gateway: what an adapter read from a native answer
//! ([`NativeImages`]: each image as the provider gave it, a URL, base64 or raw bytes, with what
//! the provider said about it, such as a decomposed image's [`ImageLayer`]), a natively
//! asynchronous provider's task, and how the caller asked to receive them ([`Delivery`]).
//!
//! Natively asynchronous providers (DashScope Wan, Black Forest Labs FLUX, Kling): a submission
//! answers with the provider's own task, which the gateway then polls until it finishes.
//!
//! [`AnswerFacts`] is what a provider said about the answer as a whole (OpenAI's GPT image
//! answers: token `usage`, and the `output_format`, `size`, `quality` and `background` it made),
//! passed to the caller as additive fields of the result, and merged over a fan-out's calls.
//!
//! [`NativeTask`] is what the gateway keeps of such a task — serializable, because an
//! asynchronous public task stores it so that any instance can resume polling after the one that
//! submitted it died. [`Poll`] is one poll's reading; a task that failed (moderated, errored,
//! expired at the provider) is an `Err` from the adapter, classified like any provider error.

use std::collections::BTreeMap;

use bytes::Bytes;

pub use super::base64_text::Base64Text;
use serde::{Deserialize, Serialize};

/// A generation a provider runs asynchronously, as the gateway tracks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeTask {
    /// The configured provider's name: which of the model's targets runs the task.
    pub provider: String,
    /// The provider's task id.
    pub id: String,
    /// Where the provider said to poll, when it gives a URL rather than an id (BFL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling_url: Option<String>,
}

/// What a provider answered to an image request: the images, or its task to poll.
#[derive(Debug)]
pub enum ImageAnswer {
    /// The images themselves (a synchronous provider).
    Images(NativeImages),
    /// The provider's task, to poll until it ends (with the image adapter's task adapter).
    Task(NativeTask),
}

/// One poll's reading of a task that has not failed.
#[derive(Debug)]
pub enum Poll {
    /// Accepted, waiting for the provider's workers (public `pending`).
    Queued,
    /// Being generated (public `running`).
    Running,
    /// Finished: the images.
    Done(NativeImages),
}

/// One image as a provider answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageData {
    /// A link to the image on the provider's (or its storage's) host.
    Url(String),
    /// Standard base64 of the image bytes.
    Base64(Base64Text),
    /// The image bytes themselves.
    Bytes(Bytes),
}

/// One generated image and what the provider said about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeImage {
    /// The image: a URL to download or the bytes.
    pub data: ImageData,
    /// The prompt as the provider rewrote it, when it says.
    pub revised_prompt: Option<String>,
    /// Where the image sits when it is one layer of a decomposed image (Ark Seedream's layer
    /// decomposition); `None` for an ordinary image.
    pub layer: Option<ImageLayer>,
}

impl NativeImage {
    /// An image with nothing else said about it.
    pub fn new(data: ImageData) -> NativeImage {
        NativeImage {
            data,
            revised_prompt: None,
            layer: None,
        }
    }
}

/// What a provider says about one layer of a decomposed image: its place in the stack, where it
/// sits on the canvas, and what it shows. Public as each `data[]` item's `layer`, with Ark's own
/// field names; every part is optional because the provider may leave any out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageLayer {
    /// Stacking order: 0 is the bottom (the background plate), higher values lie above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub z_index: Option<i64>,
    /// Where the layer sits in the whole image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounding_box: Option<BoundingBox>,
    /// The provider's name for the layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The provider's description of the layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl ImageLayer {
    /// Whether the provider said nothing about a layer (an ordinary image).
    pub fn is_empty(&self) -> bool {
        *self == ImageLayer::default()
    }
}

/// Where a layer sits, as four integers each way (Ark: `left, top, right, bottom`): `absolute` in
/// the output's pixels, `normalized` on the provider's fixed scale.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundingBox {
    /// In the output's pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absolute: Option<Vec<i64>>,
    /// On the provider's fixed scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalized: Option<Vec<i64>>,
}

/// A native image answer, translated: its images in order, and the provider's creation time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeImages {
    /// Unix seconds, when the provider reported it.
    pub created: Option<i64>,
    /// The images, in the provider's order.
    pub images: Vec<NativeImage>,
    /// What the provider said about the answer as a whole (`None` when it said nothing; boxed,
    /// as it is rare and this travels through the engine's futures).
    pub facts: Option<Box<AnswerFacts>>,
}

/// What a provider reported about an image answer as a whole, each part only when it reported
/// it: the public result's `usage`, `output_format`, `size`, `quality` and `background` (also kept
/// with an asynchronous task's result). Values are the provider's, except that JPEG is `jpg` unless
/// the caller spelled it `jpeg` (see the adapter).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerFacts {
    /// Token usage, when the provider bills in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ImageUsage>,
    /// The format the images are in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_format: Option<String>,
    /// The size the images are (`WxH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// The quality the provider used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
    /// The background the provider used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<String>,
}

/// A provider's token usage for an image answer (OpenAI's `usage` of GPT image models): what
/// the caller is billed for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUsage {
    /// Tokens of the prompt and input images.
    #[serde(default)]
    pub input_tokens: u64,
    /// Tokens of the images made.
    #[serde(default)]
    pub output_tokens: u64,
    /// All tokens billed.
    #[serde(default)]
    pub total_tokens: u64,
    /// E.g. `text_tokens`, `image_tokens`: whichever counts the provider itemised.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_tokens_details: BTreeMap<String, u64>,
    /// Whichever output counts the provider itemised.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub output_tokens_details: BTreeMap<String, u64>,
}

impl ImageUsage {
    /// Read a provider's `usage` object leniently: counts that are not non-negative integers
    /// are left out rather than failing an answer whose images are fine. `None` when it holds
    /// no count at all.
    pub fn from_json(value: &serde_json::Value) -> Option<ImageUsage> {
        let object = value.as_object()?;
        let count = |name: &str| object.get(name).and_then(serde_json::Value::as_u64);
        let details = |name: &str| -> BTreeMap<String, u64> {
            object
                .get(name)
                .and_then(serde_json::Value::as_object)
                .map(|d| {
                    d.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let usage = ImageUsage {
            input_tokens: count("input_tokens").unwrap_or(0),
            output_tokens: count("output_tokens").unwrap_or(0),
            total_tokens: count("total_tokens").unwrap_or(0),
            input_tokens_details: details("input_tokens_details"),
            output_tokens_details: details("output_tokens_details"),
        };
        let any = ["input_tokens", "output_tokens", "total_tokens"]
            .iter()
            .any(|n| count(n).is_some());
        (any || !usage.input_tokens_details.is_empty() || !usage.output_tokens_details.is_empty())
            .then_some(usage)
    }

    fn add(&mut self, other: &ImageUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        for (mine, theirs) in [
            (&mut self.input_tokens_details, &other.input_tokens_details),
            (
                &mut self.output_tokens_details,
                &other.output_tokens_details,
            ),
        ] {
            for (k, v) in theirs {
                *mine.entry(k.clone()).or_default() += v;
            }
        }
    }
}

impl AnswerFacts {
    /// Whether the provider reported nothing.
    pub fn is_empty(&self) -> bool {
        *self == AnswerFacts::default()
    }

    /// `self`, boxed, unless it is empty.
    pub fn boxed(self) -> Option<Box<AnswerFacts>> {
        (!self.is_empty()).then(|| Box::new(self))
    }

    /// The facts of a fan-out's calls as one answer's: usage summed over the calls that reported
    /// it; each of the other values kept when every call that reported it reported the same, and
    /// left out when they differ (no single value would be true of every image).
    pub fn merge<'f>(parts: impl IntoIterator<Item = &'f AnswerFacts>) -> AnswerFacts {
        let mut out = AnswerFacts::default();
        let mut conflict = [false; 4];
        for part in parts {
            if let Some(u) = &part.usage {
                out.usage.get_or_insert_with(ImageUsage::default).add(u);
            }
            let pairs = [
                (&mut out.output_format, &part.output_format),
                (&mut out.size, &part.size),
                (&mut out.quality, &part.quality),
                (&mut out.background, &part.background),
            ];
            for ((mine, theirs), conflicted) in pairs.into_iter().zip(conflict.iter_mut()) {
                match (mine.as_ref(), theirs) {
                    (_, None) => {}
                    (None, Some(v)) if !*conflicted => *mine = Some(v.clone()),
                    (Some(m), Some(v)) if m != v => {
                        *mine = None;
                        *conflicted = true;
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(usage: serde_json::Value, size: Option<&str>, quality: &str) -> AnswerFacts {
        AnswerFacts {
            usage: ImageUsage::from_json(&usage),
            output_format: Some("png".into()),
            size: size.map(str::to_string),
            quality: Some(quality.into()),
            background: None,
        }
    }

    #[test]
    fn a_delivery_kept_before_the_count_was_recorded_asks_for_no_count() {
        // A task record written by an earlier version: its delivery has no `images`, and the
        // result it resumes to is not held to a count it never kept.
        let old: super::Delivery =
            serde_json::from_value(json!({"url": false, "mime": "image/png"})).unwrap();
        assert_eq!(old.images, 0);
        let kept = super::Delivery {
            url: true,
            mime: "image/webp".into(),
            images: 3,
        };
        let back: super::Delivery =
            serde_json::from_str(&serde_json::to_string(&kept).unwrap()).unwrap();
        assert_eq!(back, kept);
    }

    #[test]
    fn fan_out_facts_sum_usage_and_keep_only_shared_values() {
        let a = facts(
            json!({"input_tokens": 10, "output_tokens": 100, "total_tokens": 110,
                   "input_tokens_details": {"text_tokens": 4, "image_tokens": 6}}),
            Some("1024x1024"),
            "high",
        );
        let b = facts(
            json!({"input_tokens": 1, "output_tokens": 2, "total_tokens": 3,
                   "input_tokens_details": {"text_tokens": 1}, "output_tokens_details": {"image_tokens": 2}}),
            Some("1536x1024"),
            "high",
        );
        let c = facts(json!(null), Some("1024x1024"), "high");
        let merged = AnswerFacts::merge([&a, &b, &c]);
        let usage = merged.usage.as_ref().unwrap();
        assert_eq!(
            (usage.input_tokens, usage.output_tokens, usage.total_tokens),
            (11, 102, 113)
        );
        assert_eq!(usage.input_tokens_details["text_tokens"], 5);
        assert_eq!(usage.input_tokens_details["image_tokens"], 6);
        assert_eq!(usage.output_tokens_details["image_tokens"], 2);
        assert_eq!(merged.output_format.as_deref(), Some("png"));
        assert_eq!(merged.quality.as_deref(), Some("high"));
        // Sizes differ (`auto`): none is true of every image, and a third call agreeing with the
        // first does not bring one back.
        assert_eq!(merged.size, None);
        assert_eq!(merged.background, None);
        assert!(AnswerFacts::merge([]).is_empty());
    }

    #[test]
    fn usage_is_read_leniently() {
        assert_eq!(ImageUsage::from_json(&json!({})), None);
        assert_eq!(ImageUsage::from_json(&json!("x")), None);
        let u = ImageUsage::from_json(
            &json!({"total_tokens": 7, "input_tokens": -1, "input_tokens_details": {"text_tokens": "x", "image_tokens": 3}}),
        )
        .unwrap();
        assert_eq!((u.input_tokens, u.total_tokens), (0, 7));
        assert_eq!(u.input_tokens_details.len(), 1);
    }
}

/// What the caller asked to receive: all that delivery needs of the request, small enough to
/// keep with an asynchronous task so another instance can deliver its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// `response_format: url` (else `b64_json`).
    pub url: bool,
    /// The MIME type of the `output_format` asked for: a hosted image's label when its bytes
    /// are not recognised.
    pub mime: String,
    /// How many images the caller asked for (`n`): an answer with fewer is refused rather than
    /// passed on short. 0 in a record written before this was kept: not checked.
    #[serde(default)]
    pub images: u64,
}
