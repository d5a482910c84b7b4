//! xAI text to speech (`POST /v1/tts`) through the speech conformance cases, against a fake that
//! answers the audio bytes as xAI does and checks the bearer key and the body it received; then
//! the caller's own `language` replacing the gateway's `auto`.

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{speech, speech_conformance, Expect, SpeechCase};
use support::{TestGateway, KEY, PROVIDER_KEY};

const MODEL: &str = "grok-tts";

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        _ => "audio/pcm",
    }
}

/// `/v1/tts` answers the audio itself, whatever the public stream format.
fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    let chunks = pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect();
    vec![Reply::chunked(
        200,
        native_content_type(format),
        chunks,
        false,
    )]
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/tts");
    let bearer = format!("Bearer {PROVIDER_KEY}");
    assert_eq!(req.header("authorization"), Some(bearer.as_str()));
    assert_eq!(req.header("content-type"), Some("application/json"));
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached xAI in {name}"
        );
    }
    let mut output = json!({"codec": e.format});
    if matches!(e.format, "wav" | "pcm") {
        output["sample_rate"] = json!(24000);
    }
    assert_eq!(
        req.json(),
        json!({"text": e.input, "language": "auto", "voice_id": e.voice, "output_format": output})
    );
}

fn error(status: u16, message: &str) -> Reply {
    Reply::json(status, json!({"code": "error", "error": message}))
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![error(400, "Invalid request: language is not supported")],
            400,
            "invalid_request",
        ),
        (
            vec![Reply::json(
                401,
                json!({"error": {"message": format!("Incorrect API key provided: {PROVIDER_KEY}"), "type": "invalid_request_error"}}),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![error(403, "The team has no credits")],
            502,
            "upstream_auth_failed",
        ),
        (vec![error(429, "Rate limit exceeded")], 429, "rate_limited"),
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

/// xAI's own "overloaded" status, which its SDK treats as worth retrying.
fn retryable() -> Vec<Reply> {
    vec![error(529, "Service overloaded")]
}

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: &[
            ("mp3", "audio/mpeg"),
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "pcm"],
        rejected_formats: &["opus", "aac", "flac"],
        speeds: &[1.0],
        rejected_speeds: &[0.5, 2.0],
        instructions: false,
        voice: "ara",
        default_voice: "eve",
        max_input_chars: 15_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

/// A caller's `language` replaces the gateway's `auto`, and the synthesis switches pass through.
#[test]
fn the_callers_language_is_sent_instead_of_auto() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", vec![1, 2, 3]));
    let resp = speech(
        &gw,
        MODEL,
        "Olá",
        json!({"language": "pt-BR", "text_normalization": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, vec![1, 2, 3]);
    assert_eq!(
        fake.requests()[0].json(),
        json!({
            "text": "Olá",
            "voice_id": "eve",
            "output_format": {"codec": "mp3"},
            "language": "pt-BR",
            "text_normalization": true,
        })
    );
}
