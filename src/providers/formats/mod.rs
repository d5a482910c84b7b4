//! Wire formats several providers share: each provider that speaks one is a small profile on top.

pub mod errors;
pub mod fastapi;
pub mod google;
pub mod model_list;
pub mod multipart;
pub mod rerank;
