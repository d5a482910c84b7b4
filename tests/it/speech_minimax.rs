//! MiniMax through the speech conformance cases.

use std::time::Duration;

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, decoded_audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "speech-2.8-hd";

fn ok() -> Value {
    json!({"status_code": 0, "status_msg": ""})
}

fn event(body: &Value) -> (Duration, String) {
    (Duration::ZERO, format!("data: {body}\n\n"))
}

fn delta(audio: &[u8]) -> (Duration, String) {
    event(
        &json!({"data": {"audio": hex::encode(audio), "status": 1}, "trace_id": "t-1", "base_resp": ok()}),
    )
}

/// The last event as MiniMax sends it by default, repeating the whole audio (the gateway asks it
/// not to, and must cope if it does anyway).
fn last(all: &[u8]) -> (Duration, String) {
    last_with(&hex::encode(all))
}

/// The last event with `stream_options.exclude_aggregated_audio: true`: no audio of its own.
fn last_excluded() -> (Duration, String) {
    last_with("")
}

fn last_with(audio_hex: &str) -> (Duration, String) {
    let size = audio_hex.len() / 2;
    event(&json!({
        "data": {"audio": audio_hex, "status": 2},
        "extra_info": {"audio_length": 1200, "audio_sample_rate": 32000,
                       "bitrate": 128000, "word_count": 9, "usage_characters": 44,
                       "audio_format": "mp3", "audio_channel": 1, "audio_size": size},
        "trace_id": "t-1",
        "base_resp": {"status_code": 0, "status_msg": "success"},
    }))
}

fn in_band(code: i64, msg: &str) -> Value {
    json!({"data": null, "trace_id": "t-1", "base_resp": {"status_code": code, "status_msg": msg}})
}

/// A 200 SSE stream whose only event reports `code`.
fn stream_error(code: i64, msg: &str) -> Reply {
    Reply::sse(vec![event(&in_band(code, msg))])
}

/// MiniMax streams hex audio as SSE for every streamable format (in both public stream formats);
/// WAV is one JSON answer.
fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    let all = pieces.concat();
    if format == "wav" {
        return vec![Reply::json(
            200,
            json!({
                "data": {"audio": hex::encode(&all), "status": 2},
                "extra_info": {"audio_format": "wav", "audio_size": all.len()},
                "trace_id": "t-1",
                "base_resp": {"status_code": 0, "status_msg": "success"},
            }),
        )];
    }
    let mut events: Vec<(Duration, String)> = pieces.iter().map(|p| delta(p)).collect();
    // The request asks for the final event without the aggregated audio (checked in `check`).
    events.push(last_excluded());
    vec![Reply::sse(events)]
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/t2a_v2");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    let stream = e.format != "wav";
    let mut audio = json!({
        "format": e.format,
        // 32 kHz is no Opus rate; PCM matches OpenAI's 24 kHz.
        "sample_rate": if matches!(e.format, "pcm" | "opus") { 24000 } else { 32000 },
        "channel": 1,
    });
    if e.format == "mp3" {
        audio["bitrate"] = json!(128000);
    }
    let mut want = json!({
        "model": MODEL,
        "text": e.input,
        "stream": stream,
        "voice_setting": {"voice_id": e.voice, "speed": e.speed},
        "audio_setting": audio,
    });
    if stream {
        want["stream_options"] = json!({"exclude_aggregated_audio": true});
    } else {
        want["output_format"] = json!("hex");
    }
    assert_eq!(req.json(), want);
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![stream_error(
                1004,
                "login fail: Please carry the API secret key sk-provider-secret-0001",
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![stream_error(2013, "invalid params, voice_id")],
            400,
            "invalid_request",
        ),
        (
            vec![stream_error(1026, "input new_sensitive")],
            400,
            "content_policy_violation",
        ),
        (
            vec![stream_error(1008, "insufficient balance")],
            502,
            "upstream_error",
        ),
        (vec![stream_error(1039, "token limit")], 429, "rate_limited"),
        // An error to a streaming request answered as a plain JSON body.
        (
            vec![Reply::json(200, in_band(2049, "invalid api key"))],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![Reply::json(500, in_band(1024, "internal error"))],
            502,
            "upstream_error",
        ),
        (
            vec![Reply::bytes(401, "text/plain", b"Unauthorized".to_vec())],
            502,
            "upstream_auth_failed",
        ),
    ]
}

