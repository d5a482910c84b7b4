//! The public contract of each operation: its request types and their validation, the public
//! result shapes, and the adapter trait a provider implements to serve it.

pub mod adapter;
pub(crate) mod common;
pub mod compat;
pub mod discovery;
pub mod image_edit;
pub mod images;
pub(crate) mod models;
pub mod rerank;
pub mod speech;
pub(crate) mod voices;
