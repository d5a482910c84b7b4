//! Volcengine / Doubao speech (豆包语音) through the V3 HTTP unidirectional streaming API
//! (`POST /api/v3/tts/unidirectional`).
//!
//! Which synthesis service answers is chosen by the `X-Api-Resource-Id` header, not by the body:
//! **the target's configured native model is sent as the resource id** (`seed-tts-1.0`,
//! `seed-tts-2.0`, `volc.service_type.10029`, `volc.megatts.default`, …), so a model entry such as
//! `{provider: volcengine, model: seed-tts-2.0}` picks the service. Every attempt also carries a
//! fresh `X-Api-Request-Id` (a v4 UUID). The credentials (`X-Api-App-Id` + `X-Api-Access-Key`, or
//! `X-Api-Key`) are added by the exchange.
//!
//! The answer is NDJSON, one JSON object per line, for both public stream formats: audio pieces
//! `{"code":0,"message":"","data":"<base64>"}` (code 3000, V1's success code, is tolerated too;
//! lines with `data: null`, such as subtitle lines, carry no audio) and the end
//! `{"code":20000000,"message":"OK","data":null,"usage":{"text_words":N}}`. `usage` counts
//! characters, not tokens, so no token usage is reported. A stream without the end line is an
//! error, never a short success.
//!
//! Any other code is an error with a `message`; non-2xx answers carry `{"code","message"}` (or
//! the same inside a `header` object). Volcengine documents only a few codes, so the mapping
//! is partly an assumption: 45xxxxxx are the caller's request (missing fields, unknown or
//! unauthorised speaker, unreadable text) — except that a message saying
//! `quota exceeded for types: concurrency` (or `qps`) is a rate limit, any other exhausted quota
//! (`…_lifetime`, `text_words…`) means the account cannot pay (not retried), and 45000010
//! (`load grant: requested grant not found`) rejects the gateway's credentials; 55xxxxxx are
//! server failures worth retrying, except `resource ID is mismatched with speaker related
//! resource`, which says the voice does not belong to the configured resource (an unknown voice:
//! the caller's 400 when it named it, the operator's 503 when it is the model's default), and
//! 45000030 (`[resource_id=…] requested resource not granted`, an HTTP 403), which says the account
//! has no such resource: the configured model is unavailable.
//! Other 4xxxxxxx codes are treated as the caller's request and anything else as a failure.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::upstream::provider::bad_answer;

use crate::common::native::json_with_extra;

use crate::common::native::NativeRequest;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::stream::audio::{base64_audio, AudioDecoder, Finished, SpeechDecoding, SpeechUsage};
use crate::stream::lines::LineSplitter;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/api/v3/tts/unidirectional";
const RESOURCE_ID: &str = "x-api-resource-id";
const REQUEST_ID: &str = "x-api-request-id";
/// Volcengine wants a user id for its own statistics; the caller's identity is not its business.
const USER_ID: &str = "switchyard";
/// 24 kHz matches OpenAI's `pcm` (16-bit mono, 24 kHz), so callers can swap providers.
const SAMPLE_RATE: u32 = 24_000;
/// Codes of lines that carry audio.
const AUDIO_CODES: [i64; 2] = [0, 3000];
/// Code of the last line of a successful stream.
const END_CODE: i64 = 20_000_000;
/// `load grant: requested grant not found`: the app id / token pair is not valid for the service.
const GRANT_NOT_FOUND: i64 = 45_000_010;
/// The message of code 45000030 (HTTP 403) when the account has no such resource (the target's
/// native model) open: `[resource_id=…] requested resource not granted`. The code alone is not
/// enough; other grants (a voice's) share it.
const RESOURCE_NOT_GRANTED: &str = "requested resource not granted";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    user: User<'a>,
    req_params: ReqParams<'a>,
}

#[derive(Serialize)]
struct User<'a> {
    uid: &'a str,
}

