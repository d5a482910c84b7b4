//! StepFun (阶跃星辰): speech through its OpenAI-compatible `POST /v1/audio/speech`, whose answer
//! is the audio itself (docs/providers/stepfun.md).
//!
//! The body is OpenAI's (`model`, `input`, `voice`, `response_format`, `speed`) plus StepFun's
//! own fields: `instruction` (global natural-language guidance, honoured only by
//! `stepaudio-2.5-tts`, so only the `stepfun-tts-instruct` family takes the public
//! `instructions`), and `volume`, `voice_label`, `pronunciation_map`, which callers pass through
//! as native fields. `stream_format` is left at StepFun's default (`audio`): both public stream
//! formats use the same answer, copied as is or wrapped in the gateway's SSE events (not WAV,
//! whose header is written for a whole file).
//!
//! `speed` spans 0.5–2, so the public speeds 0.5, 1 and 2. The input is at most 1,000
//! characters. StepFun documents no error envelope; it is read as OpenAI's (`{"error":
//! {"message", "type", "code"}}`, the compatible API's), and an answer in another shape keeps
//! its HTTP status.

use std::sync::Arc;

use serde::Serialize;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/v1/audio/speech";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SpeechBody<'a> {
    model: &'a str,
    input: &'a str,
    voice: &'a str,
    response_format: &'static str,
    speed: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    instruction: Option<&'a str>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = SpeechBody {
        model: &target.native_model,
        input: req.input.as_str(),
        voice: req.voice.as_str(),
        response_format: output_format(req.response_format)?,
        speed: req.speed,
        // Validation lets `instructions` through only for the family whose model honours it.
        instruction: req.instructions.as_ref().map(|i| i.as_str()),
    };
    Ok(NativeRequest::post_json(
        SPEECH_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// The native `response_format` for a public format.
fn output_format(format: &str) -> Result<&'static str, GatewayError> {
    Ok(match format {
        "mp3" => "mp3",
        "opus" => "opus",
        "flac" => "flac",
        "wav" => "wav",
        "pcm" => "pcm",
        // Validation refuses every other format for these families, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "stepfun cannot produce `{other}`"
            )))
        }
    })
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // The answer body is the audio itself.
    SpeechDecoding::raw_audio(provider, req.sse)
}

// ---- registration ----------------------------------------------------------------------------

/// The StepFun kind: `Authorization: Bearer`, speech only, OpenAI's error envelope.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, crate::upstream::provider::Auth::bearer)?;
    let speech = crate::providers::registry::SpeechFns {
        request: speech_request,
        decoding: Some(speech_decoding),
    };
    Ok(crate::providers::registry::speech_kind(
        auth,
        crate::providers::openai::error_response,
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
    use serde_json::{json, Value};

    const KEY: &str = "step-secret-key-42";

    fn catalog(family: &str, model: &str) -> Catalog {
        let p = support::provider("stepfun", KEY);
        support::catalog(model, family, support::target(p, model), 1_000, 1)
    }

    fn native(family: &str, model: &str, body: &str) -> Result<NativeRequest, GatewayError> {
        let catalog = catalog(family, model);
        let req = parse(body.as_bytes(), &catalog, 3)?;
        speech_request(&req.model.targets[0], &req)
    }

    #[test]
    fn builds_the_native_request() {
        let n = native(
            "stepfun-tts",
            "step-tts-2",
            r#"{"model":"step-tts-2","input":"智能阶跃","voice":"zhengpaiqingnian","response_format":"pcm","speed":2,"volume":1.5,"voice_label":{"emotion":"高兴"}}"#,
        )
        .unwrap();
        assert_eq!(n.path, "/v1/audio/speech");
        assert_eq!(n.content_type, "application/json");
        assert!(n.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"model":"step-tts-2","input":"智能阶跃","voice":"zhengpaiqingnian","response_format":"pcm","speed":2.0,"volume":1.5,"voice_label":{"emotion":"高兴"}}"#
        );
    }

    #[test]
    fn maps_formats_speeds_and_the_default_voice() {
        for format in ["mp3", "opus", "flac", "wav", "pcm"] {
            for speed in [0.5, 1.0, 2.0] {
                let n = native(
                    "stepfun-tts",
                    "step-tts-mini",
                    &format!(
                        r#"{{"model":"step-tts-mini","input":"hi","response_format":"{format}","speed":{speed}}}"#
                    ),
                )
                .unwrap();
                let body: Value = serde_json::from_slice(&n.body).unwrap();
                assert_eq!(
                    body,
                    json!({
                        "model": "step-tts-mini",
                        "input": "hi",
                        "voice": "cixingnansheng",
                        "response_format": format,
                        "speed": speed,
                    })
                );
            }
        }
        assert!(output_format("aac").is_err());
    }

    #[test]
    fn instructions_go_out_as_instruction_only_for_the_instruct_family() {
        let n = native(
            "stepfun-tts-instruct",
            "stepaudio-2.5-tts",
            r#"{"model":"stepaudio-2.5-tts","input":"hi","instructions":"语气温柔，语速偏慢"}"#,
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&n.body).unwrap();
        assert_eq!(body["instruction"], "语气温柔，语速偏慢");
        assert!(body.get("instructions").is_none());

        let Err(GatewayError::Validation(v)) = native(
            "stepfun-tts",
            "step-tts-2",
            r#"{"model":"step-tts-2","input":"hi","instructions":"softly"}"#,
        ) else {
            panic!("step-tts-2 does not honour instructions: a 400");
        };
        assert!(v.details().contains_key("instructions"));

        // `voice_label` is not a field of the instruct family (its model takes `instruction`).
        let Err(GatewayError::Validation(v)) = native(
            "stepfun-tts-instruct",
            "stepaudio-2.5-tts",
            r#"{"model":"stepaudio-2.5-tts","input":"hi","voice_label":{"emotion":"高兴"}}"#,
        ) else {
            panic!("voice_label must be refused for stepaudio-2.5-tts");
        };
        assert!(v.details().contains_key("voice_label"));
    }

    #[test]
    fn maps_errors_in_openais_envelope() {
        let p = support::provider("stepfun", KEY);
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"invalid_api_key"}}}}"#
        );
        let e = crate::providers::openai::error_response(&p, 401, body.as_bytes());
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);

        let e = crate::providers::openai::error_response(
            &p,
            400,
            br#"{"error":{"message":"voice not found","type":"request_params_invalid"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "voice not found");

        let e = crate::providers::openai::error_response(&p, 502, b"<html>Bad Gateway</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 502");
        assert!(e.retryable());
    }
}
