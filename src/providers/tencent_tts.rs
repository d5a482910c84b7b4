//! Tencent Cloud Text To Speech (语音合成): speech through the API 3.0 action `TextToVoice`
//! (version 2019-08-23, service `tts`, host `tts.tencentcloudapi.com`), TC3-signed
//! (`providers/formats/tencent.rs`).
//!
//! The body is `Text`, `SessionId` (one per request: Tencent echoes it; a fresh UUID), `VoiceType`
//! (an integer voice id: the public `voice` must be one, e.g. `501001`, "智兰") and `Codec` (`mp3`
//! or `wav`; Tencent's `pcm` is 16 kHz by default, not the public 24 kHz, so it is not offered),
//! followed by the caller's native fields (`Volume`, `PrimaryLanguage`, `SampleRate`,
//! `EmotionCategory`, `EmotionIntensity`, `SegmentRate`). `Speed` spans −2 (0.6×) to 6 (2.5×) with
//! only a few points documented (0 is 1.0×, 2 is 1.5×); none is the public 0.5×, 2× or 4×, so the
//! family offers speed 1 and no `Speed` is sent.
//!
//! The answer is one JSON document, `{"Response": {"Audio": <base64 wav/mp3>, "SessionId",
//! "Subtitles", "RequestId"}}`, or the envelope's `Error` (usually with HTTP 200): buffered,
//! checked and decoded at once. No SSE (this action answers whole). Text: 150 Chinese characters
//! or 500 letters a request, so the family's limit is 450 bytes (150 CJK characters in UTF-8).

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::native::{json_with_extra, NativeRequest};
use crate::providers::formats::tencent;
use crate::stream::audio::{base64_audio, Finished, SpeechDecoding, SpeechUsage, Whole};
use crate::upstream::provider::{bad_answer, Provider};

/// The action, its API version and the signing service.
const ACTION: &str = "TextToVoice";
const VERSION: &str = "2019-08-23";
const SERVICE: &str = "tts";

#[derive(Serialize)]
struct TextToVoice<'a> {
    #[serde(rename = "Text")]
    text: &'a str,
    #[serde(rename = "SessionId")]
    session_id: String,
    #[serde(rename = "VoiceType")]
    voice_type: u64,
    #[serde(rename = "Codec")]
    codec: &'static str,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(rename = "Audio", default)]
    audio: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    _target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let voice = req.voice.as_str();
    let voice_type = voice
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|_| voice.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            GatewayError::field(
                "voice",
                format!(
                    "`{voice}` is not a Tencent Cloud voice id; voices are numbers such as 501001 \
                     (see Tencent's voice list, cloud.tencent.com/document/product/1073/92668)"
                ),
            )
        })?;
    let codec = match req.response_format {
        "mp3" => "mp3",
        "wav" => "wav",
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "tencent-tts cannot produce `{other}`"
            )))
        }
    };
    let body = TextToVoice {
        text: req.input.as_str(),
        session_id: uuid::Uuid::new_v4().to_string(),
        voice_type,
        codec,
    };
    Ok(tencent::api_request(
        ACTION,
        VERSION,
        json_with_extra(&body, &req.passthrough)?,
    ))
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
    let answer: Answer = tencent::answer(provider, body)?;
    let text = answer
        .audio
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| bad_answer(provider, "answer carries no Audio"))?;
    let audio = base64_audio(provider, &text)?;
    if audio.is_empty() {
        return Err(bad_answer(provider, "answer carries no audio"));
    }
    out.push(audio);
    // Tencent reports no usage; the gateway estimates it from the input.
    Ok(Finished::Done(SpeechUsage::default()))
}

// ---- registration ----------------------------------------------------------------------------

/// The Tencent Cloud TTS kind: TC3-signed for the `tts` service, speech only.
pub(crate) fn kind(
    settings: &tencent::Settings,
    key: &str,
) -> Result<crate::providers::registry::Kind, String> {
    let auth = tencent::auth("tencent-tts", settings, key, SERVICE)?;
    let speech = crate::providers::registry::SpeechFns {
        request: speech_request,
        decoding: Some(speech_decoding),
    };
    Ok(crate::providers::registry::speech_kind(
        auth,
        tencent::error_response,
        speech,
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::speech::parse;
    use crate::catalog::Catalog;
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;
    use base64::Engine;
    use serde_json::{json, Value};

    fn provider() -> Arc<Provider> {
        support::provider("tencent-tts", "AKIDexample")
    }

    fn catalog() -> Catalog {
        support::catalog(
            "tencent-tts",
            "tencent-tts",
            support::target(provider(), "tts"),
            450,
            1,
        )
    }

    fn native(body: &str) -> Result<NativeRequest, GatewayError> {
        let catalog = catalog();
        let req = parse(body.as_bytes(), &catalog, 3).unwrap();
        speech_request(&req.model.targets[0], &req)
    }

    #[test]
    fn request_body_and_headers() {
        let n = native(r#"{"model":"tencent-tts","input":"你好","voice":"501004","response_format":"wav","Volume":3}"#)
            .unwrap();
        assert_eq!(n.path, "/");
        let body: Value = serde_json::from_slice(&n.body).unwrap();
        assert_eq!(body["Text"], "你好");
        assert_eq!(body["VoiceType"], 501004);
        assert_eq!(body["Codec"], "wav");
        assert_eq!(body["Volume"], 3);
        assert!(uuid::Uuid::parse_str(body["SessionId"].as_str().unwrap()).is_ok());
        assert!(body.get("Speed").is_none());
        let actions: Vec<_> = n
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        assert_eq!(actions[0], ("x-tc-action", "TextToVoice".parse().unwrap()));
        assert_eq!(actions[1], ("x-tc-version", "2019-08-23".parse().unwrap()));
    }

    #[test]
    fn voices_must_be_ids() {
        for voice in ["alloy", "-1", "50 1", "1.5"] {
            let body = json!({"model": "tencent-tts", "input": "hi", "voice": voice}).to_string();
            let Err(GatewayError::Validation(v)) = native(&body) else {
                panic!("{voice} must be refused");
            };
            assert!(v.details()["voice"].contains("501001"), "{voice}");
        }
    }

    #[test]
    fn answers_decode_or_report_their_error() {
        let p = provider();
        let catalog = catalog();
        let req = parse(br#"{"model":"tencent-tts","input":"hi"}"#, &catalog, 3).unwrap();
        let SpeechDecoding::Decode(mut d) = speech_decoding(&p, &req) else {
            panic!("Tencent answers need decoding");
        };
        let audio = b"ID3 mp3 bytes".to_vec();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&audio);
        let body = json!({"Response": {"Audio": b64, "SessionId": "s", "Subtitles": [], "RequestId": "r"}})
            .to_string();
        let mut out = Vec::new();
        d.push(&Bytes::from(body.into_bytes()), &mut out).unwrap();
        d.finish(&mut out).unwrap();
        assert_eq!(out.concat(), audio);

        let mut out = Vec::new();
        let err = decode_answer(
            &p,
            br#"{"Response":{"Error":{"Code":"InvalidParameterValue.VoiceType","Message":"bad voice"},"RequestId":"r1"}}"#,
            &mut out,
        )
        .unwrap_err();
        assert_eq!(err.kind, UpstreamErrorKind::UnknownVoice);
        let err = decode_answer(&p, br#"{"Response":{"RequestId":"r1"}}"#, &mut out).unwrap_err();
        assert_eq!(err.kind, UpstreamErrorKind::BadResponse);
    }
}