#[derive(Serialize)]
struct ReqParams<'a> {
    text: &'a str,
    speaker: &'a str,
    audio_params: AudioParams<'a>,
}

#[derive(Serialize)]
struct AudioParams<'a> {
    format: &'a str,
    sample_rate: u32,
    speech_rate: i32,
}

/// One NDJSON line, and (with `header`) the error bodies of non-2xx answers.
#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    header: Option<Header>,
}

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let format = match req.response_format {
        "mp3" => "mp3",
        "opus" => "ogg_opus",
        "pcm" => "pcm",
        // Validation already refused these; never send Volcengine a format it cannot stream.
        _ => {
            return Err(GatewayError::field(
                "response_format",
                "Volcengine produces only mp3, opus and pcm",
            ))
        }
    };
    let body = SpeechBody {
        user: User { uid: USER_ID },
        req_params: ReqParams {
            text: req.input.as_str(),
            speaker: req.voice.as_str(),
            audio_params: AudioParams {
                format,
                sample_rate: SAMPLE_RATE,
                speech_rate: speech_rate(req.speed)?,
            },
        },
    };
    let resource = HeaderValue::from_str(&target.native_model).map_err(|_| {
        GatewayError::Internal(format!(
            "Volcengine resource id (the model of provider {}) is not a valid header value",
            target.provider.name
        ))
    })?;
    let request_id = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
        .map_err(|_| GatewayError::Internal("request id is not a header value".into()))?;
    let mut native =
        NativeRequest::post_json(SPEECH_PATH, json_with_extra(&body, &req.passthrough)?);
    native.headers = vec![
        (HeaderName::from_static(RESOURCE_ID), resource),
        (HeaderName::from_static(REQUEST_ID), request_id),
    ];
    Ok(native)
}

