//! Google Cloud Text-to-Speech: speech through `POST /v1/text:synthesize`.
//!
//! Two families share the endpoint. `google-tts` (Standard, WaveNet, Neural2, Chirp 3 HD…) names
//! the voice (`en-US-Standard-C`) and its language, which Google wants separately and which is the
//! voice name's first two parts (`en-US`); a voice name without that shape is refused before
//! anything is sent. Its target's native model is not sent: Google picks the model from the voice
//! name, so such a target's model is only a label in the config. Speed maps to `speakingRate`,
//! which Google bounds to [0.25, 2.0].
//!
//! `gemini-tts` (Gemini-TTS through the same endpoint) sends the target's native model as
//! `voice.modelName`, takes Gemini's bare voice names (`Kore`, `Puck`…) and maps `instructions` to
//! `input.prompt` (Google's "style instructions"). Its language is the caller's `language_code`, or
//! `en-US`; Gemini detects the spoken language itself, the code is only a hint. Pace is steered by
//! the prompt, so the family offers only speed 1 and sends no `speakingRate`.
//!
//! WAV and PCM are asked for at 24 kHz so `pcm` matches OpenAI's (16-bit mono, headerless). The
//! answer is one JSON document with the whole audio base64-encoded in `audioContent`, so it is
//! buffered, decoded and written out at once. Google streams only over gRPC, so neither family
//! offers SSE. Errors use Google's `{"error": {"code", "message", "status"}}` envelope.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::upstream::provider::bad_answer;

use crate::common::native::json_with_extra;

use crate::providers::parse_answer;

use crate::common::native::NativeRequest;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::stream::audio::{base64_audio, Finished, SpeechDecoding, SpeechUsage, Whole};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SYNTHESIZE_PATH: &str = "/v1/text:synthesize";

/// Sample rate asked for WAV and PCM (OpenAI's `pcm` is 24 kHz).
const SAMPLE_RATE_HZ: u32 = 24_000;

/// The family whose models are Gemini-TTS models (the native model goes out as `modelName`).
const GEMINI_FAMILY: &str = "gemini-tts";

/// `languageCode` is required; for Gemini voices without a caller's `language_code` this hint is
/// sent (Gemini-TTS detects the spoken language from the text).
const GEMINI_DEFAULT_LANGUAGE: &str = "en-US";

/// Gemini-TTS takes at most this many bytes of style prompt, like its text.
const GEMINI_PROMPT_LIMIT_BYTES: usize = 4_000;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SynthesizeBody<'a> {
    input: Input<'a>,
    voice: Voice<'a>,
    #[serde(rename = "audioConfig")]
    audio_config: AudioConfig,
}

#[derive(Serialize)]
struct Input<'a> {
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Voice<'a> {
    language_code: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_name: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AudioConfig {
    audio_encoding: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    speaking_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_rate_hertz: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SynthesizeAnswer {
    #[serde(default)]
    audio_content: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    if req.caps.family == GEMINI_FAMILY {
        return gemini_request(target, req);
    }
    let voice = req.voice.as_str();
    let Some(language_code) = language_of(voice) else {
        return Err(GatewayError::field(
            "voice",
            format!(
                "`{voice}` is not a Google voice name; Google voice names look like \
                 en-US-Standard-C (language-REGION-name, e.g. en-GB-Neural2-B, cmn-CN-Wavenet-A)"
            ),
        ));
    };
    let body = SynthesizeBody {
        input: Input {
            text: req.input.as_str(),
            prompt: None,
        },
        voice: Voice {
            language_code,
            name: voice,
            model_name: None,
        },
        audio_config: audio_config(req.response_format, Some(req.speed))?,
    };
    Ok(NativeRequest::post_json(
        SYNTHESIZE_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// A Gemini-TTS request: the native model as `modelName`, the voice name as given, `instructions`
/// as the style `prompt`, and the caller's `language_code` (the family's one native field) moved
/// into `voice` where Google reads it.
fn gemini_request(target: &Target, req: &SpeechRequest<'_>) -> Result<NativeRequest, GatewayError> {
    let mut language_code = GEMINI_DEFAULT_LANGUAGE.to_string();
    for (key, value) in &req.passthrough {
        if key.as_str() != "language_code" {
            // Validation lets through only the family's native fields.
            return Err(GatewayError::Internal(format!(
                "google cannot place `{}`",
                key.as_str()
            )));
        }
        language_code = match serde_json::from_str::<String>(value.get()) {
            Ok(code) if !code.trim().is_empty() => code,
            _ => {
                return Err(GatewayError::field(
                    "language_code",
                    "must be a BCP-47 language tag such as en-US or cmn-CN",
                ))
            }
        };
    }
    let prompt = req.instructions.as_ref().map(|i| i.as_str());
    if let Some(p) = prompt {
        if p.len() > GEMINI_PROMPT_LIMIT_BYTES {
            return Err(GatewayError::field(
                "instructions",
                format!(
                    "is {} bytes; model {} accepts at most {GEMINI_PROMPT_LIMIT_BYTES} bytes of instructions",
                    p.len(),
                    req.model.name
                ),
            ));
        }
    }
    let body = SynthesizeBody {
        input: Input {
            text: req.input.as_str(),
            prompt,
        },
        voice: Voice {
            language_code: &language_code,
            name: req.voice.as_str(),
            model_name: Some(&target.native_model),
        },
        // The family offers only speed 1 (pace comes from the prompt), Google's own default.
        audio_config: audio_config(req.response_format, None)?,
    };
    Ok(NativeRequest::post_json(
        SYNTHESIZE_PATH,
        json_with_extra(&body, &[])?,
    ))
}

fn audio_config(format: &str, speaking_rate: Option<f64>) -> Result<AudioConfig, GatewayError> {
    let (audio_encoding, sample_rate_hertz) = match format {
        "mp3" => ("MP3", None),
        "opus" => ("OGG_OPUS", None),
        // LINEAR16 answers carry a WAV header; PCM is the same samples without it.
        "wav" => ("LINEAR16", Some(SAMPLE_RATE_HZ)),
        "pcm" => ("PCM", Some(SAMPLE_RATE_HZ)),
        // Validation refuses every other format for these families, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "google cannot produce `{other}`"
            )))
        }
    };
    Ok(AudioConfig {
        audio_encoding,
        speaking_rate,
        sample_rate_hertz,
    })
}

