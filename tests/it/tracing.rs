//! Seeing inside a request: every answer carries a request id (the caller's sane
//! `X-Request-Id`, else a generated one) — success, error bodies and SSE error events — that the
//! access line names too; a caller's W3C `traceparent` is continued, each upstream attempt
//! sending the provider its own span in the caller's trace (unless the account opts out), and the
//! access line names the trace.

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use crate::logs::Binary;
use crate::support::fake::{FakeProvider, Reply};
use crate::support::{client, free_port, TestGateway, KEY};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_PARENT: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{CALLER_TRACE}-{CALLER_PARENT}-01")
}

fn cohere_ok() -> Reply {
    Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    )
}

fn rerank_body() -> Value {
    json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "retries": 1})
}

fn is_generated(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The caller's sane id comes back on a success, an error body and a refusal before
/// authentication; an id with a space or over 64 characters is replaced by a generated one, a
/// different one per request.
#[test]
fn every_answer_carries_the_request_id() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(cohere_ok());
    let auth = ("Service-API-Key", KEY);
    let ok = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &[auth, ("X-Request-Id", "caller-id-123")],
        &rerank_body(),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.header("x-request-id"), Some("caller-id-123"));

    // A validation error (400): the header, and the body in the spec's shape, unchanged.
    let bad = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &[auth, ("X-Request-Id", "caller-id-400")],
        &json!({"model": "rerank-v3.5", "query": "q"}),
    );
    assert_eq!(bad.status, 400);
    assert_eq!(bad.header("x-request-id"), Some("caller-id-400"));
    assert_eq!(bad.json()["code"], "validation_error");

    // No credentials (401), an id that is not sane: a generated one.
    let unauth = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &[("X-Request-Id", "has a space")],
        &rerank_body(),
    );
    assert_eq!(unauth.status, 401);
    let generated = unauth.header("x-request-id").unwrap().to_string();
    assert!(is_generated(&generated), "{generated}");
    let long = "a".repeat(65);
    let other = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &[("X-Request-Id", long.as_str())],
        &rerank_body(),
    );
    let other_id = other.header("x-request-id").unwrap();
    assert!(is_generated(other_id) && other_id != generated);

    // Endpoints without an operation carry it too.
    let health = client::request(gw.addr, "GET", "/healthz", &[], b"");
    assert!(is_generated(health.header("x-request-id").unwrap()));
    let models = client::request(gw.addr, "GET", "/api/v1/models", &[auth], b"");
    assert!(is_generated(models.header("x-request-id").unwrap()));
}

/// Speech: the audio answer's head has it, and an SSE stream that fails after its head ends
/// with an error event naming the same id.
#[test]
fn a_speech_answer_and_its_sse_error_event_carry_the_id() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let auth = ("Service-API-Key", KEY);
    fake.push(Reply::bytes(200, "audio/mpeg", b"ID3-audio".to_vec()));
    let resp = client::post_json(
        gw.addr,
        "/api/v1/audio/speech",
        &[auth, ("X-Request-Id", "speech-1")],
        &json!({"model": "tts-1", "input": "hi"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("x-request-id"), Some("speech-1"));

    // OpenAI's SSE without its closing event: cut short, so the stream ends in an error event.
    let delta = json!({"type": "speech.audio.delta",
        "audio": base64::engine::general_purpose::STANDARD.encode([1u8; 8])});
    fake.push(Reply::sse(vec![(
        Duration::ZERO,
        format!("data: {delta}\n\n"),
    )]));
    let resp = client::post_json(
        gw.addr,
        "/api/v1/audio/speech",
        &[auth, ("X-Request-Id", "speech-sse-2")],
        &json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("x-request-id"), Some("speech-sse-2"));
    let events = client::sse_events(&resp.body);
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["request_id"], "speech-sse-2", "{last}");
    assert_eq!(last["error"]["code"], "upstream_bad_response");
}

/// A caller's `traceparent` is continued: each attempt (a retry included) sends the provider
/// the caller's trace id with a span id of its own, never the caller's span, and the caller's
/// `tracestate` as it came. Without one the gateway starts a trace of its own.
#[test]
fn the_callers_trace_reaches_the_provider_one_span_per_attempt() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(500, json!({"message": "internal"})));
    fake.push(cohere_ok());
    let tp = traceparent();
    let resp = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &[
            ("Service-API-Key", KEY),
            ("traceparent", tp.as_str()),
            ("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
        ],
        &rerank_body(),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let seen = fake.requests();
    assert_eq!(seen.len(), 2);
    let mut spans = Vec::new();
    for r in &seen {
        let sent = r
            .header("traceparent")
            .expect("a traceparent to the provider");
        let parts: Vec<&str> = sent.split('-').collect();
        assert_eq!(parts.len(), 4, "{sent}");
        assert_eq!((parts[0], parts[1], parts[3]), ("00", CALLER_TRACE, "01"));
        assert_ne!(
            parts[2], CALLER_PARENT,
            "the attempt's own span, not the caller's"
        );
        assert_eq!(parts[2].len(), 16);
        spans.push(parts[2].to_string());
        assert_eq!(
            r.header("tracestate"),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
    }
    assert_ne!(spans[0], spans[1], "each attempt is its own span");

    // No traceparent: a new trace, still sent; an invalid one is not continued either.
    for header in [
        None,
        Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
    ] {
        fake.push(cohere_ok());
        let mut headers = vec![("Service-API-Key", KEY)];
        if let Some(h) = header {
            headers.push(("traceparent", h));
        }
        let resp = client::post_json(gw.addr, "/api/v1/rerank", &headers, &rerank_body());
        assert_eq!(resp.status, 200);
        let last = fake.requests().pop().unwrap();
        let sent = last.header("traceparent").unwrap().to_string();
        assert!(!sent.contains(CALLER_TRACE) && !sent.contains("-000000000000"));
        assert!(last.header("tracestate").is_none());
    }
}

/// A `tracestate` beside a `traceparent` the gateway cannot parse is dropped, not forwarded (W3C
/// Trace Context §3.3: "If the vendor failed to parse `traceparent`, it MUST NOT attempt to
/// parse `tracestate`"); the provider still gets a fresh, valid `traceparent` of the gateway's
/// own trace. Each invalid form: uppercase hex, an all-zero trace id, version `ff`, too short.
#[test]
fn a_tracestate_beside_an_invalid_traceparent_is_not_forwarded() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for invalid in [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
    ] {
        fake.push(cohere_ok());
        let resp = client::post_json(
            gw.addr,
            "/api/v1/rerank",
            &[
                ("Service-API-Key", KEY),
                ("traceparent", invalid),
                ("tracestate", "congo=t61rcWkgMzE"),
            ],
            &rerank_body(),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        let sent = fake.requests().pop().unwrap();
        assert_eq!(sent.header("tracestate"), None, "beside {invalid}");
        let tp = sent.header("traceparent").expect("a fresh traceparent");
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "{tp}");
        assert_eq!((parts[0], parts[1].len(), parts[2].len()), ("00", 32, 16));
        assert!(
            tp.bytes()
                .all(|b| b == b'-' || b.is_ascii_digit() || b.is_ascii_lowercase()),
            "{tp}"
        );
        assert_ne!(parts[1], CALLER_TRACE, "a trace of the gateway's own");
        assert_ne!(parts[1], "0".repeat(32));
    }
}

