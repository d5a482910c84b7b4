//! Wire formats several providers share: each provider that speaks one is a small profile on top.

pub(crate) mod errors;
pub(crate) mod fastapi;
pub(crate) mod google;
pub(crate) mod model_list;
pub(crate) mod multipart;
pub(crate) mod rerank;
