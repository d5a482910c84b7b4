//! Google Cloud Text-to-Speech through the speech conformance cases.

use std::time::Duration;

use crate::support;
use base64::Engine;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{speech_conformance, Expect, SpeechCase};
use support::{post, TestGateway, PROVIDER_KEY};

const MODEL: &str = "google-tts";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The whole audio in one JSON document, sent in chunks cut at awkward places (inside the key,
/// inside the base64) so the gateway must reassemble it.
fn synthesize_answer(audio: &[u8]) -> Reply {
    let body = json!({"audioContent": b64(audio)}).to_string().into_bytes();
    let cuts = [0, 5, 17, 18, body.len() / 2 + 1, body.len() - 1, body.len()];
    let chunks = cuts
        .windows(2)
        .map(|w| (Duration::ZERO, body[w[0]..w[1]].to_vec()))
        .collect();
    Reply::chunked(200, "application/json; charset=UTF-8", chunks, false)
}

fn answer(pieces: &[Vec<u8>], _format: &str, sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    assert!(!sse, "Google offers no SSE");
    vec![synthesize_answer(&pieces.concat())]
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/text:synthesize");
    assert_eq!(req.header("x-goog-api-key"), Some(PROVIDER_KEY));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.header("content-type"), Some("application/json"));
    let language: Vec<&str> = e.voice.splitn(3, '-').take(2).collect();
    let mut audio = json!({
        "audioEncoding": match e.format {
            "mp3" => "MP3",
            "opus" => "OGG_OPUS",
            "wav" => "LINEAR16",
            "pcm" => "PCM",
            other => panic!("no Google encoding for {other}"),
        },
        "speakingRate": e.speed,
    });
    if matches!(e.format, "wav" | "pcm") {
        audio["sampleRateHertz"] = json!(24000);
    }
    assert_eq!(
        req.json(),
        json!({
            "input": {"text": e.input},
            "voice": {"languageCode": language.join("-"), "name": e.voice},
            "audioConfig": audio,
        })
    );
}

