//! OpenAI and Azure OpenAI through the speech conformance cases.

use std::time::Duration;

use crate::support;
use base64::Engine;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{speech_conformance, Expect, SpeechCase};
use support::{client, TestGateway, PROVIDER_KEY};

const FORMATS: &[(&str, &str)] = &[
    ("mp3", "audio/mpeg"),
    ("opus", "audio/opus"),
    ("aac", "audio/aac"),
    ("flac", "audio/flac"),
    ("wav", "audio/wav"),
    ("pcm", "audio/pcm"),
];

/// OpenAI answers raw audio, or its own SSE events (which the gateway passes through).
fn answer(pieces: &[Vec<u8>], _format: &str, sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    if !sse {
        let chunks = pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect();
        return vec![Reply::chunked(
            200,
            "application/octet-stream",
            chunks,
            false,
        )];
    }
    let mut events: Vec<(Duration, String)> = pieces
        .iter()
        .map(|p| {
            let ev = json!({"type": "speech.audio.delta", "audio": base64::engine::general_purpose::STANDARD.encode(p)});
            (Duration::ZERO, format!("data: {ev}\n\n"))
        })
        .collect();
    let done = json!({"type": "speech.audio.done", "usage": {"input_tokens": 10, "output_tokens": 40, "total_tokens": 50}});
    events.push((Duration::ZERO, format!("data: {done}\n\n")));
    vec![Reply::sse(events)]
}

fn check_body(req: &Recorded, e: &Expect<'_>, model: &str) {
    let mut want = json!({
        "model": model,
        "input": e.input,
        "voice": e.voice,
        "response_format": e.format,
        "speed": e.speed,
    });
    if e.sse {
        want["stream_format"] = json!("sse");
    }
    assert_eq!(req.json(), want);
    assert_eq!(req.header("content-type"), Some("application/json"));
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![Reply::json(
                400,
                json!({"error": {"message": "Invalid voice", "type": "invalid_request_error", "param": "voice", "code": null}}),
            )],
            400,
            "invalid_request",
        ),
        (
            vec![Reply::json(
                401,
                json!({"error": {"message": "Incorrect API key provided: sk-provider-secret-0001", "type": "invalid_request_error", "code": "invalid_api_key"}}),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![Reply::json(
                429,
                json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
            )],
            429,
            "rate_limited",
        ),
        (
            vec![Reply::json(
                500,
                json!({"error": {"message": "The server had an error", "type": "server_error"}}),
            )],
            502,
            "upstream_error",
        ),
    ]
}

fn retryable() -> Vec<Reply> {
    vec![Reply::json(
        503,
        json!({"error": {"message": "overloaded", "type": "server_error"}}),
    )]
}

fn check_openai(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.path, "/v1/audio/speech");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    check_body(req, e, "gpt-4o-mini-tts");
}

speech_conformance!(
    openai_conformance,
    SpeechCase {
        model: "gpt-4o-mini-tts",
        instructions: true,
        formats: FORMATS,
        sse_formats: &["mp3", "pcm"],
        rejected_formats: &[],
        speeds: &[0.25, 0.5, 1.0, 2.0, 4.0],
        rejected_speeds: &[],
        voice: "nova",
        default_voice: "alloy",
        max_input_chars: 4096,
        answer,
        check_request: check_openai,
        errors,
        retryable,
    }
);

fn check_azure_deployment(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(
        req.path,
        "/openai/deployments/tts-deployment/audio/speech?api-version=2025-03-01-preview"
    );
    assert_eq!(req.header("api-key"), Some(PROVIDER_KEY));
    assert_eq!(req.header("authorization"), None);
    check_body(req, e, "tts-deployment");
}

fn azure_errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    let mut e = errors();
    e.push((
        vec![Reply::json(400, json!({"error": {"code": "content_filter", "message": "The prompt was filtered", "innererror": {"code": "ResponsibleAIPolicyViolation"}}}))],
        400,
        "content_policy_violation",
    ));
    e
}

speech_conformance!(
    azure_deployment_url_conformance,
    SpeechCase {
        model: "azure-tts",
        instructions: true,
        formats: FORMATS,
        sse_formats: &["mp3"],
        rejected_formats: &[],
        speeds: &[0.25, 4.0],
        rejected_speeds: &[],
        voice: "nova",
        default_voice: "alloy",
        max_input_chars: 4096,
        answer,
        check_request: check_azure_deployment,
        errors: azure_errors,
        retryable,
    }
);

fn check_azure_v1(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.path, "/openai/v1/audio/speech");
    assert_eq!(req.header("api-key"), Some(PROVIDER_KEY));
    check_body(req, e, "tts-v1-deployment");
}

speech_conformance!(
    azure_v1_url_conformance,
    SpeechCase {
        model: "azure-tts-v1",
        instructions: false,
        formats: &[("mp3", "audio/mpeg")],
        sse_formats: &[],
        rejected_formats: &[],
        speeds: &[1.0],
        rejected_speeds: &[],
        voice: "nova",
        default_voice: "alloy",
        max_input_chars: 4096,
        answer,
        check_request: check_azure_v1,
        errors,
        retryable,
    }
);

// ---- OpenAI's own behaviour ------------------------------------------------------------------

fn speak(gw: &TestGateway, body: serde_json::Value) -> support::client::Response {
    support::post(gw, "/api/v1/audio/speech", &body)
}

