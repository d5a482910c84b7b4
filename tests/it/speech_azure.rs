//! Azure AI Speech through the speech conformance cases, and what its fake must have received:
//! SSML built from the public fields, the output format header, the resource key.

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::client;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, decoded_audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{auth, TestGateway, PROVIDER_KEY};

const MODEL: &str = "azure-neural";
const DEFAULT_VOICE: &str = "en-US-AvaMultilingualNeural";

fn output_format(format: &str) -> &'static str {
    match format {
        "mp3" => "audio-24khz-48kbitrate-mono-mp3",
        "opus" => "ogg-24khz-16bit-mono-opus",
        "wav" => "riff-24khz-16bit-mono-pcm",
        "pcm" => "raw-24khz-16bit-mono-pcm",
        other => panic!("no Azure format for {other}"),
    }
}

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/ogg",
        "wav" => "audio/x-wav",
        _ => "audio/basic",
    }
}

/// `/cognitiveservices/v1` answers the audio itself, chunked, whatever the public stream format.
fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    let chunks = pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect();
    vec![Reply::chunked(
        200,
        native_content_type(format),
        chunks,
        false,
    )]
}

fn ssml(voice: &str, text: &str, speed: f64) -> String {
    let lang = voice.splitn(3, '-').take(2).collect::<Vec<_>>().join("-");
    let body = if speed == 1.0 {
        text.to_string()
    } else {
        format!(r#"<prosody rate="{speed}">{text}</prosody>"#)
    };
    format!(
        r#"<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="{lang}"><voice name="{voice}">{body}</voice></speak>"#
    )
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/cognitiveservices/v1");
    assert_eq!(req.header("ocp-apim-subscription-key"), Some(PROVIDER_KEY));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.header("content-type"), Some("application/ssml+xml"));
    assert_eq!(
        req.header("x-microsoft-outputformat"),
        Some(output_format(e.format))
    );
    assert_eq!(req.header("user-agent"), Some("switchyard"));
    assert_eq!(req.text(), ssml(e.voice, e.input, e.speed));
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![Reply::bytes(400, "text/plain", Vec::new())],
            400,
            "invalid_request",
        ),
        (
            vec![Reply::bytes(401, "text/plain", Vec::new())],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![Reply::bytes(
                429,
                "text/plain",
                b"Too many requests".to_vec(),
            )],
            429,
            "rate_limited",
        ),
        (
            vec![Reply::bytes(
                502,
                "text/html",
                b"<html>Bad Gateway</html>".to_vec(),
            )],
            502,
            "upstream_error",
        ),
    ]
}

fn retryable() -> Vec<Reply> {
    vec![Reply::bytes(503, "text/plain", Vec::new())]
}

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: &[
            ("mp3", "audio/mpeg"),
            ("opus", "audio/opus"),
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "opus", "pcm"],
        rejected_formats: &["aac", "flac"],
        speeds: &[0.5, 1.0, 2.0],
        rejected_speeds: &[0.25, 4.0],
        instructions: false,
        voice: "de-DE-KatjaNeural",
        default_voice: DEFAULT_VOICE,
        max_input_chars: 10_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn text_and_voice_are_escaped_into_the_ssml_and_no_client_credential_is_forwarded() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", audio(100, 1)));
    let resp = speech(
        &gw,
        MODEL,
        "</voice><voice name=\"x\">R&D's \"plan\"",
        json!({"voice": "zh-CN-shaanxi-XiaoniNeural", "speed": 0.5}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(100, 1));
    let sent = &fake.requests()[0];
    assert_eq!(
        sent.text(),
        r#"<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="zh-CN"><voice name="zh-CN-shaanxi-XiaoniNeural"><prosody rate="0.5">&lt;/voice&gt;&lt;voice name=&quot;x&quot;&gt;R&amp;D&apos;s &quot;plan&quot;</prosody></voice></speak>"#
    );
    assert!(!sent.text().contains(support::KEY));
    assert_eq!(sent.header("service-api-key"), None);
    assert_eq!(sent.header("authorization"), None);

    // The body is SSML: there is no JSON field to pass through, so any other field is refused.
    let resp = speech(&gw, MODEL, "hi", json!({"style": "cheerful"}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["style"].is_string());
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn sse_wraps_the_streamed_audio_but_not_wav() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let pieces = [audio(1200, 1), audio(900, 2)];
    fake.push(Reply::chunked(
        200,
        "audio/ogg",
        pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect(),
        false,
    ));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "opus", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
    assert!(decoded_audio(&events) == pieces.concat());

    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "wav", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["response_format"].is_string());
    assert_eq!(fake.requests().len(), 1);
}

/// `GET /api/v1/audio/voices` adds the region's voices from `/cognitiveservices/voices/list`,
/// asked with the operator's key.
#[test]
fn the_regions_voices_are_listed() {
    let fake = FakeProvider::start();
    fake.set_handler(|r| {
        (r.method == "GET" && r.path == "/cognitiveservices/voices/list").then(|| {
            if r.header("ocp-apim-subscription-key") != Some(PROVIDER_KEY) {
                return Reply::bytes(401, "text/plain", Vec::new());
            }
            Reply::json(
                200,
                json!([
                    {"Name": "Microsoft Server Speech Text to Speech Voice (en-US, AvaMultilingualNeural)",
                     "DisplayName": "Ava Multilingual", "ShortName": "en-US-AvaMultilingualNeural",
                     "Locale": "en-US", "VoiceType": "Neural", "Status": "GA"},
                    {"Name": "Microsoft Server Speech Text to Speech Voice (de-DE, KatjaNeural)",
                     "DisplayName": "Katja", "ShortName": "de-DE-KatjaNeural",
                     "Locale": "de-DE", "VoiceType": "Neural", "Status": "GA"},
                ]),
            )
        })
    });
    let gw = TestGateway::start(&fake);
    let resp = client::request(
        gw.addr,
        "GET",
        &format!("/api/v1/audio/voices?model={MODEL}"),
        &auth(),
        b"",
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let list = resp.json();
    assert_eq!(list["provider_voices"], "listed", "{list}");
    let data = list["data"].as_array().unwrap();
    assert_eq!(data[0]["id"], DEFAULT_VOICE);
    assert_eq!(data[0]["name"], "Ava Multilingual");
    assert!(
        data.iter()
            .any(|v| v["id"] == "de-DE-KatjaNeural" && v["source"] == "provider"),
        "{list}"
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.header("user-agent"), Some("switchyard"));
}
