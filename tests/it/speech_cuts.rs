//! Speech answers a provider cuts short, as the client sees them and as the access line records
//! them (status, `aborted`, the characters charged, the cost).
//!
//! Raw audio with a `Content-Length`: the provider answers `200` with `Content-Length: 65536` and
//! 30 KiB of audio in one write, then closes (FIN) or resets (RST) its connection. When that
//! failure is in hand before the gateway wrote anything, nothing reached the client: the request
//! is retried within its `retries` (on the model's other target) and then answered
//! `502 upstream_error`. When the client already has bytes, it gets a `200` cut short of its
//! length, logged as cut (`aborted`) and not charged. Never an empty reply. Both orders are
//! driven: the cut at once (a FIN sent in the audio's own segment, `TCP_CORK`, so the gateway
//! has both before it reads; a reset right after the write, either order), and the cut only once
//! the client has received bytes.
//!
//! SSE: a stream the provider cuts mid-way ends with the `error` event and is logged and charged
//! as the same cut on raw audio is.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::logs::Binary;
use crate::support::client::{self, sse_events};
use crate::support::fake::{FakeProvider, Reply};
use crate::support::KEY;

/// The length the provider states.
const LENGTH: usize = 64 * 1024;
/// What it sends of it before the cut: with its head, less than the 32 KiB one loopback segment
/// carries here, so that a FIN held back with `TCP_CORK` leaves in the audio's own segment.
const SENT: usize = 30 * 1024;
/// The request's `retries`: three calls in all.
const RETRIES: usize = 2;

/// How the provider's connection ends after its first piece.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cut {
    /// Closed (FIN).
    Close,
    /// Reset (RST: `SO_LINGER` 0).
    Reset,
}

/// When it ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum When {
    /// Right after the audio's write (a FIN rides in the audio's own segment).
    AtOnce,
    /// Once the test's client has received bytes of the answer.
    ClientHasBytes,
}

/// MP3-looking audio: a frame header, then bytes that are not text.
fn audio(n: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xFB, 0x90, 0x64];
    v.extend((4..n).map(|i| (i * 31 % 251) as u8 | 0x80));
    v
}

/// A provider speaking raw HTTP/1.1 on loopback, answering every call with the head and
/// [`SENT`] bytes of [`LENGTH`] in one write, then cutting the connection as it is told.
struct CutProvider {
    addr: SocketAddr,
    /// Each call's `Authorization` (which account was asked) and `traceparent`, in order.
    calls: Arc<Mutex<Vec<(String, String)>>>,
    /// One message per call in [`When::ClientHasBytes`] mode: cut now.
    release: Sender<()>,
}

impl CutProvider {
    fn start(cut: Cut, when: When) -> CutProvider {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (release, released) = channel();
        let released = Arc::new(Mutex::new(released));
        let seen = calls.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (seen, released) = (seen.clone(), released.clone());
                std::thread::spawn(move || answer(conn, cut, when, &seen, &released));
            }
        });
        CutProvider {
            addr,
            calls,
            release,
        }
    }

    /// The accounts asked by the calls of trace `trace_id`.
    fn calls_of(&self, trace_id: &str) -> Vec<String> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(_, tp)| tp.split('-').nth(1) == Some(trace_id))
            .map(|(auth, _)| auth.clone())
            .collect()
    }
}

/// Read one request and answer it with the cut.
fn answer(
    mut conn: TcpStream,
    cut: Cut,
    when: When,
    seen: &Mutex<Vec<(String, String)>>,
    released: &Mutex<Receiver<()>>,
) {
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let Some(call) = read_request(&mut conn) else {
        return;
    };
    seen.lock().unwrap().push(call);
    let mut answer =
        format!("HTTP/1.1 200 OK\r\nContent-Type: audio/mpeg\r\nContent-Length: {LENGTH}\r\n\r\n")
            .into_bytes();
    answer.extend(audio(SENT));
    if (cut, when) == (Cut::Close, When::AtOnce) {
        // Held until the FIN, which then leaves in the same segment as the audio.
        socket2::SockRef::from(&conn).set_tcp_cork(true).unwrap();
    }
    conn.write_all(&answer).unwrap();
    if when == When::ClientHasBytes {
        let _ = released
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(10));
    }
    match cut {
        Cut::Close => {
            let _ = conn.shutdown(std::net::Shutdown::Write);
        }
        Cut::Reset => {
            socket2::SockRef::from(&conn)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
        }
    }
    drop(conn);
}

