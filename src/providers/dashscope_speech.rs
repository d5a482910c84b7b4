//! PLACEHOLDER: speech adapter for dashscope_speech (being written).

use std::sync::Arc;

use super::{NativeRequest, Provider};
use crate::api::error::GatewayError;
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