/// An internal error inside a 200 stream, before any audio.
fn retryable() -> Vec<Reply> {
    vec![stream_error(1024, "internal error")]
}

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: &[
            ("mp3", "audio/mpeg"),
            ("opus", "audio/opus"),
            ("flac", "audio/flac"),
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "opus", "flac", "pcm"],
        rejected_formats: &["aac"],
        speeds: &[0.5, 1.0, 2.0],
        rejected_speeds: &[0.25, 4.0],
        instructions: false,
        voice: "female-shaonv",
        default_voice: "male-qn-qingse",
        max_input_chars: 9_999,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn a_rate_limit_inside_a_200_stream_is_retried_then_reported() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let piece = audio(500, 3);
    fake.push(stream_error(1002, "rate limit"));
    fake.push(Reply::sse(vec![delta(&piece), last(&piece)]));
    let resp = speech(&gw, MODEL, "Hello there", json!({"retries": 1}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == piece);
    assert_eq!(fake.requests().len(), 2);

    fake.push(stream_error(1002, "rate limit"));
    let resp = speech(&gw, MODEL, "Hello there", json!({}));
    assert_eq!(resp.status, 429, "{}", resp.text());
    assert_eq!(resp.json()["code"], "rate_limited");
}

#[test]
fn an_error_after_audio_ends_the_answer_early() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let first = audio(800, 5);
    let failing = || {
        Reply::sse(vec![
            delta(&first),
            event(&in_band(1000, "unknown error")),
            delta(&audio(10, 7)),
        ])
    };

    fake.push(failing());
    let resp = speech(&gw, MODEL, "Hello there", json!({"stream_format": "sse"}));
    assert_eq!(resp.status, 200);
    let events = public_events(&resp);
    assert_eq!(decoded_audio(&events), first);
    let end = events.last().unwrap();
    assert_eq!(end["type"], "error", "{end}");

    fake.push(failing());
    let resp = speech(&gw, MODEL, "Hello there", json!({}));
    assert_eq!(resp.status, 200);
    assert!(!resp.complete, "a cut-off answer must not look complete");
    assert!(resp.body == first);
}

#[test]
fn a_stream_without_its_final_event_is_not_a_short_success() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let first = audio(600, 9);

    fake.push(Reply::sse(vec![delta(&first)]));
    let resp = speech(
        &gw,
        MODEL,
        "Hello there",
        json!({"stream_format": "sse", "response_format": "pcm"}),
    );
    assert_eq!(resp.status, 200);
    let events = public_events(&resp);
    assert_eq!(decoded_audio(&events), first);
    assert_eq!(events.last().unwrap()["type"], "error");

    fake.push(Reply::sse(vec![delta(&first)]));
    let resp = speech(
        &gw,
        MODEL,
        "Hello there",
        json!({"response_format": "flac"}),
    );
    assert_eq!(resp.status, 200);
    assert!(!resp.complete);

    // Nothing at all before the stream ended: an error answer, no audio.
    fake.push(Reply::sse(vec![(Duration::ZERO, ": ping\n\n".to_string())]));
    let resp = speech(&gw, MODEL, "Hello there", json!({}));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_error");
}

#[test]
fn the_final_event_alone_carries_the_audio() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let all = audio(900, 11);
    fake.push(Reply::sse(vec![last(&all)]));
    let resp = speech(&gw, MODEL, "Hello there", json!({"stream_format": "sse"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(decoded_audio(&events), all);
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
}

#[test]
fn wav_errors_inside_a_200_answer_are_translated() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(200, in_band(1027, "output new_sensitive")));
    let resp = speech(&gw, MODEL, "Hello there", json!({"response_format": "wav"}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "content_policy_violation");

    // Retried like any internal error, then answered.
    let all = audio(300, 13);
    fake.push(Reply::json(200, in_band(1001, "request timeout")));
    fake.push(Reply::json(
        200,
        json!({"data": {"audio": hex::encode(&all), "status": 2}, "base_resp": ok()}),
    ));
    let resp = speech(
        &gw,
        MODEL,
        "Hello there",
        json!({"response_format": "wav", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == all);
}

#[test]
fn native_fields_pass_through_verbatim() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let piece = audio(100, 17);
    fake.push(Reply::sse(vec![delta(&piece), last(&piece)]));
    let resp = speech(
        &gw,
        MODEL,
        "Hello there",
        json!({"language_boost": "Chinese", "pronunciation_dict": {"tone": ["处理/(chu3)(li3)"]}}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["language_boost"], "Chinese");
    assert_eq!(
        sent["pronunciation_dict"],
        json!({"tone": ["处理/(chu3)(li3)"]})
    );
    assert_eq!(sent["stream"], true);
}
