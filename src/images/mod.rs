//! Image results between the provider and the caller.
//!
//! Adapters turn a native answer into [`NativeImages`]: each image as the provider gave it (a URL,
//! base64 or raw bytes). [`deliver`] then gives the caller what `response_format` asked for,
//! whatever the provider answered: a provider URL becomes base64 by downloading it (only from that
//! provider's result hosts, size-capped, on the provider's timeouts), and base64 or bytes become a
//! URL by storing the image in the [`store::FileStore`] and minting a link to
//! `GET /api/v1/files/{id}`.

pub mod deliver;
pub mod native;
pub mod poll;
pub mod redis_conn;
pub mod redis_store;
pub mod store;
pub mod tasks;

use bytes::Bytes;

pub use deliver::{deliver, HostedFiles};

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
}

impl NativeImage {
    pub fn new(data: ImageData) -> NativeImage {
        NativeImage {
            data,
            revised_prompt: None,
        }
    }
}

/// A native image answer, translated: its images in order, and the provider's creation time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeImages {
    /// Unix seconds, when the provider reported it.
    pub created: Option<i64>,
    pub images: Vec<NativeImage>,
}
