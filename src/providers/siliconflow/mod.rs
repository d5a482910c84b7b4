//! SiliconFlow (硅基流动): rerank and image generation, sharing one error envelope.

pub mod images;
pub mod rerank;

pub use rerank::error_response;

use crate::api::adapter::Adapters;
use crate::providers::registry::{ImageFns, Kind, RerankFns};
use crate::upstream::provider::Auth;

/// The SiliconFlow kind: Bearer key; images and rerank.
pub fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // SiliconFlow links to its OSS buckets (`sc-maas.oss-cn-shanghai.aliyuncs.com`).
        result_hosts: &["*.aliyuncs.com", "*.siliconflow.cn"],
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
