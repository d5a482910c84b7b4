//! Hugging Face text-embeddings-inference (`/rerank`) through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

/// TEI answers a bare array and reports usage only in headers.
fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let ranks: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "score": s}))
        .collect();
    Reply::json(200, json!(ranks))
        .with_header("x-compute-type", "gpu+optimized")
        .with_header("x-compute-tokens", "123")
        .with_header("x-compute-characters", "456")
        .with_header("x-compute-time", "7")
        .with_header("x-total-time", "7")
        .with_header("x-tokenization-time", "1")
        .with_header("x-queue-time", "2")
        .with_header("x-inference-time", "4")
}

/// The same answer without any usage header.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let ranks: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "score": s}))
        .collect();
    Reply::json(200, json!(ranks))
}

fn check(req: &Recorded, query: &str, docs: &[&str], _top_n: Option<usize>) {
    // No model name (the server has one loaded) and never top_n (TEI has none; the gateway cuts).
    assert_eq!(
        req.json(),
        json!({"query": query, "texts": docs, "raw_scores": false, "return_text": false})
    );
    // The test provider has no key, so nothing may be sent in its place.
    assert_eq!(req.header("authorization"), None);
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        // Validation is 422 since TEI's February 2026 fix; servers built before answer 413.
        (
            Reply::json(
                422,
                json!({"error": "batch size 40 > maximum allowed batch size 32", "error_type": "Validation"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                413,
                json!({"error": "batch size 40 > maximum allowed batch size 32", "error_type": "Validation"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                422,
                json!({"error": "Tokenization error", "error_type": "Tokenizer"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                400,
                json!({"error": "`texts` cannot be empty", "error_type": "Empty"}),
            ),
            400,
            "invalid_request",
        ),
        // A server started with --api-key refuses a wrong key with a bare 401.
        (
            Reply::bytes(401, "text/plain", Vec::new()),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                429,
                json!({"error": "Model is overloaded", "error_type": "Overloaded"}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::json(
                424,
                json!({"error": "Backend error: Inference failed", "error_type": "backend"}),
            ),
            502,
            "upstream_error",
        ),
        // The server was started with a model that is not a reranker: the operator's to fix.
        (
            Reply::json(
                424,
                json!({"error": "Backend error: model is not a re-ranker model", "error_type": "backend"}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(
                503,
                json!({"error": "unhealthy", "error_type": "Unhealthy"}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"results": [{"index": 0, "score": 0.5}]})),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::json(200, json!([{"index": 9, "score": 0.5}])),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "tei-reranker",
        path: "/rerank",
        bearer: false,
        max_documents: 32,
        success,
        reported_total: Some(123),
        unbilled,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// The usage headers reach the public `metadata` as numbers, and the truncation fields the family
/// declares travel to TEI verbatim.
#[test]
fn tei_usage_headers_and_truncation_fields() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(success(&[(0, 0.1), (1, 0.8)], &["a", "b"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "tei-reranker", "query": "q", "documents": ["a", "b"], "top_n": 1,
                "truncate": true, "truncation_direction": "Left"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(
        out["results"],
        json!([{"index": 1, "relevance_score": 0.8, "document": "b"}])
    );
    assert_eq!(out["usage"]["total_tokens"], 123);
    let m = &out["metadata"];
    assert_eq!(m["total_tokens_source"], "provider");
    assert_eq!(m["compute_characters"], 456);
    assert_eq!(m["compute_time_ms"], 7);
    assert_eq!(m["total_time_ms"], 7);
    // Per-text means in TEI, and named so.
    assert_eq!(m["tokenization_time_ms_mean"], 1);
    assert_eq!(m["queue_time_ms_mean"], 2);
    assert_eq!(m["inference_time_ms_mean"], 4);
    assert!(m.get("inference_time_ms").is_none());
    assert!(m.get("compute_type").is_none());
    let sent = fake.requests().pop().unwrap();
    assert_eq!(
        sent.json(),
        json!({"query": "q", "texts": ["a", "b"], "raw_scores": false, "return_text": false,
               "truncate": true, "truncation_direction": "Left"})
    );
}
