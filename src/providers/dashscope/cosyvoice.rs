//! CosyVoice on Alibaba Cloud Model Studio (DashScope / 百炼) through its HTTP non-real-time
//! synthesis endpoint, `POST /api/v1/services/audio/tts/SpeechSynthesizer`
//! (docs/providers/dashscope.md, "CosyVoice").
//!
//! CosyVoice's other entry point is a WebSocket task protocol (`/api-ws/v1/inference`); the HTTP
//! endpoint serves the same models with one request, so the gateway's HTTP machinery carries it.
//! The body nests everything in `input`: `{"model", "input": {"text", "voice", "format",
//! "sample_rate", "rate"?, …native fields}}`. Two answer modes, picked by the public stream format:
//!
//! - whole (no `stream_format: sse`): one JSON document naming the audio file on DashScope's result
//!   storage (`output.audio.url`), fetched by the gateway as for Qwen-TTS's WAV answer;
//! - SSE (`X-DashScope-SSE: enable`): events each with a base64 audio piece in
//!   `output.audio.data`, the last with `output.finish_reason: "stop"`; read by Qwen-TTS's event
//!   handler, whose framing and in-band errors are the same.
//!
//! `sample_rate` is always 24 kHz (the public `pcm` rate; CosyVoice's own default is 22.05 kHz).
//! The public speed goes out as `rate` (0.5–2; 1, the default, is not sent). Errors are DashScope's
//! envelope, classified by the folder's table.

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use serde::Serialize;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::native::nested_with_extra;
use crate::common::native::NativeRequest;
use crate::stream::audio::{SpeechDecoding, Whole};
use crate::stream::sse_audio::SseAudio;
use crate::upstream::provider::Provider;

use super::speech::{url_answer, PcmEvents, SSE_HEADER};

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/api/v1/services/audio/tts/SpeechSynthesizer";

/// The families whose models are CosyVoice's (the DashScope kind routes them here).
const FAMILY: &str = "cosyvoice";

/// Asked for every format: the public `pcm` is 24 kHz, and one rate keeps the formats alike.
const SAMPLE_RATE: u32 = 24_000;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model: &'a str,
    /// `Input` plus the caller's native fields, already serialized: CosyVoice takes its options
    /// (`volume`, `pitch`…) inside `input`.
    input: Box<serde_json::value::RawValue>,
}

#[derive(Serialize)]
struct Input<'a> {
    text: &'a str,
    voice: &'a str,
    format: &'static str,
    sample_rate: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
}

// ---- translation to native -------------------------------------------------------------------

/// Whether a request is for a CosyVoice model (its family says so).
pub(crate) fn serves(req: &SpeechRequest<'_>) -> bool {
    req.caps.family == FAMILY
}

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let input = Input {
        text: req.input.as_str(),
        voice: req.voice.as_str(),
        format: output_format(req.response_format)?,
        sample_rate: SAMPLE_RATE,
        // 1 is CosyVoice's default: only another rate is sent.
        rate: (req.speed != 1.0).then_some(req.speed),
    };
    let body = SpeechBody {
        model: &target.native_model,
        input: nested_with_extra(&input, &req.passthrough)?,
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    let mut native = NativeRequest::post_json(SPEECH_PATH, body);
    if req.sse {
        native.headers.push((
            HeaderName::from_static(SSE_HEADER),
            HeaderValue::from_static("enable"),
        ));
    }
    Ok(native)
}

/// The native `format` for a public format.
fn output_format(format: &str) -> Result<&'static str, GatewayError> {
    Ok(match format {
        "mp3" => "mp3",
        "opus" => "opus",
        "wav" => "wav",
        "pcm" => "pcm",
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "cosyvoice cannot produce `{other}`"
            )))
        }
    })
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    if req.sse {
        SpeechDecoding::Decode(Box::new(SseAudio::new(provider, PcmEvents::default())))
    } else {
        SpeechDecoding::Decode(Box::new(Whole::new(provider, url_answer)))
    }
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::speech::parse;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;
    use serde_json::{json, Value};

    fn catalog() -> Catalog {
        let p = support::provider("dashscope", "sk-dash-secret");
        support::catalog(
            "cosyvoice-v3-flash",
            "cosyvoice",
            support::target(p, "cosyvoice-v3-flash"),
            2_000,
            1,
        )
    }

    fn native(body: &str) -> NativeRequest {
        let catalog = catalog();
        let req = parse(body.as_bytes(), &catalog, 3).unwrap();
        assert!(serves(&req));
        crate::providers::dashscope::speech_request(&req.model.targets[0], &req).unwrap()
    }

    #[test]
    fn builds_the_native_request() {
        let n = native(
            r#"{"model":"cosyvoice-v3-flash","input":"我家的后面有一个很大的花园。","voice":"longxiaochun_v3","response_format":"mp3","speed":2,"volume":80}"#,
        );
        assert_eq!(n.path, "/api/v1/services/audio/tts/SpeechSynthesizer");
        assert!(n.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"model":"cosyvoice-v3-flash","input":{"text":"我家的后面有一个很大的花园。","voice":"longxiaochun_v3","format":"mp3","sample_rate":24000,"rate":2.0,"volume":80}}"#
        );
    }

    #[test]
    fn maps_formats_the_default_voice_and_sse() {
        for format in ["mp3", "opus", "wav", "pcm"] {
            let n = native(&format!(
                r#"{{"model":"cosyvoice-v3-flash","input":"hi","response_format":"{format}"}}"#
            ));
            let body: Value = serde_json::from_slice(&n.body).unwrap();
            assert_eq!(
                body,
                json!({"model": "cosyvoice-v3-flash", "input": {"text": "hi", "voice": "longanyang", "format": format, "sample_rate": 24000}})
            );
        }
        let n = native(
            r#"{"model":"cosyvoice-v3-flash","input":"hi","response_format":"pcm","stream_format":"sse"}"#,
        );
        assert_eq!(n.headers.len(), 1);
        assert_eq!(n.headers[0].0.as_str(), "x-dashscope-sse");
        assert_eq!(n.headers[0].1, "enable");
        assert!(output_format("aac").is_err());
    }
}
