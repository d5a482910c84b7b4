//! OpenAI speech through the Realtime API (`gpt-realtime-2.1-mini`, the successor OpenAI names for
//! `tts-1`, `tts-1-hd` and `gpt-4o-mini-tts`): a WebSocket of JSON events whose audio comes back as
//! base64 deltas of 24 kHz PCM (docs/providers/openai.md, "Realtime API").
//!
//! One socket per request: a `session.update` sets the output audio (PCM 24 kHz, the voice, the
//! speed), then an out-of-band `response.create` (`conversation: "none"`, audio only) gives the
//! caller's text as the one input item, with instructions to read it aloud as written (the caller's
//! `instructions`, a voice style, follow them). [`Realtime`] decodes the server's events: audio
//! deltas into PCM, which `stream::encode` turns into the asked format; `response.done` ends the
//! answer with its usage (text tokens in, audio tokens out) unless its status is not `completed`;
//! `error` events become the attempt's error, classified by OpenAI's error map.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::native::SocketRequest;
use crate::stream::audio::{base64_audio, AudioDecoder, Finished, SpeechDecoding, SpeechUsage};
use crate::stream::encode::{encodable, Encoded};
use crate::upstream::provider::{bad_answer, Provider};

/// The capability family of the models served this way (src/caps/families.yaml).
pub(crate) const FAMILY: &str = "openai-realtime";

/// The Realtime API's PCM rate: "Only a 24kHz sample rate is supported".
const RATE: u32 = 24_000;

/// What the model is told, so that it reads the text instead of answering it (the gateway's
/// wording; OpenAI documents instructions as guidance the model follows, not a guarantee).
const READ_ALOUD: &str = "You are a text-to-speech voice. Read the user's message aloud exactly \
as it is written, word for word, in the language it is written in. Do not answer it, comment on \
it, translate it, or add anything before or after it.";

/// Whether `req`'s model is served through the Realtime API.
pub(crate) fn serves(req: &SpeechRequest<'_>) -> bool {
    req.caps.family == FAMILY
}

// ---- client events ---------------------------------------------------------------------------

#[derive(Serialize)]
struct SessionUpdate<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session: Session<'a>,
}

#[derive(Serialize)]
struct Session<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    output_modalities: [&'static str; 1],
    audio: Audio<'a>,
}

#[derive(Serialize)]
struct Audio<'a> {
    output: Output<'a>,
}

#[derive(Serialize)]
struct Output<'a> {
    format: Format,
    voice: Voice<'a>,
    speed: f64,
}

#[derive(Serialize)]
struct Format {
    #[serde(rename = "type")]
    kind: &'static str,
    rate: u32,
}

/// A built-in voice by name, or a custom voice by id (`{"id": "voice_…"}`).
#[derive(Serialize)]
#[serde(untagged)]
enum Voice<'a> {
    Name(&'a str),
    Custom { id: &'a str },
}

#[derive(Serialize)]
struct ResponseCreate<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    response: ResponseParams<'a>,
}

