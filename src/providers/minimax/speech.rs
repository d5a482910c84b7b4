//! MiniMax T2A v2 (`POST /v1/t2a_v2`): speech.
//!
//! Every format that MiniMax can stream (mp3, opus, flac, pcm) is requested with `"stream": true`,
//! in both public stream formats, so audio reaches the caller while synthesis is still running.
//! The answer is then SSE: `data: {"data":{"audio":"<hex>","status":1},"base_resp":{…}}` events,
//! and a last one with `status: 2` (plus `extra_info`). Audio is **hex**, not base64. By default
//! the final event repeats the complete audio; the request asks MiniMax to leave it out
//! (`stream_options.exclude_aggregated_audio`), and in case it is sent anyway the final event's
//! audio is used only when no earlier event carried any. A stream that ends before the `status: 2`
//! event is an error, never a short success. WAV cannot stream at MiniMax: it is one JSON answer
//! (`"stream": false`, `"output_format": "hex"`) with the whole file in `data.audio`.
//!
//! Errors (`base_resp`, in a streamed event or a plain JSON body) are read by
//! [`super::check_base_resp`], which every event goes through before any audio is taken. No token
//! counts are reported.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::upstream::provider::bad_answer;

use crate::common::native::json_with_extra;

use crate::providers::parse_answer;

use crate::common::native::NativeRequest;

use super::{check_base_resp, BaseResp};
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::stream::audio::{hex_audio, Finished, SpeechDecoding, SpeechUsage, Whole};
use crate::stream::sse::data_of;
use crate::stream::sse_audio::{EventHandler, SseAudio};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/v1/t2a_v2";
/// PCM at 24 kHz matches OpenAI's `pcm` (16-bit mono, 24 kHz), so callers can swap providers; Opus
/// is asked for at 24 kHz too (32 kHz, MiniMax's default, is not an Opus rate).
const PCM_SAMPLE_RATE: u32 = 24_000;
const SAMPLE_RATE: u32 = 32_000;
const MP3_BITRATE: u32 = 128_000;
/// `data.status` of the last event of a stream (1 = in progress).
const FINAL_STATUS: i64 = 2;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model: &'a str,
    text: &'a str,
    stream: bool,
    voice_setting: VoiceSetting<'a>,
    audio_setting: AudioSetting<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_format: Option<&'a str>,
}

#[derive(Serialize)]
struct StreamOptions {
    /// Leave the complete audio out of the final event (it would double the bytes sent).
    exclude_aggregated_audio: bool,
}

#[derive(Serialize)]
struct VoiceSetting<'a> {
    voice_id: &'a str,
    speed: f64,
}

#[derive(Serialize)]
struct AudioSetting<'a> {
    format: &'a str,
    sample_rate: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    bitrate: Option<u32>,
    channel: u8,
}

/// One streamed event, the whole non-streamed answer, and error bodies all share this shape.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    data: Option<AnswerData>,
    #[serde(default)]
    base_resp: Option<BaseResp>,
}

