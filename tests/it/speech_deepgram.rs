//! Deepgram Aura-2 through the speech conformance cases, and what its fake must have received.

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, decoded_audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "aura-2";
const DEFAULT_VOICE: &str = "thalia-en";

fn native_query(format: &str) -> &'static str {
    match format {
        "mp3" => "encoding=mp3",
        "opus" => "encoding=opus&container=ogg",
        "aac" => "encoding=aac",
        "flac" => "encoding=flac",
        "wav" => "encoding=linear16&container=wav&sample_rate=24000",
        "pcm" => "encoding=linear16&container=none&sample_rate=24000",
        other => panic!("no Deepgram format for {other}"),
    }
}

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/ogg",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        "wav" => "audio/wav",
        _ => "application/octet-stream",
    }
}

/// Deepgram's answer for a voice that is not one of the model's: a 400 naming no voice.
fn no_such_model() -> Reply {
    Reply::json(
        400,
        json!({"err_code": "INVALID_QUERY_PARAMETER", "err_msg": "No such model/version combination found.", "request_id": "r-1"}),
    )
}

/// `/v1/speak` answers the audio itself, streamed, whatever the public stream format.
fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    let chunks = pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect();
    vec![Reply::chunked(
        200,
        native_content_type(format),
        chunks,
        false,
    )]
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(
        req.path,
        format!(
            "/v1/speak?model=aura-2-{}&{}",
            e.voice,
            native_query(e.format)
        )
    );
    let token = format!("Token {PROVIDER_KEY}");
    assert_eq!(req.header("authorization"), Some(token.as_str()));
    assert_eq!(req.header("content-type"), Some("application/json"));
    // The family's only speed is 1, Deepgram's default: never sent.
    assert_eq!(e.speed, 1.0);
    assert!(!req.path.contains("speed"));
    assert_eq!(req.json(), json!({"text": e.input}));
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"err_code": code, "err_msg": message, "request_id": "r-2"}),
    )
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![error(400, "Bad Request", "Text must not be empty.")],
            400,
            "invalid_request",
        ),
        // The conformance request names no voice: the refused combination is the configured
        // default's, the operator's problem.
        (vec![no_such_model()], 503, "model_unavailable"),
        (
            vec![error(
                401,
                "INVALID_AUTH",
                &format!("Invalid credentials {PROVIDER_KEY}"),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![error(
                402,
                "ASR_PAYMENT_REQUIRED",
                "Project does not have enough credits.",
            )],
            502,
            "upstream_error",
        ),
        (
            vec![error(429, "TOO_MANY_REQUESTS", "Too many requests.")],
            429,
            "rate_limited",
        ),
        (
            vec![Reply::json(
                400,
                json!({"category": "INVALID_QUERY_PARAMETER", "message": "Invalid encoding.", "details": "", "request_id": "r-3"}),
            )],
            400,
            "invalid_request",
        ),
        (
            vec![Reply::bytes(
                500,
                "text/html",
                b"<html>Internal Server Error</html>".to_vec(),
            )],
            502,
            "upstream_error",
        ),
    ]
}

fn retryable() -> Vec<Reply> {
    vec![Reply::bytes(
        503,
        "text/html",
        b"<html>Service Unavailable</html>".to_vec(),
    )]
}

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: &[
            ("mp3", "audio/mpeg"),
            ("opus", "audio/opus"),
            ("aac", "audio/aac"),
            ("flac", "audio/flac"),
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "opus", "aac", "flac", "pcm"],
        rejected_formats: &[],
        speeds: &[1.0],
        rejected_speeds: &[0.25, 0.5, 2.0, 4.0],
        instructions: false,
        voice: "luna-en",
        default_voice: DEFAULT_VOICE,
        max_input_chars: 2_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn a_voice_deepgram_does_not_have_is_the_callers_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(no_such_model());
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"voice": "helios-en", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "invalid_request", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("No such model"),
        "{body}"
    );
    assert_eq!(fake.requests().len(), 1, "not retried");
    assert_eq!(
        fake.requests()[0].path,
        "/v1/speak?model=aura-2-helios-en&encoding=mp3"
    );
}

#[test]
fn voices_are_query_encoded_and_no_client_credential_is_forwarded() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", audio(64, 1)));
    let resp = speech(&gw, MODEL, "hi", json!({"voice": "x&speed=1.5"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(64, 1));
    let sent = &fake.requests()[0];
    assert_eq!(
        sent.path,
        "/v1/speak?model=aura-2-x%26speed%3D1.5&encoding=mp3"
    );
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Token {PROVIDER_KEY}").as_str())
    );
    assert!(!sent.text().contains(support::KEY));
    assert_eq!(sent.header("service-api-key"), None);

    // Deepgram's body takes nothing but the text: any other field is refused by name.
    let resp = speech(&gw, MODEL, "hi", json!({"mip_opt_out": true}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["mip_opt_out"].is_string());
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn sse_wraps_the_streamed_audio_but_not_wav() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let pieces = [audio(2000, 1), audio(1000, 2)];
    fake.push(Reply::chunked(
        200,
        "audio/flac",
        pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect(),
        false,
    ));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "flac", "stream_format": "sse"}),
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
