//! Cohere v1 (`/v1/rerank`) through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({"id": "abc", "results": results, "meta": {"api_version": {"version": "1"}, "billed_units": {"search_units": 1}}}),
    )
}

/// No `meta` at all: nothing billed to read.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(200, json!({"id": "abc", "results": results}))
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut expected = json!({
        "model": "rerank-english-v3.0",
        "query": query,
        "documents": docs,
        // The gateway re-attaches documents itself, so it never asks for them back.
        "return_documents": false,
    });
    if let Some(n) = top_n {
        expected["top_n"] = json!(n);
    }
    assert_eq!(req.json(), expected);
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            Reply::json(
                400,
                json!({"message": "invalid request: list of documents must not be empty"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                422,
                json!({"message": "max_chunks_per_doc must be positive"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(401, json!({"message": "invalid api token"})),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                498,
                json!({"message": "invalid api token sk-provider-secret-0001"}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                404,
                json!({"message": "model 'rerank-english-v3.0' not found, make sure the correct model ID was used and that you have access to the model."}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(429, json!({"message": "too many requests"})),
            429,
            "rate_limited",
        ),
        (
            Reply::json(500, json!({"message": "internal server error"})),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"results": "nope"})),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::json(200, json!({"results": [{"index": 0}]})),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "rerank-english-v3.0",
        path: "/v1/rerank",
        bearer: true,
        max_documents: 9999,
        success,
        reported_total: None,
        unbilled,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// Search units reach the public `metadata`, and `max_chunks_per_doc` (the family's native field)
/// travels to Cohere verbatim.
#[test]
fn cohere_v1_search_units_and_max_chunks_per_doc() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(success(&[(0, 0.1), (1, 0.8)], &["a", "b"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-english-v3.0", "query": "q", "documents": ["a", "b"],
                "max_chunks_per_doc": 4}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["metadata"]["search_units"], 1.0);
    assert_eq!(out["metadata"]["total_tokens_source"], "gateway");
    let sent = fake.requests().pop().unwrap();
    assert_eq!(
        sent.json(),
        json!({"model": "rerank-english-v3.0", "query": "q", "documents": ["a", "b"],
               "return_documents": false, "max_chunks_per_doc": 4})
    );
}

/// v1 refuses documents × `max_chunks_per_doc` (default 10) from 10,000 on: the gateway says so
/// before sending, naming the fields, and lets a caller who lowers `max_chunks_per_doc` send more.
#[test]
fn documents_times_chunks_below_ten_thousand() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let docs = |n: usize| (0..n).map(|i| format!("d{i}")).collect::<Vec<_>>();
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-english-v3.0", "query": "q", "documents": docs(1000)}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let why = resp.json()["details"]["documents"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(why.contains("max_chunks_per_doc 10"), "{why}");
    assert!(fake.requests().is_empty());

    let scores: Vec<(usize, f64)> = (0..4000).map(|i| (i, 0.5)).collect();
    fake.push(success(&scores, &[]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-english-v3.0", "query": "q", "documents": docs(4000),
                "max_chunks_per_doc": 2, "top_n": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), 1);
}
