//! Black Forest Labs FLUX — being written (see the issue 5 brief).

use super::{NativeRequest, PollRequest, Provider};
use crate::api::error::{GatewayError, UpstreamError};
use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::images::native::{ImageAnswer, NativeTask, Poll};

pub fn image_request(
    _target: &Target,
    _req: &ImageRequest<'_>,
    _n: u64,
) -> Result<NativeRequest, GatewayError> {
    Err(GatewayError::Internal("bfl adapter not written".into()))
}

pub fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    _body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    Err(super::bad_answer(provider, "bfl adapter not written"))
}

pub fn poll_request(provider: &Provider, _task: &NativeTask) -> Result<PollRequest, UpstreamError> {
    Err(super::bad_answer(provider, "bfl adapter not written"))
}

pub fn poll_response(
    provider: &Provider,
    _headers: &http::HeaderMap,
    _body: &[u8],
) -> Result<Poll, UpstreamError> {
    Err(super::bad_answer(provider, "bfl adapter not written"))
}

pub fn error_response(provider: &Provider, status: u16, _body: &[u8]) -> UpstreamError {
    UpstreamError::from_status(&provider.name, status, format!("HTTP {status}"))
}
