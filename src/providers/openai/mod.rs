//! OpenAI: speech and image generation, sharing one error envelope.

pub mod images;
pub mod speech;

pub use speech::error_response;
