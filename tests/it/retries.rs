//! Retries: which failures are retried, that the whole body is re-sent, and when retrying stops.

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{post, TestGateway};

fn cohere_ok() -> Reply {
    Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    )
}

fn big_rerank(retries: u32) -> serde_json::Value {
    // ~80 KB: beyond Pingora's 64 KiB retry buffer, so a re-send must come from the gateway.
    let docs: Vec<String> = (0..80)
        .map(|i| format!("{i} {}", "x".repeat(1000)))
        .collect();
    json!({"model": "rerank-v3.5", "query": "q", "documents": docs, "retries": retries})
}

#[test]
fn retries_5xx_and_429_resending_the_full_body() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(500, json!({"message": "internal"})));
    fake.push(Reply::json(429, json!({"message": "slow down"})).with_header("retry-after", "0"));
    fake.push(cohere_ok());
    let body = big_rerank(2);
    let resp = post(&gw, "/api/v1/rerank", &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let seen = fake.requests();
    assert_eq!(seen.len(), 3);
    let first = &seen[0].body;
    assert!(first.len() > 80_000);
    assert!(
        seen.iter().all(|r| &r.body == first),
        "a retry did not re-send the same body"
    );
}

#[test]
fn default_is_no_retry_and_exhausted_retries_report_the_last_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.set_default(Reply::json(503, json!({"message": "overloaded"})));
    let resp = post(&gw, "/api/v1/rerank", &big_rerank(0));
    assert_eq!(resp.status, 502);
    assert_eq!(fake.requests().len(), 1);
    let resp = post(&gw, "/api/v1/rerank", &big_rerank(2));
    assert_eq!(resp.status, 502);
    assert_eq!(fake.requests().len(), 4);
}

#[test]
fn caller_errors_are_not_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.set_default(Reply::json(400, json!({"message": "bad query"})));
    let resp = post(&gw, "/api/v1/rerank", &big_rerank(3));
    assert_eq!(resp.status, 400);
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn connection_refused_is_retried_then_502() {
    // A port nothing listens on (held, so no other test's server is given it meanwhile).
    let (dead, _held) = support::refused_port();
    let gw = TestGateway::start_with(|ports| {
        support::config(&format!("http://127.0.0.1:{dead}"), ports)
    });
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "retries": 2}),
    );
    assert_eq!(resp.status, 502);
    assert_eq!(resp.json()["code"], "upstream_unreachable");
}

#[test]
fn connect_failure_then_success_on_retry() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::hangup());
    fake.push(cohere_ok());
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn a_stalled_provider_times_out_with_504() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // The test config's read timeout is 1.5 s.
    fake.push(Reply::stall(Duration::from_secs(4)));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"]}),
    );
    assert_eq!(resp.status, 504, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_timeout");
}

#[test]
fn speech_is_retried_before_the_first_byte() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        500,
        json!({"error": {"message": "oops", "type": "server_error"}}),
    ));
    fake.push(Reply::bytes(200, "audio/mpeg", b"ID3-audio".to_vec()));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi", "retries": 1}),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"ID3-audio");
    assert_eq!(fake.requests().len(), 2);
}

/// A pooled connection the provider closed when the request arrived is tried once more on a
/// fresh connection, with the same request (its header is made again: sending consumes it), even
/// with no retries asked for: nothing was answered.
#[test]
fn a_reused_connection_closed_by_the_provider_is_tried_once_fresh() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_one_worker(&fake);
    fake.push(cohere_ok());
    fake.push(Reply::hangup());
    fake.push(cohere_ok());
    let body = json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"]});
    assert_eq!(post(&gw, "/api/v1/rerank", &body).status, 200);
    let resp = post(&gw, "/api/v1/rerank", &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let seen = fake.requests();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        fake.connections(),
        2,
        "the second request did not reuse the first connection"
    );
    let (dropped, fresh) = (&seen[1], &seen[2]);
    assert_eq!(fresh.body, dropped.body);
    for name in ["authorization", "content-type", "content-length", "host"] {
        assert!(
            fresh.header(name).is_some(),
            "{name} missing on the fresh try"
        );
        assert_eq!(fresh.header(name), dropped.header(name), "{name}");
    }
}
