//! `examples/inhouse_tts.rs` (compiled in here from the example's own file): an in-house TTS
//! kind written outside the crate whose server answers JSON with base64 audio, served end to end
//! against a fake of that server on 127.0.0.1. The caller gets the audio itself from the JSON
//! document, and Switchyard's speech events from the server's own SSE events; the fake checks the
//! native request (path, Bearer key, body); a 200 carrying an error, and a stream cut before its
//! end event, are bad answers, never audio.

use base64::Engine;
use serde_json::json;
use std::time::Duration;

use crate::support::fake::{FakeProvider, Recorded, Reply};
use crate::support::speech_conformance::{decoded_audio, public_events};
use crate::support::{self, TestGateway};

#[allow(dead_code)]
#[path = "../../examples/inhouse_tts.rs"]
mod example;

const KEY: &str = "studio-key-0001";

fn config(base_url: &str, ports: (u16, u16)) -> String {
    format!(
        r#"
version: 1
threads: 1
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: a, address: "127.0.0.1:{p0}"}}
    - {{name: b, address: "127.0.0.1:{p1}"}}
  auth:
    api_keys:
      - {{name: tester, key: "{key}"}}
  providers:
    studio: {{kind: inhouse-tts, api_key: "{KEY}", base_url: "{base_url}"}}
  models:
    inhouse-voice:
      family: openai-tts
      capabilities: {{sse_formats: [mp3, pcm]}}
      targets: [{{provider: studio, model: studio-v2}}]
"#,
        p0 = ports.0,
        p1 = ports.1,
        key = support::KEY,
    )
}

fn start(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with_kinds(|ports| config(&fake.base_url(), ports), &example::kinds())
}

fn speak(gw: &TestGateway, extra: serde_json::Value) -> support::client::Response {
    let mut body =
        json!({"model": "inhouse-voice", "input": "Hello there", "voice": "alloy", "retries": 0});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    support::post(gw, "/api/v1/audio/speech", &body)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The native request the example's adapter builds.
fn assert_native(req: &Recorded, stream: bool) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/synthesize");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(req.header("service-api-key"), None);
    assert_eq!(
        req.json(),
        json!({"model": "studio-v2", "voice": "alloy", "text": "Hello there", "format": "mp3",
               "speed": 1.0, "stream": stream})
    );
}

#[test]
fn a_json_document_with_base64_audio_is_answered_as_the_audio() {
    let fake = FakeProvider::start();
    let audio: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    fake.push(Reply::json(
        200,
        json!({"audio": b64(&audio), "characters": 11}),
    ));
    let gw = start(&fake);
    let r = speak(&gw, json!({}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("audio/mpeg"));
    assert_eq!(r.body, audio);
    let seen = fake.requests();
    assert_eq!(seen.len(), 1);
    assert_native(&seen[0], false);

    // A 200 that carries the server's error is not audio: a bad answer, retries spent.
    fake.push(Reply::json(
        200,
        json!({"error": {"code": "busy", "message": "try later"}}),
    ));
    let r = speak(&gw, json!({}));
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["code"], "upstream_bad_response", "{}", r.text());
    // The server's error classification: the caller's 400 with its reason.
    fake.push(Reply::json(
        400,
        json!({"error": {"code": "text_too_long", "message": "at most 500 characters"}}),
    ));
    let r = speak(&gw, json!({}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("at most 500 characters"), "{}", r.text());
}

#[test]
fn server_sent_events_with_base64_audio_become_switchyards_speech_events() {
    let fake = FakeProvider::start();
    let pieces: [&[u8]; 3] = [b"first piece ", b"second piece ", b"last"];
    let mut events: Vec<(Duration, String)> = pieces
        .iter()
        .map(|p| {
            (
                Duration::ZERO,
                format!("data: {}\n\n", json!({"audio": b64(p)})),
            )
        })
        .collect();
    events.insert(1, (Duration::ZERO, ": keep-alive\n\n".to_string()));
    events.push((
        Duration::ZERO,
        format!("data: {}\n\n", json!({"done": true})),
    ));
    fake.push(Reply::sse(events));
    let gw = start(&fake);
    let r = speak(&gw, json!({"stream_format": "sse"}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let events = public_events(&r);
    assert_eq!(decoded_audio(&events), pieces.concat());
    assert_eq!(
        events.last().unwrap()["type"],
        "speech.audio.done",
        "{events:?}"
    );
    assert_native(&fake.requests()[0], true);

    // Cut before the end event: not a whole answer; the caller is told, not handed it as done.
    fake.push(Reply::sse(vec![(
        Duration::ZERO,
        format!("data: {}\n\n", json!({"audio": b64(b"only this")})),
    )]));
    let r = speak(&gw, json!({"stream_format": "sse"}));
    let events = public_events(&r);
    assert!(
        events.iter().all(|e| e["type"] != "speech.audio.done"),
        "{events:?}"
    );
    assert!(
        r.status >= 500 || events.iter().any(|e| e["type"] == "error"),
        "{} {events:?}",
        r.status
    );
}