#[derive(Serialize)]
struct ResponseParams<'a> {
    conversation: &'static str,
    output_modalities: [&'static str; 1],
    instructions: Cow<'a, str>,
    input: [Item<'a>; 1],
}

#[derive(Serialize)]
struct Item<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: [Content<'a>; 1],
}

#[derive(Serialize)]
struct Content<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// The socket for `req` at `target`: `/realtime?model=<native model>`, the session's settings,
/// then the response asked for. A format this build cannot encode PCM into is the caller's 400.
pub(crate) fn socket_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<SocketRequest, GatewayError> {
    if !encodable(req.response_format) {
        return Err(GatewayError::field(
            "response_format",
            format!(
                "model {} cannot give `{}` (this build encodes its PCM only into {})",
                req.model.name,
                req.response_format,
                encodable_formats(req.caps.formats)
            ),
        ));
    }
    let session = SessionUpdate {
        kind: "session.update",
        session: Session {
            kind: "realtime",
            output_modalities: ["audio"],
            audio: Audio {
                output: Output {
                    format: Format {
                        kind: "audio/pcm",
                        rate: RATE,
                    },
                    voice: voice(req),
                    speed: req.speed,
                },
            },
        },
    };
    let response = ResponseCreate {
        kind: "response.create",
        response: ResponseParams {
            conversation: "none",
            output_modalities: ["audio"],
            instructions: instructions(req),
            input: [Item {
                kind: "message",
                role: "user",
                content: [Content {
                    kind: "input_text",
                    text: req.input.as_str(),
                }],
            }],
        },
    };
    Ok(SocketRequest {
        path: format!("/realtime?model={}", target.native_model),
        headers: Vec::new(),
        messages: vec![to_json(&session)?, to_json(&response)?],
        last: is_last,
    })
}

fn to_json<T: Serialize>(event: &T) -> Result<String, GatewayError> {
    serde_json::to_string(event)
        .map_err(|e| GatewayError::Internal(format!("serializing a Realtime event: {e}")))
}

fn voice<'a>(req: &'a SpeechRequest<'_>) -> Voice<'a> {
    if req.custom_voice {
        Voice::Custom {
            id: req.voice.as_str(),
        }
    } else {
        Voice::Name(req.voice.as_str())
    }
}

/// The reading instruction, then the caller's voice style when it gave one.
fn instructions<'a>(req: &'a SpeechRequest<'_>) -> Cow<'a, str> {
    match &req.instructions {
        Some(style) if !style.as_str().trim().is_empty() => Cow::Owned(format!(
            "{READ_ALOUD}\n\nHow to speak it: {}",
            style.as_str()
        )),
        _ => Cow::Borrowed(READ_ALOUD),
    }
}

/// The formats of `formats` this build can encode, for the refusal's message.
fn encodable_formats(formats: &[&str]) -> String {
    let can: Vec<&str> = formats.iter().copied().filter(|f| encodable(f)).collect();
    can.join(", ")
}

/// Whether a server event is the answer's last: `response.done` ("Returned when a Response is done
/// streaming. Always emitted, no matter the final state"). Audio deltas, the bulk of the messages,
/// never hold the name, so most are judged by one search, not a parse.
fn is_last(text: &str) -> bool {
    text.contains("\"response.done\"") && event_type(text).as_deref() == Some("response.done")
}

fn event_type(text: &str) -> Option<Cow<'_, str>> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
    }
    serde_json::from_str::<Head<'_>>(text).ok().map(|h| h.kind)
}

/// How the Realtime events become the public answer: PCM, encoded into the asked format.
pub(crate) fn decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    let pcm = Box::new(Realtime::new(provider));
    match Encoded::wrap(pcm, req.response_format, RATE, provider) {
        Some(encoded) => SpeechDecoding::Decode(Box::new(encoded)),
        // Refused before anything was sent (`socket_request`); kept an error, never a panic.
        None => SpeechDecoding::Decode(Box::new(Unencodable {
            provider: provider.clone(),
            format: req.response_format,
        })),
    }
}

// ---- server events ---------------------------------------------------------------------------

/// The Realtime API's server events of one response, decoded into 24 kHz PCM.
pub(crate) struct Realtime {
    provider: Arc<Provider>,
    /// `response.done`'s usage, once it came (completed).
    done: Option<SpeechUsage>,
}

impl Realtime {
    pub(crate) fn new(provider: &Arc<Provider>) -> Realtime {
        Realtime {
            provider: provider.clone(),
            done: None,
        }
    }
}

/// A decoder for a format this build cannot encode: fails at once (never reached: such a request
/// is refused before it is sent).
struct Unencodable {
    provider: Arc<Provider>,
    format: &'static str,
}

impl AudioDecoder for Unencodable {
    fn push(&mut self, _chunk: &Bytes, _out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        Err(bad_answer(
            &self.provider,
            format!("this build cannot encode PCM into {}", self.format),
        ))
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        self.push(&Bytes::new(), out)
            .map(|_| Finished::Done(SpeechUsage::default()))
    }
}

/// A server event, with the fields the gateway reads.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    /// `response.output_audio.delta`: base64 PCM.
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
    /// `response.done`.
    #[serde(default)]
    response: Option<Response>,
    /// `error`.
    #[serde(default)]
    error: Option<ErrorDetail>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    status_details: Option<StatusDetails>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct StatusDetails {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    error: Option<ErrorDetail>,
}

