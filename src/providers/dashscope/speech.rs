//! Alibaba Cloud Model Studio (DashScope / 百炼) Qwen-TTS speech
//! (`POST /api/v1/services/aigc/multimodal-generation/generation`). CosyVoice models (their own
//! endpoint and body) are routed to `cosyvoice.rs` by the kind (`mod.rs`); it reuses this file's
//! answer readers.
//!
//! The native request nests the text: `{"model", "input": {"text", "voice", …}}`, and the family's
//! native options (`language_type`, `optimize_instructions`) live inside `input` too, as does the
//! public `instructions` for the models that take it (`qwen3-tts-instruct-flash`; validation refuses
//! it for the others). Qwen-TTS has two answer modes, picked
//! by the public format:
//!
//! - `wav`: one JSON document naming a WAV file on DashScope's result storage
//!   (`output.audio.url`). The decoder returns [`Finished::Fetch`]; the gateway downloads the file
//!   itself (without the provider key, only from allowed result hosts) and streams it on.
//! - `pcm`: requested with `X-DashScope-SSE: enable`. Each SSE event's JSON carries a base64 piece
//!   of 24 kHz 16-bit mono PCM in `output.audio.data`; `output.finish_reason` is `"stop"` only on
//!   the last event. A stream that ends without that marker is an error, never a short success.
//!
//! Errors use DashScope's one envelope `{"request_id","code","message"}`, normally with a 4xx/5xx
//! status (classified by [`crate::providers::dashscope::error_response`], shared with rerank and
//! images) but sometimes inside a 200 answer or as an SSE event (`event:error`, with a
//! `:HTTP_STATUS/…` comment line), which this module classifies the same way.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::common::error::GatewayError;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::UpstreamError;
use crate::common::native::nested_with_extra;
use crate::common::native::NativeRequest;
use crate::providers::billed_tokens;
use crate::providers::dashscope::error_response;
use crate::providers::formats::errors::UNKNOWN_CODE_STATUS;
use crate::stream::audio::{base64_audio, Finished, SpeechDecoding, SpeechUsage, Whole};
use crate::stream::sse::data_of;
use crate::stream::sse_audio::{EventHandler, SseAudio};
use crate::upstream::provider::bad_answer;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/api/v1/services/aigc/multimodal-generation/generation";

/// Asks DashScope to answer as Server-Sent Events.
pub(super) const SSE_HEADER: &str = "x-dashscope-sse";

/// The `finish_reason` of the last event of a complete stream.
const STOP: &str = "stop";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model: &'a str,
    /// `Input` plus the caller's pass-through fields, already serialized: Qwen-TTS takes its
    /// native options (`language_type`) inside `input`, not at the top level.
    input: Box<RawValue>,
}

#[derive(Serialize)]
struct Input<'a> {
    text: &'a str,
    voice: &'a str,
    /// Natural-language control of tone, pace and emotion (instruct models only).
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
}

/// A success answer, one SSE event's data, or (in a 200 or an error event) an error envelope: all
/// are read through this one shape.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default, borrow)]
    output: Option<Output<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Output<'a> {
    /// `null` (or the string `"null"`) until the last event, which says `"stop"`.
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    audio: Option<Audio<'a>>,
}

#[derive(Deserialize)]
struct Audio<'a> {
    #[serde(default, borrow)]
    url: Option<Cow<'a, str>>,
    /// Base64 PCM in streamed events (often empty); empty in the URL answer.
    #[serde(default, borrow)]
    data: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<f64>,
    #[serde(default)]
    output_tokens: Option<f64>,
}

// ---- translation to native -------------------------------------------------------------------

/// Which of Qwen-TTS's two answer modes a request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// JSON naming a WAV file.
    WavUrl,
    /// SSE events carrying base64 PCM.
    PcmStream,
}

