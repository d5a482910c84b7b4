//! A provider's 200 answer that is not what was asked for (an HTML page, a JSON error envelope,
//! a type that is not audio) never reaches the client as audio: it is retried like a 5xx and,
//! when retries run out, answered `502 upstream_bad_response`. Real audio of every format passes
//! untouched. And a pass-through SSE stream that ends early, cleanly or inside an event, ends with
//! the `error` event and never forwards half an event.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support;
use support::fake::{FakeProvider, Reply, ReplyBody};
use support::speech_conformance::{decoded_audio, public_events};
use support::{client, post, TestGateway};

const HTML: &str = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\
                    <body><h1>Bad Gateway</h1><p>upstream connect error</p></body></html>\n";
const ENVELOPE: &str = r#"{"error": {"message": "The server had an error while processing your request.", "type": "server_error", "code": null}}"#;

fn speech(gw: &TestGateway, body: Value) -> client::Response {
    post(gw, "/api/v1/audio/speech", &body)
}

/// `body` as a chunked 200 of `content_type`, cut into 3-byte pieces (the first bytes arrive a
/// few at a time, so the check must wait for enough of them).
fn in_pieces(content_type: &str, body: &[u8]) -> Reply {
    let chunks = body
        .chunks(3)
        .map(|c| (Duration::ZERO, c.to_vec()))
        .collect();
    Reply::chunked(200, content_type, chunks, false)
}

/// 200 answers to a raw-audio request that are not audio, each with what it is.
fn not_audio() -> Vec<(&'static str, Reply)> {
    vec![
        (
            "an HTML page typed text/html",
            Reply::bytes(200, "text/html; charset=utf-8", HTML.as_bytes().to_vec()),
        ),
        (
            "a JSON error envelope typed audio/mpeg",
            Reply::bytes(200, "audio/mpeg", ENVELOPE.as_bytes().to_vec()),
        ),
        (
            "a JSON body typed application/octet-stream, a few bytes at a time",
            in_pieces(
                "application/octet-stream",
                format!("\u{feff}\r\n  {ENVELOPE}").as_bytes(),
            ),
        ),
        (
            "an HTML page typed audio/mpeg",
            in_pieces("audio/mpeg", HTML.as_bytes()),
        ),
        (
            "a JSON envelope with no type",
            Reply {
                status: 200,
                headers: Vec::new(),
                body: ReplyBody::Full(ENVELOPE.as_bytes().to_vec()),
            },
        ),
        (
            "a JSON document typed application/json",
            Reply::json(200, json!({"status": "ok"})),
        ),
    ]
}

/// The answer is the gateway's own 502 in the error shape, and nothing of the provider's body.
fn assert_bad_response(resp: &client::Response, what: &str) {
    assert_eq!(resp.status, 502, "{what}: {}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("application/json"),
        "{what}"
    );
    assert!(resp.complete, "{what}");
    let body = resp.json();
    assert_eq!(body["code"], "upstream_bad_response", "{what}");
    let text = resp.text();
    for leaked in ["Bad Gateway", "server had an error", "<html", "\"ok\""] {
        assert!(!text.contains(leaked), "{what}: {leaked:?} echoed: {text}");
    }
}

fn mp3(n: usize) -> Vec<u8> {
    let mut audio = b"ID3\x04\x00\x00\x00\x00\x00\x00".to_vec();
    audio.extend((0..n).map(|i| (i * 31 % 251) as u8));
    audio
}

#[test]
fn a_non_audio_200_is_a_bad_response_when_retries_are_spent() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for (n, (what, reply)) in not_audio().into_iter().enumerate() {
        fake.push(reply);
        let resp = speech(&gw, json!({"model": "tts-1", "input": "hi", "retries": 0}));
        assert_bad_response(&resp, what);
        assert_eq!(
            fake.requests().len(),
            n + 1,
            "{what}: retried with retries 0"
        );
    }
}

#[test]
fn a_non_audio_200_is_retried_and_the_retry_answers() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let audio = mp3(20_000);
    for (n, (what, reply)) in not_audio().into_iter().enumerate() {
        fake.push(reply);
        fake.push(Reply::bytes(200, "audio/mpeg", audio.clone()));
        let resp = speech(&gw, json!({"model": "tts-1", "input": "hi", "retries": 1}));
        assert_eq!(resp.status, 200, "{what}: {}", resp.text());
        assert_eq!(resp.header("content-type"), Some("audio/mpeg"), "{what}");
        assert!(resp.complete, "{what}");
        assert!(resp.body == audio, "{what}: the retry's audio differs");
        assert_eq!(fake.requests().len(), 2 * (n + 1), "{what}");
    }
}

