//! DashScope through the speech conformance cases.

use std::time::Duration;

use crate::support;
use base64::Engine;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "qwen3-tts-flash";
const SPEECH_PATH: &str = "/api/v1/services/aigc/multimodal-generation/generation";
/// Where the fake's URL answers put the WAV file: a signed OSS-style URL whose query must survive
/// the download untouched.
const RESULT_PATH: &str = "/results/abc.wav?Expires=1700000000&Signature=x%2By";
const INPUT: &str = "The quick brown fox jumps over the lazy dog.";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The non-streamed answer: JSON naming the WAV file at `url`.
fn url_answer(url: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "request_id": "5a1b8c2e-0000-0000-0000-000000000001",
            "output": {
                "finish_reason": "stop",
                "audio": {"url": url, "data": "", "id": "audio_5a1b8c2e", "expires_at": 1_700_000_000}
            },
            "usage": {"input_tokens": 14, "output_tokens": 150, "characters": 44}
        }),
    )
}

/// One DashScope SSE event as the service frames it.
fn sse_event(id: usize, kind: &str, status: u16, data: &Value) -> (Duration, String) {
    (
        Duration::ZERO,
        format!("id:{id}\nevent:{kind}\n:HTTP_STATUS/{status}\ndata:{data}\n\n"),
    )
}

fn audio_event(id: usize, pcm: &[u8]) -> (Duration, String) {
    sse_event(
        id,
        "result",
        200,
        &json!({
            "output": {"finish_reason": "null", "audio": {"data": b64(pcm), "url": "", "id": "audio_1", "expires_at": 0}},
            "usage": {"input_tokens": 14, "output_tokens": 10 * id},
            "request_id": "r"
        }),
    )
}

fn stop_event(id: usize) -> (Duration, String) {
    sse_event(
        id,
        "result",
        200,
        &json!({
            "output": {"finish_reason": "stop", "audio": {"data": "", "url": "https://dashscope-result-bj.oss-cn-beijing.aliyuncs.com/x.wav", "id": "audio_1", "expires_at": 1_700_000_000}},
            "usage": {"input_tokens": 14, "output_tokens": 42},
            "request_id": "r"
        }),
    )
}

fn error_event(id: usize, status: u16, code: &str, message: &str) -> (Duration, String) {
    sse_event(
        id,
        "error",
        status,
        &json!({"code": code, "message": message, "request_id": "r"}),
    )
}

/// A complete PCM stream: one event per piece (plus an empty one), then the "stop" event.
fn pcm_stream(pieces: &[Vec<u8>]) -> Reply {
    let mut events: Vec<_> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| audio_event(i + 1, p))
        .collect();
    events.insert(1, audio_event(99, b""));
    events.push(stop_event(pieces.len() + 2));
    Reply::sse(events)
}

fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, fake: &FakeProvider) -> Vec<Reply> {
    match format {
        "wav" => vec![
            url_answer(&format!("{}{RESULT_PATH}", fake.base_url())),
            Reply::bytes(200, "audio/wav", pieces.concat()),
        ],
        _ => vec![pcm_stream(pieces)],
    }
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, SPEECH_PATH);
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    let sse = (e.format == "pcm").then_some("enable");
    assert_eq!(req.header("x-dashscope-sse"), sse, "{}", e.format);
    assert_eq!(e.speed, 1.0);
    assert_eq!(
        req.json(),
        json!({"model": MODEL, "input": {"text": e.input, "voice": e.voice}})
    );
}