/// `speech_rate` is a percentage change, −50..=100: 0.5× is −50, 1× is 0, 2× is 100. Only the
/// speeds it can express exactly are accepted (validation already holds callers to these).
fn speech_rate(speed: f64) -> Result<i32, GatewayError> {
    if speed == 0.5 {
        Ok(-50)
    } else if speed == 1.0 {
        Ok(0)
    } else if speed == 2.0 {
        Ok(100)
    } else {
        Err(GatewayError::field(
            "speed",
            "Volcengine accepts only speeds 0.5, 1, 2",
        ))
    }
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(
    provider: &Arc<Provider>,
    _req: &SpeechRequest<'_>,
) -> SpeechDecoding {
    // The same NDJSON arrives whether the caller wants raw audio or SSE.
    SpeechDecoding::Decode(Box::new(LineDecoder::new(provider)))
}

/// Decodes the NDJSON stream into audio (see the module docs).
struct LineDecoder {
    provider: Arc<Provider>,
    lines: LineSplitter,
    /// At least the bytes held in `lines` (an over-estimate by at most one chunk), to cap it.
    buffered: usize,
    /// Whether the end line arrived.
    ended: bool,
}

impl LineDecoder {
    fn new(provider: &Arc<Provider>) -> LineDecoder {
        LineDecoder {
            provider: provider.clone(),
            lines: LineSplitter::new(),
            buffered: 0,
            ended: false,
        }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        if self.ended {
            // Nothing after the end line matters.
            return Ok(());
        }
        let line: Line = serde_json::from_slice(line).map_err(|e| {
            bad_answer(
                &self.provider,
                format!("stream line is not the expected JSON: {e}"),
            )
        })?;
        let (code, message) = line.code_and_message();
        match code {
            Some(c) if AUDIO_CODES.contains(&c) => {
                if let Some(data) = line.data.filter(|d| !d.trim().is_empty()) {
                    let audio = base64_audio(&self.provider, &data)?;
                    if !audio.is_empty() {
                        out.push(audio);
                    }
                }
                Ok(())
            }
            Some(END_CODE) => {
                self.ended = true;
                Ok(())
            }
            Some(c) => Err(in_band_error(
                &self.provider,
                c,
                message.unwrap_or_default(),
            )),
            None => Err(bad_answer(&self.provider, "stream line carries no code")),
        }
    }
}

impl Line {
    /// The code and message, wherever the answer put them.
    fn code_and_message(&self) -> (Option<i64>, Option<&str>) {
        let header = self.header.as_ref();
        (
            self.code.or_else(|| header.and_then(|h| h.code)),
            self.message
                .as_deref()
                .filter(|m| !m.trim().is_empty())
                .or_else(|| header.and_then(|h| h.message.as_deref())),
        )
    }
}

impl AudioDecoder for LineDecoder {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        self.lines.push(chunk);
        let mut any = false;
        while let Some(line) = self.lines.next_line() {
            any = true;
            self.line(&line, out)?;
        }
        // After a whole line, only the tail of this chunk can still be buffered.
        self.buffered = if any {
            chunk.len()
        } else {
            self.buffered.saturating_add(chunk.len())
        };
        let limit = self.provider.max_response_bytes;
        if self.buffered > limit {
            return Err(bad_answer(
                &self.provider,
                format!("stream line larger than {limit} bytes"),
            ));
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        if let Some(rest) = self.lines.remainder() {
            self.buffered = 0;
            let rest = rest.trim_ascii();
            self.line(rest, out)?;
        }
        if !self.ended {
            // The provider stopped mid-synthesis; another attempt may well complete.
            return Err(UpstreamError::new(
                UpstreamErrorKind::Failure,
                &self.provider.name,
                "audio stream ended before its end line",
            ));
        }
        Ok(Finished::Done(SpeechUsage::default()))
    }
}

// ---- error mapping ---------------------------------------------------------------------------

/// An error line inside a 200 answer.
fn in_band_error(provider: &Provider, code: i64, message: &str) -> UpstreamError {
    let (kind, status) = classify(code, message).unwrap_or((UpstreamErrorKind::Failure, None));
    let err = UpstreamError::new(
        kind,
        &provider.name,
        native_message(provider, code, message),
    );
    match status {
        Some(s) => err.with_status(s),
        None => err,
    }
}

/// What a code (and, where codes are shared, its message) means; `None` when neither says.
fn classify(code: i64, message: &str) -> Option<(UpstreamErrorKind, Option<u16>)> {
    use UpstreamErrorKind as K;
    let m = message.to_ascii_lowercase();
    if m.contains("quota exceeded") {
        return Some(if m.contains("concurrency") || m.contains("qps") {
            (K::RateLimited, None)
        } else {
            // The account's allowance is used up: an operator problem a retry does not fix.
            (K::Failure, Some(402))
        });
    }
    if m.contains(RESOURCE_NOT_GRANTED) {
        return Some((K::UnknownModel, None));
    }
    if code == GRANT_NOT_FOUND || m.contains("load grant") {
        return Some((K::AuthRejected, None));
    }
    if m.contains("mismatched with speaker") {
        return Some((K::UnknownVoice, None));
    }
    Some(match code {
        45_000_000..=45_999_999 => (K::InvalidRequest, None),
        55_000_000..=55_999_999 => (K::Failure, None),
        40_000_000..=49_999_999 => (K::InvalidRequest, None),
        _ => return None,
    })
}

fn native_message(provider: &Provider, code: i64, message: &str) -> String {
    let text = provider.redact(message.trim());
    if text.is_empty() {
        format!("Volcengine code {code}")
    } else {
        format!("{text} (code {code})")
    }
}

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<Line>(body).ok();
    let (code, message) = parsed
        .as_ref()
        .map(Line::code_and_message)
        .unwrap_or((None, None));
    let message_text = message.unwrap_or_default();
    let text = match code {
        Some(c) => native_message(provider, c, message_text),
        None if !message_text.trim().is_empty() => provider.redact(message_text.trim()),
        None => format!("HTTP {status}"),
    };
    let fallback = UpstreamError::from_status(&provider.name, status, text);
    let class = code.and_then(|c| classify(c, message_text));
    // The status decides for credentials and rate limits; otherwise the code is more precise. A
    // resource the account does not have comes as a 403 too, but it is the configured model.
    let unknown_model = matches!(class, Some((UpstreamErrorKind::UnknownModel, _)));
    if matches!(status, 401 | 403 | 429) && !unknown_model {
        return fallback;
    }
    match class {
        Some((kind, code_status)) => {
            let err = UpstreamError::new(kind, &provider.name, fallback.message);
            match code_status {
                Some(s) => err.with_status(s),
                None => err,
            }
        }
        None => fallback,
    }
}