#[derive(Deserialize, Serialize)]
struct ErrorDetail {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    param: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_token_details: Option<TokenDetails>,
    #[serde(default)]
    output_token_details: Option<TokenDetails>,
}

#[derive(Deserialize)]
struct TokenDetails {
    #[serde(default)]
    text_tokens: Option<u64>,
    #[serde(default)]
    audio_tokens: Option<u64>,
}

impl AudioDecoder for Realtime {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        if self.done.is_some() {
            return Ok(());
        }
        let event: Event<'_> = serde_json::from_slice(chunk).map_err(|e| {
            bad_answer(&self.provider, format!("a Realtime event is not JSON: {e}"))
        })?;
        match event.kind.as_ref() {
            "response.output_audio.delta" => {
                let delta = event.delta.unwrap_or_default();
                let pcm = base64_audio(&self.provider, &delta)?;
                if !pcm.is_empty() {
                    out.push(pcm);
                }
            }
            "response.done" => {
                let response = event.response.ok_or_else(|| {
                    bad_answer(&self.provider, "response.done without a response")
                })?;
                self.done = Some(completed(&self.provider, response)?);
            }
            "error" => {
                let detail = event.error.unwrap_or(ErrorDetail {
                    kind: None,
                    code: None,
                    message: String::new(),
                    param: None,
                });
                return Err(error_event(&self.provider, &detail));
            }
            // session.created, session.updated, response.created, the transcript's events,
            // response.output_audio.done, rate_limits.updated…: nothing the answer needs.
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        match self.done {
            Some(usage) => Ok(Finished::Done(usage)),
            None => Err(UpstreamError::new(
                UpstreamErrorKind::Failure,
                &self.provider.name,
                "the Realtime socket ended before response.done",
            )),
        }
    }
}

/// A `response.done`'s usage when its status is `completed`; any other status is the attempt's
/// error ("Clients should check the `status` field … `cancelled`, `failed`, or `incomplete`").
fn completed(provider: &Provider, response: Response) -> Result<SpeechUsage, UpstreamError> {
    let status = response.status.as_deref().unwrap_or("");
    if status != "completed" {
        let details = response.status_details;
        let reason = details.as_ref().and_then(|d| d.reason.as_deref());
        if let Some(error) = details.as_ref().and_then(|d| d.error.as_ref()) {
            return Err(error_event(provider, error));
        }
        let mut err = UpstreamError::new(
            UpstreamErrorKind::Failure,
            &provider.name,
            format!(
                "the Realtime response ended {status} ({})",
                reason.unwrap_or("no reason given")
            ),
        );
        if reason == Some("content_filter") {
            err.kind = UpstreamErrorKind::ContentPolicy;
        }
        return Err(err);
    }
    let usage = response.usage;
    let input = usage.as_ref().and_then(|u| {
        (u.input_token_details.as_ref())
            .and_then(|d| d.text_tokens)
            .or(u.input_tokens)
    });
    let output = usage.as_ref().and_then(|u| {
        (u.output_token_details.as_ref())
            .and_then(|d| d.audio_tokens)
            .or(u.output_tokens)
    });
    Ok(SpeechUsage {
        input_tokens: input,
        output_tokens: output,
    })
}