/// The language code of a Google voice name: its first two dash-separated parts (`en-US` of
/// `en-US-Standard-C`, `cmn-CN` of `cmn-CN-Wavenet-A`). `None` unless the name has that shape
/// (a 2–3 letter language, a 2-letter or 3-digit region) followed by a non-empty rest.
fn language_of(voice: &str) -> Option<&str> {
    let mut parts = voice.splitn(3, '-');
    let language = parts.next()?;
    let region = parts.next()?;
    let rest = parts.next()?;
    let language_ok =
        (2..=3).contains(&language.len()) && language.bytes().all(|b| b.is_ascii_alphabetic());
    let region_ok = (region.len() == 2 && region.bytes().all(|b| b.is_ascii_alphabetic()))
        || (region.len() == 3 && region.bytes().all(|b| b.is_ascii_digit()));
    (language_ok && region_ok && !rest.is_empty())
        .then(|| &voice[..language.len() + 1 + region.len()])
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(
    provider: &Arc<Provider>,
    _req: &SpeechRequest<'_>,
) -> SpeechDecoding {
    // The whole audio arrives in one JSON document; SSE never gets here (validation refuses it).
    SpeechDecoding::Decode(Box::new(Whole::new(provider, decode_answer)))
}

fn decode_answer(
    provider: &Provider,
    body: &[u8],
    out: &mut Vec<Bytes>,
) -> Result<Finished, UpstreamError> {
    let answer: SynthesizeAnswer = parse_answer(provider, body)?;
    let text = answer
        .audio_content
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| bad_answer(provider, "answer carries no audioContent"))?;
    let audio = base64_audio(provider, &text)?;
    if audio.is_empty() {
        return Err(bad_answer(provider, "answer carries no audio"));
    }
    out.push(audio);
    // Google reports no usage; the gateway estimates it from the input.
    Ok(Finished::Done(SpeechUsage::default()))
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let (mut err, detail) = crate::providers::formats::google::classify(provider, status, body);
    // "Voice 'en-US-Nope' does not exist.": the voice is unknown, which is the operator's
    // problem when it is the model's configured default (the speech path decides).
    if let Some(detail) = detail {
        let unknown_voice =
            detail.message.starts_with("Voice '") && detail.message.contains("does not exist");
        if detail.status == "INVALID_ARGUMENT" && unknown_voice && !detail.bad_key() {
            err.kind = UpstreamErrorKind::UnknownVoice;
        }
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Google kind: an API key in `x-goog-api-key` (its OAuth tokens expire hourly, so a static
/// config cannot hold one), speech only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, |k| {
        crate::upstream::provider::Auth::header("x-goog-api-key", k)
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
    use crate::api::speech::parse;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;
    use crate::stream::audio::AudioDecoder;
    use base64::Engine;
    use serde_json::{json, Value};

    const KEY: &str = "AIzaSy-google-secret";

    fn provider() -> Arc<Provider> {
        support::provider("google", KEY)
    }

    fn catalog() -> Catalog {
        support::catalog(
            "google-tts",
            "google-tts",
            support::target(provider(), "default"),
            5_000,
            1,
        )
    }

    fn native(body: &str) -> Result<NativeRequest, GatewayError> {
        let catalog = catalog();
        let req = parse(body.as_bytes(), &catalog, 3).unwrap();
        speech_request(&req.model.targets[0], &req)
    }

    fn body_json(n: &NativeRequest) -> Value {
        serde_json::from_slice(&n.body).unwrap()
    }

    #[test]
    fn builds_the_native_request() {
        let n = native(
            r#"{"model":"google-tts","input":"Hello \"world\"","voice":"en-GB-Neural2-B","response_format":"pcm","speed":0.25}"#,
        )
        .unwrap();
        assert_eq!(n.path, "/v1/text:synthesize");
        assert_eq!(n.content_type, "application/json");
        assert!(n.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"input":{"text":"Hello \"world\""},"voice":{"languageCode":"en-GB","name":"en-GB-Neural2-B"},"audioConfig":{"audioEncoding":"PCM","speakingRate":0.25,"sampleRateHertz":24000}}"#
        );
    }

    #[test]
    fn maps_formats_speeds_and_the_default_voice() {
        for (format, encoding, rate) in [
            ("mp3", "MP3", None),
            ("opus", "OGG_OPUS", None),
            ("wav", "LINEAR16", Some(24_000)),
            ("pcm", "PCM", Some(24_000)),
        ] {
            for speed in [0.25, 0.5, 1.0, 2.0] {
                let n = native(&format!(
                    r#"{{"model":"google-tts","input":"hi","response_format":"{format}","speed":{speed}}}"#
                ))
                .unwrap();
                let mut audio = json!({"audioEncoding": encoding, "speakingRate": speed});
                if let Some(r) = rate {
                    audio["sampleRateHertz"] = json!(r);
                }
                assert_eq!(
                    body_json(&n),
                    json!({
                        "input": {"text": "hi"},
                        "voice": {"languageCode": "en-US", "name": "en-US-Standard-C"},
                        "audioConfig": audio,
                    })
                );
            }
        }
    }

    #[test]
    fn language_comes_from_the_voice_name() {
        assert_eq!(language_of("en-US-Standard-C"), Some("en-US"));
        assert_eq!(language_of("cmn-CN-Wavenet-A"), Some("cmn-CN"));
        assert_eq!(language_of("en-US-Chirp3-HD-Charon"), Some("en-US"));
        assert_eq!(language_of("es-419-Neural2-A"), Some("es-419"));
        for bad in [
            "v-custom",
            "Kore",
            "en-US",
            "en-US-",
            "english-US-A",
            "en-USA-A",
            "e1-US-A",
            "",
        ] {
            assert_eq!(language_of(bad), None, "{bad}");
        }
        let Err(GatewayError::Validation(v)) =
            native(r#"{"model":"google-tts","input":"hi","voice":"alloy"}"#)
        else {
            panic!("a voice without a language must be refused");
        };
        let msg = &v.details()["voice"];
        assert!(msg.contains("en-US-Standard-C"), "{msg}");
    }

    fn decoder() -> Box<dyn AudioDecoder> {
        let catalog = catalog();
        let req = parse(br#"{"model":"google-tts","input":"hi"}"#, &catalog, 3).unwrap();
        match speech_decoding(&provider(), &req) {
            SpeechDecoding::Decode(d) => d,
            SpeechDecoding::Passthrough => panic!("Google answers need decoding"),
        }
    }

    #[test]
    fn decodes_the_answer_split_anywhere() {
        let audio: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&audio);
        let answer = format!(r#"{{"audioContent": "{b64}"}}"#).into_bytes();
        // Cut inside the key, inside the base64 and between the last two bytes.
        for cuts in [vec![1, 7, 40, answer.len() - 1], vec![0, 18, 19, 600]] {
            let mut d = decoder();
            let mut out = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([answer.len()]) {
                d.push(&Bytes::copy_from_slice(&answer[from..cut]), &mut out)
                    .unwrap();
                from = cut;
            }
            assert!(out.is_empty(), "audio before the answer ended");
            assert_eq!(
                d.finish(&mut out).unwrap(),
                Finished::Done(SpeechUsage::default())
            );
            assert_eq!(out.concat(), audio);
        }
    }

    #[test]
    fn refuses_answers_without_audio() {
        for body in [
            &br#"{}"#[..],
            br#"{"audioContent":""}"#,
            br#"{"audioContent":null}"#,
            br#"{"audioContent":"!!!"}"#,
            b"\x7b\"audioContent\":\"SUQz", // cut: no closing brace
            b"",
        ] {
            let mut d = decoder();
            let mut out = Vec::new();
            d.push(&Bytes::copy_from_slice(body), &mut out).unwrap();
            let e = d.finish(&mut out).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{body:?}");
            assert!(!e.retryable());
            assert!(out.is_empty());
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":400,"message":"Voice 'en-US-Nope' does not exist.","status":"INVALID_ARGUMENT"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownVoice);
        assert_eq!(e.message, "Voice 'en-US-Nope' does not exist.");

        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":400,"message":"precondition","status":"FAILED_PRECONDITION"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);

        let e = error_response(
            &p,
            401,
            br#"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);

        let e = error_response(
            &p,
            403,
            br#"{"error":{"code":403,"message":"Key AIzaSy-google-secret lacks texttospeech","status":"PERMISSION_DENIED"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);

        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);

        let e = error_response(
            &p,
            429,
            br#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        let e = error_response(
            &p,
            503,
            br#"[{"error":{"code":503,"message":"The service is currently unavailable.","status":"UNAVAILABLE"}}]"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "The service is currently unavailable.");
        assert!(e.retryable());

        let e = error_response(
            &p,
            404,
            br#"{"error":{"code":404,"message":"","status":"NOT_FOUND"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 404");
        assert!(!e.retryable());

        let e = error_response(&p, 502, b"<html>Bad Gateway</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 502");
    }
}