/// `trace_context: false` on a provider account: nothing of the trace is sent to it.
#[test]
fn an_account_can_opt_out_of_trace_context() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        crate::support::config(&fake.base_url(), ports).replacen(
            "    cohere:\n      kind: cohere\n",
            "    cohere:\n      kind: cohere\n      trace_context: false\n",
            1,
        )
    });
    fake.push(cohere_ok());
    let tp = traceparent();
    let resp = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &[
            ("Service-API-Key", KEY),
            ("traceparent", tp.as_str()),
            ("tracestate", "congo=t61rcWkgMzE"),
        ],
        &rerank_body(),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let seen = fake.requests();
    assert!(seen[0].header("traceparent").is_none());
    assert!(seen[0].header("tracestate").is_none());
}

/// The access line (JSON and text) names the request id and the trace id.
#[test]
fn access_lines_name_the_request_and_its_trace() {
    let fake = FakeProvider::start();
    fake.set_default(cohere_ok());
    let base = fake.base_url();
    let bin = Binary::start(
        |port| {
            crate::support::config(&base, (port, free_port())).replacen(
                "switchyard:\n",
                "switchyard:\n  access_log: {format: json}\n",
                1,
            )
        },
        "warn,access=info",
    );
    let tp = traceparent();
    let resp = client::post_json(
        bin.addr,
        "/api/v1/rerank",
        &[
            ("Service-API-Key", KEY),
            ("X-Request-Id", "logged-id-7"),
            ("traceparent", tp.as_str()),
        ],
        &rerank_body(),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let refused = client::post_json(bin.addr, "/api/v1/rerank", &[], &rerank_body());
    assert_eq!(refused.status, 401);
    let refused_id = refused.header("x-request-id").unwrap().to_string();
    let text = bin.output_when("two access lines", |t| {
        t.lines().filter(|l| l.contains(" access] ")).count() >= 2
    });
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| l.split_once(" access] ").map(|(_, j)| j))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    let ok = lines
        .iter()
        .find(|l| l["request_id"] == "logged-id-7")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(ok["trace_id"], CALLER_TRACE);
    let no = lines
        .iter()
        .find(|l| l["request_id"] == refused_id.as_str())
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(no["status"], 401);
    assert_eq!(no["trace_id"].as_str().unwrap().len(), 32);
    drop(bin);

    let bin = Binary::start(
        |port| crate::support::config(&base, (port, free_port())),
        "warn,access=info",
    );
    let resp = client::post_json(
        bin.addr,
        "/api/v1/rerank",
        &[
            ("Service-API-Key", KEY),
            ("X-Request-Id", "text-id-8"),
            ("traceparent", tp.as_str()),
        ],
        &rerank_body(),
    );
    assert_eq!(resp.status, 200);
    let text = bin.output_when("the access line", |t| t.contains(" access] "));
    let line = text.lines().find(|l| l.contains(" access] ")).unwrap();
    assert!(line.contains(" request_id=text-id-8"), "{line}");
    assert!(
        line.contains(&format!(" trace_id={CALLER_TRACE}")),
        "{line}"
    );
}

/// Spans exported over OTLP/HTTP to a receiver on loopback that decodes the protobuf.
#[cfg(feature = "otel")]
mod otlp {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::{cohere_ok, traceparent, CALLER_PARENT, CALLER_TRACE};
    use crate::support::fake::{FakeProvider, Reply};
    use crate::support::{client, TestGateway, KEY, PROVIDER_KEY};

    /// A protobuf field's value, by wire type.
    #[derive(Debug, Clone)]
    enum Wire {
        Varint(u64),
        Fixed64(u64),
        Len(Vec<u8>),
        Fixed32(u32),
    }