fn dashscope_error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"request_id": "5a1b8c2e-0000-0000-0000-000000000002", "code": code, "message": message}),
    )
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![dashscope_error(
                400,
                "InvalidParameter",
                "Voice Bogus is not supported",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![dashscope_error(
                401,
                "InvalidApiKey",
                "Invalid API-key provided: sk-provider-secret-0001",
            )],
            502,
            "upstream_auth_failed",
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
        (
            vec![dashscope_error(
                400,
                "DataInspectionFailed",
                "Input data may contain inappropriate content.",
            )],
            400,
            "content_policy_violation",
        ),
        (
            vec![dashscope_error(
                400,
                "Arrearage",
                "Access denied, please make sure your account is in good standing.",
            )],
            502,
            "upstream_error",
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
        formats: &[("wav", "audio/wav"), ("pcm", "audio/pcm")],
        sse_formats: &["pcm"],
        rejected_formats: &["mp3", "opus", "aac", "flac"],
        speeds: &[1.0],
        rejected_speeds: &[0.25, 0.5, 2.0, 4.0],
        instructions: false,
        voice: "Ethan",
        default_voice: "Cherry",
        max_input_chars: 600,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

// ---- provider-specific cases -----------------------------------------------------------------

#[test]
fn result_download_keeps_the_query_and_sends_no_key() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let wav = audio(5000, 7);
    fake.push(url_answer(&format!("{}{RESULT_PATH}", fake.base_url())));
    fake.push(Reply::bytes(200, "audio/wav", wav.clone()));
    let resp = speech(&gw, MODEL, INPUT, json!({"response_format": "wav"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, wav);

    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].path, SPEECH_PATH);
    let download = &sent[1];
    assert_eq!(download.method, "GET");
    assert_eq!(download.path, RESULT_PATH);
    assert_eq!(download.header("authorization"), None);
    assert!(
        download
            .headers
            .iter()
            .all(|(_, v)| !v.contains(PROVIDER_KEY)),
        "provider key sent to the result host: {:?}",
        download.headers
    );
    assert!(download.body.is_empty());
}

#[test]
fn result_url_on_a_foreign_host_is_not_fetched() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // "localhost" is neither the configured base host (127.0.0.1) nor a result host.
    let url = format!("http://localhost:{}/x.wav", fake.addr().port());
    fake.push(url_answer(&url));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "wav", "retries": 2}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_bad_response");
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].method, "POST");
}

#[test]
fn result_download_failure_is_a_bad_response() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(url_answer(&format!("{}{RESULT_PATH}", fake.base_url())));
    fake.push(Reply::bytes(
        404,
        "application/xml",
        b"<Error><Code>NoSuchKey</Code></Error>".to_vec(),
    ));
    let resp = speech(&gw, MODEL, INPUT, json!({"response_format": "wav"}));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_bad_response");
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn errors_inside_a_200_are_retried_when_retryable() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);

    // URL mode: a throttling error inside a 200, then the real answer.
    let wav = audio(3000, 3);
    fake.push(dashscope_error(
        200,
        "Throttling.RateQuota",
        "Requests rate limit exceeded",
    ));
    fake.push(url_answer(&format!("{}{RESULT_PATH}", fake.base_url())));
    fake.push(Reply::bytes(200, "audio/wav", wav.clone()));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "wav", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, wav);
    assert_eq!(fake.requests().len(), 3);

    // Stream mode: an error event before any audio, then a good stream.
    let before = fake.requests().len();
    let pcm = vec![audio(2000, 5), audio(1000, 9)];
    fake.push(Reply::sse(vec![error_event(
        1,
        429,
        "Throttling.RateQuota",
        "Requests rate limit exceeded",
    )]));
    fake.push(pcm_stream(&pcm));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "pcm", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("audio/pcm"));
    assert_eq!(resp.body, pcm.concat());
    assert_eq!(fake.requests().len() - before, 2);
}

#[test]
fn errors_inside_a_200_are_translated_otherwise() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);

    fake.push(dashscope_error(
        200,
        "InvalidParameter",
        "Voice Bogus is not supported (key sk-provider-secret-0001)",
    ));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "wav", "voice": "Bogus", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "invalid_request");
    assert!(!resp.text().contains(PROVIDER_KEY));
    assert_eq!(fake.requests().len(), 1, "a refusal was retried");

    let before = fake.requests().len();
    fake.push(Reply::sse(vec![error_event(
        1,
        400,
        "DataInspectionFailed",
        "Input data may contain inappropriate content.",
    )]));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "pcm", "stream_format": "sse", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "content_policy_violation");
    assert_eq!(fake.requests().len() - before, 1);
}

