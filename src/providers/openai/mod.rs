//! OpenAI: speech and image generation, sharing one error envelope.

pub mod images;
pub mod speech;

pub use speech::error_response;

use crate::api::adapter::Adapters;
use crate::providers::registry::{ImageFns, Kind, SpeechFns};
use crate::upstream::provider::Auth;

/// The OpenAI kind: Bearer key; speech (the body is the audio) and images.
pub fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // DALL·E answers link to Azure blob storage (`oaidalleapiprodscus.blob.core.windows.net`).
        result_hosts: &["*.blob.core.windows.net"],
        adapters: Adapters {
            speech: Some(Box::new(SpeechFns {
                request: speech::speech_request,
                decoding: None,
            })),
            images: Some(Box::new(ImageFns {
                request: images::image_request,
                response: |p, r, h, b| {
                    crate::providers::registry::images(images::image_response(p, r, h, b))
                },
                input_as_bytes: true,
                tasks: None,
            })),
            rerank: None,
        },
    })
}
