//! The public contract: request types, their validation, result shapes and the error model.

pub mod common;
pub mod error;
pub mod image_input;
pub mod images;
pub mod json;
pub mod rerank;
pub mod speech;
