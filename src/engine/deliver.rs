//! Giving the caller each image in the `response_format` it asked for, whatever the provider
//! answered, and building the public result.
//!
//! | provider gave | caller asked `url`            | caller asked `b64_json`                  |
//! |---------------|-------------------------------|------------------------------------------|
//! | URL           | the provider's URL unchanged  | downloaded from the provider's hosts     |
//! | base64        | hosted by the gateway         | unchanged                                |
//! | bytes         | hosted by the gateway         | encoded                                  |
//!
//! Downloads and stores run concurrently; any failure fails the request (a result with fewer
//! images than asked would be a silent change).

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures_util::future::try_join_all;

use crate::common::images::Delivery;
use crate::store::files::new_id;

use crate::store::files::FileStore;

use crate::api::images::{now, ImageItem, ImageRequest, ImageResult};
use crate::common::error::GatewayError;
use crate::common::image_input::sniff;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::images::{Base64Text, ImageData};
use crate::store::files::StoredFile;
use crate::upstream::exchange::Upstream;
use crate::upstream::provider::bad_answer;
use crate::upstream::provider::Provider;

/// Where hosted images go and how long they stay.
pub struct HostedFiles {
    pub store: Box<dyn FileStore>,
    pub ttl: Duration,
}

impl HostedFiles {
    /// Store `bytes` and return the public link to them under `base` (scheme and host).
    pub async fn host(
        &self,
        bytes: Bytes,
        content_type: &str,
        base: &str,
    ) -> Result<String, GatewayError> {
        let id = new_id();
        let file = StoredFile {
            content_type: content_type.to_string(),
            bytes,
        };
        self.store.put(&id, file, self.ttl).await?;
        Ok(format!("{base}/api/v1/files/{id}"))
    }
}

/// How the caller asked `req`'s images to be delivered.
pub(crate) fn delivery_of(req: &ImageRequest<'_>) -> Delivery {
    Delivery {
        url: req.response_format == "url",
        mime: req.output_mime().to_string(),
        images: req.n,
    }
}

/// The public result for `native`, each image converted as `delivery` says.
pub(crate) async fn deliver(
    upstream: &Upstream,
    files: &HostedFiles,
    provider: &Provider,
    delivery: &Delivery,
    native: NativeImages,
    base: &str,
) -> Result<ImageResult, GatewayError> {
    if native.images.is_empty() {
        return Err(GatewayError::Upstream(bad_answer(
            provider,
            "image answer carries no image",
        )));
    }
    // A short set is never passed on as if it were the whole (the caller asked for `n`, and a
    // provider's filter may drop some silently). More than asked is left alone: a layer
    // decomposition answers one request with several layers.
    let got = native.images.len() as u64;
    if got < delivery.images {
        return Err(GatewayError::Upstream(bad_answer(
            provider,
            format!("returned {got} of the {} images asked for", delivery.images),
        )));
    }
    let items = native
        .images
        .into_iter()
        .map(|image| convert(upstream, files, provider, delivery, image, base));
    let data = try_join_all(items).await?;
    Ok(ImageResult {
        created: native.created.unwrap_or_else(now),
        data,
        task_id: uuid::Uuid::new_v4().to_string(),
        task_status: "succeed",
        error: None,
        facts: native.facts,
        served: Vec::new(),
    })
}

async fn convert(
    upstream: &Upstream,
    files: &HostedFiles,
    provider: &Provider,
    delivery: &Delivery,
    image: NativeImage,
    base: &str,
) -> Result<ImageItem, GatewayError> {
    let want_url = delivery.url;
    let NativeImage {
        data,
        revised_prompt,
        layer,
    } = image;
    let item = |url: Option<String>, b64: Option<Base64Text>| ImageItem {
        url,
        b64_json: b64,
        revised_prompt: revised_prompt.clone(),
        layer: layer.clone(),
    };
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(match (data, want_url) {
        (ImageData::Url(u), true) => item(Some(u), None),
        (ImageData::Base64(s), false) => item(None, Some(s)),
        (ImageData::Bytes(bytes), false) => item(None, Some(b64.encode(&bytes).into())),
        (ImageData::Url(u), false) => {
            // Boxed: a download is a big future (a connection, its body read and release), and
            // inline it would make every image's conversion as big, links passed through too.
            let bytes = Box::pin(download(upstream, provider, &u)).await?;
            item(None, Some(b64.encode(&bytes).into()))
        }
        (ImageData::Base64(s), true) => {
            let bytes = b64.decode(s.as_str().as_bytes()).map_err(|e| {
                GatewayError::Upstream(bad_answer(provider, format!("image is not base64: {e}")))
            })?;
            let url = host(files, Bytes::from(bytes), &delivery.mime, base).await?;
            item(Some(url), None)
        }
        (ImageData::Bytes(bytes), true) => {
            let url = host(files, bytes, &delivery.mime, base).await?;
            item(Some(url), None)
        }
    })
}

/// The image at a provider's `url`, whole.
async fn download(
    upstream: &Upstream,
    provider: &Provider,
    url: &str,
) -> Result<Bytes, GatewayError> {
    let resp = upstream
        .fetch(provider, url)
        .await
        .map_err(GatewayError::Upstream)?;
    resp.read_all(provider.max_response_bytes)
        .await
        .map_err(GatewayError::Upstream)
}

/// Host an image, labelled by what its bytes are (else by the format the caller asked for).
async fn host(
    files: &HostedFiles,
    bytes: Bytes,
    fallback_mime: &str,
    base: &str,
) -> Result<String, GatewayError> {
    let content_type = sniff(&bytes).unwrap_or(fallback_mime);
    files.host(bytes, content_type, base).await
}