    /// A message's fields in order: (field number, value). Written from the protobuf encoding's
    /// specification, independently of the gateway's encoder.
    fn fields(mut b: &[u8]) -> Vec<(u64, Wire)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let (mut n, mut shift) = (0u64, 0);
            loop {
                let byte = b[0];
                *b = &b[1..];
                n |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    return n;
                }
                shift += 7;
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let v = match key & 7 {
                0 => Wire::Varint(varint(&mut b)),
                1 => {
                    let v = u64::from_le_bytes(b[..8].try_into().unwrap());
                    b = &b[8..];
                    Wire::Fixed64(v)
                }
                2 => {
                    let n = varint(&mut b) as usize;
                    let v = b[..n].to_vec();
                    b = &b[n..];
                    Wire::Len(v)
                }
                5 => {
                    let v = u32::from_le_bytes(b[..4].try_into().unwrap());
                    b = &b[4..];
                    Wire::Fixed32(v)
                }
                w => panic!("wire type {w}"),
            };
            out.push((key >> 3, v));
        }
        out
    }

    fn all(msg: &[(u64, Wire)], field: u64) -> Vec<Vec<u8>> {
        msg.iter()
            .filter(|(f, _)| *f == field)
            .filter_map(|(_, v)| match v {
                Wire::Len(b) => Some(b.clone()),
                _ => None,
            })
            .collect()
    }

    fn one(msg: &[(u64, Wire)], field: u64) -> Option<Vec<u8>> {
        all(msg, field).into_iter().next()
    }

    fn int(msg: &[(u64, Wire)], field: u64) -> Option<u64> {
        msg.iter()
            .find(|(f, _)| *f == field)
            .and_then(|(_, v)| match v {
                Wire::Varint(n) | Wire::Fixed64(n) => Some(*n),
                Wire::Fixed32(n) => Some(u64::from(*n)),
                Wire::Len(_) => None,
            })
    }

    /// A decoded `Span` (opentelemetry-proto `trace/v1/trace.proto`'s field numbers).
    #[derive(Debug, Clone)]
    struct Span {
        trace_id: String,
        span_id: String,
        parent: Option<String>,
        name: String,
        kind: u64,
        start: u64,
        end: u64,
        attributes: Vec<(String, serde_json::Value)>,
        events: Vec<String>,
        /// `Span.Link { trace_id = 1, span_id = 2 }`, as hex.
        links: Vec<(String, String)>,
        error: bool,
    }

    impl Span {
        fn attr(&self, key: &str) -> Option<&serde_json::Value> {
            self.attributes
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
        }
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// `KeyValue { key = 1, value = 2: AnyValue { string = 1, bool = 2, int = 3 } }`.
    fn key_value(b: &[u8]) -> (String, serde_json::Value) {
        let kv = fields(b);
        let key = String::from_utf8(one(&kv, 1).unwrap()).unwrap();
        let any = fields(&one(&kv, 2).unwrap());
        let value = match &any[0] {
            (1, Wire::Len(s)) => json!(String::from_utf8(s.clone()).unwrap()),
            (2, Wire::Varint(n)) => json!(*n != 0),
            (3, Wire::Varint(n)) => json!(*n as i64),
            other => panic!("unexpected AnyValue {other:?}"),
        };
        (key, value)
    }

    /// Every span of an `ExportTraceServiceRequest`.
    fn decode(request: &[u8]) -> Vec<Span> {
        let mut spans = Vec::new();
        for rs in all(&fields(request), 1) {
            let rs = fields(&rs);
            let resource = fields(&one(&rs, 1).unwrap());
            let names: Vec<_> = all(&resource, 1).iter().map(|kv| key_value(kv)).collect();
            assert!(names
                .iter()
                .any(|(k, v)| k == "service.name" && v == "switchyard"));
            for ss in all(&rs, 2) {
                let ss = fields(&ss);
                let scope = fields(&one(&ss, 1).unwrap());
                assert_eq!(one(&scope, 1).unwrap(), b"switchyard");
                for s in all(&ss, 2) {
                    let s = fields(&s);
                    let status = one(&s, 15).map(|st| fields(&st));
                    spans.push(Span {
                        trace_id: hex(&one(&s, 1).unwrap()),
                        span_id: hex(&one(&s, 2).unwrap()),
                        parent: one(&s, 4).map(|p| hex(&p)),
                        name: String::from_utf8(one(&s, 5).unwrap()).unwrap(),
                        kind: int(&s, 6).unwrap(),
                        start: int(&s, 7).unwrap(),
                        end: int(&s, 8).unwrap(),
                        attributes: all(&s, 9).iter().map(|kv| key_value(kv)).collect(),
                        events: all(&s, 11)
                            .iter()
                            .map(|e| String::from_utf8(one(&fields(e), 2).unwrap()).unwrap())
                            .collect(),
                        links: all(&s, 13)
                            .iter()
                            .map(|l| {
                                let l = fields(l);
                                (hex(&one(&l, 1).unwrap()), hex(&one(&l, 2).unwrap()))
                            })
                            .collect(),
                        error: status.is_some_and(|st| int(&st, 3) == Some(2)),
                    });
                }
            }
        }
        spans
    }

    /// A fake OTLP/HTTP collector: answers each `POST /v1/traces` 200 and keeps its spans (and
    /// its raw bodies, to look for secrets).
    struct Collector {
        addr: SocketAddr,
        spans: Arc<Mutex<Vec<Span>>>,
        raw: Arc<Mutex<Vec<u8>>>,
    }

    impl Collector {
        fn start() -> Collector {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let spans = Arc::new(Mutex::new(Vec::new()));
            let raw = Arc::new(Mutex::new(Vec::new()));
            let (s, r) = (spans.clone(), raw.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { return };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    let (head_end, length) = loop {
                        let n = conn.read(&mut chunk).unwrap_or(0);
                        if n == 0 {
                            break (0, 0);
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                            assert!(head.starts_with("post /v1/traces http/1.1"), "{head}");
                            assert!(head.contains("content-type: application/x-protobuf"));
                            let len = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length: "))
                                .unwrap()
                                .trim()
                                .parse::<usize>()
                                .unwrap();
                            break (i + 4, len);
                        }
                    };
                    if head_end == 0 {
                        continue;
                    }
                    while buf.len() < head_end + length {
                        let n = conn.read(&mut chunk).unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    let body = &buf[head_end..head_end + length];
                    r.lock().unwrap().extend_from_slice(body);
                    s.lock().unwrap().extend(decode(body));
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
                    );
                }
            });
            Collector { addr, spans, raw }
        }

        /// The spans of trace `trace` once there are at least `n` (at most 10 s).
        fn wait(&self, trace: &str, n: usize) -> Vec<Span> {
            self.wait_for(n, |s| s.trace_id == trace)
        }

        /// The spans `pick` keeps once there are at least `n` (at most 10 s).
        fn wait_for(&self, n: usize, pick: impl Fn(&Span) -> bool) -> Vec<Span> {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let got: Vec<Span> = self
                    .spans
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|s| pick(s))
                    .cloned()
                    .collect();
                if got.len() >= n {
                    return got;
                }
                assert!(
                    Instant::now() < deadline,
                    "waited 10 s for {n} spans: {got:#?}"
                );
                std::thread::park_timeout(Duration::from_millis(20));
            }
        }
    }

    fn config(fake: &str, ports: (u16, u16), collector: SocketAddr, extra: &str) -> String {
        crate::support::config(fake, ports).replacen(
            "switchyard:\n",
            &format!(
                "switchyard:\n  tracing: {{endpoint: \"http://{collector}\", flush_interval_ms: 20{extra}}}\n"
            ),
            1,
        )
    }

    fn named<'s>(spans: &'s [Span], name: &str) -> Vec<&'s Span> {
        spans.iter().filter(|s| s.name == name).collect()
    }

    /// No attribute carries a credential or the caller's text.
    fn nothing_secret(c: &Collector, texts: &[&str]) {
        let raw = c.raw.lock().unwrap();
        let raw = String::from_utf8_lossy(&raw);
        for secret in [KEY, PROVIDER_KEY].iter().chain(texts) {
            assert!(!raw.contains(secret), "{secret} was exported");
        }
    }

    /// A speech request with one retry, under a caller's trace: the server span is the caller's
    /// span's child, and authentication, validation, both attempts (the failed one first, the
    /// second after its retry delay) and the relay (with its first byte) are the server span's.
    /// Each attempt's span id is the one its `traceparent` gave the provider.
    #[test]
    fn a_speech_request_with_one_retry_is_one_span_tree() {
        let collector = Collector::start();
        let fake = FakeProvider::start();
        let gw = TestGateway::start_with(|p| config(&fake.base_url(), p, collector.addr, ""));
        fake.push(Reply::json(
            500,
            json!({"error": {"message": "oops", "type": "server_error"}}),
        ));
        fake.push(Reply::bytes(200, "audio/mpeg", b"ID3-audio".to_vec()));
        let text = "a caller's private sentence";
        let tp = traceparent();
        let resp = client::post_json(
            gw.addr,
            "/api/v1/audio/speech",
            &[
                ("Service-API-Key", KEY),
                ("traceparent", tp.as_str()),
                ("X-Request-Id", "sp-1"),
            ],
            &json!({"model": "tts-1", "input": text, "retries": 1}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        let spans = collector.wait(CALLER_TRACE, 6);
        let server = named(&spans, "POST /api/v1/audio/speech");
        assert_eq!(server.len(), 1, "{spans:#?}");
        let server = server[0];
        assert_eq!(server.kind, 2, "SERVER");
        assert_eq!(server.parent.as_deref(), Some(CALLER_PARENT));
        assert_eq!(server.attr("switchyard.request_id").unwrap(), "sp-1");
        assert_eq!(server.attr("gen_ai.operation.name").unwrap(), "speech");
        assert_eq!(server.attr("gen_ai.request.model").unwrap(), "tts-1");
        assert_eq!(server.attr("gen_ai.provider.name").unwrap(), "openai");
        assert_eq!(server.attr("gen_ai.response.model").unwrap(), "tts-1");
        assert_eq!(server.attr("http.response.status_code").unwrap(), 200);
        assert_eq!(server.attr("switchyard.attempts").unwrap(), 2);
        assert!(!server.error);
        for name in ["auth_and_limits", "validate", "speech_relay"] {
            let s = named(&spans, name);
            assert_eq!(s.len(), 1, "{name}: {spans:#?}");
            assert_eq!(
                s[0].parent.as_deref(),
                Some(server.span_id.as_str()),
                "{name}"
            );
            assert!(
                s[0].start >= server.start && s[0].end <= server.end,
                "{name} inside"
            );
        }
        let relay = named(&spans, "speech_relay")[0];
        assert_eq!(relay.events, ["first_byte"]);
        assert_eq!(relay.attr("switchyard.relay.ended").unwrap(), "complete");
        assert!(
            relay
                .attr("switchyard.relay.bytes")
                .unwrap()
                .as_i64()
                .unwrap()
                >= 9
        );
        let mut attempts = named(&spans, "upstream_attempt");
        attempts.sort_by_key(|s| s.attr("switchyard.attempt").unwrap().as_i64());
        assert_eq!(attempts.len(), 2, "{spans:#?}");
        let (first, second) = (attempts[0], attempts[1]);
        for a in [first, second] {
            assert_eq!(a.kind, 3, "CLIENT");
            assert_eq!(a.parent.as_deref(), Some(server.span_id.as_str()));
            assert_eq!(a.attr("switchyard.provider.account").unwrap(), "openai");
            assert_eq!(a.attr("gen_ai.request.model").unwrap(), "tts-1");
        }
        assert_eq!(first.attr("switchyard.attempt.outcome").unwrap(), "failure");
        assert_eq!(first.attr("http.response.status_code").unwrap(), 500);
        assert!(first.error && first.attr("switchyard.retry.delay_ms").is_none());
        assert_eq!(
            second.attr("switchyard.attempt.outcome").unwrap(),
            "success"
        );
        assert_eq!(second.attr("http.response.status_code").unwrap(), 200);
        assert!(second.attr("switchyard.retry.delay_ms").is_some());
        // What the provider was sent names each attempt's span.
        let sent: Vec<String> = fake
            .requests()
            .iter()
            .map(|r| {
                r.header("traceparent")
                    .unwrap()
                    .split('-')
                    .nth(2)
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(sent, [first.span_id.clone(), second.span_id.clone()]);
        nothing_secret(&collector, &[text]);
    }

    /// An SSE speech stream the provider cuts mid-way: the client has its `error` event, and the
    /// trace says the answer was cut as it does for raw audio — the relay span ended
    /// `upstream_failed` with an error status, and the server span is an error.
    #[test]
    fn an_sse_speech_stream_cut_mid_way_is_a_failed_relay() {
        use base64::Engine;
        let collector = Collector::start();
        let fake = FakeProvider::start();
        let gw = TestGateway::start_with(|p| config(&fake.base_url(), p, collector.addr, ""));
        let audio = base64::engine::general_purpose::STANDARD.encode([0xFFu8, 0xFB, 0x90, 0x64]);
        let delta = format!(
            "data: {}\n\n",
            json!({"type": "speech.audio.delta", "audio": audio})
        );
        fake.push(Reply::chunked(
            200,
            "text/event-stream",
            vec![(Duration::ZERO, delta.into_bytes())],
            true,
        ));
        let tp = traceparent();
        let resp = client::post_json(
            gw.addr,
            "/api/v1/audio/speech",
            &[("Service-API-Key", KEY), ("traceparent", tp.as_str())],
            &json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse"}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        let events = client::sse_events(&resp.body);
        assert!(
            events
                .last()
                .is_some_and(|e| e.contains("\"type\":\"error\"")),
            "{events:?}"
        );
        let spans = collector.wait(CALLER_TRACE, 5);
        let relay = named(&spans, "speech_relay");
        assert_eq!(relay.len(), 1, "{spans:#?}");
        assert_eq!(
            relay[0].attr("switchyard.relay.ended").unwrap(),
            "upstream_failed"
        );
        assert!(relay[0].error, "{:#?}", relay[0]);
        let server = named(&spans, "POST /api/v1/audio/speech");
        assert_eq!(server.len(), 1, "{spans:#?}");
        assert_eq!(server[0].attr("http.response.status_code").unwrap(), 200);
        assert!(server[0].error, "{:#?}", server[0]);
    }

    /// The same through OpenAI's Realtime API (issue 45): the socket dropped after two of its
    /// three audio deltas, raw and SSE; each trace's relay span ends `upstream_failed` with an
    /// error status after its `first_byte`, and its server span is an error, as for HTTP relays.
    #[test]
    fn a_realtime_speech_answer_cut_mid_stream_is_a_failed_relay() {
        use crate::support::realtime_fake::{RealtimeFake, Script};
        let collector = Collector::start();
        let fake = FakeProvider::start();
        let realtime = RealtimeFake::start();
        let gw = TestGateway::start_with(|p| {
            config(&fake.base_url(), p, collector.addr, "")
                .replacen(
                    "  providers:\n",
                    &format!(
                        "  providers:\n    openai-rt: {{kind: openai, api_key: \"{PROVIDER_KEY}\", base_url: \"{}\"}}\n",
                        realtime.base_url()
                    ),
                    1,
                )
                .replacen(
                    "  models:\n",
                    "  models:\n    rt: {family: openai-realtime, default_voice: alloy, targets: [{provider: openai-rt, model: gpt-realtime-2.1-mini}]}\n",
                    1,
                )
        });
        for (trace, sse) in [
            ("5bf92f3577b34da6a3ce929d0e0e4736", false),
            ("6bf92f3577b34da6a3ce929d0e0e4736", true),
        ] {
            realtime.push(Script::Cut(2));
            let tp = format!("00-{trace}-{CALLER_PARENT}-01");
            let mut body = json!({"model": "rt", "input": "hi", "response_format": "pcm"});
            if sse {
                body["stream_format"] = json!("sse");
            }
            let resp = client::post_json(
                gw.addr,
                "/api/v1/audio/speech",
                &[("Service-API-Key", KEY), ("traceparent", tp.as_str())],
                &body,
            );
            assert_eq!(resp.status, 200, "{}", resp.text());
            assert!(!resp.complete || sse, "a raw answer cut short has no end");
            let spans = collector.wait_for(2, |s| {
                s.trace_id == trace && (s.name == "speech_relay" || s.name.starts_with("POST "))
            });
            let relay = named(&spans, "speech_relay");
            assert_eq!(relay.len(), 1, "sse={sse}: {spans:#?}");
            assert_eq!(relay[0].events, ["first_byte"]);
            assert_eq!(
                relay[0].attr("switchyard.relay.ended").unwrap(),
                "upstream_failed",
                "sse={sse}"
            );
            assert!(relay[0].error, "sse={sse}: {:#?}", relay[0]);
            let server = named(&spans, "POST /api/v1/audio/speech");
            assert_eq!(server.len(), 1, "{spans:#?}");
            assert!(server[0].error, "sse={sse}: {:#?}", server[0]);
        }
    }

    /// A rerank request without a caller's trace: the gateway's own trace, its server span the
    /// root, with the usage and the attempt; no document or query text in any attribute.
    #[test]
    fn a_rerank_request_is_traced_without_its_documents() {
        let collector = Collector::start();
        let fake = FakeProvider::start();
        let gw = TestGateway::start_with(|p| config(&fake.base_url(), p, collector.addr, ""));
        fake.push(cohere_ok());
        let resp = client::post_json(
            gw.addr,
            "/api/v1/rerank",
            &[("Service-API-Key", KEY)],
            &json!({"model": "rerank-v3.5", "query": "secret query words",
                    "documents": ["confidential document body"]}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        let id = resp.header("x-request-id").unwrap().to_string();
        let sent = fake.requests()[0]
            .header("traceparent")
            .unwrap()
            .to_string();
        let trace = sent.split('-').nth(1).unwrap().to_string();
        let spans = collector.wait(&trace, 4);
        let server = named(&spans, "POST /api/v1/rerank")[0];
        assert!(server.parent.is_none(), "the gateway started the trace");
        assert_eq!(server.attr("switchyard.request_id").unwrap(), id.as_str());
        assert_eq!(server.attr("gen_ai.operation.name").unwrap(), "rerank");
        assert_eq!(server.attr("gen_ai.provider.name").unwrap(), "cohere");
        assert_eq!(server.attr("gen_ai.response.model").unwrap(), "rerank-v3.5");
        let attempt = named(&spans, "upstream_attempt")[0];
        assert_eq!(attempt.parent.as_deref(), Some(server.span_id.as_str()));
        assert_eq!(attempt.attr("switchyard.attempt").unwrap(), 1);
        assert_eq!(named(&spans, "validate").len(), 1);
        nothing_secret(
            &collector,
            &["secret query words", "confidential document body"],
        );
    }

    /// A cached model's request records its cache lookup, a child of its server span, saying
    /// what it found: a miss (then an upstream attempt), and a hit (no attempt at all).
    #[test]
    fn a_cache_lookup_is_a_span_saying_what_it_found() {
        let collector = Collector::start();
        let fake = FakeProvider::start();
        let gw = TestGateway::start_with(|p| {
            let mut c = config(&fake.base_url(), p, collector.addr, "");
            c.push_str("    rerank-cached: {family: cohere-rerank, targets: [{provider: cohere, model: rerank-v3.5}], cache: {ttl_seconds: 600}}\n");
            c
        });
        fake.push(cohere_ok());
        let body = json!({"model": "rerank-cached", "query": "q", "documents": ["a"]});
        for (trace, found, attempts) in [
            ("4bf92f3577b34da6a3ce929d0e0e4001", "miss", 1),
            ("4bf92f3577b34da6a3ce929d0e0e4002", "hit", 0),
        ] {
            let tp = format!("00-{trace}-{CALLER_PARENT}-01");
            let resp = client::post_json(
                gw.addr,
                "/api/v1/rerank",
                &[("Service-API-Key", KEY), ("traceparent", tp.as_str())],
                &body,
            );
            assert_eq!(resp.status, 200, "{}", resp.text());
            assert_eq!(resp.header("switchyard-cache"), Some(found));
            let spans = collector.wait_for(1, |s| {
                s.trace_id == trace && s.name == "POST /api/v1/rerank"
            });
            let server = &spans[0];
            let spans = collector.wait(trace, 3 + attempts);
            let lookup = named(&spans, "cache_lookup");
            assert_eq!(lookup.len(), 1, "{spans:?}");
            assert_eq!(lookup[0].parent.as_deref(), Some(server.span_id.as_str()));
            assert_eq!(lookup[0].attr("switchyard.cache.result").unwrap(), found);
            assert_eq!(named(&spans, "upstream_attempt").len(), attempts);
        }
        assert_eq!(fake.requests().len(), 1);
    }

    /// An asynchronous image task: the creating request's trace ends with its answer; the task's
    /// work is a trace of its own whose `image_task` span links to the creating request's server
    /// span, its attempt a child of the task span (and the provider sees the task's trace).
    #[test]
    fn an_async_image_tasks_work_links_to_the_request_that_created_it() {
        let collector = Collector::start();
        let fake = FakeProvider::start();
        let gw = TestGateway::start_with(|p| config(&fake.base_url(), p, collector.addr, ""));
        fake.push(Reply::json(
            200,
            json!({"created": 9, "data": [{"b64_json": "iVBORw0KGgo="}]}),
        ));
        let tp = traceparent();
        let resp = client::post_json(
            gw.addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", KEY), ("traceparent", tp.as_str())],
            &json!({"model": "gpt-image-2", "prompt": "a private prompt", "async": true,
                    "response_format": "b64_json"}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        let task_id = resp.json()["task_id"].as_str().unwrap().to_string();
        let created = collector.wait_for(1, |s| s.name == "POST /api/v1/images/generations");
        let server = &created[0];
        assert_eq!(server.trace_id, CALLER_TRACE);
        let tasks = collector.wait_for(1, |s| s.name == "image_task");
        let task = &tasks[0];
        assert_ne!(
            task.trace_id, CALLER_TRACE,
            "the task's work is a trace of its own"
        );
        assert!(task.parent.is_none());
        assert_eq!(
            task.links,
            [(CALLER_TRACE.to_string(), server.span_id.clone())]
        );
        assert_eq!(task.attr("switchyard.task_id").unwrap(), task_id.as_str());
        assert_eq!(task.attr("switchyard.task.resumed").unwrap(), false);
        assert_eq!(task.attr("switchyard.task.takeover").unwrap(), false);
        assert_eq!(task.attr("switchyard.task.status").unwrap(), "succeed");
        assert_eq!(task.attr("gen_ai.request.model").unwrap(), "gpt-image-2");
        let attempts = collector.wait(&task.trace_id, 2);
        let attempt = attempts
            .iter()
            .find(|s| s.name == "upstream_attempt")
            .unwrap();
        assert_eq!(attempt.parent.as_deref(), Some(task.span_id.as_str()));
        let sent = fake.requests()[0]
            .header("traceparent")
            .unwrap()
            .to_string();
        assert_eq!(sent.split('-').nth(1), Some(task.trace_id.as_str()));
        nothing_secret(&collector, &["a private prompt"]);
    }

    /// What the shared store holds for task `id` under `prefix`.
    #[cfg(feature = "redis")]
    fn stored(prefix: &str, id: &str) -> switchyard::internals::store::tasks::TaskRecord {
        use switchyard::internals::store::tasks::{RedisTaskStore, TaskStore};
        let mut settings = switchyard::internals::store::redis_files::RedisSettings::new(
            crate::support::redis::redis_url(),
        );
        settings.key_prefix = prefix.to_string();
        let store = RedisTaskStore::new(settings).unwrap();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(store.get(id))
            .unwrap()
            .expect("the task is stored")
    }

    /// An asynchronous task taken over by another instance: created through instance A under a
    /// caller's trace (the task record keeps A's server span as a `traceparent`), A stops while
    /// the provider's task runs, instance B on the same Redis notices A's silence, takes the task
    /// over and polls it to the end. B's `image_task` span links to A's request span (trace id
    /// and span id), says it was a takeover and from which instance; B's polling is its child.
    /// No credential and no prompt text anywhere.
    #[cfg(feature = "redis")]
    #[test]
    fn a_task_taken_over_by_another_instance_links_to_the_request_that_created_it() {
        use crate::support::redis;
        use crate::support::wan::{End, Wan};

        let collector = Collector::start();
        let fake = FakeProvider::start();
        let wan = Wan::install(&fake, End::Held);
        let prefix = redis::run_prefix();
        let make = |p| {
            config(&fake.base_url(), p, collector.addr, "")
                .replace(
                    "  images: {",
                    &format!(
                        "  store: {{redis_url: \"{}\", key_prefix: \"{prefix}\"}}\n  images: {{",
                        redis::redis_url()
                    ),
                )
                .replace(
                    "poll_interval_ms: 20",
                    "poll_interval_ms: 20, task_heartbeat_ms: 100, task_lost_after_ms: 400",
                )
        };
        let a = TestGateway::start_with(make);
        let prompt = "a private prompt about a lighthouse";
        let tp = traceparent();
        let resp = client::post_json(
            a.addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", KEY), ("traceparent", tp.as_str())],
            &json!({"model": "wanx2.1-t2i-turbo", "prompt": prompt, "async": true}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        let task_id = resp.json()["task_id"].as_str().unwrap().to_string();
        let created = collector.wait_for(1, |s| s.name == "POST /api/v1/images/generations");
        let server = created[0].clone();
        assert_eq!(server.trace_id, CALLER_TRACE);
        let record = stored(&prefix, &task_id);
        assert_eq!(
            record.trace.as_deref(),
            Some(format!("00-{CALLER_TRACE}-{}-01", server.span_id).as_str()),
            "the record keeps the creating request's span"
        );
        let instance_a = record.instance.clone();
        // A has the provider's task (held running), then stops without handing it over.
        let deadline = Instant::now() + Duration::from_secs(10);
        while stored(&prefix, &task_id).native.iter().flatten().count() == 0 {
            assert!(Instant::now() < deadline, "A never submitted the task");
            std::thread::park_timeout(Duration::from_millis(20));
        }
        drop(a);

        let b = TestGateway::start_with(make);
        let deadline = Instant::now() + Duration::from_secs(10);
        while stored(&prefix, &task_id).instance == instance_a {
            assert!(Instant::now() < deadline, "B never took the task over");
            std::thread::park_timeout(Duration::from_millis(20));
        }
        wan.finish();
        let done = crate::support::tasks::finished(&b, &task_id);
        assert_eq!(done["task_status"], "succeed", "{done}");
        assert_eq!(wan.submitted(), 1, "resumed, not submitted again");

        let tasks = collector.wait_for(1, |s| {
            s.name == "image_task" && s.attr("switchyard.task.takeover") == Some(&json!(true))
        });
        let task = &tasks[0];
        assert_ne!(task.trace_id, CALLER_TRACE, "a trace of its own");
        assert!(task.parent.is_none());
        assert_eq!(
            task.links,
            [(CALLER_TRACE.to_string(), server.span_id.clone())]
        );
        assert_eq!(task.attr("switchyard.task_id").unwrap(), task_id.as_str());
        assert_eq!(task.attr("switchyard.task.resumed").unwrap(), true);
        assert_eq!(
            task.attr("switchyard.task.taken_over_from").unwrap(),
            instance_a.as_str()
        );
        assert_eq!(task.attr("switchyard.task.status").unwrap(), "succeed");
        assert_eq!(task.attr("gen_ai.operation.name").unwrap(), "images");
        assert_eq!(
            task.attr("gen_ai.request.model").unwrap(),
            "wanx2.1-t2i-turbo"
        );
        assert!(!task.error);
        let inside =
            collector.wait_for(1, |s| s.trace_id == task.trace_id && s.name == "task_poll");
        let poll = &inside[0];
        assert_eq!(poll.parent.as_deref(), Some(task.span_id.as_str()));
        assert_eq!(poll.attr("gen_ai.provider.name").unwrap(), "dashscope");
        assert!(
            poll.attr("switchyard.poll.count")
                .unwrap()
                .as_i64()
                .unwrap()
                >= 1
        );
        assert!(!poll.error);
        nothing_secret(&collector, &[prompt]);
    }

    /// A takeover that can only fail the task (its instance may have reached a provider that
    /// answers directly): still an `image_task` span, failed `instance_lost`, linked to the
    /// creating request's span as the record keeps it.
    #[cfg(feature = "redis")]
    #[test]
    fn a_task_failed_at_its_takeover_is_a_failed_span_linked_to_its_request() {
        use crate::support::redis;
        use switchyard::internals::store::tasks::{RedisTaskStore, TaskRecord, TaskStore};

        let collector = Collector::start();
        let fake = FakeProvider::start();
        let prefix = redis::run_prefix();
        let id = uuid::Uuid::new_v4().to_string();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let creator_span = "b7ad6b7169203331";
        let record = TaskRecord {
            sent: true,
            trace: Some(format!("00-{CALLER_TRACE}-{creator_span}-01")),
            ..TaskRecord::started(
                "key:tester".into(),
                "gpt-image-2".into(),
                "dead-instance".into(),
                now_ms / 1000 - 120,
                now_ms - 120_000,
            )
        };
        let mut settings =
            switchyard::internals::store::redis_files::RedisSettings::new(redis::redis_url());
        settings.key_prefix = prefix.clone();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(RedisTaskStore::new(settings).unwrap().put(
                &id,
                &record,
                Duration::from_secs(600),
            ))
            .unwrap();
        let gw = TestGateway::start_with(|p| {
            config(&fake.base_url(), p, collector.addr, "").replace(
                "  images: {",
                &format!(
                    "  store: {{redis_url: \"{}\", key_prefix: \"{prefix}\"}}\n  images: {{",
                    redis::redis_url()
                ),
            )
        });
        let done = crate::support::tasks::finished(&gw, &id);
        assert_eq!(done["error"]["code"], "instance_lost", "{done}");
        let spans = collector.wait_for(1, |s| s.name == "image_task");
        let task = &spans[0];
        assert_eq!(
            task.links,
            [(CALLER_TRACE.to_string(), creator_span.to_string())]
        );
        assert_ne!(task.trace_id, CALLER_TRACE);
        assert!(task.error);
        assert_eq!(task.attr("error.type").unwrap(), "instance_lost");
        assert_eq!(task.attr("switchyard.task.status").unwrap(), "failed");
        assert_eq!(task.attr("switchyard.task.takeover").unwrap(), true);
        assert_eq!(
            task.attr("switchyard.task.taken_over_from").unwrap(),
            "dead-instance"
        );
        assert_eq!(task.attr("switchyard.task_id").unwrap(), id.as_str());
    }

    /// A collector that accepts and never answers: requests are not slowed, nothing is
    /// exported, and every span is counted as failed or dropped (a queue of 2).
    #[cfg(feature = "metrics")]
    #[test]
    fn a_stalled_collector_slows_nothing_and_its_spans_are_counted() {
        let stalled = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = stalled.local_addr().unwrap();
        let held = Arc::new(Mutex::new(Vec::new()));
        let h = held.clone();
        std::thread::spawn(move || {
            for conn in stalled.incoming().flatten() {
                h.lock().unwrap().push(conn);
            }
        });
        let [_, _, dropped] = collector_down(addr);
        assert!(dropped > 0, "a queue of 2 overflowed");
    }

    /// A collector that is down (nothing listens on its port): every export is refused at once;
    /// requests are served as promptly, and every span is counted as failed or dropped.
    #[cfg(feature = "metrics")]
    #[test]
    fn a_collector_that_is_down_slows_nothing_and_its_spans_are_counted() {
        let closed = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let [_, failed, _] = collector_down(addr);
        assert!(failed > 0, "refused exports are counted as failed");
    }

    /// Ten rerank requests through a gateway exporting to `addr`, a collector that never takes a
    /// span: each served in well under the export timeout, and all of their spans counted as
    /// failed or dropped, none exported. The counts: exported, failed, dropped.
    #[cfg(feature = "metrics")]
    fn collector_down(addr: SocketAddr) -> [u64; 3] {
        let fake = FakeProvider::start();
        fake.set_default(cohere_ok());
        let m = crate::support::free_port();
        let gw = TestGateway::start_with(|p| {
            config(
                &fake.base_url(),
                p,
                addr,
                ", timeout_ms: 1500, queue_spans: 2, batch_spans: 2",
            )
            .replacen(
                "switchyard:\n",
                &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{m}\"}}\n"),
                1,
            )
        });
        let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
        crate::support::wait_listening(metrics);
        let n = 10;
        for _ in 0..n {
            let started = Instant::now();
            let resp = client::post_json(
                gw.addr,
                "/api/v1/rerank",
                &[("Service-API-Key", KEY)],
                &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"]}),
            );
            assert_eq!(resp.status, 200);
            // An export waiting on the collector would hold a request 1.5 s.
            assert!(
                started.elapsed() < Duration::from_millis(1000),
                "{:?}",
                started.elapsed()
            );
        }
        // Four spans a request (authentication and limits, validation, the attempt, the
        // server span): each one exported, failed or dropped, counted exactly.
        let count = |outcome: &str| -> u64 {
            let text = client::request(metrics, "GET", "/metrics", &[], b"").text();
            let series = format!("switchyard_trace_spans_total{{outcome=\"{outcome}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&series))
                .map_or(0, |v| v.trim().parse().unwrap())
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while count("failed") + count("dropped") < 4 * n && Instant::now() < deadline {
            std::thread::park_timeout(Duration::from_millis(50));
        }
        assert_eq!(count("failed") + count("dropped"), 4 * n);
        assert_eq!(count("exported"), 0);
        [count("exported"), count("failed"), count("dropped")]
    }
}

/// Defect 7: an error body names its request — `request_id`, equal to the answer's
/// `X-Request-Id` — for a validation error (400), a refused caller (401), a path the gateway does
/// not serve (404) and a model it cannot serve (503), the caller's id or a generated one; and a
/// rerank compatibility surface's error shape carries it too.
#[test]
fn an_error_body_names_the_request_id_of_its_answer() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let auth = ("Service-API-Key", KEY);
    /// Method, path, headers, JSON body (`Null`: none) and the status expected.
    type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, Value, u16);
    let cases: [Case; 5] = [
        (
            "POST",
            "/api/v1/rerank",
            vec![auth, ("X-Request-Id", "caller-400")],
            json!({"model": "rerank-v3.5", "query": "q"}),
            400,
        ),
        ("POST", "/api/v1/rerank", vec![], rerank_body(), 401),
        (
            "GET",
            "/api/v1/no-such-thing",
            vec![auth, ("X-Request-Id", "caller-404")],
            Value::Null,
            404,
        ),
        (
            "POST",
            "/api/v1/audio/speech",
            vec![auth],
            json!({"model": "tts-off", "input": "hi", "voice": "alloy"}),
            503,
        ),
        (
            "POST",
            "/compat/jina/v1/rerank",
            vec![auth, ("X-Request-Id", "caller-jina")],
            json!({"model": "jina-reranker-v2", "query": "q"}),
            400,
        ),
    ];
    for (method, path, headers, body, status) in cases {
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&body).unwrap()
        };
        let mut headers = headers;
        if !bytes.is_empty() {
            headers.push(("Content-Type", "application/json"));
        }
        let resp = client::request(gw.addr, method, path, &headers, &bytes);
        assert_eq!(resp.status, status, "{path}: {}", resp.text());
        let id = resp.header("x-request-id").unwrap().to_string();
        let body = resp.json();
        assert_eq!(body["request_id"], id.as_str(), "{path} {status}: {body}");
        if let Some((_, sent)) = headers.iter().find(|(h, _)| *h == "X-Request-Id") {
            assert_eq!(id, *sent);
        } else {
            assert!(is_generated(&id), "{id}");
        }
    }
    assert!(fake.requests().is_empty());
}
