//! StepFun through the speech conformance cases (both families), and what its fake must have
//! received.

use std::time::Duration;

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{speech, speech_conformance, Expect, SpeechCase};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "step-tts-2";
const INSTRUCT_MODEL: &str = "stepaudio-2.5-tts";

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/ogg",
        "flac" => "audio/flac",
        "wav" => "audio/wav",
        _ => "application/octet-stream",
    }
}

/// `/v1/audio/speech` answers the audio itself, chunked, whatever the public stream format (the
/// gateway never asks for StepFun's own SSE).
fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    let chunks = pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect();
    vec![Reply::chunked(
        200,
        native_content_type(format),
        chunks,
        false,
    )]
}

fn expected_body(native_model: &str, e: &Expect<'_>) -> Value {
    json!({
        "model": native_model,
        "input": e.input,
        "voice": e.voice,
        "response_format": e.format,
        "speed": e.speed,
    })
}

fn check_request(req: &Recorded) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/audio/speech");
    let bearer = format!("Bearer {PROVIDER_KEY}");
    assert_eq!(req.header("authorization"), Some(bearer.as_str()));
    assert_eq!(req.header("content-type"), Some("application/json"));
}

fn check(req: &Recorded, e: &Expect<'_>) {
    check_request(req);
    assert_eq!(req.json(), expected_body("step-tts-2", e));
}

fn check_instruct(req: &Recorded, e: &Expect<'_>) {
    check_request(req);
    assert_eq!(req.json(), expected_body("stepaudio-2.5-tts", e));
}

fn openai_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(status, json!({"error": {"message": message, "type": kind}}))
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![openai_error(
                400,
                "request_params_invalid",
                "speed must be between 0.5 and 2",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![openai_error(
                401,
                "invalid_api_key",
                &format!("Incorrect API key provided: {PROVIDER_KEY}"),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![openai_error(429, "rate_limit_reached", "Too many requests")],
            429,
            "rate_limited",
        ),
        // An answer in no JSON shape keeps its status.
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

const FORMATS: &[(&str, &str)] = &[
    ("mp3", "audio/mpeg"),
    ("opus", "audio/opus"),
    ("flac", "audio/flac"),
    ("wav", "audio/wav"),
    ("pcm", "audio/pcm"),
];

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: FORMATS,
        sse_formats: &["mp3", "opus", "flac", "pcm"],
        rejected_formats: &["aac"],
        speeds: &[0.5, 1.0, 2.0],
        rejected_speeds: &[0.25, 4.0],
        instructions: false,
        voice: "zhengpaiqingnian",
        default_voice: "cixingnansheng",
        max_input_chars: 1_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

speech_conformance!(
    conformance_instruct,
    SpeechCase {
        model: INSTRUCT_MODEL,
        formats: FORMATS,
        sse_formats: &["mp3", "opus", "flac", "pcm"],
        rejected_formats: &["aac"],
        speeds: &[0.5, 1.0, 2.0],
        rejected_speeds: &[0.25, 4.0],
        instructions: true,
        voice: "zhengpaiqingnian",
        default_voice: "cixingnansheng",
        max_input_chars: 1_000,
        answer,
        check_request: check_instruct,
        errors,
        retryable,
    }
);

#[test]
fn instructions_and_native_fields_reach_stepfun() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", vec![1, 2, 3]));
    let resp = speech(
        &gw,
        INSTRUCT_MODEL,
        "今天天气不错",
        json!({"instructions": "语气温柔，语速偏慢", "volume": 1.5}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, vec![1, 2, 3]);
    assert_eq!(
        fake.requests()[0].json(),
        json!({
            "model": "stepaudio-2.5-tts",
            "input": "今天天气不错",
            "voice": "cixingnansheng",
            "response_format": "mp3",
            "speed": 1.0,
            "instruction": "语气温柔，语速偏慢",
            "volume": 1.5,
        })
    );

    fake.push(Reply::bytes(200, "audio/mpeg", vec![4]));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"voice_label": {"language": "粤语"}, "pronunciation_map": {"tone": ["阿胶/e1胶"]}}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[1].json();
    assert_eq!(sent["voice_label"], json!({"language": "粤语"}));
    assert_eq!(sent["pronunciation_map"], json!({"tone": ["阿胶/e1胶"]}));

    // `voice_label` is not a field of stepaudio-2.5-tts: refused before anything is sent.
    let resp = speech(
        &gw,
        INSTRUCT_MODEL,
        "hi",
        json!({"voice_label": {"emotion": "高兴"}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(fake.requests().len(), 2);
}
