//! ElevenLabs through the speech conformance cases.

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{public_events, speech_conformance, Expect, SpeechCase};
use support::{post, TestGateway, PROVIDER_KEY};

const MODEL: &str = "eleven-multilingual-v2";

fn native_format(format: &str) -> &'static str {
    match format {
        "mp3" => "mp3_44100_128",
        "opus" => "opus_48000_128",
        "wav" => "wav_24000",
        "pcm" => "pcm_24000",
        other => panic!("no ElevenLabs format for {other}"),
    }
}

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/opus",
        "wav" => "audio/wav",
        _ => "audio/pcm",
    }
}

/// "Rachel", the default voice until ElevenLabs retired it.
const RETIRED_VOICE: &str = "21m00Tcm4TlvDq8ikWAM";
/// "George", a premade voice (the SDK README's), the test account's default (the families name none).
const DEFAULT_VOICE: &str = "JBFqnCBsd6RMkjVDRZzb";

/// ElevenLabs' answer for a voice id it does not know (or no longer has): a 404 with the
/// FastAPI-style `detail`, as its API answers today.
fn voice_not_found(voice: &str) -> Reply {
    Reply::json(
        404,
        json!({"detail": {"status": "voice_not_found", "message": format!("A voice with the voice_id {voice} was not found.")}}),
    )
}

/// Refuse the retired voice the way ElevenLabs does, whatever else the test queued.
fn refuse_retired_voices(fake: &FakeProvider) {
    fake.set_handler(|req| {
        req.path
            .starts_with(&format!("/v1/text-to-speech/{RETIRED_VOICE}"))
            .then(|| voice_not_found(RETIRED_VOICE))
    });
}

/// The `/stream` endpoint answers the audio itself, chunked, whatever the public stream format.
fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, fake: &FakeProvider) -> Vec<Reply> {
    refuse_retired_voices(fake);
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
    // WAV exists only on the non-streaming endpoint; every other format streams.
    let endpoint = if e.format == "wav" { "" } else { "/stream" };
    assert_eq!(
        req.path,
        format!(
            "/v1/text-to-speech/{}{endpoint}?output_format={}",
            e.voice,
            native_format(e.format)
        )
    );
    assert_eq!(req.header("xi-api-key"), Some(PROVIDER_KEY));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.header("content-type"), Some("application/json"));
    // The only speed ElevenLabs' family allows is 1, its own default: never sent.
    assert_eq!(e.speed, 1.0);
    assert_eq!(
        req.json(),
        json!({"text": e.input, "model_id": "eleven_multilingual_v2"})
    );
}

fn detail(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"detail": {"status": code, "message": message}}),
    )
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![Reply::json(
                422,
                json!({"detail": [{"loc": ["body", "text"], "msg": "field required", "type": "value_error.missing"}]}),
            )],
            400,
            "invalid_request",
        ),
        (
            vec![detail(
                401,
                "invalid_api_key",
                &format!("Invalid API key: {PROVIDER_KEY}"),
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![detail(
                401,
                "quota_exceeded",
                "This request exceeds your quota of 10000. You have 12 credits remaining.",
            )],
            502,
            "upstream_error",
        ),
        // The conformance request names no voice, so the refused voice is the configured
        // default: the operator's problem, not the caller's.
        (
            vec![voice_not_found(DEFAULT_VOICE)],
            503,
            "model_unavailable",
        ),
        (
            vec![detail(
                400,
                "max_character_limit_exceeded",
                "Text is too long.",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![detail(
                429,
                "too_many_concurrent_requests",
                "Too many concurrent requests.",
            )],
            429,
            "rate_limited",
        ),
        (
            vec![detail(429, "system_busy", "The system is busy.")],
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
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "opus", "pcm"],
        rejected_formats: &["aac", "flac"],
        speeds: &[1.0],
        rejected_speeds: &[0.25, 0.5, 2.0, 4.0],
        instructions: false,
        voice: "pNInz6obpgDQGcFmaJgB",
        default_voice: DEFAULT_VOICE,
        max_input_chars: 10_000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

fn audio(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 17 % 251) as u8).collect()
}

#[test]
fn voice_ids_are_path_encoded_and_native_fields_pass_through() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", audio(100)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({
            "model": MODEL,
            "input": "Bonjour",
            "voice": "my voice/../x?y=1",
            "previous_text": "Avant.",
            "seed": 42,
            "voice_settings": {"stability": 0.3, "similarity_boost": 0.8, "speed": 1.1},
            "apply_text_normalization": "off",
        }),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(100));
    let sent = &fake.requests()[0];
    assert_eq!(
        sent.path,
        "/v1/text-to-speech/my%20voice%2F..%2Fx%3Fy%3D1/stream?output_format=mp3_44100_128"
    );
    // Verbatim, in the order the client sent them (`json!` sorts keys), after the known fields.
    assert_eq!(
        sent.text(),
        r#"{"text":"Bonjour","model_id":"eleven_multilingual_v2","apply_text_normalization":"off","previous_text":"Avant.","seed":42,"voice_settings":{"similarity_boost":0.8,"speed":1.1,"stability":0.3}}"#
    );
}

