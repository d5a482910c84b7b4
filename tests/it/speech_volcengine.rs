//! Volcengine through the speech conformance cases.

use std::time::Duration;

use crate::support;
use base64::Engine;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, decoded_audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "doubao-tts";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn line(v: &Value) -> (Duration, Vec<u8>) {
    (Duration::ZERO, format!("{v}\n").into_bytes())
}

fn chunk(audio: &[u8]) -> (Duration, Vec<u8>) {
    line(&json!({"code": 0, "message": "", "data": b64(audio)}))
}

fn end() -> (Duration, Vec<u8>) {
    line(&json!({"code": 20000000, "message": "OK", "data": null, "usage": {"text_words": 44}}))
}

fn failure(code: i64, message: &str) -> (Duration, Vec<u8>) {
    line(&json!({"code": code, "message": message, "data": null}))
}

/// A 200 NDJSON answer made of `lines`.
fn ndjson(lines: Vec<(Duration, Vec<u8>)>) -> Reply {
    Reply::chunked(200, "application/json", lines, false)
}

/// Volcengine answers NDJSON with base64 audio, whatever the public stream format.
fn answer(pieces: &[Vec<u8>], _format: &str, _sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    let mut lines: Vec<(Duration, Vec<u8>)> = pieces.iter().map(|p| chunk(p)).collect();
    // A data-less line in between (as subtitle lines are) carries no audio.
    lines.insert(1, line(&json!({"code": 0, "message": "", "data": null})));
    lines.push(end());
    vec![ndjson(lines)]
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/api/v3/tts/unidirectional");
    assert_eq!(req.header("x-api-app-id"), Some("test-app-id"));
    assert_eq!(req.header("x-api-access-key"), Some(PROVIDER_KEY));
    assert_eq!(req.header("x-api-key"), None);
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.header("x-api-resource-id"), Some("seed-tts-1.0"));
    let id = uuid::Uuid::parse_str(req.header("x-api-request-id").unwrap()).unwrap();
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(req.header("content-type"), Some("application/json"));
    let format = match e.format {
        "opus" => "ogg_opus",
        other => other,
    };
    let rate = [(0.5, -50), (1.0, 0), (2.0, 100)]
        .iter()
        .find(|(speed, _)| *speed == e.speed)
        .map(|(_, rate)| *rate)
        .unwrap_or_else(|| panic!("speed {} should have been refused", e.speed));
    assert_eq!(
        req.json(),
        json!({
            "user": {"uid": "switchyard"},
            "req_params": {
                "text": e.input,
                "speaker": e.voice,
                "audio_params": {"format": format, "sample_rate": 24000, "speech_rate": rate},
            },
        })
    );
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![ndjson(vec![failure(45000001, "speaker not found")])],
            400,
            "invalid_request",
        ),
        (
            vec![ndjson(vec![failure(
                45000010,
                "load grant: requested grant not found in SaaS storage (token sk-provider-secret-0001)",
            )])],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![ndjson(vec![failure(
                45000292,
                "quota exceeded for types: concurrency",
            )])],
            429,
            "rate_limited",
        ),
        (
            vec![ndjson(vec![failure(
                45000000,
                "quota exceeded for types: text_words_lifetime",
            )])],
            502,
            "upstream_error",
        ),
        (
            vec![Reply::json(
                401,
                json!({"header": {"code": 45000010, "message": "load grant: requested grant not found in SaaS storage"}}),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![Reply::json(
                400,
                json!({"code": 45000000, "message": "payload unmarshal: invalid character"}),
            )],
            400,
            "invalid_request",
        ),
        (
            vec![Reply::bytes(500, "text/html", b"<html>oops</html>".to_vec())],
            502,
            "upstream_error",
        ),
    ]
}

