//! OpenAI speech (`/audio/speech`); images are in `images.rs`, the error mapping in `mod.rs`.
//!
//! The public API follows OpenAI's conventions, so translation is mostly renaming and filling in
//! defaults: speech audio and SSE pass through untouched; image answers gain the gateway's
//! `task_id`/`task_status`.

use serde::Serialize;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/audio/speech";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model: &'a str,
    input: &'a str,
    voice: Voice<'a>,
    response_format: &'a str,
    speed: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_format: Option<&'a str>,
}

/// A built-in voice by name, or a custom voice by id (`{"id": "voice_…"}`).
#[derive(Serialize)]
#[serde(untagged)]
enum Voice<'a> {
    Name(&'a str),
    Custom { id: &'a str },
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = SpeechBody {
        model: &target.native_model,
        input: req.input.as_str(),
        voice: if req.custom_voice {
            Voice::Custom {
                id: req.voice.as_str(),
            }
        } else {
            Voice::Name(req.voice.as_str())
        },
        response_format: req.response_format,
        speed: req.speed,
        instructions: req.instructions.as_ref().map(|s| s.as_str()),
        stream_format: req.sse.then_some("sse"),
    };
    Ok(NativeRequest::post_json(
        SPEECH_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}
