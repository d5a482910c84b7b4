//! Images between the provider and the gateway: what an adapter read from a native answer
//! ([`NativeImages`]: each image as the provider gave it, a URL, base64 or raw bytes, with what
//! the provider said about it, such as a decomposed image's [`ImageLayer`]), a natively
//! asynchronous provider's task, and how the caller asked to receive them ([`Delivery`]).
//!
//! Natively asynchronous providers (DashScope Wan, Black Forest Labs FLUX, Kling): a submission
//! answers with the provider's own task, which the gateway then polls until it finishes.
//!
//! [`NativeTask`] is what the gateway keeps of such a task — serializable, because an
//! asynchronous public task stores it so that any instance can resume polling after the one that
//! submitted it died. [`Poll`] is one poll's reading; a task that failed (moderated, errored,
//! expired at the provider) is an `Err` from the adapter, classified like any provider error.

use bytes::Bytes;
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
    Images(NativeImages),
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
    Base64(String),
    /// The image bytes themselves.
    Bytes(Bytes),
}

/// One generated image and what the provider said about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeImage {
    pub data: ImageData,
    pub revised_prompt: Option<String>,
    /// Where the image sits when it is one layer of a decomposed image (Ark Seedream's layer
    /// decomposition); `None` for an ordinary image.
    pub layer: Option<ImageLayer>,
}

impl NativeImage {
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounding_box: Option<BoundingBox>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absolute: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalized: Option<Vec<i64>>,
}

/// A native image answer, translated: its images in order, and the provider's creation time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeImages {
    /// Unix seconds, when the provider reported it.
    pub created: Option<i64>,
    pub images: Vec<NativeImage>,
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
}
