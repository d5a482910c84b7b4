//! Cartesia (Sonic): speech through `POST /tts/bytes`, whose body is the audio itself, streamed as
//! it is synthesised, or `POST /tts/sse`, whose events carry base64 audio.
//!
//! Both take the same JSON body: the text as `transcript`, the target's native model as
//! `model_id`, the voice id as `voice` and an `output_format` object (container, encoding, sample
//! rate, bit rate). The SSE endpoint produces only the `raw` container, so public PCM with
//! `stream_format: sse` goes there and its `chunk` events are decoded, while MP3 with SSE is the
//! bytes endpoint's audio wrapped in the gateway's events; WAV (a header that needs the final
//! length) is offered whole only. Every request carries the `Cartesia-Version` the wire facts were
//! read for (docs/providers/cartesia.md), so a later Cartesia version cannot change them unseen.
//!
//! Speed is never sent: Sonic 3's `generation_config.speed` takes 0.6–1.5, so of the public
//! speeds only 1, its default, can be honoured. Errors are `{error_code, title, message,
//! request_id}` JSON (plain `Title: Message` text from older API versions), and an SSE stream that
//! fails midway ends with an `error` event of the same fields plus `status_code`.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::stream::audio::{base64_audio, Finished, SpeechDecoding, SpeechUsage};
use crate::stream::sse::data_of;
use crate::stream::sse_audio::{EventHandler, SseAudio};
use crate::upstream::provider::{bad_answer, Provider};

// ---- constants -------------------------------------------------------------------------------

const BYTES_PATH: &str = "/tts/bytes";
const SSE_PATH: &str = "/tts/sse";

/// The API version every request names: the one `cartesia-ai/cartesia-python` 4.0.1 was generated
/// for, whose request and error shapes the adapter follows.
const API_VERSION: &str = "2026-08-14";

/// PCM and WAV are 16-bit little-endian at 24 kHz, like OpenAI's `pcm`.
const SAMPLE_RATE: u32 = 24_000;
const MP3_SAMPLE_RATE: u32 = 44_100;
const MP3_BIT_RATE: u32 = 128_000;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model_id: &'a str,
    transcript: &'a str,
    voice: &'a str,
    output_format: OutputFormat,
}

#[derive(Serialize, Debug, PartialEq, Eq)]
struct OutputFormat {
    container: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
    sample_rate: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    bit_rate: Option<u32>,
}

/// An HTTP error body, or an SSE `error` event (which adds `type`, `done` and `status_code`).
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    error_code: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    status_code: Option<u16>,
}

/// One `/tts/sse` event: `chunk` (base64 `data`), `timestamps`, `phoneme_timestamps`, `done` or
/// `error`.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    done: bool,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let output_format = output_format(req.response_format)?;
    let sse_endpoint = uses_sse_endpoint(req);
    let body = SpeechBody {
        model_id: &target.native_model,
        transcript: req.input.as_str(),
        voice: req.voice.as_str(),
        output_format,
    };
    let mut native = NativeRequest::post_json(
        if sse_endpoint { SSE_PATH } else { BYTES_PATH },
        json_with_extra(&body, &req.passthrough)?,
    );
    native.headers.push((
        HeaderName::from_static("cartesia-version"),
        HeaderValue::from_static(API_VERSION),
    ));
    if sse_endpoint {
        native.headers.push((
            http::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        ));
    }
    Ok(native)
}

/// Whether the request goes to `/tts/sse`: SSE of the only container that endpoint produces.
fn uses_sse_endpoint(req: &SpeechRequest<'_>) -> bool {
    req.sse && req.response_format == "pcm"
}

