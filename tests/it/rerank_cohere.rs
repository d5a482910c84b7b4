//! Cohere v2 through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, RerankCase};

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({"id": "abc", "results": results, "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}),
    )
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let b = req.json();
    assert_eq!(b["model"], "rerank-v3.5");
    assert_eq!(b["query"], query);
    assert_eq!(b["documents"], json!(docs));
    match top_n {
        Some(n) => assert_eq!(b["top_n"], n),
        None => assert!(b.get("top_n").is_none()),
    }
    // v2 has no return_documents: the gateway re-attaches documents itself.
    assert!(b.get("return_documents").is_none());
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            Reply::json(
                400,
                json!({"id": "x", "message": "invalid request: list of documents must not be empty"}),
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
            Reply::json(498, json!({"message": "invalid api token"})),
            502,
            "upstream_auth_failed",
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
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "rerank-v3.5",
        path: "/v2/rerank",
        bearer: true,
        max_documents: 1000,
        success,
        reported_total: None,
        check_request: check,
        errors,
    }
);