// ---- registration ----------------------------------------------------------------------------

/// Settings only Volcengine speech takes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// The console app id sent with the access token (absent: the key is a single API key).
    #[serde(default)]
    pub app_id: Option<String>,
}

/// The Volcengine kind: the console's app id + access token pair, or the newer single API key;
/// speech only.
pub(crate) fn kind(
    settings: &Settings,
    key: &str,
) -> Result<crate::providers::registry::Kind, String> {
    use crate::upstream::provider::Auth;
    use http::HeaderName;
    let app_id = settings
        .app_id
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty());
    let auth = crate::providers::registry::keyed(key, |key| match app_id {
        Some(app) => Auth::headers(&[
            (HeaderName::from_static("x-api-app-id"), app.to_string()),
            (HeaderName::from_static("x-api-access-key"), key.to_string()),
        ]),
        None => Auth::header("x-api-key", key),
    })?;
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
    use crate::api::speech::{self, SpeechRequest};
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;
    use base64::Engine;

    const KEY: &str = "volc-access-token-secret";

    fn provider() -> Arc<Provider> {
        support::provider("volcengine", KEY)
    }

    fn catalog() -> Catalog {
        support::catalog(
            "doubao-tts",
            "doubao-tts",
            support::target(provider(), "seed-tts-2.0"),
            1024,
            0,
        )
    }

    fn request<'a>(catalog: &Catalog, body: &'a [u8]) -> SpeechRequest<'a> {
        speech::parse(body, catalog, 3).unwrap()
    }

    fn header<'a>(n: &'a NativeRequest, name: &str) -> &'a str {
        n.headers
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| v.to_str().unwrap())
            .unwrap()
    }

    #[test]
    fn builds_the_request_with_resource_and_request_ids() {
        let c = catalog();
        let req = request(
            &c,
            r#"{"model":"doubao-tts","input":"你好","voice":"zh_male_M392_conversation_wvae_bigtts",
                "response_format":"opus","speed":0.5,"stream_format":"sse"}"#
                .as_bytes(),
        );
        let n = speech_request(&req.model.targets[0], &req).unwrap();
        assert_eq!(n.path, "/api/v3/tts/unidirectional");
        assert_eq!(n.content_type, "application/json");
        assert_eq!(header(&n, "x-api-resource-id"), "seed-tts-2.0");
        let id = uuid::Uuid::parse_str(header(&n, "x-api-request-id")).unwrap();
        assert_eq!(id.get_version_num(), 4);
        let body: serde_json::Value = serde_json::from_slice(&n.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "user": {"uid": "switchyard"},
                "req_params": {
                    "text": "你好",
                    "speaker": "zh_male_M392_conversation_wvae_bigtts",
                    "audio_params": {"format": "ogg_opus", "sample_rate": 24000, "speech_rate": -50},
                },
            })
        );
        // Each attempt is a new request to Volcengine.
        let again = speech_request(&req.model.targets[0], &req).unwrap();
        assert_ne!(
            header(&n, "x-api-request-id"),
            header(&again, "x-api-request-id")
        );
    }

    #[test]
    fn maps_formats_speeds_and_the_default_voice() {
        let c = catalog();
        for (format, native) in [("mp3", "mp3"), ("pcm", "pcm")] {
            for (speed, rate) in [("0.5", -50), ("1", 0), ("2", 100)] {
                let body = format!(
                    r#"{{"model":"doubao-tts","input":"hi","response_format":"{format}","speed":{speed}}}"#
                );
                let req = request(&c, body.as_bytes());
                let n = speech_request(&req.model.targets[0], &req).unwrap();
                let v: serde_json::Value = serde_json::from_slice(&n.body).unwrap();
                let params = &v["req_params"]["audio_params"];
                assert_eq!(params["format"], native);
                assert_eq!(params["speech_rate"], rate);
                assert_eq!(v["req_params"]["speaker"], "zh_female_cancan_mars_bigtts");
            }
        }
        for bad in [0.25, 4.0, 1.5] {
            assert!(matches!(
                speech_rate(bad),
                Err(GatewayError::Validation(v)) if v.has("speed")
            ));
        }
    }

    fn decoder() -> Box<dyn AudioDecoder> {
        let c = catalog();
        let req = request(&c, br#"{"model":"doubao-tts","input":"hi"}"#);
        match speech_decoding(&provider(), &req) {
            SpeechDecoding::Decode(d) => d,
            SpeechDecoding::Passthrough => panic!("Volcengine answers must be decoded"),
        }
    }

    fn run(stream: &[u8], cut: usize) -> (Vec<u8>, Result<Finished, UpstreamError>) {
        let mut d = decoder();
        let mut out = Vec::new();
        for piece in stream.chunks(cut) {
            if let Err(e) = d.push(&Bytes::copy_from_slice(piece), &mut out) {
                return (out.concat(), Err(e));
            }
        }
        let end = d.finish(&mut out);
        (out.concat(), end)
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn decodes_lines_at_any_split() {
        let stream = format!(
            "{}\n{}\r\n\n{}\n{}\n{}",
            serde_json::json!({"code": 0, "message": "", "data": b64(b"ID3\x01")}),
            serde_json::json!({"code": 0, "message": "", "data": null, "sentence": {"text": "hi"}}),
            serde_json::json!({"code": 3000, "message": "", "data": b64(b"\x02\x03")}),
            serde_json::json!({"code": 20000000, "message": "OK", "data": null, "usage": {"text_words": 2}}),
            serde_json::json!({"code": 0, "data": b64(b"late")}),
        );
        for cut in 1..stream.len() {
            let (audio, end) = run(stream.as_bytes(), cut);
            assert_eq!(audio, b"ID3\x01\x02\x03", "cut {cut}");
            assert_eq!(end.unwrap(), Finished::Done(SpeechUsage::default()));
        }
    }

    #[test]
    fn a_stream_without_its_end_line_fails() {
        let stream = format!(
            "{}\n",
            serde_json::json!({"code": 0, "message": "", "data": b64(b"ID3")})
        );
        let (audio, end) = run(stream.as_bytes(), 3);
        assert_eq!(audio, b"ID3");
        let e = end.unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        let (_, end) = run(b"", 1);
        assert!(end.is_err());
    }

    #[test]
    fn in_band_errors_are_classified_and_redacted() {
        use UpstreamErrorKind as K;
        let cases = [
            (45000001, "speaker not found", K::InvalidRequest, false),
            (
                45000000,
                "speaker permission denied: get resource id: access denied",
                K::InvalidRequest,
                false,
            ),
            (
                45000000,
                "quota exceeded for types: concurrency",
                K::RateLimited,
                true,
            ),
            (
                45000292,
                "quota exceeded for types: qps",
                K::RateLimited,
                true,
            ),
            (
                45000000,
                "quota exceeded for types: text_words_lifetime",
                K::Failure,
                false,
            ),
            (
                45000010,
                "load grant: requested grant not found in SaaS storage",
                K::AuthRejected,
                false,
            ),
            (55000000, "synthesis processing timeout", K::Failure, true),
            (55000031, "server busy", K::Failure, true),
            (
                55000000,
                "resource ID is mismatched with speaker related resource",
                K::UnknownVoice,
                false,
            ),
            (40402003, "TTSExceededTextLimit", K::InvalidRequest, false),
            (
                45000030,
                "[resource_id=seed-tts-3.0] requested resource not granted",
                K::UnknownModel,
                false,
            ),
            (12345, "odd", K::Failure, true),
        ];
        for (code, message, kind, retryable) in cases {
            let line = serde_json::json!({"code": code, "message": format!("{message} {KEY}"), "data": null});
            let (audio, end) = run(line.to_string().as_bytes(), 7);
            assert!(audio.is_empty());
            let e = end.unwrap_err();
            assert_eq!(
                (e.kind, e.retryable()),
                (kind, retryable),
                "{code} {message}"
            );
            assert!(!e.message.contains(KEY), "{}", e.message);
            assert!(e.message.contains(&code.to_string()));
        }
    }

    #[test]
    fn an_error_after_audio_stops_the_stream() {
        let stream = format!(
            "{}\n{}\n",
            serde_json::json!({"code": 0, "message": "", "data": b64(b"ID3")}),
            serde_json::json!({"code": 55000000, "message": "server error", "data": null}),
        );
        let mut d = decoder();
        let mut out = Vec::new();
        let err = d
            .push(&Bytes::from(stream.into_bytes()), &mut out)
            .unwrap_err();
        assert_eq!(out.concat(), b"ID3");
        assert_eq!(err.message, "server error (code 55000000)");
    }

    #[test]
    fn garbage_is_a_bad_response() {
        for body in [&b"<html>oops</html>\n"[..], b"{\"message\":\"no code\"}\n"] {
            let (_, end) = run(body, 4);
            assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::BadResponse);
        }
        let (_, end) = run(b"{\"code\":0,\"data\":\"!!\"}\n", 4);
        assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn maps_http_errors() {
        use UpstreamErrorKind as K;
        let p = provider();
        let e = error_response(
            &p,
            401,
            br#"{"header":{"code":45000010,"message":"load grant: requested grant not found in SaaS storage"}}"#,
        );
        assert_eq!(e.kind, K::AuthRejected);
        assert!(e.message.contains("load grant"));

        let e = error_response(
            &p,
            403,
            br#"{"code":45000030,"message":"speaker not granted"}"#,
        );
        assert_eq!(e.kind, K::AuthRejected);

        let e = error_response(
            &p,
            403,
            br#"{"code":45000030,"message":"[resource_id=seed-tts-1.0] requested resource not granted"}"#,
        );
        assert_eq!(e.kind, K::UnknownModel);
        assert!(!e.retryable());

        let body = format!(r#"{{"code":45000000,"message":"payload unmarshal: bad {KEY}"}}"#);
        let e = error_response(&p, 400, body.as_bytes());
        assert_eq!(e.kind, K::InvalidRequest);
        assert!(!e.message.contains(KEY));

        let e = error_response(
            &p,
            400,
            br#"{"code":45000292,"message":"quota exceeded for types: concurrency"}"#,
        );
        assert_eq!(e.kind, K::RateLimited);

        let e = error_response(&p, 500, br#"{"code":55000000,"message":"internal"}"#);
        assert!(e.kind == K::Failure && e.retryable());

        let e = error_response(&p, 429, b"");
        assert_eq!((e.kind, e.message.as_str()), (K::RateLimited, "HTTP 429"));

        let e = error_response(&p, 503, b"<html>busy</html>");
        assert!(e.kind == K::Failure && e.retryable());
        assert_eq!(e.message, "HTTP 503");
    }
}
