//! Azure OpenAI speech: OpenAI's body at the deployment's (or v1) `audio/speech` URL.

use super::operation_path;
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::native::NativeRequest;

const SPEECH: &str = "audio/speech";

pub(crate) fn speech_request(
    api_version: Option<&str>,
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    if req.custom_voice {
        // OpenAI's custom voices live in an OpenAI organisation; no Azure source says a
        // deployment takes one, so it is refused rather than sent.
        return Err(GatewayError::field(
            "voice",
            format!(
                "model {} is served by Azure OpenAI, which takes a voice name (a string), not a custom voice",
                req.model.name
            ),
        ));
    }
    // Same body as OpenAI's (the deployment name stands in for the model).
    let mut native = crate::providers::openai::speech::speech_request(target, req)?;
    native.path = operation_path(api_version, target, SPEECH);
    Ok(native)
}
