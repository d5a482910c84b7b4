//! Wire formats several providers share: each provider that speaks one is a small profile on top.

// AWS credentials, SigV4 and error bodies (issue 30).
pub(crate) mod aws;
pub(crate) mod errors;
pub(crate) mod fastapi;
pub(crate) mod google;
pub(crate) mod model_list;
pub(crate) mod multipart;
pub(crate) mod rerank;
// Tencent Cloud API 3.0: TC3 credentials, requests and the Response envelope (issue 30).
pub(crate) mod tencent;
