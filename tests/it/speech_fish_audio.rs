//! Fish Audio through the speech conformance cases, and what its fake must have received.

use std::time::Duration;

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, decoded_audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "fish-s2.1-pro";
/// The family's default voice (a voice model id from the official SDK's docs).
const DEFAULT_VOICE: &str = "802e3bc2b27e49c2995d23ef70e6ac89";

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/ogg",
        "wav" => "audio/wav",
        _ => "application/octet-stream",
    }
}

/// `/v1/tts` answers the audio itself, chunked, whatever the public stream format.
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
    assert_eq!(req.path, "/v1/tts");
    let bearer = format!("Bearer {PROVIDER_KEY}");
    assert_eq!(req.header("authorization"), Some(bearer.as_str()));
    assert_eq!(req.header("model"), Some("s2.1-pro"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    let mut expected = json!({"text": e.input, "reference_id": e.voice, "format": e.format});
    if matches!(e.format, "wav" | "pcm") {
        expected["sample_rate"] = json!(24000);
    }
    // Speed 1 is Fish Audio's default and is not sent; the others go as `prosody.speed`.
    if e.speed != 1.0 {
        expected["prosody"] = json!({"speed": e.speed});
    }
    assert_eq!(req.json(), expected);
}

fn error(status: u16, message: &str) -> Reply {
    Reply::json(status, json!({"message": message, "status": status}))
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![error(422, "chunk_length must be at least 100")],
            400,
            "invalid_request",
        ),
        (
            vec![error(401, &format!("Invalid Token {PROVIDER_KEY}"))],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![error(402, "Insufficient credits")],
            502,
            "upstream_error",
        ),
        // The conformance request names no voice: the missing voice is the configured default,
        // the operator's problem.
        (
            vec![error(404, "Voice model not found")],
            503,
            "model_unavailable",
        ),
        (vec![error(429, "Rate limit exceeded")], 429, "rate_limited"),
        // A body Fish Audio could not parse is answered in plain text.
        (
            vec![Reply::bytes(
                400,
                "text/plain",
                b"Failed to parse the request body".to_vec(),
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
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "opus", "pcm"],
        rejected_formats: &["aac", "flac"],
        speeds: &[0.5, 1.0, 2.0],
        rejected_speeds: &[0.25, 4.0],
        instructions: false,
        voice: "7f92f8afb8ec43bf81429cc1c9199cb1",
        default_voice: DEFAULT_VOICE,
        max_input_chars: 10_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn a_voice_fish_audio_does_not_have_is_the_callers_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(error(404, "Voice model not found"));
    let resp = speech(&gw, MODEL, "hi", json!({"voice": "nope", "retries": 2}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "invalid_request", "{body}");
    assert_eq!(fake.requests().len(), 1, "not retried");
    assert_eq!(fake.requests()[0].json()["reference_id"], "nope");
}

#[test]
fn native_fields_pass_through_and_no_client_credential_is_forwarded() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", audio(100, 1)));
    let resp = speech(
        &gw,
        MODEL,
        "Bonjour",
        json!({"voice": "v-fr", "latency": "normal", "temperature": 0.6, "chunk_length": 150}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(100, 1));
    let sent = &fake.requests()[0];
    assert!(!sent.text().contains(support::KEY));
    assert_eq!(sent.header("service-api-key"), None);
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    // Verbatim, after the known fields.
    assert_eq!(
        sent.text(),
        r#"{"text":"Bonjour","reference_id":"v-fr","format":"mp3","chunk_length":150,"latency":"normal","temperature":0.6}"#
    );

    // `prosody` is the gateway's (from `speed`): a caller cannot send its own.
    let resp = speech(&gw, MODEL, "hi", json!({"prosody": {"volume": 3}}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["prosody"].is_string());
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn sse_wraps_the_streamed_audio() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let pieces = [audio(1500, 1), audio(700, 2)];
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
        json!({"response_format": "opus", "stream_format": "sse", "speed": 2}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
    assert!(decoded_audio(&events) == pieces.concat());
    let sent: Value = fake.requests()[0].json();
    assert_eq!(sent["format"], "opus");
    assert_eq!(sent["prosody"], json!({"speed": 2.0}));
}