#[test]
fn busy_is_retried_but_exhausted_quota_is_not() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);

    fake.push(detail(429, "system_busy", "busy"));
    fake.push(Reply::bytes(200, "audio/mpeg", audio(64)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(64));
    assert_eq!(fake.requests().len(), 2);

    fake.push(detail(401, "quota_exceeded", "quota exceeded"));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "retries": 3}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_error");
    assert_eq!(fake.requests().len(), 3, "an exhausted quota was retried");
}

#[test]
fn stream_cut_before_any_audio_is_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // The head arrives, then the connection closes without the terminating chunk.
    fake.push(Reply::chunked(200, "audio/mpeg", Vec::new(), true));
    fake.push(Reply::bytes(200, "audio/mpeg", audio(500)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "retries": 1, "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
    assert_eq!(fake.requests().len(), 2);

    // Without retries the cut-off stream is an upstream error, not a short success.
    fake.push(Reply::chunked(200, "audio/mpeg", Vec::new(), true));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi"}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_error");
}

fn cut_after_audio() -> Reply {
    Reply::chunked(
        200,
        "audio/mpeg",
        vec![
            (Duration::ZERO, audio(4000)),
            (Duration::from_millis(20), audio(3000)),
        ],
        true,
    )
}

#[test]
fn stream_cut_after_audio_truncates_raw_audio_visibly() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(cut_after_audio());
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "retries": 3}),
    );
    assert_eq!(resp.status, 200);
    assert!(
        !resp.complete,
        "a cut-off stream must not end like a success"
    );
    assert!(resp.body.starts_with(&audio(4000)));
    // Audio already reached the client: no retry.
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn stream_cut_after_audio_ends_sse_with_an_error_event() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(cut_after_audio());
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "stream_format": "sse", "retries": 3}),
    );
    assert_eq!(resp.status, 200);
    let events = public_events(&resp);
    assert!(events.len() >= 2, "{events:?}");
    let (last, deltas) = events.split_last().unwrap();
    assert!(deltas.iter().all(|d| d["type"] == "speech.audio.delta"));
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn wav_comes_from_the_non_streaming_endpoint_and_is_never_sse() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/wav", audio(300)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "voice": "v1", "response_format": "wav"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(300));
    // `/stream` lists no `wav_*` output format; only `POST /v1/text-to-speech/{voice_id}` does.
    assert_eq!(
        fake.requests()[0].path,
        "/v1/text-to-speech/v1?output_format=wav_24000"
    );

    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "response_format": "wav", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(
        resp.json()["details"]["response_format"].is_string(),
        "{}",
        resp.text()
    );
    assert_eq!(fake.requests().len(), 1, "nothing sent");
}

fn with_current_models(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + &format!("    eleven-flash-v2.5: {{family: elevenlabs-tts-flash, default_voice: {DEFAULT_VOICE}, targets: [{{provider: elevenlabs, model: eleven_flash_v2_5}}]}}\n")
            + &format!("    eleven-v3: {{family: elevenlabs-v3, default_voice: {DEFAULT_VOICE}, targets: [{{provider: elevenlabs, model: eleven_v3}}]}}\n")
    })
}