/// A 440 Hz tone, 16-bit little-endian PCM at 24 kHz.
fn tone(samples: usize) -> Vec<u8> {
    (0..samples)
        .flat_map(|i| {
            let t = i as f64 / 24_000.0;
            ((f64::sin(2.0 * std::f64::consts::PI * 440.0 * t) * 20_000.0) as i16).to_le_bytes()
        })
        .collect()
}

#[test]
fn real_audio_of_every_format_passes_untouched() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let tail = |n: usize| -> Vec<u8> { (0..n).map(|i| (i * 7 % 256) as u8).collect() };
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        ("mp3", "audio/mpeg", mp3(5000)),
        (
            "mp3",
            "audio/mpeg",
            [&[0xFF, 0xFB, 0x90, 0x64][..], &tail(5000)].concat(),
        ),
        (
            "opus",
            "audio/ogg",
            [&b"OggS\x00\x02\x00\x00"[..], &tail(5000)].concat(),
        ),
        (
            "aac",
            "audio/aac",
            [&[0xFF, 0xF1, 0x50, 0x80, 0x02, 0x1F, 0xFC][..], &tail(5000)].concat(),
        ),
        (
            "flac",
            "audio/flac",
            [&b"fLaC\x00\x00\x00\x22"[..], &tail(5000)].concat(),
        ),
        (
            "wav",
            "audio/wav",
            [&b"RIFF\x24\x08\x00\x00WAVEfmt "[..], &tail(5000)].concat(),
        ),
        ("pcm", "audio/pcm", tone(4000)),
        // PCM whose first samples happen to read `{`, `[`, `<` or whitespace.
        (
            "pcm",
            "application/octet-stream",
            [&b"{\x00\x7f"[..], &tone(4000)].concat(),
        ),
        ("pcm", "audio/pcm", [&b"[\"<"[..], &tone(4000)].concat()),
        (
            "pcm",
            "application/octet-stream",
            [&b"  \n"[..], &tone(4000)].concat(),
        ),
    ];
    for (format, native_type, audio) in cases {
        // The first bytes arrive a few at a time, the rest at once.
        let mut chunks: Vec<(Duration, Vec<u8>)> = audio[..9]
            .chunks(3)
            .map(|c| (Duration::ZERO, c.to_vec()))
            .collect();
        chunks.push((Duration::ZERO, audio[9..].to_vec()));
        fake.push(Reply::chunked(200, native_type, chunks, false));
        let resp = speech(
            &gw,
            json!({"model": "tts-1", "input": "hi", "response_format": format, "retries": 0}),
        );
        assert_eq!(
            resp.status,
            200,
            "{format} {:?}: {}",
            &audio[..4],
            resp.text()
        );
        assert!(resp.complete);
        assert!(
            resp.body == audio,
            "{format} {:?}: bytes differ",
            &audio[..4]
        );
    }
}

fn delta(audio: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"type": "speech.audio.delta", "audio": audio})
    )
}

fn done() -> String {
    let usage = json!({"input_tokens": 1, "output_tokens": 2, "total_tokens": 3});
    format!(
        "data: {}\n\n",
        json!({"type": "speech.audio.done", "usage": usage})
    )
}

fn sse_request(retries: u32) -> Value {
    json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse", "retries": retries})
}

#[test]
fn sse_pass_through_gets_the_same_checks() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let not_events = || {
        vec![
            (
                "an HTML page typed text/html",
                Reply::bytes(200, "text/html", HTML.as_bytes().to_vec()),
            ),
            (
                "a JSON envelope typed text/event-stream",
                in_pieces("text/event-stream", format!("\n{ENVELOPE}").as_bytes()),
            ),
            (
                "a JSON envelope typed application/json",
                Reply::bytes(200, "application/json", ENVELOPE.as_bytes().to_vec()),
            ),
            ("an audio file", Reply::bytes(200, "audio/mpeg", mp3(100))),
        ]
    };
    for (what, reply) in not_events() {
        fake.push(reply);
        let resp = speech(&gw, sse_request(0));
        assert_bad_response(&resp, what);
    }
    for (what, reply) in not_events() {
        fake.push(reply);
        fake.push(Reply::sse(vec![
            (Duration::ZERO, delta("AQID")),
            (Duration::ZERO, done()),
        ]));
        let resp = speech(&gw, sse_request(1));
        assert_eq!(resp.status, 200, "{what}: {}", resp.text());
        assert_eq!(resp.header("content-type"), Some("text/event-stream"));
        let events = public_events(&resp);
        assert_eq!(events.len(), 2, "{what}: {events:?}");
        assert_eq!(events[0]["audio"], "AQID");
        assert_eq!(events[1]["type"], "speech.audio.done");
    }
}

