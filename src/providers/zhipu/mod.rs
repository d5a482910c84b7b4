//! Zhipu AI / BigModel (智谱): rerank and CogView / GLM-Image generation, sharing one error envelope.

pub mod images;
pub mod rerank;

pub(crate) use rerank::{error_in_answer, error_response};

use crate::api::adapter::Adapters;
use crate::providers::registry::{ImageFns, Kind, RerankFns};
use crate::upstream::provider::Auth;

/// The Zhipu kind: Bearer key; images and rerank.
pub fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // CogView links to `aigc-files.bigmodel.cn` / `*.z.ai` storage.
        result_hosts: &["*.bigmodel.cn", "*.z.ai"],
        adapters: Adapters {
            images: Some(Box::new(ImageFns {
                request: images::image_request,
                response: |p, r, h, b| {
                    crate::providers::registry::images(images::image_response(p, r, h, b))
                },
                input_as_bytes: false,
                tasks: None,
            })),
            rerank: Some(Box::new(RerankFns {
                request: rerank::rerank_request,
                response: rerank::rerank_response,
            })),
            speech: None,
        },
    })
}