fn mode(format: &str) -> Option<Mode> {
    match format {
        "wav" => Some(Mode::WavUrl),
        "pcm" => Some(Mode::PcmStream),
        _ => None,
    }
}

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    // Validation only lets the family's formats through when the caller names one; a format that
    // still arrives here (e.g. a default the family cannot produce) is refused rather than served
    // as WAV under another format's Content-Type.
    let Some(mode) = mode(req.response_format) else {
        return Err(GatewayError::field(
            "response_format",
            format!(
                "model {} cannot produce `{}`; it offers: {}",
                req.model.name,
                req.response_format,
                req.caps.formats.join(", ")
            ),
        ));
    };
    let input = Input {
        text: req.input.as_str(),
        voice: req.voice.as_str(),
        instructions: req.instructions.as_ref().map(|i| i.as_str()),
    };
    let input = nested_with_extra(&input, &req.passthrough)?;
    let body = SpeechBody {
        model: &target.native_model,
        input,
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    let mut native = NativeRequest::post_json(SPEECH_PATH, body);
    if mode == Mode::PcmStream {
        native.headers.push((
            HeaderName::from_static(SSE_HEADER),
            HeaderValue::from_static("enable"),
        ));
    }
    Ok(native)
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // `speech_request` refused any other format, so nothing was sent for one.
    match mode(req.response_format) {
        Some(Mode::WavUrl) => SpeechDecoding::Decode(Box::new(Whole::new(provider, url_answer))),
        Some(Mode::PcmStream) | None => {
            SpeechDecoding::Decode(Box::new(SseAudio::new(provider, PcmEvents::default())))
        }
    }
}

/// The non-streamed answer: the URL of the audio file, or an error reported inside the 200.
pub(super) fn url_answer(
    provider: &Provider,
    body: &[u8],
    _out: &mut Vec<Bytes>,
) -> Result<Finished, UpstreamError> {
    let answer: Answer<'_> = serde_json::from_slice(body).map_err(|e| not_json(provider, &e))?;
    if let Some(code) = code_text(answer.code.as_ref()) {
        return Err(in_band_error(provider, None, &code, body));
    }
    let url = answer
        .output
        .and_then(|o| o.audio)
        .and_then(|a| a.url)
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| bad_answer(provider, "speech answer names no output.audio.url"))?;
    Ok(Finished::Fetch(url.trim().to_string()))
}

/// The streamed answer: SSE events, each with a base64 audio piece (PCM for Qwen-TTS; the asked
/// format for CosyVoice).
#[derive(Default)]
pub(super) struct PcmEvents {
    /// Whether the `"stop"` event arrived.
    stopped: bool,
    usage: SpeechUsage,
}

impl EventHandler for PcmEvents {
    fn event(
        &mut self,
        provider: &Provider,
        event: &[u8],
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError> {
        // Comments, `id:`-only events and keep-alives carry no data.
        let Some(data) = data_of(event).filter(|d| !d.trim().is_empty()) else {
            return Ok(());
        };
        let fields = EventFields::of(event);
        let answer: Answer<'_> = serde_json::from_str(&data).map_err(|e| not_json(provider, &e))?;
        if let Some(code) = code_text(answer.code.as_ref()) {
            return Err(in_band_error(
                provider,
                fields.status,
                &code,
                data.as_bytes(),
            ));
        }
        if fields.error {
            // An error event without a code: still an error, classified by its status if any.
            let status = fields.status.unwrap_or(UNKNOWN_CODE_STATUS);
            return Err(error_response(provider, status, data.as_bytes()));
        }
        if let Some(u) = answer.usage {
            self.usage = SpeechUsage {
                input_tokens: billed_tokens(u.input_tokens),
                output_tokens: billed_tokens(u.output_tokens),
            };
        }
        let Some(output) = answer.output else {
            return Ok(());
        };
        if output.finish_reason.as_deref() == Some(STOP) {
            self.stopped = true;
        }
        if let Some(b64) = output.audio.and_then(|a| a.data) {
            if !b64.trim().is_empty() {
                let pcm = base64_audio(provider, &b64)?;
                if !pcm.is_empty() {
                    out.push(pcm);
                }
            }
        }
        Ok(())
    }

    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError> {
        if !self.stopped {
            return Err(bad_answer(
                provider,
                "speech stream ended before its \"stop\" event",
            ));
        }
        Ok(Finished::Done(self.usage))
    }
}

/// The SSE fields of one event besides `data`.
struct EventFields {
    /// `event:error`.
    error: bool,
    /// The status DashScope states in a `:HTTP_STATUS/400` comment line.
    status: Option<u16>,
}

impl EventFields {
    fn of(event: &[u8]) -> EventFields {
        let mut fields = EventFields {
            error: false,
            status: None,
        };
        let text = String::from_utf8_lossy(event);
        for line in text.lines() {
            if let Some(kind) = line.strip_prefix("event:") {
                fields.error = kind.trim().eq_ignore_ascii_case("error");
            } else if let Some(status) = line.strip_prefix(":HTTP_STATUS/") {
                fields.status = status.trim().parse().ok();
            }
        }
        fields
    }
}

// ---- error mapping ---------------------------------------------------------------------------

/// An error DashScope reported inside a 200 answer or an SSE event. It is classified by the
/// folder's code table, as if it had come with `status` (an SSE event's own `:HTTP_STATUS`, when that
/// says error) or with the status DashScope documents for `code`.
fn in_band_error(
    provider: &Provider,
    status: Option<u16>,
    code: &str,
    body: &[u8],
) -> UpstreamError {
    let status = status.filter(|s| *s >= 400).unwrap_or_else(|| {
        crate::providers::dashscope::native_code(code)
            .map_or(UNKNOWN_CODE_STATUS, |(_, status)| status)
    });
    error_response(provider, status, body)
}

/// A non-empty error code as text (DashScope sends strings; numbers are tolerated).
fn code_text(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn not_json(provider: &Provider, e: &serde_json::Error) -> UpstreamError {
    bad_answer(
        provider,
        provider.redact(&format!("speech answer is not the expected JSON: {e}")),
    )
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use base64::Engine;

    use super::*;
    use crate::catalog::Catalog;
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;
    use crate::stream::audio::AudioDecoder;

    const KEY: &str = "sk-dash-secret-123456";

    fn provider() -> Arc<Provider> {
        support::provider("dashscope", KEY)
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "qwen3-tts-flash");
        support::catalog("qwen3-tts-flash", "qwen-tts", target, 600, 0)
    }

    fn parse<'a>(catalog: &Catalog, body: &'a [u8]) -> SpeechRequest<'a> {
        crate::api::speech::parse(body, catalog, 3).unwrap()
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// Feed `stream` to a fresh decoder in pieces of `cut` bytes; the audio and how it ended.
    fn decode(stream: &[u8], cut: usize) -> (Vec<u8>, Result<Finished, UpstreamError>) {
        let mut d = SseAudio::new(&provider(), PcmEvents::default());
        let mut out = Vec::new();
        for piece in stream.chunks(cut) {
            if let Err(e) = d.push(&Bytes::copy_from_slice(piece), &mut out) {
                return (out.concat(), Err(e));
            }
        }
        let end = d.finish(&mut out);
        (out.concat(), end)
    }

