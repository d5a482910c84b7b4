//! Zhipu AI / BigModel (智谱): rerank and CogView / GLM-Image generation, sharing one error envelope.

pub mod images;
pub mod rerank;

pub(crate) use rerank::{error_in_answer, error_response};
