//! CosyVoice on DashScope (the HTTP non-real-time endpoint) through the speech conformance cases,
//! and what its fake must have received.

use std::time::Duration;

use crate::support;
use base64::Engine;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{audio, speech, speech_conformance, Expect, SpeechCase};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "cosyvoice-v3-flash";
const SPEECH_PATH: &str = "/api/v1/services/audio/tts/SpeechSynthesizer";
/// Where the fake's URL answers put the audio file (a signed OSS-style URL).
const RESULT_PATH: &str = "/results/cosy.mp3?Expires=1700000000&Signature=x%2By";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The non-streamed answer: JSON naming the audio file at `url`.
fn url_answer(url: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "request_id": "c0511c3e-0000-0000-0000-000000000001",
            "output": {
                "finish_reason": "stop",
                "audio": {"url": url, "id": "audio_c0511c3e", "expires_at": 1_700_000_000}
            },
            "usage": {"characters": 44}
        }),
    )
}

fn sse_event(id: usize, kind: &str, status: u16, data: &Value) -> (Duration, String) {
    (
        Duration::ZERO,
        format!("id:{id}\nevent:{kind}\n:HTTP_STATUS/{status}\ndata:{data}\n\n"),
    )
}

/// A streamed answer: one `sentence-synthesis` event per piece, then the "stop" event naming the
/// whole file.
fn stream(pieces: &[Vec<u8>]) -> Reply {
    let mut events: Vec<_> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            sse_event(
                i + 1,
                "result",
                200,
                &json!({
                    "output": {"type": "sentence-synthesis", "sentence": {"index": 0}, "audio": {"data": b64(p)}},
                    "request_id": "r"
                }),
            )
        })
        .collect();
    events.push(sse_event(
        pieces.len() + 1,
        "result",
        200,
        &json!({
            "output": {"finish_reason": "stop", "audio": {"url": "https://dashscope-result-bj.oss-cn-beijing.aliyuncs.com/x.mp3", "id": "audio_1", "expires_at": 1_700_000_000}},
            "usage": {"characters": 44},
            "request_id": "r"
        }),
    ));
    Reply::sse(events)
}

fn answer(pieces: &[Vec<u8>], _format: &str, sse: bool, fake: &FakeProvider) -> Vec<Reply> {
    if sse {
        vec![stream(pieces)]
    } else {
        vec![
            url_answer(&format!("{}{RESULT_PATH}", fake.base_url())),
            Reply::bytes(200, "application/octet-stream", pieces.concat()),
        ]
    }
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, SPEECH_PATH);
    let bearer = format!("Bearer {PROVIDER_KEY}");
    assert_eq!(req.header("authorization"), Some(bearer.as_str()));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(
        req.header("x-dashscope-sse"),
        e.sse.then_some("enable"),
        "{}",
        e.format
    );
    let mut input =
        json!({"text": e.input, "voice": e.voice, "format": e.format, "sample_rate": 24000});
    // Rate 1 is CosyVoice's default and is not sent.
    if e.speed != 1.0 {
        input["rate"] = json!(e.speed);
    }
    assert_eq!(req.json(), json!({"model": MODEL, "input": input}));
}

fn dashscope_error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"request_id": "c0511c3e-0000-0000-0000-000000000002", "code": code, "message": message}),
    )
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![dashscope_error(400, "InvalidParameter", "Invalid voice")],
            400,
            "invalid_request",
        ),
        (
            vec![dashscope_error(
                401,
                "InvalidApiKey",
                &format!("Invalid API-key provided: {PROVIDER_KEY}"),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![dashscope_error(
                403,
                "Model.AccessDenied",
                "Model access denied.",
            )],
            503,
            "model_unavailable",
        ),
        (
            vec![dashscope_error(
                429,
                "Throttling.RateQuota",
                "Requests rate limit exceeded, please try again later.",
            )],
            429,
            "rate_limited",
        ),
        // Inside a 200.
        (
            vec![dashscope_error(
                200,
                "DataInspectionFailed",
                "Input data may contain inappropriate content.",
            )],
            400,
            "content_policy_violation",
        ),
        (
            vec![dashscope_error(
                500,
                "InternalError",
                "An internal error has occured.",
            )],
            502,
            "upstream_error",
        ),
    ]
}

fn retryable() -> Vec<Reply> {
    vec![dashscope_error(
        503,
        "ServiceUnavailable",
        "The service is temporarily unavailable.",
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
        voice: "longxiaochun_v3",
        default_voice: "longanyang",
        max_input_chars: 2_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn han_characters_count_twice_and_native_fields_go_into_input() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // 1,001 Han characters are 2,002 of CosyVoice's characters: refused before sending.
    let resp = speech(&gw, MODEL, &"花".repeat(1_001), json!({}));
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert!(fake.requests().is_empty());

    let mp3 = audio(2000, 5);
    fake.push(url_answer(&format!("{}{RESULT_PATH}", fake.base_url())));
    fake.push(Reply::bytes(200, "audio/mpeg", mp3.clone()));
    let resp = speech(
        &gw,
        MODEL,
        &"花".repeat(1_000),
        json!({"volume": 80, "pitch": 1.1, "language_hints": ["zh"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, mp3);
    let sent = fake.requests();
    assert_eq!(sent[0].path, SPEECH_PATH);
    let input = &sent[0].json()["input"];
    assert_eq!(input["volume"], 80);
    assert_eq!(input["pitch"], 1.1);
    assert_eq!(input["language_hints"], json!(["zh"]));
    // The result file is fetched without the provider key.
    assert_eq!(sent[1].method, "GET");
    assert_eq!(sent[1].header("authorization"), None);
}

#[test]
fn a_stream_without_its_stop_event_is_an_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::sse(vec![sse_event(
        1,
        "result",
        200,
        &json!({"output": {"type": "sentence-synthesis", "audio": {"data": b64(b"abc")}}}),
    )]));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "pcm", "stream_format": "sse", "retries": 0}),
    );
    // Never a short success: an error status, or (once audio was sent) an SSE error event.
    let failed = resp.status == 502 || (resp.status == 200 && resp.text().contains("error"));
    assert!(failed, "{}: {}", resp.status, resp.text());
}