/// The request's head and body; its `Authorization` and `traceparent` (`None`: the connection
/// ended first).
fn read_request(conn: &mut TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let length: usize = field("content-length:").map_or(0, |v| v.parse().unwrap());
    while buf.len() < head_end + length {
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((
        field("authorization:").unwrap_or_default(),
        field("traceparent:").unwrap_or_default(),
    ))
}

/// The gateway binary: access lines in JSON; `tts-cut` over two accounts at `now` and
/// `tts-later` over two at `later` (each retry moves to the other account; none is ejected,
/// though every call fails); `tts-sse` and `eleven-sse` at `http` (an HTTP fake).
fn yaml(port: u16, now: SocketAddr, later: SocketAddr, http: &str) -> String {
    format!(
        r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:{port}"}}]
  access_log: {{format: json}}
  retries: {{max: 3, initial_backoff_ms: 1, max_backoff_ms: 5, max_retry_after_ms: 50}}
  routing: {{ejection: {{consecutive_failures: 1000}}}}
  auth:
    api_keys: [{{name: caller, key: "{KEY}"}}]
  providers:
    cut-a: {{kind: openai, api_key: "sk-account-a", base_url: "http://{now}/v1", timeouts: {{read_ms: 5000}}}}
    cut-b: {{kind: openai, api_key: "sk-account-b", base_url: "http://{now}/v1", timeouts: {{read_ms: 5000}}}}
    later-a: {{kind: openai, api_key: "sk-account-a", base_url: "http://{later}/v1", timeouts: {{read_ms: 5000}}}}
    later-b: {{kind: openai, api_key: "sk-account-b", base_url: "http://{later}/v1", timeouts: {{read_ms: 5000}}}}
    openai: {{kind: openai, api_key: "sk-http", base_url: "{http}/v1", timeouts: {{read_ms: 5000}}}}
    elevenlabs: {{kind: elevenlabs, api_key: "xi-http", base_url: "{http}", timeouts: {{read_ms: 5000}}}}
  models:
    tts-cut: {{family: openai-tts, targets: [{{provider: cut-a, model: tts-1}}, {{provider: cut-b, model: tts-1}}]}}
    tts-later: {{family: openai-tts, targets: [{{provider: later-a, model: tts-1}}, {{provider: later-b, model: tts-1}}]}}
    tts-sse: {{family: openai-tts-instruct, targets: [{{provider: openai, model: gpt-4o-mini-tts}}]}}
    eleven-sse: {{family: elevenlabs-tts, default_voice: JBFqnCBsd6RMkjVDRZzb, targets: [{{provider: elevenlabs, model: eleven_multilingual_v2}}]}}
"#
    )
}

fn start(now: &CutProvider, later: &CutProvider, http: &FakeProvider) -> Binary {
    let (now, later, base) = (now.addr, later.addr, http.base_url());
    Binary::start(|port| yaml(port, now, later, &base), "warn,access=info")
}

/// What the client got: the status (0: no answer at all), the stated length, the body.
struct Got {
    status: u16,
    length: Option<usize>,
    body: Vec<u8>,
}

/// A raw-audio request for `model` with id `id`, read to the connection's end; `has_bytes` is
/// called once the client holds the head and some of the body.
fn speech(gw: &Binary, model: &str, id: &str, has_bytes: impl FnOnce()) -> Got {
    let body = json!({"model": model, "input": "hello world", "retries": RETRIES}).to_string();
    let mut s = client::connect(gw.addr);
    write!(
        s,
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: gw\r\nService-API-Key: {KEY}\r\n\
         X-Request-Id: {id}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut got = Vec::new();
    let mut head_end = None;
    let mut has_bytes = Some(has_bytes);
    let mut buf = [0u8; 16 * 1024];
    loop {
        // A reset from the gateway ends the answer as a close does.
        let n = s.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if head_end.is_none() {
            head_end = got.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
        }
        if head_end.is_some_and(|h| got.len() > h) {
            if let Some(f) = has_bytes.take() {
                f();
            }
        }
    }
    let Some(h) = head_end else {
        return Got {
            status: 0,
            length: None,
            body: got,
        };
    };
    let head = String::from_utf8_lossy(&got[..h]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap());
    Got {
        status,
        length,
        body: got[h..].to_vec(),
    }
}

/// The JSON access lines, once there are `n`.
fn access_lines(gw: &Binary, n: usize) -> Vec<Value> {
    let text = gw.output_when("the access lines", |t| {
        t.lines().filter(|l| l.contains(" access] ")).count() >= n
    });
    text.lines()
        .filter_map(|l| l.split_once(" access] ").map(|(_, json)| json))
        .map(|json| serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}")))
        .collect()
}

fn line_of<'l>(lines: &'l [Value], id: &str) -> &'l Value {
    let of: Vec<&Value> = lines.iter().filter(|l| l["request_id"] == id).collect();
    assert_eq!(of.len(), 1, "access lines of {id}: {lines:#?}");
    of[0]
}