/// The native `output_format` for a public format.
fn output_format(format: &str) -> Result<OutputFormat, GatewayError> {
    Ok(match format {
        "mp3" => OutputFormat {
            container: "mp3",
            encoding: None,
            sample_rate: MP3_SAMPLE_RATE,
            bit_rate: Some(MP3_BIT_RATE),
        },
        "wav" => OutputFormat {
            container: "wav",
            encoding: Some("pcm_s16le"),
            sample_rate: SAMPLE_RATE,
            bit_rate: None,
        },
        "pcm" => OutputFormat {
            container: "raw",
            encoding: Some("pcm_s16le"),
            sample_rate: SAMPLE_RATE,
            bit_rate: None,
        },
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "cartesia cannot produce `{other}`"
            )))
        }
    })
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    if uses_sse_endpoint(req) {
        SpeechDecoding::Decode(Box::new(SseAudio::new(provider, SseEvents::default())))
    } else {
        // `/tts/bytes` answers the audio itself.
        SpeechDecoding::raw_audio(provider, req.sse)
    }
}

/// Decodes `/tts/sse` events into audio: `chunk` events carry it, `done` ends the stream, an
/// `error` event is the provider's error after the 200.
#[derive(Default)]
struct SseEvents {
    ended: bool,
}

impl EventHandler for SseEvents {
    fn event(
        &mut self,
        provider: &Provider,
        event: &[u8],
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError> {
        if self.ended {
            return Ok(());
        }
        let Some(json) = data_of(event) else {
            // Comments and keep-alives carry no data.
            return Ok(());
        };
        let ev: Event = serde_json::from_str(&json).map_err(|e| {
            bad_answer(
                provider,
                format!("stream event is not the expected JSON: {e}"),
            )
        })?;
        match ev.kind.as_str() {
            "chunk" => {
                if let Some(data) = ev.data.filter(|d| !d.is_empty()) {
                    let audio = base64_audio(provider, &data)?;
                    if !audio.is_empty() {
                        out.push(audio);
                    }
                }
            }
            "done" => self.ended = true,
            "error" => {
                let body: ErrorBody = serde_json::from_str(&json).unwrap_or_default();
                let status = body.status_code.unwrap_or(500);
                return Err(classify(provider, status, Some(body)));
            }
            // Word and phoneme timestamps (asked for only through pass-through fields) carry no
            // audio; an event type added later is no reason to fail the stream.
            _ => {}
        }
        if ev.done {
            self.ended = true;
        }
        Ok(())
    }

    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError> {
        if !self.ended {
            // Cartesia stopped mid-synthesis; another attempt may well complete.
            return Err(UpstreamError::new(
                UpstreamErrorKind::Failure,
                &provider.name,
                "audio stream ended before its done event",
            ));
        }
        Ok(Finished::Done(SpeechUsage::default()))
    }
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok().or_else(|| {
        // Older API versions answer `Title: Message` as plain text.
        let text = std::str::from_utf8(body).ok()?.trim();
        (!text.is_empty() && !text.starts_with('<') && text.len() <= 1000).then(|| ErrorBody {
            message: Some(text.to_string()),
            ..ErrorBody::default()
        })
    });
    classify(provider, status, parsed)
}

/// The error for an HTTP status (or an SSE error event's `status_code`) and its body.
fn classify(provider: &Provider, status: u16, body: Option<ErrorBody>) -> UpstreamError {
    let body = body.unwrap_or_default();
    let text = match (&body.title, &body.message) {
        (Some(t), Some(m)) if !m.is_empty() => format!("{t}: {m}"),
        (_, Some(m)) if !m.is_empty() => m.clone(),
        (Some(t), _) if !t.is_empty() => t.clone(),
        _ => format!("HTTP {status}"),
    };
    let mut err = UpstreamError::from_status(&provider.name, status, provider.redact(&text));
    let code = body.error_code.as_deref().unwrap_or_default();
    // Cartesia publishes no list of `error_code` values (only `concurrency_limited`); the names
    // below are matched by what they say, and the status decides otherwise (ledger, "Errors").
    if code.contains("concurrency") || code.contains("rate_limit") {
        err.kind = UpstreamErrorKind::RateLimited;
    } else if code.contains("model") && (code.contains("not_found") || code.contains("invalid")) {
        err.kind = UpstreamErrorKind::UnknownModel;
    } else if code.contains("voice") && code.contains("not_found") {
        err.kind = UpstreamErrorKind::UnknownVoice;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Cartesia kind: `Authorization: Bearer`, speech only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, crate::upstream::provider::Auth::bearer)?;
    let speech = crate::providers::registry::SpeechFns {
        request: speech_request,
        decoding: Some(speech_decoding),
    };
    Ok(crate::providers::registry::speech_kind(
        auth,
        error_response,
        speech,
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::speech::parse;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;
    use serde_json::{json, Value};

    const KEY: &str = "sk_car_secret_42";

    fn catalog() -> Catalog {
        let p = support::provider("cartesia", KEY);
        support::catalog(
            "sonic",
            "cartesia-sonic",
            support::target(p, "sonic-3"),
            10_000,
            1,
        )
    }

    fn native(body: &str) -> NativeRequest {
        let catalog = catalog();
        let req = parse(body.as_bytes(), &catalog, 3).unwrap();
        speech_request(&req.model.targets[0], &req).unwrap()
    }

    fn header<'a>(n: &'a NativeRequest, name: &str) -> Option<&'a str> {
        n.headers
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .and_then(|(_, v)| v.to_str().ok())
    }

    #[test]
    fn builds_the_native_request() {
        let n = native(
            r#"{"model":"sonic","input":"Hello \"world\"","voice":"v-1","response_format":"mp3","language":"fr","generation_config":{"emotion":"calm","volume":1.2}}"#,
        );
        assert_eq!(n.path, "/tts/bytes");
        assert_eq!(header(&n, "cartesia-version"), Some("2026-08-14"));
        assert_eq!(header(&n, "accept"), None);
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"model_id":"sonic-3","transcript":"Hello \"world\"","voice":"v-1","output_format":{"container":"mp3","sample_rate":44100,"bit_rate":128000},"language":"fr","generation_config":{"emotion":"calm","volume":1.2}}"#
        );
    }

    #[test]
    fn maps_formats_and_endpoints() {
        for (format, sse, path, output) in [
            (
                "mp3",
                false,
                "/tts/bytes",
                json!({"container": "mp3", "sample_rate": 44100, "bit_rate": 128000}),
            ),
            (
                "mp3",
                true,
                "/tts/bytes",
                json!({"container": "mp3", "sample_rate": 44100, "bit_rate": 128000}),
            ),
            (
                "wav",
                false,
                "/tts/bytes",
                json!({"container": "wav", "encoding": "pcm_s16le", "sample_rate": 24000}),
            ),
            (
                "pcm",
                false,
                "/tts/bytes",
                json!({"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}),
            ),
            (
                "pcm",
                true,
                "/tts/sse",
                json!({"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}),
            ),
        ] {
            let stream = if sse { "sse" } else { "audio" };
            let n = native(&format!(
                r#"{{"model":"sonic","input":"hi","response_format":"{format}","stream_format":"{stream}"}}"#
            ));
            assert_eq!(n.path, path, "{format} {stream}");
            let body: Value = serde_json::from_slice(&n.body).unwrap();
            assert_eq!(body["output_format"], output, "{format}");
            // The default voice, and never a speed.
            assert_eq!(body["voice"], "e07c00bc-4134-4eae-9ea4-1a55fb45746b");
            assert!(body.get("speed").is_none());
            assert_eq!(
                header(&n, "accept"),
                (path == "/tts/sse").then_some("text/event-stream")
            );
        }
        assert!(output_format("opus").is_err());
    }

    fn sse_decoder(p: &Arc<Provider>) -> Box<dyn crate::stream::audio::AudioDecoder> {
        let catalog = catalog();
        let req = parse(
            br#"{"model":"sonic","input":"hi","response_format":"pcm","stream_format":"sse"}"#,
            &catalog,
            3,
        )
        .unwrap();
        let SpeechDecoding::Decode(d) = speech_decoding(p, &req) else {
            panic!("SSE needs a decoder");
        };
        d
    }

    #[test]
    fn decodes_sse_chunks_split_anywhere() {
        let p = support::provider("cartesia", KEY);
        let mut d = sse_decoder(&p);
        let stream = concat!(
            "event: chunk\ndata: {\"type\":\"chunk\",\"data\":\"AAEC\",\"done\":false,\"status_code\":206,\"step_time\":1.5}\n\n",
            "event: timestamps\ndata: {\"type\":\"timestamps\",\"done\":false,\"status_code\":206,\"word_timestamps\":{\"words\":[\"hi\"],\"start\":[0],\"end\":[0.2]}}\n\n",
            "event: chunk\r\ndata: {\"type\":\"chunk\",\"data\":\"AwQ=\",\"done\":false,\"status_code\":206,\"step_time\":1}\r\n\r\n",
            "event: done\ndata: {\"type\":\"done\",\"done\":true,\"status_code\":200}\n\n",
        )
        .as_bytes();
        let mut out = Vec::new();
        for piece in stream.chunks(7) {
            d.push(&Bytes::copy_from_slice(piece), &mut out).unwrap();
        }
        assert!(matches!(d.finish(&mut out).unwrap(), Finished::Done(_)));
        assert_eq!(out.concat(), vec![0, 1, 2, 3, 4]);

        // A stream cut before `done` is an error, not a short success.
        let mut d = sse_decoder(&p);
        let mut out = Vec::new();
        d.push(
            &Bytes::from_static(b"data: {\"type\":\"chunk\",\"data\":\"AAEC\",\"done\":false}\n\n"),
            &mut out,
        )
        .unwrap();
        let e = d.finish(&mut out).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
    }

    #[test]
    fn an_sse_error_event_is_the_providers_error() {
        let p = support::provider("cartesia", KEY);
        let mut d = sse_decoder(&p);
        let mut out = Vec::new();
        let e = d
            .push(
                &Bytes::from_static(
                    b"event: error\ndata: {\"type\":\"error\",\"done\":true,\"status_code\":429,\"error_code\":\"concurrency_limited\",\"title\":\"Too many concurrent requests\",\"message\":\"You have exceeded your plan's concurrency limit.\",\"request_id\":\"r\"}\n\n",
                ),
                &mut out,
            )
            .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert_eq!(
            e.message,
            "Too many concurrent requests: You have exceeded your plan's concurrency limit."
        );

        let mut d = sse_decoder(&p);
        let e = d
            .push(&Bytes::from_static(b"data: {not json}\n\n"), &mut out)
            .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("cartesia", KEY);
        let body = format!(
            r#"{{"error_code":null,"title":"Unauthorized","message":"Invalid API key {KEY}","request_id":"r"}}"#
        );
        let e = error_response(&p, 401, body.as_bytes());
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);

        let e = error_response(
            &p,
            429,
            br#"{"error_code":"concurrency_limited","title":"Too many concurrent requests","message":"Slow down.","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        let e = error_response(
            &p,
            400,
            br#"{"error_code":"model_not_found","title":"Invalid model","message":"Model sonic-0 not found","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert!(!e.retryable());

        let e = error_response(
            &p,
            404,
            br#"{"error_code":"voice_not_found","title":"Voice not found","message":"No voice abc","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownVoice);

        let e = error_response(
            &p,
            400,
            br#"{"error_code":null,"title":"Bad request","message":"transcript is required","request_id":"r"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Bad request: transcript is required");

        // Older versions' plain text.
        let e = error_response(&p, 400, b"Invalid output format: opus");
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Invalid output format: opus");

        let e = error_response(&p, 402, br#"{"error_code":null,"title":"Payment required","message":"Out of credits","request_id":"r"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = error_response(&p, 503, b"<html>Service Unavailable</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 503");
        assert!(e.retryable());
    }
}
