//! Amazon Polly: speech through `SynthesizeSpeech` (`POST /v1/speech` on
//! `https://polly.<region>.amazonaws.com`), signed with AWS Signature Version 4 (signing name
//! `polly`; credentials and region from the account, `providers/formats/aws.rs`).
//!
//! The target's native model is the Polly engine (`standard`, `neural`, `long-form`,
//! `generative`): Polly has no models, and the engine is what decides the voices, the quality and
//! the price. The JSON body is `{Engine, OutputFormat, Text, TextType, VoiceId[, SampleRate]}`
//! plus the caller's native fields (`LanguageCode`, `LexiconNames`, in Polly's own names). The
//! public formats map to Polly's: `mp3` → `mp3` (the engine's default rate), `opus` → `ogg_opus`
//! (48 kHz, its only rate), `pcm` → `pcm` at 16 kHz (Polly's highest PCM rate; signed 16-bit
//! little-endian mono). Polly makes no WAV, AAC or FLAC, so those are refused, never transcoded.
//!
//! Speed is SSML: at speed 1 the text goes as `TextType: text`; any other public speed wraps the
//! XML-escaped text in `<speak><prosody rate="N%">…</prosody></speak>` (`TextType: ssml`). Polly
//! takes rates of 20%–200% on every engine (generative voices only around whole sentences, which
//! the whole text is), so the public speeds 0.25, 0.5, 1 and 2; 4 is refused by the family. SSML
//! tags are not billed, but Polly caps the whole text at 6,000 characters (3,000 billed): an
//! input whose escaped SSML would pass 6,000 is the caller's 400 here, before any signing.
//!
//! The answer body is the audio itself, streamed (`Content-Type` `audio/mpeg`, `audio/ogg`,
//! `audio/pcm`); `x-amzn-RequestCharacters` reports the billed characters. Errors are AWS
//! REST-JSON (`{"message"}`, the type in `x-amzn-ErrorType`, which the error map cannot see, and
//! sometimes `__type`): classified by status, type and message. A voice the engine does not have
//! (`EngineNotSupportedException`, or a `VoiceId` outside the enum) is the voice's fault;
//! throttling (`ThrottlingException`, a 400 on Polly, or "Rate exceeded") is a rate limit.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::api::discovery::{Discovery, ListFns, Listed, Page};
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::native::{json_with_extra, NativeRequest};
use crate::providers::formats::aws;
use crate::providers::formats::errors::status_error;
use crate::providers::registry::{speech_kind, Kind, SpeechFns};
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/v1/speech";
const VOICES_PATH: &str = "/v1/voices";

/// SigV4's signing name (Polly's endpoint prefix; its service model names no other).
const SIGNING_NAME: &str = "polly";

/// The engines `SynthesizeSpeech` takes (the target's native model is one of them).
const ENGINES: &[&str] = &["standard", "neural", "long-form", "generative"];

/// `SynthesizeSpeech` takes at most this many characters of text, SSML tags included.
const MAX_TEXT_CHARS: usize = 6000;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct SynthesizeSpeech<'a> {
    engine: &'a str,
    output_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_rate: Option<&'static str>,
    text: &'a str,
    text_type: &'static str,
    voice_id: &'a str,
}

