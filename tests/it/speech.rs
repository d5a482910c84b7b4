//! Speech end to end through the gateway against a fake OpenAI.

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{client, post, TestGateway, PROVIDER_KEY};

fn audio(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn audio_streams_through_identical_with_the_right_content_type() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for (format, ctype) in [
        ("mp3", "audio/mpeg"),
        ("opus", "audio/opus"),
        ("aac", "audio/aac"),
        ("flac", "audio/flac"),
        ("wav", "audio/wav"),
    ] {
        let bytes = audio(300_000);
        let chunks: Vec<(Duration, Vec<u8>)> = bytes
            .chunks(70_000)
            .map(|c| (Duration::ZERO, c.to_vec()))
            .collect();
        fake.push(Reply::chunked(
            200,
            "application/octet-stream",
            chunks,
            false,
        ));
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &json!({"model": "tts-1", "input": "Hello there", "voice": "nova", "response_format": format}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.header("content-type"), Some(ctype));
        assert!(resp.complete);
        assert!(resp.body == bytes, "{format}: audio bytes differ");
    }
    let got = fake.requests();
    let last = got.last().unwrap();
    assert_eq!(last.method, "POST");
    assert_eq!(last.path, "/v1/audio/speech");
    assert_eq!(
        last.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    assert_eq!(
        last.header("service-api-key"),
        None,
        "client credentials leaked upstream"
    );
    assert_eq!(
        last.json(),
        json!({"model": "tts-1", "input": "Hello there", "voice": "nova", "response_format": "wav", "speed": 1.0})
    );
}

#[test]
fn defaults_fill_voice_format_and_speed() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", audio(10)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi", "speed": 0.25}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("audio/mpeg"));
    let sent = fake.requests()[0].json();
    assert_eq!(sent["voice"], "alloy");
    assert_eq!(sent["response_format"], "mp3");
    assert_eq!(sent["speed"], 0.25);
}

#[test]
fn sse_events_pass_through_in_order_each_as_it_arrives() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Event spacing is measured: nothing heavy may run beside what follows.
    let _alone = support::timing_lock();
    let gap = Duration::from_millis(150);
    let mut events = Vec::new();
    for i in 0..4 {
        let ev = json!({"type": "speech.audio.delta", "audio": base64_of(&[i as u8; 8])});
        events.push((
            if i == 0 { Duration::ZERO } else { gap },
            format!("data: {ev}\n\n"),
        ));
    }
    let done = json!({"type": "speech.audio.done", "usage": {"input_tokens": 3, "output_tokens": 9, "total_tokens": 12}});
    events.push((gap, format!("data: {done}\n\n")));
    fake.push(Reply::sse(events));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse", "instructions": "whisper"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let got = client::sse_events(&resp.body);
    assert_eq!(got.len(), 5);
    for (i, ev) in got.iter().take(4).enumerate() {
        let v: serde_json::Value = serde_json::from_str(ev).unwrap();
        assert_eq!(v["type"], "speech.audio.delta");
        assert_eq!(v["audio"], base64_of(&[i as u8; 8]));
    }
    assert!(got[4].contains("speech.audio.done"));
    // One chunk per event, spaced like the provider spaced them: nothing was held back.
    assert!(
        resp.chunks.len() >= 5,
        "events were batched: {} chunks",
        resp.chunks.len()
    );
    for w in resp.chunks.windows(2).take(4) {
        let d = w[1].0 - w[0].0;
        assert!(
            d >= Duration::from_millis(100),
            "event arrived early/batched: {d:?}"
        );
    }
    let sent = fake.requests()[0].json();
    assert_eq!(sent["stream_format"], "sse");
    assert_eq!(sent["instructions"], "whisper");
}

#[test]
fn provider_dying_mid_audio_truncates_the_answer_visibly() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        vec![
            (Duration::ZERO, audio(5000)),
            (Duration::from_millis(20), audio(5000)),
        ],
        true,
    ));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi", "retries": 3}),
    );
    assert_eq!(resp.status, 200);
    assert!(
        !resp.complete,
        "a truncated stream must not end like a success"
    );
    // Retries stop once bytes went to the client.
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn provider_dying_mid_sse_ends_with_an_error_event() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let ev = json!({"type": "speech.audio.delta", "audio": "AAAA"});
    fake.push(Reply::chunked(
        200,
        "text/event-stream",
        vec![
            (Duration::ZERO, format!("data: {ev}\n\n").into_bytes()),
            (Duration::ZERO, b"data: {\"type\":\"speech.au".to_vec()),
        ],
        true,
    ));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200);
    let events = client::sse_events(&resp.body);
    assert_eq!(events.len(), 2, "{events:?}");
    let last: serde_json::Value = serde_json::from_str(&events[1]).unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(last["error"]["code"], "upstream_error");
}

#[test]
fn speech_errors_from_the_provider_are_translated() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        400,
        json!({"error": {"message": "Invalid voice 'x'", "type": "invalid_request_error", "param": "voice", "code": null}}),
    ));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi", "voice": "x"}),
    );
    assert_eq!(resp.status, 400);
    let body = resp.json();
    assert_eq!(body["code"], "invalid_request");
    assert!(body["message"].as_str().unwrap().contains("Invalid voice"));
}

fn base64_of(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}