#[derive(Deserialize)]
struct AnswerData {
    #[serde(default)]
    audio: Option<String>,
    #[serde(default)]
    status: Option<i64>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let format = req.response_format;
    if !matches!(format, "mp3" | "opus" | "flac" | "wav" | "pcm") {
        // Validation already refused it; never send MiniMax a format it does not know.
        return Err(GatewayError::field(
            "response_format",
            "MiniMax produces only mp3, opus, flac, wav and pcm",
        ));
    }
    let stream = streams(format);
    let body = SpeechBody {
        model: &target.native_model,
        text: req.input.as_str(),
        stream,
        voice_setting: VoiceSetting {
            voice_id: req.voice.as_str(),
            speed: req.speed,
        },
        audio_setting: AudioSetting {
            format,
            sample_rate: if matches!(format, "pcm" | "opus") {
                PCM_SAMPLE_RATE
            } else {
                SAMPLE_RATE
            },
            bitrate: (format == "mp3").then_some(MP3_BITRATE),
            channel: 1,
        },
        stream_options: stream.then_some(StreamOptions {
            exclude_aggregated_audio: true,
        }),
        // Streaming answers are always hex; a whole answer must be asked for hex rather than a URL.
        output_format: (!stream).then_some("hex"),
    };
    Ok(NativeRequest::post_json(
        SPEECH_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// Whether MiniMax can stream `format` (all but WAV, whose header needs the final length).
fn streams(format: &str) -> bool {
    format != "wav"
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    if streams(req.response_format) {
        SpeechDecoding::Decode(Box::new(SseAudio::new(provider, StreamDecoder::default())))
    } else {
        SpeechDecoding::Decode(Box::new(Whole::new(provider, whole_answer)))
    }
}

/// The non-streamed answer: `{"data":{"audio":"<hex>","status":2},"base_resp":{…}}`.
fn whole_answer(
    provider: &Provider,
    body: &[u8],
    out: &mut Vec<Bytes>,
) -> Result<Finished, UpstreamError> {
    let answer: Answer = parse_answer(provider, body)?;
    check_base_resp(provider, answer.base_resp.as_ref())?;
    let audio = answer
        .data
        .and_then(|d| d.audio)
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| bad_answer(provider, "answer carries no audio"))?;
    out.push(hex_audio(provider, &audio)?);
    Ok(Finished::Done(SpeechUsage::default()))
}

/// Decodes MiniMax's SSE stream into audio (see the module docs).
#[derive(Default)]
struct StreamDecoder {
    /// Whether any audio was produced (the final event's copy is then skipped).
    emitted: bool,
    /// Whether the `status: 2` event arrived.
    ended: bool,
}

impl EventHandler for StreamDecoder {
    fn event(
        &mut self,
        provider: &Provider,
        event: &[u8],
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError> {
        if self.ended {
            // Nothing after the final event matters.
            return Ok(());
        }
        let Some(json) = payload(event) else {
            return Ok(());
        };
        let answer: Answer = serde_json::from_str(&json).map_err(|e| {
            bad_answer(
                provider,
                format!("stream event is not the expected JSON: {e}"),
            )
        })?;
        check_base_resp(provider, answer.base_resp.as_ref())?;
        let Some(data) = answer.data else {
            return Ok(());
        };
        let last = data.status == Some(FINAL_STATUS);
        if let Some(audio) = data.audio.filter(|a| !a.trim().is_empty()) {
            // The final event may repeat everything already sent: use it only when it is all
            // there is.
            if !last || !self.emitted {
                let bytes = hex_audio(provider, &audio)?;
                if !bytes.is_empty() {
                    out.push(bytes);
                    self.emitted = true;
                }
            }
        }
        if last {
            self.ended = true;
        }
        Ok(())
    }

    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError> {
        if !self.ended {
            // The provider stopped mid-synthesis; another attempt may well complete.
            return Err(UpstreamError::new(
                UpstreamErrorKind::Failure,
                &provider.name,
                "audio stream ended before its final event",
            ));
        }
        Ok(Finished::Done(SpeechUsage::default()))
    }
}

/// The JSON an event carries: its `data:` lines, or (for an error answered as a plain JSON body
/// rather than as SSE) the text itself. `None` for comments and other data-less events.
fn payload(event: &[u8]) -> Option<String> {
    if let Some(data) = data_of(event) {
        return Some(data);
    }
    let text = std::str::from_utf8(event).ok()?.trim();
    text.starts_with('\u{7b}').then(|| text.to_string())
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::speech::{self, SpeechRequest};
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;
    use crate::stream::audio::AudioDecoder;

    const KEY: &str = "sk-minimax-secret-42";

    fn provider() -> Arc<Provider> {
        support::provider("minimax", KEY)
    }

    fn catalog() -> Catalog {
        support::catalog(
            "speech-2.8-hd",
            "minimax-tts",
            support::target(provider(), "speech-2.8-hd"),
            10_000,
            0,
        )
    }

    fn request<'a>(catalog: &Catalog, body: &'a [u8]) -> SpeechRequest<'a> {
        speech::parse(body, catalog, 3).unwrap()
    }

    fn native(body: &[u8]) -> serde_json::Value {
        let c = catalog();
        let req = request(&c, body);
        let n = speech_request(&req.model.targets[0], &req).unwrap();
        assert_eq!(n.path, "/v1/t2a_v2");
        assert!(n.headers.is_empty());
        serde_json::from_slice(&n.body).unwrap()
    }

    #[test]
    fn builds_a_streaming_request_with_pass_through_fields() {
        let got = native(
            br#"{"model":"speech-2.8-hd","input":"Hello","voice":"female-shaonv","speed":2,
                "response_format":"mp3","stream_format":"sse","language_boost":"English",
                "pronunciation_dict":{"tone":["a/(a1)"]}}"#,
        );
        assert_eq!(
            got,
            serde_json::json!({
                "model": "speech-2.8-hd",
                "text": "Hello",
                "stream": true,
                "voice_setting": {"voice_id": "female-shaonv", "speed": 2.0},
                "audio_setting": {"format": "mp3", "sample_rate": 32000, "bitrate": 128000, "channel": 1},
                "stream_options": {"exclude_aggregated_audio": true},
                "language_boost": "English",
                "pronunciation_dict": {"tone": ["a/(a1)"]},
            })
        );
    }

