//! (being written) siliconflow_images image adapter.

use super::{NativeRequest, Provider};
use crate::api::error::{GatewayError, UpstreamError};
use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::images::NativeImages;

pub fn image_request(
    target: &Target,
    _req: &ImageRequest<'_>,
    _n: u64,
) -> Result<NativeRequest, GatewayError> {
    Err(GatewayError::Internal(format!("{} images not built yet", target.provider.name)))
}

pub fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    _body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    Err(super::bad_answer(provider, "not built yet"))
}