#[test]
fn each_model_has_its_own_input_limit() {
    let fake = FakeProvider::start();
    let gw = with_current_models(&fake);
    for (model, limit) in [
        (MODEL, 10_000),
        ("eleven-flash-v2.5", 40_000),
        ("eleven-v3", 5_000),
    ] {
        fake.push(Reply::bytes(200, "audio/mpeg", audio(10)));
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &json!({"model": model, "input": "a".repeat(limit)}),
        );
        assert_eq!(resp.status, 200, "{model}: {}", resp.text());
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &json!({"model": model, "input": "a".repeat(limit + 1)}),
        );
        assert_eq!(resp.status, 413, "{model}: {}", resp.text());
    }
    let sent: Vec<_> = fake
        .requests()
        .iter()
        .map(|r| r.json()["model_id"].clone())
        .collect();
    assert_eq!(
        sent,
        vec![
            json!("eleven_multilingual_v2"),
            json!("eleven_flash_v2_5"),
            json!("eleven_v3")
        ]
    );
}

#[test]
fn a_model_elevenlabs_does_not_serve_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(detail(
        400,
        "model_not_found",
        "A model with model ID eleven_multilingual_v2 does not exist or is not available to you.",
    ));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains(MODEL), "{message}");
    assert!(message.contains("eleven_multilingual_v2"), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}