/// A `200` cut short: the stated length, fewer bytes, the bytes the provider sent; logged as
/// cut after as many attempts as the provider got `calls`, its head's cost kept, nothing charged.
fn assert_cut_short(got: &Got, line: &Value, calls: &[String]) {
    assert_eq!(got.length, Some(LENGTH));
    assert_eq!(got.body.len(), SENT, "what the provider sent, then the cut");
    assert_eq!(got.body, audio(SENT));
    assert_eq!(line["status"], 200, "{line}");
    let aborted = line["aborted"].as_str().unwrap_or_else(|| panic!("{line}"));
    assert!(aborted.contains("mid-stream"), "{line}");
    assert_eq!(line["attempts"], calls.len(), "{line}");
    assert_eq!(
        line["usage"]["characters"], 0,
        "a cut answer is not charged: {line}"
    );
    // `tts-1` at $15 per 1M characters: "hello world" is $0.000165, announced at the head.
    assert_eq!(line["cost"], "0.000165", "{line}");
}

/// Nothing reached the client: retried on the other account, then `502 upstream_error`;
/// logged so, nothing charged, no cost.
fn assert_retried_then_502(got: &Got, line: &Value, calls: &[String]) {
    let body: Value = serde_json::from_slice(&got.body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&got.body)));
    assert_eq!(body["code"], "upstream_error", "{body}");
    assert_eq!(calls.len(), RETRIES + 1, "{calls:?}");
    for account in ["sk-account-a", "sk-account-b"] {
        assert!(
            calls.iter().any(|c| c.contains(account)),
            "a retry moves to the other target: {calls:?}"
        );
    }
    assert_eq!(line["status"], 502, "{line}");
    assert_eq!(line["code"], "upstream_error", "{line}");
    assert_eq!(line["aborted"], Value::Null, "{line}");
    assert_eq!(line["attempts"], 3, "{line}");
    assert_eq!(line["usage"]["characters"], 0, "{line}");
    assert_eq!(line["cost"], Value::Null, "{line}");
}