#[test]
fn sse_made_from_raw_audio_gets_the_same_checks() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let request = |retries: u32| json!({"model": "eleven-multilingual-v2", "input": "hi", "stream_format": "sse", "retries": retries});
    fake.push(in_pieces("audio/mpeg", ENVELOPE.as_bytes()));
    assert_bad_response(&speech(&gw, request(0)), "JSON as ElevenLabs audio");
    fake.push(Reply::bytes(200, "text/html", HTML.as_bytes().to_vec()));
    assert_bad_response(&speech(&gw, request(0)), "HTML from ElevenLabs");

    let audio = mp3(3000);
    fake.push(Reply::bytes(200, "text/html", HTML.as_bytes().to_vec()));
    fake.push(Reply::bytes(200, "audio/mpeg", audio.clone()));
    let resp = speech(&gw, request(1));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(decoded_audio(&events), audio);
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
}

#[test]
fn a_decoded_answer_that_is_an_html_page_is_retried_but_unreadable_json_is_not() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let request = |retries: u32| json!({"model": "google-tts", "input": "hi", "retries": retries});
    // An HTML page, by its type or (typed as JSON) by its first bytes.
    for page in [
        Reply::bytes(200, "text/html", HTML.as_bytes().to_vec()),
        Reply::bytes(200, "application/json", HTML.as_bytes().to_vec()),
    ] {
        fake.push(page);
        assert_bad_response(&speech(&gw, request(0)), "HTML from Google");
    }
    let audio = mp3(600);
    use base64::Engine;
    let good = json!({"audioContent": base64::engine::general_purpose::STANDARD.encode(&audio)});
    fake.push(Reply::bytes(200, "text/html", HTML.as_bytes().to_vec()));
    fake.push(Reply::json(200, good));
    let before = fake.requests().len();
    let resp = speech(&gw, request(1));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio);
    assert_eq!(fake.requests().len(), before + 2);

    // A JSON answer from the API itself that the adapter cannot read is a bug that repeats: not
    // retried.
    fake.push(Reply::json(200, json!({"unexpected": true})));
    let before = fake.requests().len();
    let resp = speech(&gw, request(1));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_bad_response");
    assert_eq!(fake.requests().len(), before + 1);
}

/// The pass-through SSE answer for a native stream made of `chunks`, ending cleanly.
fn relayed(chunks: &[&str]) -> client::Response {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::sse(
        chunks
            .iter()
            .map(|c| (Duration::ZERO, c.to_string()))
            .collect(),
    ));
    let resp = speech(&gw, sse_request(0));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.complete, "the SSE answer must end properly");
    resp
}

#[test]
fn an_sse_stream_ending_cleanly_without_its_done_event_ends_with_an_error_event() {
    let resp = relayed(&[&delta("AQID"), &delta("BAUG")]);
    let events = public_events(&resp);
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0]["audio"], "AQID");
    assert_eq!(events[1]["audio"], "BAUG");
    assert_eq!(events[2]["type"], "error");
    assert_eq!(events[2]["error"]["code"], "upstream_bad_response");
    assert!(resp.body.ends_with(b"\n\n"));
}

#[test]
fn an_sse_stream_ending_inside_an_event_forwards_no_half_event() {
    let half_delta = r#"data: {"type":"speech.audio.delta","audio":"HALFHALF"#;
    let half_done = r#"data: {"type":"speech.audio.done","usage":{"input_tok"#;
    // A whole delta then half of one; a whole delta split over pieces then half the done event;
    // a delta whose blank line never came.
    for chunks in [
        vec![delta("AQID"), half_delta.to_string()],
        vec![
            delta("AQID")[..20].to_string(),
            delta("AQID")[20..].to_string(),
            half_done.to_string(),
        ],
        vec![delta("AQID"), delta("HALFHALF").trim_end().to_string()],
    ] {
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        let resp = relayed(&refs);
        let events = public_events(&resp);
        assert_eq!(events.len(), 2, "{chunks:?}: {events:?}");
        assert_eq!(events[0]["audio"], "AQID");
        assert_eq!(events[1]["type"], "error");
        let text = resp.text();
        assert!(!text.contains("HALFHALF"), "half event forwarded: {text}");
        assert!(
            !text.contains("input_tok\n"),
            "half event forwarded: {text}"
        );
        // Exactly the whole events: the first delta and the error event, nothing between.
        assert!(
            text.starts_with(&delta("AQID")) && text.matches("data:").count() == 2,
            "{text}"
        );
    }
}

#[test]
fn a_done_event_missing_only_its_blank_line_still_completes_the_stream() {
    let resp = relayed(&[&delta("AQID"), done().trim_end()]);
    let events = public_events(&resp);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1]["type"], "speech.audio.done");
    assert!(resp.body.ends_with(b"\n\n"));
}