/// A default voice ElevenLabs no longer has is the operator's configuration failing (503 naming
/// the model and the voice, not retried), while the same refusal of a voice the caller named is
/// the caller's 400; the operator's default voice is what a request without one gets.
#[test]
fn a_refused_default_voice_is_the_operators_problem_not_the_callers() {
    let fake = FakeProvider::start();
    refuse_retired_voices(&fake);
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + &format!("    eleven-rachel: {{family: elevenlabs-tts, default_voice: {RETIRED_VOICE}, targets: [{{provider: elevenlabs, model: eleven_multilingual_v2}}]}}\n")
    });

    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "eleven-rachel", "input": "hi", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("eleven-rachel"), "{message}");
    assert!(message.contains(RETIRED_VOICE), "{message}");
    assert!(message.contains("default voice"), "{message}");
    assert!(!resp.text().contains(PROVIDER_KEY));
    assert_eq!(fake.requests().len(), 1, "a refused voice is not retried");

    // The caller named the retired voice: its own request is at fault.
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi", "voice": RETIRED_VOICE}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "invalid_request", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("was not found"),
        "{body}"
    );

    // Without a voice, the model's default (the operator's `default_voice`) is sent.
    fake.push(Reply::bytes(200, "audio/mpeg", audio(32)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": MODEL, "input": "hi"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(32));
    assert_eq!(
        fake.requests()[2].path,
        format!("/v1/text-to-speech/{DEFAULT_VOICE}/stream?output_format=mp3_44100_128")
    );
}

/// Eleven v3 refuses `previous_text`/`next_text` and Multilingual v2 ignores `language_code`:
/// the gateway refuses each where the model cannot honour it (a 400 naming the field, nothing
/// sent), and passes them where it can.
#[test]
fn fields_a_model_cannot_honour_are_refused_before_sending() {
    let fake = FakeProvider::start();
    let gw = with_current_models(&fake);
    for (model, field, value) in [
        ("eleven-v3", "previous_text", json!("Before.")),
        ("eleven-v3", "next_text", json!("After.")),
        (MODEL, "language_code", json!("fr")),
    ] {
        let mut body = json!({"model": model, "input": "hi"});
        body[field] = value;
        let resp = post(&gw, "/api/v1/audio/speech", &body);
        assert_eq!(resp.status, 400, "{model} {field}: {}", resp.text());
        let b = resp.json();
        assert_eq!(b["code"], "validation_error", "{b}");
        let detail = b["details"][field].as_str().unwrap_or_default();
        assert!(detail.contains(model), "{model} {field}: {b}");
    }
    assert!(fake.requests().is_empty(), "nothing was sent");

    for (model, native, extra) in [
        (
            "eleven-flash-v2.5",
            "eleven_flash_v2_5",
            json!({"language_code": "fr", "previous_text": "Avant."}),
        ),
        ("eleven-v3", "eleven_v3", json!({"language_code": "fr"})),
        (
            MODEL,
            "eleven_multilingual_v2",
            json!({"previous_text": "Before."}),
        ),
    ] {
        fake.push(Reply::bytes(200, "audio/mpeg", audio(8)));
        let mut body = json!({"model": model, "input": "hi"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let resp = post(&gw, "/api/v1/audio/speech", &body);
        assert_eq!(resp.status, 200, "{model}: {}", resp.text());
        let sent = fake.requests().pop().unwrap().json();
        assert_eq!(sent["model_id"], native);
        for (k, v) in extra.as_object().unwrap() {
            assert_eq!(&sent[k], v, "{model}: {k}");
        }
    }
}

/// ElevenLabs removes its Default voices on 2026-12-31 (accounts made after March 2026 never had
/// them): no voice serves every account, so the families name none. The default configuration
/// still loads with no environment, warns at start once the ElevenLabs key is set without
/// `ELEVENLABS_VOICE_ID` (naming each model's `default_voice`) but starts, and loads quietly with both.
#[test]
fn an_elevenlabs_key_without_a_voice_is_warned_of_at_start() {
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/conf/switchyard.yaml");
    let warned = |out: &str, model: &str| {
        out.contains(&format!(
            "switchyard.models.{model}.default_voice: not set, and family `elevenlabs"
        ))
    };
    let (code, out) = crate::cli::switchyard(&["-t", "-c", conf], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        !warned(&out, "eleven-v3"),
        "no key, nothing to warn of: {out}"
    );
    let (code, out) =
        crate::cli::switchyard(&["-t", "-c", conf], &[("ELEVENLABS_API_KEY", "xi-key")]);
    assert_eq!(
        code, 0,
        "one missing voice does not stop the gateway: {out}"
    );
    for model in ["eleven-multilingual-v2", "eleven-flash-v2.5", "eleven-v3"] {
        assert!(warned(&out, model), "{model}: {out}");
    }
    assert!(!out.contains("xi-key"), "{out}");
    let (code, out) = crate::cli::switchyard(
        &["-t", "-c", conf],
        &[
            ("ELEVENLABS_API_KEY", "xi-key"),
            ("ELEVENLABS_VOICE_ID", "my-voice-id"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(!warned(&out, "eleven-v3"), "{out}");
}

/// A request without `voice` for an ElevenLabs model that names no default voice (its account
/// has no key yet, so it loaded) is the caller's 400 naming `voice`, and nothing is sent; the
/// operator's voice, once set, is what goes to ElevenLabs.
#[test]
fn a_model_without_a_default_voice_asks_for_one() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports).replace(
            "\n  models:\n",
            &format!(
                "\n    eleven-no-key: {{kind: elevenlabs, api_key: \"\", base_url: \"{}\"}}\n  models:\n    eleven-unvoiced: {{family: elevenlabs-v3, targets: [{{provider: eleven-no-key, model: eleven_v3}}]}}\n    eleven-voiced: {{family: elevenlabs-v3, default_voice: my-voice-id, targets: [{{provider: elevenlabs, model: eleven_v3}}]}}\n",
                fake.base_url()
            ),
        )
    });
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "eleven-unvoiced", "input": "hi"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error", "{body}");
    assert!(resp.text().contains("voice"), "{body}");
    assert!(resp.text().contains("no default voice"), "{body}");
    assert!(fake.requests().is_empty());

    fake.push(Reply::bytes(200, "audio/mpeg", audio(16)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "eleven-voiced", "input": "hi"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].path,
        "/v1/text-to-speech/my-voice-id/stream?output_format=mp3_44100_128"
    );
}