/// An `error` event (or a failed response's error), classified by OpenAI's error map as the HTTP
/// answer of the same error would be: its `type` gives the status (`invalid_request_error` 400,
/// `authentication_error` 401, `rate_limit_exceeded` 429, anything else 500), its `code` the rest
/// (`model_not_found`, `insufficient_quota`, …). A refused voice is the voice's.
fn error_event(provider: &Provider, error: &ErrorDetail) -> UpstreamError {
    let kind = error.kind.as_deref().unwrap_or("");
    let code = error.code.as_deref().unwrap_or("");
    let status = match (kind, code) {
        (_, "invalid_api_key") | ("authentication_error", _) => 401,
        (_, "rate_limit_exceeded") | ("rate_limit_exceeded" | "rate_limit_error", _) => 429,
        (_, "insufficient_quota") => 429,
        (_, "model_not_found") => 404,
        ("invalid_request_error", _) => 400,
        _ => 500,
    };
    let body = serde_json::json!({ "error": error }).to_string();
    let mut err = super::error_response(provider, status, body.as_bytes());
    let voice = error.param.as_deref().is_some_and(|p| p.ends_with("voice"));
    if status == 400 && voice {
        err.kind = UpstreamErrorKind::UnknownVoice;
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;

    fn decoded(events: &[serde_json::Value]) -> (Result<Finished, UpstreamError>, Vec<u8>) {
        let p = support::provider("openai", "sk-x");
        let mut d = Realtime::new(&p);
        let mut out = Vec::new();
        for e in events {
            if let Err(err) = d.push(&Bytes::from(e.to_string()), &mut out) {
                return (Err(err), out.concat());
            }
        }
        (d.finish(&mut out), out.concat())
    }

    #[test]
    fn deltas_become_pcm_and_done_gives_the_usage() {
        let (end, pcm) = decoded(&[
            serde_json::json!({"type": "session.created", "session": {}}),
            serde_json::json!({"type": "response.output_audio.delta", "delta": "AQID"}),
            serde_json::json!({"type": "response.output_audio.delta", "delta": "BAU="}),
            serde_json::json!({"type": "response.output_audio.done"}),
            serde_json::json!({"type": "response.done", "response": {"status": "completed",
                "usage": {"input_tokens": 9, "output_tokens": 50,
                    "input_token_details": {"text_tokens": 9},
                    "output_token_details": {"text_tokens": 8, "audio_tokens": 42}}}}),
        ]);
        assert_eq!(pcm, [1, 2, 3, 4, 5]);
        let usage = SpeechUsage {
            input_tokens: Some(9),
            output_tokens: Some(42),
        };
        assert_eq!(end.unwrap(), Finished::Done(usage));
    }

    #[test]
    fn an_end_without_response_done_or_not_completed_is_an_error() {
        let delta = serde_json::json!({"type": "response.output_audio.delta", "delta": "AQID"});
        assert!(decoded(std::slice::from_ref(&delta)).0.is_err());
        let filtered = serde_json::json!({"type": "response.done", "response": {"status": "incomplete",
            "status_details": {"type": "incomplete", "reason": "content_filter"}}});
        let e = decoded(&[delta.clone(), filtered]).0.unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        let failed = serde_json::json!({"type": "response.done", "response": {"status": "failed",
            "status_details": {"type": "failed", "error": {"type": "server_error", "code": "x"}}}});
        assert!(decoded(&[delta, failed]).0.unwrap_err().retryable());
    }

    #[test]
    fn error_events_are_classified_by_the_error_map() {
        let kind = |t: &str, code: &str, param: Option<&str>| {
            let e = serde_json::json!({"type": "error", "event_id": "e", "error":
                {"type": t, "code": code, "message": "m sk-x", "param": param}});
            decoded(&[e]).0.unwrap_err()
        };
        assert_eq!(
            kind("invalid_request_error", "invalid_api_key", None).kind,
            UpstreamErrorKind::AuthRejected
        );
        assert_eq!(
            kind("invalid_request_error", "model_not_found", None).kind,
            UpstreamErrorKind::UnknownModel
        );
        assert_eq!(
            kind("requests", "rate_limit_exceeded", None).kind,
            UpstreamErrorKind::RateLimited
        );
        assert!(!kind("insufficient_quota", "insufficient_quota", None).retryable());
        let voice = kind(
            "invalid_request_error",
            "invalid_value",
            Some("session.audio.output.voice"),
        );
        assert_eq!(voice.kind, UpstreamErrorKind::UnknownVoice);
        assert_eq!(
            kind("invalid_request_error", "x", None).kind,
            UpstreamErrorKind::InvalidRequest
        );
        let server = kind("server_error", "", None);
        assert!(server.retryable());
        assert!(!server.message.contains("sk-x"), "the key is redacted");
    }

    #[test]
    fn only_response_done_is_the_last_message() {
        assert!(is_last(r#"{"type":"response.done","response":{}}"#));
        assert!(is_last(r#"{"event_id":"e","type": "response.done"}"#));
        assert!(!is_last(r#"{"type":"response.output_audio.done"}"#));
        assert!(!is_last(
            r#"{"type":"error","error":{"message":"\"response.done\""}}"#
        ));
    }
}