#[test]
fn error_event_after_audio_ends_the_answer_with_an_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let first = audio(2000, 11);
    let stream = || {
        Reply::sse(vec![
            audio_event(1, &first),
            error_event(
                2,
                500,
                "InternalError.Algo",
                "An internal error has occured during execution.",
            ),
        ])
    };

    // SSE: the audio went out, then the gateway's error event.
    fake.push(stream());
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert!(events.len() >= 2, "{events:?}");
    assert_eq!(events[0]["type"], "speech.audio.delta");
    assert_eq!(events.last().unwrap()["type"], "error", "{events:?}");

    // Raw audio: cut off without the terminating chunk.
    fake.push(stream());
    let resp = speech(&gw, MODEL, INPUT, json!({"response_format": "pcm"}));
    assert_eq!(resp.status, 200);
    assert!(!resp.complete, "a failed stream looked complete");
    assert_eq!(resp.body, first);
}

#[test]
fn stream_without_stop_is_incomplete() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let first = audio(1500, 13);
    let stream = || Reply::sse(vec![audio_event(1, &first), audio_event(2, &first)]);

    fake.push(stream());
    let resp = speech(&gw, MODEL, INPUT, json!({"response_format": "pcm"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(!resp.complete, "a stream without \"stop\" looked complete");

    fake.push(stream());
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "error", "{events:?}");
}

#[test]
fn sse_usage_and_language_type_reach_their_places() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let pcm = vec![audio(900, 17), audio(600, 19)];
    fake.push(pcm_stream(&pcm));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "pcm", "stream_format": "sse", "voice": "Serena", "language_type": "English"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    let done = events.last().unwrap();
    assert_eq!(done["type"], "speech.audio.done");
    // The last usage DashScope reported.
    assert_eq!(
        done["usage"],
        json!({"input_tokens": 14, "output_tokens": 42, "total_tokens": 56})
    );
    let sent = fake.requests();
    assert_eq!(
        sent[0].json(),
        json!({"model": MODEL, "input": {"text": INPUT, "voice": "Serena", "language_type": "English"}})
    );
}

// ---- the instruct and first-generation models --------------------------------------------------

const INSTRUCT: &str = "qwen3-tts-instruct-flash";
const LEGACY: &str = "qwen-tts";

/// The test config plus Qwen3-TTS-Instruct-Flash and the first Qwen-TTS, each in its own family.
fn gateway_with_more_models(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + &format!(
                "    {INSTRUCT}: {{family: qwen-tts-instruct, targets: [{{provider: dashscope, model: {INSTRUCT}}}]}}\n    \
                 {LEGACY}: {{family: qwen-tts-legacy, targets: [{{provider: dashscope, model: {LEGACY}}}]}}\n"
            )
    })
}

