//! Placeholder while the local reranker is being written.

use bytes::Bytes;

use super::Provider;
use crate::api::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::api::rerank::{RerankRequest, RerankResult};

pub fn rerank(_req: &RerankRequest<'_>) -> Result<Bytes, GatewayError> {
    Err(GatewayError::Internal("local reranker not written".into()))
}

pub fn rerank_response<'r>(
    provider: &Provider,
    _req: &'r RerankRequest<'r>,
    _body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    Err(UpstreamError::new(
        UpstreamErrorKind::BadResponse,
        &provider.name,
        "not written",
    ))
}