fn google_error(http: u16, status: &str, message: &str) -> Reply {
    Reply::json(
        http,
        json!({"error": {"code": http, "message": message, "status": status}}),
    )
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![google_error(
                400,
                "INVALID_ARGUMENT",
                "Voice 'en-GB-Neural2-B' does not support SSML.",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![google_error(
                400,
                "FAILED_PRECONDITION",
                "This voice needs a model name.",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![google_error(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials.",
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![google_error(
                403,
                "PERMISSION_DENIED",
                &format!("API key {PROVIDER_KEY} cannot call texttospeech.googleapis.com"),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            // A bad API key is a 400 INVALID_ARGUMENT whose reason is only in `details`.
            vec![Reply::json(
                400,
                json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![google_error(
                429,
                "RESOURCE_EXHAUSTED",
                "Quota exceeded for quota metric 'Requests'.",
            )],
            429,
            "rate_limited",
        ),
        (
            vec![google_error(500, "INTERNAL", "Internal error encountered.")],
            502,
            "upstream_error",
        ),
    ]
}

fn retryable() -> Vec<Reply> {
    vec![google_error(
        503,
        "UNAVAILABLE",
        "The service is currently unavailable.",
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
        sse_formats: &[],
        rejected_formats: &["aac", "flac"],
        speeds: &[0.25, 0.5, 1.0, 2.0],
        // `speakingRate` is bounded to [0.25, 2.0] (cloud_tts.proto).
        rejected_speeds: &[4.0],
        instructions: false,
        voice: "en-GB-Neural2-B",
        default_voice: "en-US-Standard-C",
        max_input_chars: 5_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

fn audio(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 % 251) as u8).collect()
}

#[test]
fn voices_without_a_language_are_refused_before_sending() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for voice in ["alloy", "v-custom", "en-US"] {
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &json!({"model": MODEL, "input": "hi", "voice": voice}),
        );
        assert_eq!(resp.status, 400, "{voice}: {}", resp.text());
        let detail = resp.json()["details"]["voice"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(detail.contains("en-US-Standard-C"), "{detail}");
    }
    assert!(fake.requests().is_empty());

    // Three-letter languages work too.
    fake.push(synthesize_answer(&audio(10)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "你好", "voice": "cmn-CN-Wavenet-A"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[0].json()["voice"]["languageCode"], "cmn-CN");
}

#[test]
fn a_200_without_audio_is_a_bad_response_and_not_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for body in [
        json!({}),
        json!({"audioContent": ""}),
        json!({"audioContent": "@@"}),
    ] {
        let before = fake.requests().len();
        fake.push(Reply::json(200, body.clone()));
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &json!({"model": MODEL, "input": "hi", "retries": 2}),
        );
        assert_eq!(resp.status, 502, "{body}: {}", resp.text());
        assert_eq!(resp.json()["code"], "upstream_bad_response", "{body}");
        assert_eq!(fake.requests().len(), before + 1, "{body}: retried");
    }
}

#[test]
fn an_answer_cut_off_is_retried_and_never_a_short_success() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let cut = || {
        let body = json!({"audioContent": b64(&audio(3000))}).to_string();
        Reply::chunked(
            200,
            "application/json",
            vec![(Duration::ZERO, body.as_bytes()[..1500].to_vec())],
            true,
        )
    };

    fake.push(cut());
    fake.push(synthesize_answer(&audio(3000)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "retries": 1, "response_format": "wav"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.complete);
    assert!(resp.body == audio(3000));
    assert_eq!(fake.requests().len(), 2);

    // Without retries the caller gets an error, not part of the audio.
    fake.push(cut());
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi"}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    let b: Value = resp.json();
    assert_eq!(b["code"], "upstream_error", "{b}");
}

#[test]
fn the_input_limit_is_5000_bytes_not_characters() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // 1,666 CJK characters are 4,998 bytes: sent. 1,667 are 5,001 bytes: Google would refuse them,
    // so the gateway does, with its own 413, before sending.
    fake.push(synthesize_answer(&audio(10)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "语".repeat(1666), "voice": "cmn-CN-Wavenet-A"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "语".repeat(1667), "voice": "cmn-CN-Wavenet-A"}),
    );
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert_eq!(resp.json()["code"], "input_too_long");
    assert_eq!(fake.requests().len(), 1);
}

fn with_gemini(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + "    gemini-2.5-flash-tts: {family: gemini-tts, targets: [{provider: google, model: gemini-2.5-flash-tts}]}\n"
    })
}

#[test]
fn gemini_voices_take_the_model_name_and_style_prompt() {
    let fake = FakeProvider::start();
    let gw = with_gemini(&fake);
    fake.push(synthesize_answer(&audio(20)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({
            "model": "gemini-2.5-flash-tts",
            "input": "Have a wonderful day!",
            "voice": "Kore",
            "instructions": "Say cheerfully",
            "response_format": "pcm",
        }),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(20));
    assert_eq!(
        fake.requests()[0].json(),
        json!({
            "input": {"text": "Have a wonderful day!", "prompt": "Say cheerfully"},
            "voice": {"languageCode": "en-US", "name": "Kore", "modelName": "gemini-2.5-flash-tts"},
            "audioConfig": {"audioEncoding": "PCM", "sampleRateHertz": 24000},
        })
    );

    // The default voice, the caller's language hint, no prompt.
    fake.push(synthesize_answer(&audio(20)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "gemini-2.5-flash-tts", "input": "你好", "language_code": "cmn-CN"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[1].json(),
        json!({
            "input": {"text": "你好"},
            "voice": {"languageCode": "cmn-CN", "name": "Kore", "modelName": "gemini-2.5-flash-tts"},
            "audioConfig": {"audioEncoding": "MP3"},
        })
    );

    // Speed is steered by the prompt; text and prompt take 4,000 bytes each.
    for (body, field, status) in [
        (json!({"speed": 2}), "speed", 400),
        (
            json!({"instructions": "é".repeat(2001)}),
            "instructions",
            400,
        ),
        (json!({"language_code": 7}), "language_code", 400),
    ] {
        let mut req = json!({"model": "gemini-2.5-flash-tts", "input": "hi"});
        for (k, v) in body.as_object().unwrap() {
            req[k] = v.clone();
        }
        let resp = post(&gw, "/api/v1/audio/speech", &req);
        assert_eq!(resp.status, status, "{field}: {}", resp.text());
        assert!(resp.json()["details"][field].is_string(), "{}", resp.text());
    }
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "gemini-2.5-flash-tts", "input": "a".repeat(4001)}),
    );
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert_eq!(fake.requests().len(), 2);

    // The classic family still refuses instructions.
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "instructions": "calm"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
}