/// `qwen3-tts-instruct-flash` takes the public `instructions` (sent as `input.instructions`) and
/// its native `optimize_instructions`; `qwen3-tts-flash` refuses both, naming them.
#[test]
fn instructions_reach_the_instruct_model_only() {
    let fake = FakeProvider::start();
    let gw = gateway_with_more_models(&fake);
    let wav = audio(2000, 23);
    fake.push(url_answer(&format!("{}{RESULT_PATH}", fake.base_url())));
    fake.push(Reply::bytes(200, "audio/wav", wav.clone()));
    let resp = speech(
        &gw,
        INSTRUCT,
        INPUT,
        json!({"response_format": "wav", "voice": "Serena",
               "instructions": "Fast, bright, rising intonation.", "optimize_instructions": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, wav);
    assert_eq!(
        fake.requests()[0].json(),
        json!({"model": INSTRUCT, "input": {"text": INPUT, "voice": "Serena",
               "instructions": "Fast, bright, rising intonation.", "optimize_instructions": true}})
    );

    let before = fake.requests().len();
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "wav", "instructions": "whisper", "optimize_instructions": true}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let details = &resp.json()["details"];
    assert!(details["instructions"].is_string(), "{details}");
    assert!(details["optimize_instructions"].is_string(), "{details}");
    assert_eq!(fake.requests().len(), before, "nothing sent");
}

/// The first Qwen-TTS counts its 512-token limit in tokens: 700 characters of English pass, 513
/// words do not (413, nothing sent); Qwen3-TTS-Flash counts 600 characters.
#[test]
fn the_first_qwen_tts_limits_tokens_not_characters() {
    let fake = FakeProvider::start();
    let gw = gateway_with_more_models(&fake);
    let short = "hello ".repeat(117); // 702 characters, about 118 tokens
    assert!(short.chars().count() > 600);

    fake.push(url_answer(&format!("{}{RESULT_PATH}", fake.base_url())));
    fake.push(Reply::bytes(200, "audio/wav", audio(1000, 29)));
    let resp = speech(&gw, LEGACY, &short, json!({"response_format": "wav"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].json(),
        json!({"model": LEGACY, "input": {"text": short, "voice": "Cherry"}})
    );

    let before = fake.requests().len();
    let resp = speech(&gw, MODEL, &short, json!({"response_format": "wav"}));
    assert_eq!(resp.status, 413, "{}", resp.text());

    let long = "hello ".repeat(513);
    let resp = speech(&gw, LEGACY, &long, json!({"response_format": "wav"}));
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert_eq!(resp.json()["code"], "input_too_long");
    assert_eq!(fake.requests().len(), before, "nothing sent");
}

/// A Qwen-TTS model DashScope does not serve: 503 `model_unavailable` naming it, not retried.
#[test]
fn a_model_the_provider_no_longer_serves_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(dashscope_error(400, "InvalidParameter", "Model not exist."));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "wav", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["code"], "model_unavailable");
    let message = out["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "provider dashscope does not serve its configured model {MODEL}"
        )),
        "{message}"
    );
    assert_eq!(fake.requests().len(), 1, "not retried");
}

/// Qwen3-TTS counts its 600-character limit with each Han ideograph as two: 300 Chinese characters
/// (plus punctuation) pass, 301 do not (413, nothing sent), while 600 Latin letters pass.
#[test]
fn chinese_characters_count_twice_toward_the_limit() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for text in [
        "你".repeat(300),
        "a".repeat(600),
        format!("{}。", "好".repeat(299)),
    ] {
        fake.push(url_answer(&format!("{}{RESULT_PATH}", fake.base_url())));
        fake.push(Reply::bytes(200, "audio/wav", audio(500, 31)));
        let resp = speech(&gw, MODEL, &text, json!({"response_format": "wav"}));
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    let before = fake.requests().len();
    let resp = speech(
        &gw,
        MODEL,
        &"你".repeat(301),
        json!({"response_format": "wav"}),
    );
    assert_eq!(resp.status, 413, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["code"], "input_too_long");
    assert!(out["message"].as_str().unwrap().contains("602"), "{out}");
    assert_eq!(fake.requests().len(), before, "nothing sent");
}

#[test]
fn a_result_file_that_is_not_audio_is_retried_and_any_file_type_passes() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let wav = audio(5000, 7);
    let file_url = format!("{}{RESULT_PATH}", fake.base_url());
    // An object store's XML error page served with 200, then (retried) the real file, labelled
    // with a type no provider documents: it passes on its bytes.
    fake.push(url_answer(&file_url));
    fake.push(Reply::bytes(
        200,
        "application/xml",
        b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code></Error>".to_vec(),
    ));
    fake.push(url_answer(&file_url));
    fake.push(Reply::bytes(200, "application/x-wav", wav.clone()));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "wav", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, wav);
    assert_eq!(fake.requests().len(), 4);

    // A JSON document labelled as audio, with no retry left.
    fake.push(url_answer(&file_url));
    fake.push(Reply::bytes(
        200,
        "audio/wav",
        br#"{"code": "InternalError", "message": "internal"}"#.to_vec(),
    ));
    let resp = speech(
        &gw,
        MODEL,
        INPUT,
        json!({"response_format": "wav", "retries": 0}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_bad_response");
}
