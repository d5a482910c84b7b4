//! Alibaba Cloud Model Studio (DashScope / 百炼): text rerank, Qwen-TTS speech and Wan images, all
//! answering errors in one `{"request_id","code","message"}` envelope.

pub mod images;
pub mod rerank;
pub mod speech;

pub(crate) use rerank::{code_string, error_response, native_code};
