//! Azure AI Speech: speech through the text to speech REST API, `POST /cognitiveservices/v1` on
//! the resource's regional endpoint (`https://{region}.tts.speech.microsoft.com`).
//!
//! The body is SSML the adapter builds from the public fields: the voice name in `<voice>`, the
//! language (`xml:lang`, required) taken from the voice name's locale prefix (`en-US-AvaNeural` →
//! `en-US`), the public speed as `<prosody rate>` (a multiplier, 0.5–2), and the input text
//! escaped so it can never become markup. The audio format is the `X-Microsoft-OutputFormat`
//! header; the answer body is the audio itself, streamed for every format but WAV (a RIFF header
//! is written for a whole file), so WAV is offered whole only. Azure names no model in the
//! request: the target's model is only a label. Errors carry no documented body; the status
//! decides (400 a bad request, 401 the key, 415, 429, 502/503 the service).

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use serde::Deserialize;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::native::NativeRequest;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::{Auth, Provider};

// ---- constants -------------------------------------------------------------------------------

const SPEECH_PATH: &str = "/cognitiveservices/v1";
const VOICES_PATH: &str = "/cognitiveservices/voices/list";
const SSML_CONTENT_TYPE: &str = "application/ssml+xml";

/// Azure requires an application name in `User-Agent` (fewer than 255 characters).
const USER_AGENT: &str = "switchyard";

/// The locale when a voice name does not start with one (a custom voice's name).
const DEFAULT_LOCALE: &str = "en-US";

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn speech_request(
    _target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let format = output_format(req.response_format)?;
    let mut native = NativeRequest::post_json(SPEECH_PATH, ssml(req).into_bytes());
    native.content_type = SSML_CONTENT_TYPE.into();
    native.headers.push((
        HeaderName::from_static("x-microsoft-outputformat"),
        HeaderValue::from_static(format),
    ));
    native.headers.push((
        http::header::USER_AGENT,
        HeaderValue::from_static(USER_AGENT),
    ));
    Ok(native)
}

/// The `X-Microsoft-OutputFormat` for a public format: 24 kHz mono (every prebuilt neural voice's
/// own rate, and OpenAI's `pcm`).
fn output_format(format: &str) -> Result<&'static str, GatewayError> {
    Ok(match format {
        "mp3" => "audio-24khz-48kbitrate-mono-mp3",
        "opus" => "ogg-24khz-16bit-mono-opus",
        "wav" => "riff-24khz-16bit-mono-pcm",
        "pcm" => "raw-24khz-16bit-mono-pcm",
        // Validation refuses every other format for this family, so this is a catalog bug.
        other => {
            return Err(GatewayError::Internal(format!(
                "azure-speech cannot produce `{other}`"
            )))
        }
    })
}