/// `DescribeVoices`' answer: `{"Voices": [{"Id", "Name", …}], "NextToken"?}`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct VoiceList {
    voices: Vec<ListedVoice>,
    #[serde(default)]
    next_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListedVoice {
    id: String,
    #[serde(default)]
    name: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let engine = target.native_model.as_str();
    if !ENGINES.contains(&engine) {
        return Err(GatewayError::Internal(format!(
            "polly native model `{engine}` is not one of Polly's engines ({})",
            ENGINES.join(", ")
        )));
    }
    let (output_format, sample_rate) = output_format(req.response_format)?;
    let ssml = (req.speed != 1.0).then(|| prosody_ssml(req.input.as_str(), req.speed));
    let (text, text_type) = match &ssml {
        Some(s) => {
            let chars = s.chars().count();
            if chars > MAX_TEXT_CHARS {
                return Err(GatewayError::field(
                    "input",
                    format!(
                        "with speed {} the input becomes {chars} characters of SSML; Amazon Polly \
                         takes at most {MAX_TEXT_CHARS} (shorten the input or use speed 1)",
                        req.speed
                    ),
                ));
            }
            (s.as_str(), "ssml")
        }
        None => (req.input.as_str(), "text"),
    };
    let body = SynthesizeSpeech {
        engine,
        output_format,
        sample_rate,
        text,
        text_type,
        voice_id: req.voice.as_str(),
    };
    Ok(NativeRequest::post_json(
        SPEECH_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// Polly's `OutputFormat` (and `SampleRate`, where the adapter picks one) for a public format.
fn output_format(format: &str) -> Result<(&'static str, Option<&'static str>), GatewayError> {
    Ok(match format {
        // The engine's own default rate (22,050 Hz standard, 24,000 Hz the others).
        "mp3" => ("mp3", None),
        // Polly's only rate for Ogg Opus.
        "opus" => ("ogg_opus", Some("48000")),
        // Polly's PCM comes at 8 or 16 kHz: the higher.
        "pcm" => ("pcm", Some("16000")),
        // Validation refuses every other format for these families, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "polly cannot produce `{other}`"
            )))
        }
    })
}

/// `<speak><prosody rate="N%">text</prosody></speak>` with the text XML-escaped, so the caller's
/// text can never become markup.
fn prosody_ssml(text: &str, speed: f64) -> String {
    let percent = (speed * 100.0).round() as u32;
    let mut out = String::with_capacity(48 + text.len() + text.len() / 8);
    out.push_str("<speak><prosody rate=\"");
    out.push_str(&percent.to_string());
    out.push_str("%\">");
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            // XML 1.0 forbids most control characters even escaped; they carry no speech.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out.push_str("</prosody></speak>");
    out
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // The answer body is the audio itself.
    SpeechDecoding::raw_audio(provider, req.sse)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = aws::ErrorBody::parse(body);
    let message = parsed.message();
    let mut err = status_error(provider, status, message);
    let lower = message.map(str::to_ascii_lowercase).unwrap_or_default();
    let kind = parsed.kind().unwrap_or_default();
    match status {
        // Polly's ThrottlingException is a 400; "Rate exceeded" is AWS's throttling message.
        400 if kind == "ThrottlingException" || lower.contains("rate exceeded") => {
            err.kind = UpstreamErrorKind::RateLimited;
        }
        // The voice is not one of the engine's, or not a Polly voice at all: the voice's fault
        // (the caller's 400, or the operator's 503 for the model's default voice).
        400 if kind == "EngineNotSupportedException"
            || lower.contains("engine")
            || lower.contains("voiceid") =>
        {
            err.kind = UpstreamErrorKind::UnknownVoice;
        }
        // ServiceQuotaExceededException: the account's quota, not the request.
        402 => err.kind = UpstreamErrorKind::RateLimited,
        // LexiconNotFoundException: a lexicon the caller named in `LexiconNames`.
        404 => err.kind = UpstreamErrorKind::InvalidRequest,
        _ => {}
    }
    err
}

// ---- what the account serves -----------------------------------------------------------------

/// `DescribeVoices` (`GET /v1/voices`, paged by `NextToken`): every voice of the region, each
/// with its `Id` (what `VoiceId` takes) and `Name`. Polly has no model list.
pub(crate) const DISCOVERY: Discovery = Discovery {
    models: None,
    voices: Some(ListFns {
        request: voices_request,
        response: read_voices,
    }),
};

fn voices_request(next: Option<&str>) -> NativeRequest {
    match next {
        None => NativeRequest::get(VOICES_PATH),
        Some(token) => {
            let mut path = String::with_capacity(VOICES_PATH.len() + 11 + token.len() * 3);
            path.push_str(VOICES_PATH);
            path.push_str("?NextToken=");
            // Percent-encode the opaque token, so it can never reshape the query.
            for b in token.bytes() {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                    path.push(b as char);
                } else {
                    path.push_str(&format!("%{b:02X}"));
                }
            }
            NativeRequest::get(path)
        }
    }
}