/// `runs` requests to a provider cutting at once, then three cutting once the client has bytes:
/// never an empty reply; each answer and its access line agree on what the client got.
/// `always_retried`: the cut at once is known to be in hand before the head (a corked FIN).
fn cuts(cut: Cut, runs: usize, always_retried: bool) {
    let http = FakeProvider::start();
    let now = CutProvider::start(cut, When::AtOnce);
    let later = CutProvider::start(cut, When::ClientHasBytes);
    let gw = start(&now, &later, &http);
    let mut answers = Vec::new();
    for i in 0..runs {
        let id = format!("cut-at-once-{i}");
        let got = speech(&gw, "tts-cut", &id, || {});
        assert_ne!(got.status, 0, "{id}: no answer at all");
        answers.push((id, got));
    }
    let mut later_answers = Vec::new();
    for i in 0..3 {
        let id = format!("cut-later-{i}");
        let got = speech(&gw, "tts-later", &id, || later.release.send(()).unwrap());
        assert_eq!(got.status, 200, "{id}: {} bytes", got.body.len());
        later_answers.push((id, got));
    }

    let lines = access_lines(&gw, runs + 3);
    for (id, got) in &answers {
        let line = line_of(&lines, id);
        let calls = now.calls_of(line["trace_id"].as_str().unwrap());
        match got.status {
            // (After a retry or not: an earlier attempt may have failed before its head.)
            200 if !always_retried => assert_cut_short(got, line, &calls),
            502 => assert_retried_then_502(got, line, &calls),
            other => panic!(
                "{id}: {other} with {} bytes of {:?} after {} calls; {line}",
                got.body.len(),
                got.length,
                calls.len(),
            ),
        }
    }
    for (id, got) in &later_answers {
        let line = line_of(&lines, id);
        let calls = later.calls_of(line["trace_id"].as_str().unwrap());
        assert_eq!(calls.len(), 1, "a cut after bytes went out is not retried");
        assert_cut_short(got, line, &calls);
    }
}

/// Closed after the first piece: retried, then 502, when the close is in hand before the head;
/// a 200 cut short once the client has bytes.
#[test]
fn a_provider_closing_after_its_first_piece_is_retried_or_cut_short_never_an_empty_reply() {
    cuts(Cut::Close, 5, true);
}

/// Reset after the first piece: whichever comes first at the gateway, the reset or its first
/// write, the client gets a 502 after the retries or a 200 cut short; never nothing.
#[test]
fn a_provider_resetting_after_its_first_piece_is_retried_or_cut_short_never_an_empty_reply() {
    cuts(Cut::Reset, 20, false);
}

/// An SSE speech stream the provider cuts mid-way (its connection closed inside the chunked
/// body), passed through (OpenAI's own events) and translated (ElevenLabs' audio): the client
/// gets the audio so far and a final `error` event; the access line says the answer was cut
/// (`aborted`) and nothing is charged, as for a cut raw answer.
#[test]
fn an_sse_stream_cut_mid_way_is_logged_and_charged_as_a_cut() {
    use base64::Engine;
    let http = FakeProvider::start();
    let (now, later) = (
        CutProvider::start(Cut::Close, When::AtOnce),
        CutProvider::start(Cut::Close, When::ClientHasBytes),
    );
    let gw = start(&now, &later, &http);
    let delta = |p: &[u8]| {
        let ev = json!({"type": "speech.audio.delta", "audio": base64::engine::general_purpose::STANDARD.encode(p)});
        (Duration::ZERO, format!("data: {ev}\n\n").into_bytes())
    };
    http.push(Reply::chunked(
        200,
        "text/event-stream",
        vec![delta(&audio(600)), delta(&audio(700))],
        true,
    ));
    http.push(Reply::chunked(
        200,
        "audio/mpeg",
        vec![(Duration::ZERO, audio(2000)), (Duration::ZERO, audio(2000))],
        true,
    ));
    for (id, model) in [("sse-openai", "tts-sse"), ("sse-eleven", "eleven-sse")] {
        let resp = client::post_json(
            gw.addr,
            "/api/v1/audio/speech",
            &[("Service-API-Key", KEY), ("X-Request-Id", id)],
            &json!({"model": model, "input": "hello world", "stream_format": "sse"}),
        );
        assert_eq!(resp.status, 200, "{id}: {}", resp.text());
        let events = sse_events(&resp.body);
        let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
        assert_eq!(last["type"], "error", "{id}: {events:?}");
        assert!(
            events.len() >= 2,
            "{id}: the audio before the cut: {events:?}"
        );
    }
    let lines = access_lines(&gw, 2);
    for id in ["sse-openai", "sse-eleven"] {
        let line = line_of(&lines, id);
        assert_eq!(line["status"], 200, "{line}");
        let aborted = line["aborted"].as_str().unwrap_or_else(|| panic!("{line}"));
        assert!(aborted.contains("mid-stream"), "{line}");
        assert_eq!(
            line["usage"]["characters"], 0,
            "a cut answer is not charged: {line}"
        );
    }
}
