//! SiliconFlow (硅基流动): rerank and image generation, sharing one error envelope.

pub mod images;
pub mod rerank;

pub use rerank::error_response;