/// A server error on the first line of a 200 answer, before any audio.
fn retryable() -> Vec<Reply> {
    vec![ndjson(vec![failure(
        55000000,
        "synthesis processing timeout",
    )])]
}

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: &[
            ("mp3", "audio/mpeg"),
            ("opus", "audio/opus"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "opus", "pcm"],
        rejected_formats: &["wav", "aac", "flac"],
        speeds: &[0.5, 1.0, 2.0],
        rejected_speeds: &[0.25, 4.0],
        instructions: false,
        voice: "zh_male_M392_conversation_wvae_bigtts",
        default_voice: "zh_female_cancan_mars_bigtts",
        max_input_chars: 1024,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn errors_before_audio_are_retried_with_a_new_request_id() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let piece = audio(700, 3);

    fake.push(ndjson(vec![failure(
        45000000,
        "quota exceeded for types: concurrency",
    )]));
    fake.push(Reply::json(
        503,
        json!({"code": 55000000, "message": "busy"}),
    ));
    fake.push(ndjson(vec![chunk(&piece), end()]));
    let resp = speech(&gw, MODEL, "你好，世界", json!({"retries": 2}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == piece);
    let sent = fake.requests();
    assert_eq!(sent.len(), 3);
    let ids: Vec<&str> = sent
        .iter()
        .map(|r| r.header("x-api-request-id").unwrap())
        .collect();
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
    assert_eq!(sent[0].json(), sent[2].json());

    // Not retried: the caller's request.
    fake.push(ndjson(vec![failure(45002001, "No readable text!")]));
    let resp = speech(&gw, MODEL, "你好，世界", json!({"retries": 2}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(fake.requests().len(), 4);
}

#[test]
fn an_error_after_audio_ends_the_answer_early() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let first = audio(900, 5);
    let failing = || {
        ndjson(vec![
            chunk(&first),
            failure(55000000, "connect downstream service timeout"),
            chunk(&audio(10, 7)),
            end(),
        ])
    };

    fake.push(failing());
    let resp = speech(
        &gw,
        MODEL,
        "你好，世界",
        json!({"stream_format": "sse", "response_format": "opus"}),
    );
    assert_eq!(resp.status, 200);
    let events = public_events(&resp);
    assert_eq!(decoded_audio(&events), first);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error", "{last}");

    fake.push(failing());
    let resp = speech(&gw, MODEL, "你好，世界", json!({}));
    assert_eq!(resp.status, 200);
    assert!(!resp.complete, "a cut-off answer must not look complete");
    assert!(resp.body == first);
}

#[test]
fn a_stream_without_its_end_line_is_not_a_short_success() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let first = audio(400, 9);

    fake.push(ndjson(vec![chunk(&first)]));
    let resp = speech(&gw, MODEL, "你好，世界", json!({"stream_format": "sse"}));
    assert_eq!(resp.status, 200);
    let events = public_events(&resp);
    assert_eq!(decoded_audio(&events), first);
    assert_eq!(events.last().unwrap()["type"], "error");

    fake.push(ndjson(vec![chunk(&first)]));
    let resp = speech(&gw, MODEL, "你好，世界", json!({"response_format": "pcm"}));
    assert_eq!(resp.status, 200);
    assert!(!resp.complete);

    // The connection dropping mid-stream is no better.
    fake.push(Reply::chunked(
        200,
        "application/json",
        vec![chunk(&first)],
        true,
    ));
    let resp = speech(&gw, MODEL, "你好，世界", json!({}));
    assert!(!resp.complete);
}

#[test]
fn v1_style_success_code_and_unterminated_last_line_are_accepted() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let a = audio(300, 11);
    let b = audio(200, 13);
    let last = json!({"code": 20000000, "message": "OK", "data": null}).to_string();
    fake.push(ndjson(vec![
        line(&json!({"code": 3000, "message": "", "data": b64(&a)})),
        chunk(&b),
        (Duration::ZERO, last.into_bytes()),
    ]));
    let resp = speech(
        &gw,
        MODEL,
        "你好，世界",
        json!({"stream_format": "sse", "response_format": "pcm"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(decoded_audio(&events), [a, b].concat());
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
}

#[test]
fn seed_tts_2_speaks_a_2_0_voice_by_default() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + "    seed-tts-2.0: {family: doubao-tts-2, targets: [{provider: volcengine, model: seed-tts-2.0}]}\n"
    });
    fake.push(ndjson(vec![chunk(&audio(40, 1)), end()]));
    let resp = speech(&gw, "seed-tts-2.0", "你好", json!({}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = &fake.requests()[0];
    assert_eq!(sent.header("x-api-resource-id"), Some("seed-tts-2.0"));
    // A 1.0 voice (`*_mars_bigtts`) on the 2.0 resource is Volcengine's "resource ID is mismatched
    // with speaker related resource"; the 2.0 family's default is a 2.0 voice.
    assert_eq!(
        sent.json()["req_params"]["speaker"],
        "zh_female_vv_uranus_bigtts"
    );
}

#[test]
fn a_resource_the_account_lacks_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Volcengine's answer for a resource id (the target's model) the account has not opened.
    fake.push(Reply::json(
        403,
        json!({"code": 45000030, "message": "[resource_id=seed-tts-1.0] requested resource not granted"}),
    ));
    let resp = speech(&gw, MODEL, "你好", json!({"retries": 2}));
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains(MODEL), "{message}");
    assert!(message.contains("seed-tts-1.0"), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}
