//! DashScope Wan — being written (see the issue 5 brief).

use super::{NativeRequest, Provider};
use crate::api::error::{GatewayError, UpstreamError};
use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::images::native::{ImageAnswer, NativeTask, Poll};

pub fn image_request(
    _target: &Target,
    _req: &ImageRequest<'_>,
    _n: u64,
) -> Result<NativeRequest, GatewayError> {
    Err(GatewayError::Internal("dashscope adapter not written".into()))
}

pub fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    _body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    Err(super::bad_answer(provider, "dashscope adapter not written"))
}

pub fn poll_request(task: &NativeTask) -> NativeRequest {
    NativeRequest::get(format!("/api/v1/tasks/{}", task.id))
}

pub fn poll_response(
    provider: &Provider,
    _headers: &http::HeaderMap,
    _body: &[u8],
) -> Result<Poll, UpstreamError> {
    Err(super::bad_answer(provider, "dashscope adapter not written"))
}