fn read_voices(body: &[u8]) -> Result<Page, String> {
    let list: VoiceList = serde_json::from_slice(body)
        .map_err(|e| format!("voice list is not the expected JSON: {e}"))?;
    Ok(Page {
        items: list
            .voices
            .into_iter()
            .map(|v| Listed::new(v.id, v.name))
            .collect(),
        next: list.next_token.filter(|t| !t.is_empty()),
    })
}

// ---- registration ----------------------------------------------------------------------------

/// The Polly kind: SigV4-signed, speech only.
pub(crate) fn kind(settings: &aws::Settings, key: &str) -> Result<Kind, String> {
    let auth = aws::auth("polly", settings, key, SIGNING_NAME)?;
    Ok(speech_kind(
        auth,
        error_response,
        SpeechFns {
            request: speech_request,
            decoding: Some(speech_decoding),
        },
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::speech::parse;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;
    use crate::upstream::provider::Auth;

    const KEY: &str = "AKIDEXAMPLE";

    fn catalog(engine: &str) -> Catalog {
        let p = support::provider("polly", KEY);
        support::catalog(
            "polly-neural",
            "polly-neural",
            support::target(p, engine),
            3_000,
            1,
        )
    }

    fn native_for(engine: &str, body: &str) -> Result<NativeRequest, GatewayError> {
        let catalog = catalog(engine);
        let req = parse(body.as_bytes(), &catalog, 3).unwrap();
        speech_request(&req.model.targets[0], &req)
    }

    fn json(n: &NativeRequest) -> serde_json::Value {
        serde_json::from_slice(&n.body).unwrap()
    }

    #[test]
    fn builds_the_native_request() {
        let n = native_for(
            "neural",
            r#"{"model":"polly-neural","input":"Hello <world> & \"you\"","voice":"Matthew"}"#,
        )
        .unwrap();
        assert_eq!(n.path, "/v1/speech");
        assert_eq!(n.method, http::Method::POST);
        assert_eq!(n.content_type, "application/json");
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"{"Engine":"neural","OutputFormat":"mp3","Text":"Hello <world> & \"you\"","TextType":"text","VoiceId":"Matthew"}"#
        );
    }

    #[test]
    fn maps_formats_and_the_default_voice() {
        for (format, polly, rate) in [
            ("mp3", "mp3", None),
            ("opus", "ogg_opus", Some("48000")),
            ("pcm", "pcm", Some("16000")),
        ] {
            let n = native_for(
                "standard",
                &format!(r#"{{"model":"polly-neural","input":"hi","response_format":"{format}"}}"#),
            )
            .unwrap();
            let body = json(&n);
            assert_eq!(body["OutputFormat"], polly);
            assert_eq!(body["SampleRate"].as_str(), rate);
            assert_eq!(body["Engine"], "standard");
            assert_eq!(body["VoiceId"], "Joanna");
        }
        for format in ["wav", "aac", "flac"] {
            assert!(output_format(format).is_err());
        }
    }

    #[test]
    fn speed_is_ssml_prosody_with_the_text_escaped() {
        let n = native_for(
            "generative",
            r#"{"model":"polly-neural","input":"</prosody><break time=\"9s\"/> R&D\u0001","speed":0.5}"#,
        )
        .unwrap();
        let body = json(&n);
        assert_eq!(body["TextType"], "ssml");
        assert_eq!(
            body["Text"],
            r#"<speak><prosody rate="50%">&lt;/prosody&gt;&lt;break time="9s"/&gt; R&amp;D </prosody></speak>"#
        );
        for (speed, rate) in [(0.25, "25%"), (2.0, "200%")] {
            let n = native_for(
                "neural",
                &format!(r#"{{"model":"polly-neural","input":"hi","speed":{speed}}}"#),
            )
            .unwrap();
            let text = json(&n)["Text"].as_str().unwrap().to_string();
            assert!(text.contains(&format!(r#"rate="{rate}""#)), "{text}");
        }
    }

    #[test]
    fn ssml_over_polly_s_limit_is_the_callers_400() {
        let input = "&".repeat(1_300);
        let body = format!(r#"{{"model":"polly-neural","input":"{input}","speed":2}}"#);
        let Err(GatewayError::Validation(v)) = native_for("neural", &body) else {
            panic!("6,000 characters of SSML must be refused");
        };
        assert!(v.details()["input"].contains("6000"), "{:?}", v.details());
        // The same text at speed 1 is plain text, within the limit.
        let body = format!(r#"{{"model":"polly-neural","input":"{input}"}}"#);
        assert!(native_for("neural", &body).is_ok());
    }

    #[test]
    fn native_fields_pass_through_and_unknown_engines_are_refused() {
        let n = native_for(
            "neural",
            r#"{"model":"polly-neural","input":"hi","voice":"Kajal","LanguageCode":"hi-IN","LexiconNames":["x"]}"#,
        )
        .unwrap();
        let body = json(&n);
        assert_eq!(body["LanguageCode"], "hi-IN");
        assert_eq!(body["LexiconNames"][0], "x");
        assert!(native_for("turbo", r#"{"model":"polly-neural","input":"hi"}"#).is_err());
    }

    #[test]
    fn reads_the_voice_list_and_pages_it() {
        let page = read_voices(
            br#"{"Voices":[{"Gender":"Female","Id":"Joanna","LanguageCode":"en-US","LanguageName":"US English","Name":"Joanna","SupportedEngines":["neural","standard"]}],"NextToken":"abc/+="}"#,
        )
        .unwrap();
        assert_eq!(page.items[0].id, "Joanna");
        assert_eq!(page.items[0].name.as_deref(), Some("Joanna"));
        assert_eq!(page.next.as_deref(), Some("abc/+="));
        assert!(read_voices(b"[]").is_err());
        assert_eq!(voices_request(None).path, "/v1/voices");
        assert_eq!(
            voices_request(Some("abc/+=&x")).path,
            "/v1/voices?NextToken=abc%2F%2B%3D%26x"
        );
        assert_eq!(voices_request(None).method, http::Method::GET);
    }

    #[test]
    fn the_kind_is_signed() {
        let settings = aws::Settings {
            secret_key: Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
            session_token: None,
            region: Some("eu-west-1".into()),
        };
        assert!(matches!(
            kind(&settings, KEY).unwrap().auth,
            Auth::Signed(_)
        ));
        assert!(matches!(kind(&settings, "").unwrap().auth, Auth::Missing));
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("polly", KEY);
        let cases: &[(u16, &str, UpstreamErrorKind)] = &[
            (
                400,
                r#"{"message":"Maximum text length has been exceeded"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                400,
                r#"{"__type":"InvalidSsmlException","message":"Invalid SSML request"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                400,
                r#"{"__type":"EngineNotSupportedException","message":"This voice does not support the selected engine: neural"}"#,
                UpstreamErrorKind::UnknownVoice,
            ),
            (
                400,
                r#"{"message":"1 validation error detected: Value 'Alloy' at 'voiceId' failed to satisfy constraint: Member must satisfy enum value set"}"#,
                UpstreamErrorKind::UnknownVoice,
            ),
            (
                400,
                r#"{"__type":"ThrottlingException","message":"Too many requests"}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                400,
                r#"{"message":"Rate exceeded"}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                402,
                r#"{"message":"quota","quotaCode":"q","serviceCode":"polly"}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                403,
                r#"{"message":"The security token included in the request is invalid."}"#,
                UpstreamErrorKind::AuthRejected,
            ),
            (
                404,
                r#"{"message":"Lexicon not found"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                500,
                r#"{"message":"An unknown condition has caused a service failure."}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (status, body, kind) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
        }
        assert!(error_response(&p, 400, cases[4].1.as_bytes()).retryable());
        assert!(error_response(&p, 503, b"").retryable());
        assert_eq!(
            error_response(&p, 400, cases[0].1.as_bytes()).message,
            "Maximum text length has been exceeded"
        );
    }
}
