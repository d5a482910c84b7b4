//! Placeholder while the adapter is being written: every call is refused as an internal error.

use super::{NativeRequest, Provider};
use crate::api::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;

pub fn rerank_request(
    _target: &Target,
    _req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    Err(GatewayError::Internal("adapter not written".into()))
}

pub fn rerank_response<'r>(
    provider: &Provider,
    _req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    _body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    Err(UpstreamError::new(
        UpstreamErrorKind::BadResponse,
        &provider.name,
        "adapter not written",
    ))
}

pub fn error_response(provider: &Provider, status: u16, _body: &[u8]) -> UpstreamError {
    UpstreamError::from_status(&provider.name, status, "adapter not written")
}
