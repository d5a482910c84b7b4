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
