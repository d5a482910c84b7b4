//! Mistral Voxtral TTS through the speech conformance cases, and what its fake must have received.

use std::time::Duration;

use crate::support;
use base64::Engine;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{speech, speech_conformance, Expect, SpeechCase};
use support::{TestGateway, PROVIDER_KEY};

const MODEL: &str = "voxtral-mini-tts";

/// `{"audio_data": <base64>}` in one JSON document, sent in chunks cut at awkward places (inside
/// the key, inside the base64) so the gateway must reassemble it.
fn speech_answer(audio: &[u8]) -> Reply {
    let b64 = base64::engine::general_purpose::STANDARD.encode(audio);
    let body = json!({ "audio_data": b64 }).to_string().into_bytes();
    let cuts = [0, 4, 15, 16, body.len() / 2 + 1, body.len() - 1, body.len()];
    let chunks = cuts
        .windows(2)
        .map(|w| (Duration::ZERO, body[w[0]..w[1]].to_vec()))
        .collect();
    Reply::chunked(200, "application/json", chunks, false)
}

fn answer(pieces: &[Vec<u8>], _format: &str, sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    assert!(!sse, "the Voxtral family offers no SSE");
    vec![speech_answer(&pieces.concat())]
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/audio/speech");
    let bearer = format!("Bearer {PROVIDER_KEY}");
    assert_eq!(req.header("authorization"), Some(bearer.as_str()));
    assert_eq!(req.header("content-type"), Some("application/json"));
    // No speed field exists (speed 1 is the only one offered), and `stream` is left at false.
    assert_eq!(
        req.json(),
        json!({
            "model": "voxtral-mini-tts-2603",
            "input": e.input,
            "voice_id": e.voice,
            "response_format": e.format,
        })
    );
}

fn mistral_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"object": "error", "message": message, "type": kind, "param": null, "code": null}),
    )
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![Reply::json(
                422,
                json!({"detail": [{"type": "missing", "loc": ["body", "input"], "msg": "Field required"}]}),
            )],
            400,
            "invalid_request",
        ),
        (
            vec![mistral_error(
                401,
                "invalid_request_error",
                &format!("Invalid API key {PROVIDER_KEY}"),
            )],
            502,
            "upstream_auth_failed",
        ),
        // The native model in the gateway's config is one Mistral does not serve.
        (
            vec![Reply::json(
                400,
                json!({"object": "error", "message": "Invalid model: voxtral-mini-tts-2603", "type": "invalid_model", "param": null, "code": "1500"}),
            )],
            503,
            "model_unavailable",
        ),
        (
            vec![mistral_error(
                429,
                "rate_limited",
                "Requests rate limit exceeded",
            )],
            429,
            "rate_limited",
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
            ("opus", "audio/opus"),
            ("flac", "audio/flac"),
            ("wav", "audio/wav"),
        ],
        sse_formats: &[],
        // Voxtral's `pcm` is float samples, not the public 16-bit PCM; it has no AAC.
        rejected_formats: &["pcm", "aac"],
        speeds: &[1.0],
        rejected_speeds: &[0.25, 0.5, 2.0, 4.0],
        instructions: false,
        voice: "voice_478",
        default_voice: "gb_jane_neutral",
        max_input_chars: 5_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn a_json_answer_without_audio_is_a_bad_answer() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(200, json!({"audio_data": ""})));
    let resp = speech(&gw, MODEL, "hi", json!({"retries": 0}));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_bad_response");
    assert_eq!(fake.requests()[0].json()["voice_id"], "gb_jane_neutral");
}