    #[test]
    fn pcm_streams_at_24k_and_wav_is_whole_hex() {
        let pcm = native(br#"{"model":"speech-2.8-hd","input":"Hi","response_format":"pcm"}"#);
        assert_eq!(pcm["stream"], true);
        assert_eq!(
            pcm["audio_setting"],
            serde_json::json!({"format": "pcm", "sample_rate": 24000, "channel": 1})
        );
        assert_eq!(pcm["voice_setting"]["voice_id"], "male-qn-qingse");
        assert!(pcm.get("output_format").is_none());

        let opus = native(br#"{"model":"speech-2.8-hd","input":"Hi","response_format":"opus"}"#);
        assert_eq!(opus["stream"], true);
        assert_eq!(
            opus["audio_setting"],
            serde_json::json!({"format": "opus", "sample_rate": 24000, "channel": 1})
        );
        assert_eq!(
            opus["stream_options"],
            serde_json::json!({"exclude_aggregated_audio": true})
        );

        let wav = native(
            br#"{"model":"speech-2.8-hd","input":"Hi","response_format":"wav","speed":0.5}"#,
        );
        assert_eq!(wav["stream"], false);
        assert_eq!(wav["output_format"], "hex");
        assert!(wav.get("stream_options").is_none());
        assert_eq!(wav["voice_setting"]["speed"], 0.5);
        assert_eq!(
            wav["audio_setting"],
            serde_json::json!({"format": "wav", "sample_rate": 32000, "channel": 1})
        );
    }

    fn decoder_for(format: &str) -> Box<dyn AudioDecoder> {
        let c = catalog();
        let body =
            format!(r#"{{"model":"speech-2.8-hd","input":"Hi","response_format":"{format}"}}"#);
        let req = request(&c, body.as_bytes());
        match speech_decoding(&provider(), &req) {
            SpeechDecoding::Decode(d) => d,
            SpeechDecoding::Passthrough => panic!("MiniMax answers must be decoded"),
        }
    }

    /// Feed `stream` in pieces of `cut` bytes; the audio, and the first error.
    fn run(format: &str, stream: &[u8], cut: usize) -> (Vec<u8>, Result<Finished, UpstreamError>) {
        let mut d = decoder_for(format);
        let mut out = Vec::new();
        for piece in stream.chunks(cut) {
            if let Err(e) = d.push(&Bytes::copy_from_slice(piece), &mut out) {
                return (out.concat(), Err(e));
            }
        }
        let end = d.finish(&mut out);
        (out.concat(), end)
    }

    fn event(json: serde_json::Value) -> String {
        format!("data: {json}\n\n")
    }

    fn ok() -> serde_json::Value {
        serde_json::json!({"status_code": 0, "status_msg": ""})
    }

    #[test]
    fn decodes_hex_events_at_any_split_and_skips_the_repeated_final_audio() {
        let stream = [
            event(serde_json::json!({"data": {"audio": "494433", "status": 1}, "base_resp": ok()})),
            ": keep-alive\n\n".to_string(),
            event(serde_json::json!({"data": {"audio": "0a0b", "status": 1}, "base_resp": ok()})),
            event(
                serde_json::json!({"data": {"audio": "4944330a0b", "status": 2},
                "extra_info": {"audio_length": 10, "usage_characters": 2},
                "base_resp": {"status_code": 0, "status_msg": "success"}}),
            ),
        ]
        .concat();
        for cut in 1..stream.len() {
            let (audio, end) = run("mp3", stream.as_bytes(), cut);
            assert_eq!(audio, b"ID3\x0a\x0b", "cut {cut}");
            assert_eq!(end.unwrap(), Finished::Done(SpeechUsage::default()));
        }
    }

    #[test]
    fn final_audio_is_used_when_nothing_came_before() {
        let stream = event(serde_json::json!({"data": {"audio": "494433", "status": 2},
            "base_resp": ok()}));
        // Without the closing blank line too (the remainder is still read).
        for s in [stream.as_str(), stream.trim_end()] {
            let (audio, end) = run("flac", s.as_bytes(), 7);
            assert_eq!(audio, b"ID3");
            assert!(end.is_ok());
        }
    }

    #[test]
    fn a_stream_without_its_final_event_fails() {
        let stream = event(serde_json::json!({"data": {"audio": "494433", "status": 1},
            "base_resp": ok()}));
        let (audio, end) = run("mp3", stream.as_bytes(), 5);
        assert_eq!(audio, b"ID3");
        let e = end.unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());

        let (audio, end) = run("mp3", b"", 1);
        assert!(audio.is_empty());
        assert!(end.is_err());
    }

    #[test]
    fn in_band_errors_are_classified_and_redacted() {
        let cases = [
            (1002, UpstreamErrorKind::RateLimited, true),
            (1039, UpstreamErrorKind::RateLimited, true),
            (1004, UpstreamErrorKind::AuthRejected, false),
            (2049, UpstreamErrorKind::AuthRejected, false),
            (1008, UpstreamErrorKind::Failure, false),
            (1026, UpstreamErrorKind::ContentPolicy, false),
            (1027, UpstreamErrorKind::ContentPolicy, false),
            (2013, UpstreamErrorKind::InvalidRequest, false),
            (20132, UpstreamErrorKind::UnknownVoice, false),
            (1000, UpstreamErrorKind::Failure, true),
            (1024, UpstreamErrorKind::Failure, true),
            (9999, UpstreamErrorKind::Failure, true),
        ];
        for (code, kind, retryable) in cases {
            let stream = event(serde_json::json!({"data": null,
                "base_resp": {"status_code": code, "status_msg": format!("bad key {KEY}")}}));
            let (audio, end) = run("pcm", stream.as_bytes(), 3);
            assert!(audio.is_empty());
            let e = end.unwrap_err();
            assert_eq!((e.kind, e.retryable()), (kind, retryable), "code {code}");
            assert!(!e.message.contains(KEY), "{}", e.message);
            assert!(e.message.contains(&code.to_string()), "{}", e.message);
        }
    }

    #[test]
    fn an_error_after_audio_stops_the_stream() {
        let stream = [
            event(serde_json::json!({"data": {"audio": "494433", "status": 1}, "base_resp": ok()})),
            event(serde_json::json!({"base_resp": {"status_code": 1000, "status_msg": "unknown error"}})),
        ]
        .concat();
        let (audio, end) = run("mp3", stream.as_bytes(), 4);
        assert_eq!(audio, b"ID3");
        assert_eq!(end.unwrap_err().message, "unknown error (status_code 1000)");
    }

    #[test]
    fn a_plain_json_error_to_a_streaming_request_is_read() {
        let body = br#"{"base_resp":{"status_code":1004,"status_msg":"login fail"}}"#;
        let (_, end) = run("mp3", body, 9);
        assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::AuthRejected);
    }

    #[test]
    fn garbage_and_bad_hex_are_bad_responses() {
        let (_, end) = run("mp3", b"data: not json\n\n", 4);
        assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::BadResponse);
        let stream = event(serde_json::json!({"data": {"audio": "zz", "status": 1}}));
        let (_, end) = run("mp3", stream.as_bytes(), 4);
        assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn wav_is_one_json_answer() {
        let body = serde_json::json!({"data": {"audio": "52494646", "status": 2},
            "extra_info": {"audio_format": "wav"}, "trace_id": "t", "base_resp": ok()})
        .to_string();
        for cut in [1, 5, body.len()] {
            let (audio, end) = run("wav", body.as_bytes(), cut);
            assert_eq!(audio, b"RIFF");
            assert!(end.is_ok());
        }
        let body =
            br#"{"data":null,"base_resp":{"status_code":1026,"status_msg":"input new_sensitive"}}"#;
        let (audio, end) = run("wav", body, 10);
        assert!(audio.is_empty());
        assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::ContentPolicy);
        let (_, end) = run(
            "wav",
            br#"{"data":{"audio":""},"base_resp":{"status_code":0}}"#,
            10,
        );
        assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::BadResponse);
    }
}
