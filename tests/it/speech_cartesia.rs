//! Cartesia through the speech conformance cases, and what its fake must have received.

use std::time::Duration;

use crate::support;
use base64::Engine;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, decoded_audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "sonic-3";
/// The family's default voice (the official Python SDK's README voice).
const DEFAULT_VOICE: &str = "e07c00bc-4134-4eae-9ea4-1a55fb45746b";

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        _ => "application/octet-stream",
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One `/tts/sse` event as Cartesia frames it: `event:` names the type, `data:` the JSON.
fn sse_event(body: &Value) -> (Duration, String) {
    let kind = body["type"].as_str().unwrap_or("chunk");
    (Duration::ZERO, format!("event: {kind}\ndata: {body}\n\n"))
}

fn chunk(audio: &[u8]) -> (Duration, String) {
    sse_event(
        &json!({"type": "chunk", "data": b64(audio), "done": false, "status_code": 206, "step_time": 12.5}),
    )
}

fn done() -> (Duration, String) {
    sse_event(&json!({"type": "done", "done": true, "status_code": 200}))
}

/// `/tts/bytes` answers the audio itself, streamed; `/tts/sse` (PCM with SSE) answers chunk events
/// then `done`.
fn answer(pieces: &[Vec<u8>], format: &str, sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    if sse && format == "pcm" {
        let mut events: Vec<_> = pieces.iter().map(|p| chunk(p)).collect();
        events.push(done());
        return vec![Reply::sse(events)];
    }
    let chunks = pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect();
    vec![Reply::chunked(
        200,
        native_content_type(format),
        chunks,
        false,
    )]
}

fn expected_output_format(format: &str) -> Value {
    match format {
        "mp3" => json!({"container": "mp3", "sample_rate": 44100, "bit_rate": 128000}),
        "wav" => json!({"container": "wav", "encoding": "pcm_s16le", "sample_rate": 24000}),
        "pcm" => json!({"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}),
        other => panic!("no Cartesia format for {other}"),
    }
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    let sse_endpoint = e.sse && e.format == "pcm";
    assert_eq!(
        req.path,
        if sse_endpoint {
            "/tts/sse"
        } else {
            "/tts/bytes"
        }
    );
    let bearer = format!("Bearer {PROVIDER_KEY}");
    assert_eq!(req.header("authorization"), Some(bearer.as_str()));
    assert_eq!(req.header("cartesia-version"), Some("2026-08-14"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    if sse_endpoint {
        assert_eq!(req.header("accept"), Some("text/event-stream"));
    }
    // The family's only speed is 1, Cartesia's default: never sent.
    assert_eq!(e.speed, 1.0);
    assert_eq!(
        req.json(),
        json!({
            "model_id": "sonic-3",
            "transcript": e.input,
            "voice": e.voice,
            "output_format": expected_output_format(e.format),
        })
    );
}

fn error(status: u16, code: Option<&str>, title: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"error_code": code, "title": title, "message": message, "request_id": "550e8400-e29b-41d4-a716-446655440000"}),
    )
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![error(
                400,
                None,
                "Bad request",
                "transcript must not be empty",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![error(
                401,
                None,
                "Unauthorized",
                &format!("Invalid API key {PROVIDER_KEY}"),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![error(402, None, "Payment required", "Out of credits.")],
            502,
            "upstream_error",
        ),
        (
            vec![error(
                429,
                Some("concurrency_limited"),
                "Too many concurrent requests",
                "You have exceeded your plan's concurrency limit.",
            )],
            429,
            "rate_limited",
        ),
        // Older API versions answer plain text.
        (
            vec![Reply::bytes(
                400,
                "text/plain",
                b"Bad Request: invalid output format".to_vec(),
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
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm")
        ],
        sse_formats: &["mp3", "pcm"],
        rejected_formats: &["opus", "aac", "flac"],
        speeds: &[1.0],
        rejected_speeds: &[0.25, 0.5, 2.0, 4.0],
        instructions: false,
        voice: "a0e99841-438c-4a64-b679-ae501e7d6091",
        default_voice: DEFAULT_VOICE,
        max_input_chars: 10_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn native_fields_pass_through_and_no_client_credential_is_forwarded() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", audio(100, 1)));
    let resp = speech(
        &gw,
        MODEL,
        "Bonjour",
        json!({
            "voice": "v-fr",
            "language": "fr",
            "generation_config": {"emotion": "calm", "volume": 1.5, "speed": 0.8},
            "pronunciation_dict_id": "pd_1",
        }),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(100, 1));
    let sent = &fake.requests()[0];
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    assert!(!sent.text().contains(support::KEY));
    assert_eq!(sent.header("service-api-key"), None);
    // Verbatim, after the known fields.
    assert_eq!(
        sent.text(),
        r#"{"model_id":"sonic-3","transcript":"Bonjour","voice":"v-fr","output_format":{"container":"mp3","sample_rate":44100,"bit_rate":128000},"generation_config":{"emotion":"calm","speed":0.8,"volume":1.5},"language":"fr","pronunciation_dict_id":"pd_1"}"#
    );

    // A field the family does not take is refused by name, nothing sent.
    let resp = speech(&gw, MODEL, "hi", json!({"add_timestamps": true}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["add_timestamps"].is_string());
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn an_sse_error_event_after_audio_ends_the_public_stream_with_an_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::sse(vec![
        chunk(&audio(3000, 1)),
        sse_event(&json!({
            "type": "error", "done": true, "status_code": 500, "error_code": null,
            "title": "Internal error", "message": "Generation failed.", "request_id": "r-1",
        })),
    ]));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "pcm", "stream_format": "sse", "retries": 2}),
    );
    assert_eq!(resp.status, 200);
    let events = public_events(&resp);
    let (last, deltas) = events.split_last().unwrap();
    assert_eq!(decoded_audio(deltas), audio(3000, 1));
    assert_eq!(last["type"], "error", "{last}");
    // Audio already reached the client: not retried.
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn an_sse_error_event_before_audio_is_retried_then_answered() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let busy = || {
        Reply::sse(vec![sse_event(&json!({
            "type": "error", "done": true, "status_code": 429, "error_code": "concurrency_limited",
            "title": "Too many concurrent requests", "message": "Slow down.", "request_id": "r-2",
        }))])
    };
    fake.push(busy());
    fake.push(Reply::sse(vec![chunk(&audio(500, 2)), done()]));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "pcm", "stream_format": "sse", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
    assert_eq!(decoded_audio(&events), audio(500, 2));
    assert_eq!(fake.requests().len(), 2);

    // Without retries, the in-band refusal is the caller's 429.
    fake.push(busy());
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 429, "{}", resp.text());
    assert_eq!(resp.json()["code"], "rate_limited");
}

#[test]
fn an_sse_stream_without_done_is_not_a_success() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::sse(vec![chunk(&audio(800, 3))]));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200);
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "error", "{events:?}");
}

#[test]
fn wav_is_never_sse() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "wav", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["response_format"].is_string());
    assert!(fake.requests().is_empty());
}

#[test]
fn a_model_cartesia_does_not_serve_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(error(
        400,
        Some("model_not_found"),
        "Model not found",
        "Model sonic-3 is not available.",
    ));
    let resp = speech(&gw, MODEL, "hi", json!({"retries": 2}));
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    assert!(body["message"].as_str().unwrap().contains(MODEL), "{body}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}
