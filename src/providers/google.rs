//! PLACEHOLDER: speech adapter for google (being written).

use std::sync::Arc;

use super::{NativeRequest, Provider};
use crate::api::error::{GatewayError, UpstreamError};
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::stream::audio::SpeechDecoding;

pub fn speech_request(
    _target: &Target,
    _req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    Err(GatewayError::Internal("not written yet".into()))
}

pub fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    SpeechDecoding::raw_audio(provider, req.sse)
}

pub fn error_response(provider: &Provider, status: u16, _body: &[u8]) -> UpstreamError {
    UpstreamError::from_status(&provider.name, status, format!("HTTP {status}"))
}