/// The SSML document for a request.
fn ssml(req: &SpeechRequest<'_>) -> String {
    let voice = req.voice.as_str();
    let text = req.input.as_str();
    let mut out = String::with_capacity(160 + voice.len() * 2 + text.len() + text.len() / 8);
    out.push_str(r#"<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang=""#);
    escape_into(&mut out, locale(voice));
    out.push_str(r#""><voice name=""#);
    escape_into(&mut out, voice);
    out.push_str(r#"">"#);
    // Speed 1 is the default rate: the text goes without a `prosody` element.
    let prosody = req.speed != 1.0;
    if prosody {
        out.push_str(r#"<prosody rate=""#);
        out.push_str(&req.speed.to_string());
        out.push_str(r#"">"#);
    }
    escape_into(&mut out, text);
    if prosody {
        out.push_str("</prosody>");
    }
    out.push_str("</voice></speak>");
    out
}

/// The locale a voice name starts with (`en-US-AvaMultilingualNeural` → `en-US`,
/// `zh-CN-shaanxi-XiaoniNeural` → `zh-CN`); the default locale otherwise.
fn locale(voice: &str) -> &str {
    let mut parts = voice.splitn(3, '-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(lang), Some(region), Some(_))
            if (2..=3).contains(&lang.len())
                && lang.bytes().all(|b| b.is_ascii_lowercase())
                && (2..=4).contains(&region.len())
                && region.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            &voice[..lang.len() + 1 + region.len()]
        }
        _ => DEFAULT_LOCALE,
    }
}

/// Escape text for an XML element or a double-quoted attribute, so a caller's text or voice can
/// never open, close or reshape an element.
fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters even escaped; they carry no speech.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    // The answer body is the audio itself.
    SpeechDecoding::raw_audio(provider, req.sse)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    // Azure documents no error body for this API; a short text one is quoted when present.
    let message = std::str::from_utf8(body)
        .ok()
        .map(str::trim)
        .filter(|t| !t.is_empty() && !t.starts_with('<') && t.len() <= 1000)
        .map(|t| provider.redact(t))
        .unwrap_or_else(|| match status {
            400 => "bad request (a required parameter missing or invalid)".to_string(),
            415 => "unsupported media type".to_string(),
            _ => format!("HTTP {status}"),
        });
    UpstreamError::from_status(&provider.name, status, message)
}

// ---- what the account serves -----------------------------------------------------------------

/// `GET /cognitiveservices/voices/list`: a JSON array of every voice of the region, each with its
/// `ShortName` (the name SSML takes) and `DisplayName`. Azure has no model list.
pub(crate) const DISCOVERY: crate::api::discovery::Discovery = crate::api::discovery::Discovery {
    models: None,
    voices: Some(crate::api::discovery::ListFns {
        request: |_| voices_request(),
        response: read_voices,
    }),
};

fn voices_request() -> NativeRequest {
    let mut r = NativeRequest::get(VOICES_PATH);
    r.headers.push((
        http::header::USER_AGENT,
        HeaderValue::from_static(USER_AGENT),
    ));
    r
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListedVoice {
    short_name: String,
    #[serde(default)]
    display_name: Option<String>,
}

fn read_voices(body: &[u8]) -> Result<crate::api::discovery::Page, String> {
    let voices: Vec<ListedVoice> = serde_json::from_slice(body)
        .map_err(|e| format!("voice list is not the expected JSON: {e}"))?;
    Ok(crate::api::discovery::Page {
        items: voices
            .into_iter()
            .map(|v| crate::api::discovery::Listed::new(v.short_name, v.display_name))
            .collect(),
        next: None,
    })
}

// ---- registration ----------------------------------------------------------------------------

/// The Azure AI Speech kind: the resource key in `Ocp-Apim-Subscription-Key`, speech only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth =
        crate::providers::registry::keyed(key, |k| Auth::header("ocp-apim-subscription-key", k))?;
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
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;

    const KEY: &str = "azure-speech-secret-42";

    fn catalog() -> Catalog {
        let p = support::provider("azure-speech", KEY);
        support::catalog(
            "azure-neural",
            "azure-speech",
            support::target(p, "neural"),
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
    fn builds_ssml_from_the_public_fields() {
        let n = native(
            r#"{"model":"azure-neural","input":"Tom & \"Jerry\" <b>say</b> 'hi'","voice":"fr-FR-DeniseNeural","speed":2}"#,
        );
        assert_eq!(n.path, "/cognitiveservices/v1");
        assert_eq!(n.content_type, "application/ssml+xml");
        assert_eq!(
            header(&n, "x-microsoft-outputformat"),
            Some("audio-24khz-48kbitrate-mono-mp3")
        );
        assert_eq!(header(&n, "user-agent"), Some("switchyard"));
        assert_eq!(
            std::str::from_utf8(&n.body).unwrap(),
            r#"<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="fr-FR"><voice name="fr-FR-DeniseNeural"><prosody rate="2">Tom &amp; &quot;Jerry&quot; &lt;b&gt;say&lt;/b&gt; &apos;hi&apos;</prosody></voice></speak>"#
        );
    }

    #[test]
    fn maps_formats_speeds_and_the_default_voice() {
        for (format, header_value) in [
            ("mp3", "audio-24khz-48kbitrate-mono-mp3"),
            ("opus", "ogg-24khz-16bit-mono-opus"),
            ("wav", "riff-24khz-16bit-mono-pcm"),
            ("pcm", "raw-24khz-16bit-mono-pcm"),
        ] {
            let n = native(&format!(
                r#"{{"model":"azure-neural","input":"hi","response_format":"{format}"}}"#
            ));
            assert_eq!(header(&n, "x-microsoft-outputformat"), Some(header_value));
            assert_eq!(
                std::str::from_utf8(&n.body).unwrap(),
                r#"<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="en-US"><voice name="en-US-AvaMultilingualNeural">hi</voice></speak>"#
            );
        }
        let n = native(r#"{"model":"azure-neural","input":"hi","speed":0.5}"#);
        assert!(std::str::from_utf8(&n.body)
            .unwrap()
            .contains(r#"<prosody rate="0.5">hi</prosody>"#));
        assert!(output_format("aac").is_err());
    }

    #[test]
    fn voices_cannot_reshape_the_ssml() {
        let n = native(
            r#"{"model":"azure-neural","input":"a\u0001b","voice":"x\"><audio src=\"https://evil\"/><voice name=\"y"}"#,
        );
        let body = std::str::from_utf8(&n.body).unwrap();
        assert!(!body.contains("<audio"), "{body}");
        assert!(body.contains(r#"<voice name="x&quot;&gt;&lt;audio src=&quot;https://evil&quot;/&gt;&lt;voice name=&quot;y">a b</voice>"#), "{body}");
        assert!(body.contains(r#"xml:lang="en-US""#));
    }

    #[test]
    fn takes_the_locale_from_the_voice_name() {
        for (voice, locale_) in [
            ("en-US-AvaMultilingualNeural", "en-US"),
            ("zh-CN-shaanxi-XiaoniNeural", "zh-CN"),
            ("en-US-Ava:DragonHDLatestNeural", "en-US"),
            ("fil-PH-BlessicaNeural", "fil-PH"),
            ("MyCustomVoice", "en-US"),
            ("a-b", "en-US"),
            ("EN-US-x", "en-US"),
            ("en-\"x-y", "en-US"),
        ] {
            assert_eq!(locale(voice), locale_, "{voice}");
        }
    }

    #[test]
    fn reads_the_voice_list() {
        let page = read_voices(
            br#"[{"Name":"Microsoft Server Speech Text to Speech Voice (en-US, JennyNeural)","DisplayName":"Jenny","ShortName":"en-US-JennyNeural","Locale":"en-US","VoiceType":"Neural"}]"#,
        )
        .unwrap();
        assert_eq!(page.items[0].id, "en-US-JennyNeural");
        assert_eq!(page.items[0].name.as_deref(), Some("Jenny"));
        assert!(read_voices(b"{}").is_err());
        let r = voices_request();
        assert_eq!(r.path, "/cognitiveservices/voices/list");
        assert_eq!(r.method, http::Method::GET);
    }

    #[test]
    fn maps_errors() {
        let p = support::provider("azure-speech", KEY);
        let e = error_response(&p, 400, b"");
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert!(e.message.contains("bad request"), "{}", e.message);

        let e = error_response(&p, 401, format!("Access denied for key {KEY}").as_bytes());
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY), "{}", e.message);

        let e = error_response(&p, 429, b"");
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        for status in [502, 503] {
            let e = error_response(&p, status, b"<html>down</html>");
            assert_eq!(e.kind, UpstreamErrorKind::Failure);
            assert_eq!(e.message, format!("HTTP {status}"));
            assert!(e.retryable());
        }
    }
}
