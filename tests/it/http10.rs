//! HTTP/1.0 clients: a streamed answer is delimited by the connection's close, never chunked
//! (RFC 9112 §6.1), and a complete answer keeps its `Content-Length`. Read byte for byte from a
//! raw socket, so any chunk framing would show.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support;
use support::fake::{FakeProvider, Reply};
use support::{client, TestGateway, KEY};

/// Send `body` to `path` as an HTTP/1.0 request (with `extra` header lines), read until the
/// gateway closes the connection, and split the bytes into the head (lower-cased) and the body.
fn http10(gw: &TestGateway, path: &str, body: &Value, extra: &str) -> (String, Vec<u8>) {
    let body = serde_json::to_vec(body).unwrap();
    let mut stream = client::connect(gw.addr);
    let head = format!(
        "POST {path} HTTP/1.0\r\nHost: {}\r\nService-API-Key: {KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n",
        gw.addr,
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body).unwrap();
    let mut got = Vec::new();
    // Ends only at EOF: a connection the gateway kept open fails the test by timing out.
    stream
        .read_to_end(&mut got)
        .expect("the gateway must close the connection after the answer");
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head")
        + 4;
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    (head, got[end..].to_vec())
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

fn audio(n: usize) -> Vec<u8> {
    let mut a = b"ID3\x04\x00".to_vec();
    a.extend((0..n - 5).map(|i| (i * 31 % 251) as u8));
    a
}

#[test]
fn a_streamed_audio_answer_is_close_delimited_byte_for_byte() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let audio = audio(65_536);
    // Asking to keep the connection alive changes nothing: the close is the body's end.
    for extra in ["", "Connection: keep-alive\r\n"] {
        let chunks = audio
            .chunks(10_000)
            .map(|c| (Duration::ZERO, c.to_vec()))
            .collect();
        fake.push(Reply::chunked(200, "audio/mpeg", chunks, false));
        let (head, body) = http10(
            &gw,
            "/api/v1/audio/speech",
            &json!({"model": "tts-1", "input": "hi"}),
            extra,
        );
        assert!(head.contains(" 200 "), "{head}");
        assert_eq!(header(&head, "content-type"), Some("audio/mpeg"));
        assert_eq!(header(&head, "transfer-encoding"), None, "{head}");
        assert_eq!(header(&head, "content-length"), None, "{head}");
        assert_eq!(header(&head, "connection"), Some("close"), "{head}");
        assert_eq!(body.len(), 65_536, "{extra:?}: chunk framing or loss");
        assert!(body == audio, "{extra:?}: audio bytes differ");
    }
}

#[test]
fn a_streamed_sse_answer_is_close_delimited_too() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let events = [
        format!(
            "data: {}\n\n",
            json!({"type": "speech.audio.delta", "audio": "AQID"})
        ),
        format!(
            "data: {}\n\n",
            json!({"type": "speech.audio.done", "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}})
        ),
    ];
    fake.push(Reply::sse(
        events.iter().map(|e| (Duration::ZERO, e.clone())).collect(),
    ));
    let (head, body) = http10(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse"}),
        "",
    );
    assert!(head.contains(" 200 "), "{head}");
    assert_eq!(header(&head, "content-type"), Some("text/event-stream"));
    assert_eq!(header(&head, "transfer-encoding"), None, "{head}");
    assert_eq!(header(&head, "connection"), Some("close"), "{head}");
    assert_eq!(String::from_utf8_lossy(&body), events.concat());
}

#[test]
fn a_complete_answer_keeps_its_content_length() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for (request, status) in [
        (
            json!({"model": "local-bm25", "query": "a cat", "documents": ["a cat sat", "dogs"]}),
            " 200 ",
        ),
        (json!({"model": "local-bm25", "query": "a cat"}), " 400 "),
    ] {
        let (head, body) = http10(&gw, "/api/v1/rerank", &request, "");
        assert!(head.contains(status), "{head}");
        assert_eq!(header(&head, "transfer-encoding"), None, "{head}");
        assert_eq!(
            header(&head, "content-length"),
            Some(body.len().to_string().as_str()),
            "{head}"
        );
        serde_json::from_slice::<Value>(&body).unwrap();
    }
}

#[test]
fn http11_still_streams_chunked() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let audio = audio(30_000);
    // An answer whose length the provider does not state (one that states it keeps it:
    // `speech_streaming::raw_audio_with_a_length_keeps_it_and_streams`).
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        audio
            .chunks(10_000)
            .map(|c| (Duration::ZERO, c.to_vec()))
            .collect(),
        false,
    ));
    let resp = support::post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi"}),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
    assert!(resp.complete && resp.body == audio);
}
