//! Alibaba Cloud Model Studio (DashScope / 百炼): text rerank, Qwen-TTS speech and Wan images, all
//! answering errors in one `{"request_id","code","message"}` envelope.

pub mod images;
pub mod rerank;
pub mod speech;

pub(crate) use rerank::{code_string, error_response, native_code};

use crate::api::adapter::Adapters;
use crate::common::native::PollRequest;
use crate::providers::registry::{ImageFns, Kind, RerankFns, SpeechFns, TaskFns};
use crate::upstream::provider::Auth;

/// The DashScope kind: Bearer key; speech, images (run as tasks) and rerank.
pub fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // Qwen-TTS answers with an OSS URL (`dashscope-result-*.oss-*.aliyuncs.com`).
        result_hosts: &["*.aliyuncs.com"],
        adapters: Adapters {
            speech: Some(Box::new(SpeechFns {
                request: speech::speech_request,
                decoding: Some(speech::speech_decoding),
            })),
            images: Some(Box::new(ImageFns {
                request: images::image_request,
                response: images::image_response,
                input_as_bytes: false,
                tasks: Some(TaskFns {
                    poll_request: |_, task| Ok(PollRequest::Api(images::poll_request(task))),
                    poll_response: images::poll_response,
                }),
            })),
            rerank: Some(Box::new(RerankFns {
                request: rerank::rerank_request,
                response: rerank::rerank_response,
            })),
        },
    })
}