    fn event(id: usize, data: &serde_json::Value) -> String {
        format!("id:{id}\nevent:result\n:HTTP_STATUS/200\ndata:{data}\n\n")
    }

    #[test]
    fn builds_wav_request_with_language_type_inside_input() {
        let catalog = catalog();
        let req = parse(
            &catalog,
            r#"{"model":"qwen3-tts-flash","input":"你好","voice":"Ethan","response_format":"wav","language_type":"Chinese"}"#
                .as_bytes(),
        );
        let native = speech_request(&req.model.targets[0], &req).unwrap();
        assert_eq!(native.path, SPEECH_PATH);
        assert_eq!(native.content_type, "application/json");
        assert!(native.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            r#"{"model":"qwen3-tts-flash","input":{"text":"你好","voice":"Ethan","language_type":"Chinese"}}"#
        );
    }

    #[test]
    fn instructions_go_inside_input_for_the_instruct_family() {
        let target = support::target(provider(), "qwen3-tts-instruct-flash");
        let instruct = support::catalog(
            "qwen3-tts-instruct-flash",
            "qwen-tts-instruct",
            target,
            600,
            0,
        );
        let req = parse(
            &instruct,
            r#"{"model":"qwen3-tts-instruct-flash","input":"hi","response_format":"wav","instructions":"whisper, slowly","optimize_instructions":true}"#
                .as_bytes(),
        );
        let native = speech_request(&req.model.targets[0], &req).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&native.body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"model": "qwen3-tts-instruct-flash", "input": {
                "text": "hi", "voice": "Cherry", "instructions": "whisper, slowly",
                "optimize_instructions": true}})
        );
        // The plain family refuses both.
        let plain = catalog();
        let refused = crate::api::speech::parse(
            br#"{"model":"qwen3-tts-flash","input":"hi","instructions":"x","optimize_instructions":true}"#,
            &plain,
            3,
        );
        match refused {
            Err(GatewayError::Validation(v)) => {
                assert!(v.has("instructions"));
                assert!(v.has("optimize_instructions"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pcm_asks_for_sse_with_the_default_voice() {
        let catalog = catalog();
        for stream_format in ["audio", "sse"] {
            let body = format!(
                r#"{{"model":"qwen3-tts-flash","input":"hi","response_format":"pcm","stream_format":"{stream_format}"}}"#
            );
            let req = parse(&catalog, body.as_bytes());
            let native = speech_request(&req.model.targets[0], &req).unwrap();
            assert_eq!(native.headers.len(), 1);
            assert_eq!(native.headers[0].0.as_str(), "x-dashscope-sse");
            assert_eq!(native.headers[0].1, "enable");
            let json: serde_json::Value = serde_json::from_slice(&native.body).unwrap();
            assert_eq!(
                json,
                serde_json::json!({"model": "qwen3-tts-flash", "input": {"text": "hi", "voice": "Cherry"}})
            );
        }
    }

    #[test]
    fn refuses_a_format_the_family_cannot_produce() {
        let catalog = catalog();
        let mut req = parse(
            &catalog,
            br#"{"model":"qwen3-tts-flash","input":"hi","response_format":"wav"}"#,
        );
        // Validation keeps other formats out when the caller names one; this guards against one
        // that reaches the adapter anyway (such as an unchecked default).
        req.response_format = "mp3";
        match speech_request(&req.model.targets[0], &req) {
            Err(GatewayError::Validation(v)) => assert!(v.has("response_format")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn url_answer_names_the_file() {
        let p = provider();
        let body = br#"{"request_id":"r","output":{"finish_reason":"stop","audio":{"url":"https://dashscope-result-bj.oss-cn-beijing.aliyuncs.com/a.wav?Expires=1&Signature=x%2By","data":"","id":"audio_1","expires_at":1700000000}},"usage":{"input_tokens":14,"output_tokens":150,"characters":5}}"#;
        let mut d = Whole::new(&p, url_answer);
        let mut out = Vec::new();
        for piece in body.chunks(7) {
            d.push(&Bytes::copy_from_slice(piece), &mut out).unwrap();
        }
        assert_eq!(
            d.finish(&mut out).unwrap(),
            Finished::Fetch(
                "https://dashscope-result-bj.oss-cn-beijing.aliyuncs.com/a.wav?Expires=1&Signature=x%2By"
                    .into()
            )
        );
        assert!(out.is_empty());

        let e = url_answer(
            &p,
            br#"{"output":{"audio":{"url":"","data":""}}}"#,
            &mut out,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        let e = url_answer(&p, b"<html>", &mut out).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn errors_inside_a_200_are_classified_by_code() {
        let p = provider();
        let mut out = Vec::new();
        let cases: [(&[u8], UpstreamErrorKind, bool); 6] = [
            (
                br#"{"request_id":"r","code":"InvalidParameter","message":"Voice Bogus is not supported"}"#,
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                br#"{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded"}"#,
                UpstreamErrorKind::RateLimited,
                true,
            ),
            (
                br#"{"code":"DataInspectionFailed","message":"Input data may contain inappropriate content."}"#,
                UpstreamErrorKind::ContentPolicy,
                false,
            ),
            (
                br#"{"code":"Arrearage","message":"Access denied, please make sure your account is in good standing."}"#,
                UpstreamErrorKind::Failure,
                false,
            ),
            (
                br#"{"code":"InternalError.Algo","message":"algorithm failed"}"#,
                UpstreamErrorKind::Failure,
                true,
            ),
            (
                br#"{"code":"SomethingNew","message":"?"}"#,
                UpstreamErrorKind::Failure,
                true,
            ),
        ];
        for (body, kind, retryable) in cases {
            let e = url_answer(&p, body, &mut out).unwrap_err();
            let what = String::from_utf8_lossy(body);
            assert_eq!(e.kind, kind, "{what}");
            assert_eq!(e.retryable(), retryable, "{what}");
        }
        let e = url_answer(
            &p,
            br#"{"code":"InvalidApiKey","message":"Invalid API-key provided: sk-dash-secret-123456"}"#,
            &mut out,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);
    }

    #[test]
    fn http_errors_use_the_shared_envelope() {
        // Non-2xx answers are routed to the folder's `error_response` by the dispatch.
        let p = provider();
        let e = error_response(
            &p,
            400,
            br#"{"request_id":"r","code":"InvalidParameter","message":"The text is too long"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "The text is too long");
        let e = error_response(&p, 503, b"");
        assert_eq!(e.message, "HTTP 503");
        assert!(e.retryable());
    }

    #[test]
    fn decodes_events_split_anywhere() {
        let a: Vec<u8> = (0..=255).collect();
        let b: Vec<u8> = (0..100).map(|i| i * 2).collect();
        let mut stream = String::new();
        stream.push_str(&event(
            1,
            &serde_json::json!({"output": {"finish_reason": "null", "audio": {"data": b64(&a), "url": "", "id": "x"}}, "usage": {"input_tokens": 14, "output_tokens": 3}, "request_id": "r"}),
        ));
        // An event with no audio, CRLF line ends, and `finish_reason` as JSON null.
        stream.push_str(
            &event(
                2,
                &serde_json::json!({"output": {"finish_reason": null, "audio": {"data": ""}}}),
            )
            .replace('\n', "\r\n"),
        );
        stream.push_str(": keep-alive\n\n");
        stream.push_str(&event(
            3,
            &serde_json::json!({"output": {"finish_reason": "null", "audio": {"data": b64(&b)}}, "usage": {"input_tokens": 14, "output_tokens": 9}}),
        ));
        stream.push_str(&event(
            4,
            &serde_json::json!({"output": {"finish_reason": "stop", "audio": {"data": "", "url": "https://x.aliyuncs.com/a.wav"}}, "usage": {"input_tokens": 14, "output_tokens": 11}}),
        ));
        let want = [a.clone(), b.clone()].concat();
        for cut in 1..stream.len() {
            let (audio, end) = decode(stream.as_bytes(), cut);
            assert_eq!(audio, want, "cut {cut}");
            assert_eq!(
                end.unwrap(),
                Finished::Done(SpeechUsage {
                    input_tokens: Some(14),
                    output_tokens: Some(11)
                }),
                "cut {cut}"
            );
        }
        // The last event without its blank line still ends the stream properly.
        let trimmed = stream.trim_end();
        let (audio, end) = decode(trimmed.as_bytes(), 64);
        assert_eq!(audio, want);
        assert!(matches!(end, Ok(Finished::Done(_))));
    }

    #[test]
    fn stream_without_stop_is_an_error() {
        let stream = event(
            1,
            &serde_json::json!({"output": {"finish_reason": "null", "audio": {"data": b64(b"pcm!")}}}),
        );
        let (audio, end) = decode(stream.as_bytes(), 5);
        assert_eq!(audio, b"pcm!");
        assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn error_events_are_classified() {
        let audio = event(
            1,
            &serde_json::json!({"output": {"finish_reason": "null", "audio": {"data": b64(b"abcd")}}}),
        );
        let cases: [(String, UpstreamErrorKind, bool); 4] = [
            // DashScope's error event, with its status comment.
            (
                "id:2\nevent:error\n:HTTP_STATUS/400\ndata:{\"code\":\"InvalidParameter\",\"message\":\"bad voice\",\"request_id\":\"r\"}\n\n".into(),
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                "id:2\nevent:error\n:HTTP_STATUS/429\ndata:{\"code\":\"Throttling.RateQuota\",\"message\":\"slow down\"}\n\n".into(),
                UpstreamErrorKind::RateLimited,
                true,
            ),
            // A code without an error status line: the code's documented status decides.
            (
                "data:{\"code\":\"Arrearage\",\"message\":\"pay up\"}\n\n".into(),
                UpstreamErrorKind::Failure,
                false,
            ),
            // An error event without a code.
            (
                "event:error\ndata:{\"message\":\"boom\"}\n\n".into(),
                UpstreamErrorKind::Failure,
                true,
            ),
        ];
        for (error, kind, retryable) in cases {
            let stream = format!("{audio}{error}");
            for cut in [1, 7, stream.len()] {
                let (got, end) = decode(stream.as_bytes(), cut);
                assert_eq!(got, b"abcd", "{error}");
                let e = end.unwrap_err();
                assert_eq!(e.kind, kind, "{error}");
                assert_eq!(e.retryable(), retryable, "{error}");
            }
        }
        // The provider key never reaches the message.
        let stream = "event:error\n:HTTP_STATUS/401\ndata:{\"code\":\"InvalidApiKey\",\"message\":\"Invalid API-key provided: sk-dash-secret-123456\"}\n\n";
        let e = decode(stream.as_bytes(), 3).1.unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);
    }

    #[test]
    fn bad_events_are_bad_responses() {
        for stream in [
            "data:not json\n\n".to_string(),
            "data:{\"output\":{\"audio\":{\"data\":\"!!!\"}}}\n\n".to_string(),
        ] {
            let e = decode(stream.as_bytes(), 4).1.unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{stream}");
        }
        // An event that never ends may not grow past the provider's answer limit.
        let mut d = SseAudio::new(&provider(), PcmEvents::default());
        let mut out = Vec::new();
        let big = Bytes::from(vec![b'a'; 64 * 1024]);
        let mut failed = None;
        for _ in 0..40 {
            if let Err(e) = d.push(&big, &mut out) {
                failed = Some(e);
                break;
            }
        }
        assert_eq!(failed.unwrap().kind, UpstreamErrorKind::BadResponse);
    }
}
