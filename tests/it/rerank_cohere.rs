//! Cohere v2 through the rerank conformance cases.

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
        json!({"id": "abc", "results": results, "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}),
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
        // Cohere's "no such model" (its errors page), naming the model.
        (
            Reply::json(
                404,
                json!({"id": "da62", "message": "model 'rerank-v3.5' not found, make sure the correct model ID was used and that you have access to the model."}),
            ),
            503,
            "model_unavailable",
        ),
        // A 404 without that message is a wrong path, not a model.
        (
            Reply::json(404, json!({"message": "404 page not found"})),
            502,
            "upstream_error",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "rerank-v3.5",
        path: "/v2/rerank",
        bearer: true,
        max_documents: 10000,
        success,
        reported_total: None,
        unbilled,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// Cohere's 499 "request cancelled" is retried, as its errors page says to.
#[test]
fn a_cancelled_request_is_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        499,
        json!({"message": "failed to get rerank inference: request cancelled"}),
    ));
    fake.push(success(&[(0, 0.5), (1, 0.4)], &["a", "b"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"], "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), 2);

    // Without a retry left, the caller learns it was Cohere's failure, not its request.
    fake.push(Reply::json(499, json!({"message": "request cancelled"})));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_error");
}

/// Cohere takes up to 10,000 documents (1,000 is only its recommendation).
#[test]
fn ten_thousand_documents_reach_cohere() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let n = 10_000;
    let docs: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
    let scores: Vec<(usize, f64)> = (0..n).map(|i| (i, i as f64 / n as f64)).collect();
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    fake.push(success(&scores, &refs));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": docs, "top_n": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["results"][0]["index"], n - 1);
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.json()["documents"].as_array().unwrap().len(), n);
}

/// Cohere's query limit is 2,048 tokens, and it cuts a longer query rather than refuse it: the
/// gateway refuses one over 2,048 tokens (a 400 naming `query` and the unit), and sends one under
/// it even when it is far over 2,048 characters.
#[test]
fn a_query_over_2048_tokens_is_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let long = "rerank ".repeat(900);
    assert!(long.chars().count() > 2048);
    assert!(switchyard::internals::tokens::count(&long) <= 2048);
    fake.push(success(&[(0, 0.9)], &["a"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": long, "documents": ["a"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().pop().unwrap().json()["query"], long);

    let too_long = "rerank ".repeat(2100);
    assert!(switchyard::internals::tokens::count(&too_long) > 2048);
    assert!(
        too_long.chars().count() < 32_000,
        "refused below the old limit"
    );
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": too_long, "documents": ["a"]}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    let why = body["details"]["query"].as_str().unwrap();
    assert!(why.contains("tokens") && why.contains("2048"), "{why}");
    assert_eq!(fake.requests().len(), 1, "nothing sent");
}