fn delta(audio: &[u8]) -> String {
    let ev = json!({"type": "speech.audio.delta", "audio": base64::engine::general_purpose::STANDARD.encode(audio)});
    format!("data: {ev}\n\n")
}

/// OpenAI's (and Azure's) own SSE passes through, but a stream that ends cleanly without its
/// closing `speech.audio.done` was cut short: the caller's stream ends with an error event, never
/// like a complete one.
#[test]
fn a_stream_without_speech_audio_done_ends_with_an_error_event() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for model in ["gpt-4o-mini-tts", "azure-tts"] {
        fake.push(Reply::sse(vec![
            (Duration::ZERO, delta(&[1; 8])),
            (Duration::from_millis(10), delta(&[2; 8])),
        ]));
        let resp = speak(
            &gw,
            json!({"model": model, "input": "hi", "stream_format": "sse", "retries": 2}),
        );
        assert_eq!(resp.status, 200, "{model}: {}", resp.text());
        let events = client::sse_events(&resp.body);
        assert_eq!(events.len(), 3, "{model}: {events:?}");
        for ev in &events[..2] {
            let v: serde_json::Value = serde_json::from_str(ev).unwrap();
            assert_eq!(v["type"], "speech.audio.delta", "{model}");
        }
        let last: serde_json::Value = serde_json::from_str(&events[2]).unwrap();
        assert_eq!(last["type"], "error", "{model}: {last}");
        assert_eq!(last["error"]["code"], "upstream_bad_response", "{model}");
        assert!(
            last["error"]["message"]
                .as_str()
                .unwrap()
                .contains("speech.audio.done"),
            "{model}: {last}"
        );
    }
    assert_eq!(fake.requests().len(), 2, "audio went out: no retry");
}

/// The closing event counts even when the stream ends right after it without its blank line.
#[test]
fn a_done_event_missing_its_blank_line_still_closes_the_stream() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let done = json!({"type": "speech.audio.done", "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}});
    fake.push(Reply::sse(vec![
        (Duration::ZERO, delta(&[7; 8])),
        (Duration::ZERO, format!("data: {done}")),
    ]));
    let resp = speak(
        &gw,
        json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.complete);
    let events = client::sse_events(&resp.body);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[1].contains("speech.audio.done"), "{events:?}");
}

/// gpt-4o-mini-tts takes a custom voice as `{"id": "voice_…"}` and gets it in that shape; models
/// and providers without custom voices refuse it by name, and a malformed one is refused.
#[test]
fn custom_voices_reach_openai_as_objects() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", vec![1, 2, 3]));
    let resp = speak(
        &gw,
        json!({"model": "gpt-4o-mini-tts", "input": "hi", "voice": {"id": "voice_1234"}}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, vec![1, 2, 3]);
    assert_eq!(
        fake.requests()[0].json()["voice"],
        json!({"id": "voice_1234"})
    );

    for (body, why) in [
        (
            json!({"model": "tts-1", "input": "hi", "voice": {"id": "voice_1234"}}),
            "not a custom voice",
        ),
        (
            json!({"model": "azure-tts", "input": "hi", "voice": {"id": "voice_1234"}}),
            "Azure OpenAI",
        ),
        (
            json!({"model": "gpt-4o-mini-tts", "input": "hi", "voice": {"id": 5}}),
            "custom voice {\"id\"",
        ),
        (
            json!({"model": "gpt-4o-mini-tts", "input": "hi", "voice": {"id": "voice_1", "name": "x"}}),
            "custom voice {\"id\"",
        ),
        (
            json!({"model": "gpt-4o-mini-tts", "input": "hi", "voice": {"id": " "}}),
            "must not be empty",
        ),
    ] {
        let resp = speak(&gw, body.clone());
        assert_eq!(resp.status, 400, "{body}: {}", resp.text());
        let detail = resp.json()["details"]["voice"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(detail.contains(why), "{body}: {detail}");
    }
    assert_eq!(
        fake.requests().len(),
        1,
        "a refused voice reached a provider"
    );
}

/// gpt-4o-mini-tts takes at most 2,000 input tokens (OpenAI's model page) besides the speech
/// endpoint's 4,096 characters: a text within the characters but over the tokens (a CJK text) is
/// the gateway's 413 naming `input`'s tokens and the bound, nothing sent; tts-1, bounded only by
/// characters, takes the same text; the character bound still holds for gpt-4o-mini-tts.
#[test]
fn gpt_4o_mini_tts_refuses_more_than_2000_input_tokens() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let cjk = "龘".repeat(3000);
    let resp = speak(&gw, json!({"model": "gpt-4o-mini-tts", "input": cjk}));
    assert_eq!(resp.status, 413, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "input_too_long", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("input is too long for model gpt-4o-mini-tts"),
        "{message}"
    );
    assert!(message.contains("tokens, the limit is 2000"), "{message}");
    assert!(fake.requests().is_empty(), "nothing sent");

    fake.push(Reply::bytes(200, "audio/mpeg", vec![1, 2, 3]));
    let resp = speak(&gw, json!({"model": "tts-1", "input": cjk}));
    assert_eq!(resp.status, 200, "{}", resp.text());

    let long = "a".repeat(4097);
    let resp = speak(&gw, json!({"model": "gpt-4o-mini-tts", "input": long}));
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert!(
        resp.json()["message"]
            .as_str()
            .unwrap()
            .contains("4097 characters, the limit is 4096"),
        "{}",
        resp.text()
    );
    assert_eq!(fake.requests().len(), 1);
}
