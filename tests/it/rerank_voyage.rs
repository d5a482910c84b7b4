//! Voyage AI through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

/// The billed total the fake reports (Voyage counts the query once per document, so it is larger
/// than query + documents); the public `total_tokens` must be exactly this.
const BILLED: u64 = 1234;

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let data: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"relevance_score": s, "index": i}))
        .collect();
    Reply::json(
        200,
        json!({"object": "list", "data": data, "model": "rerank-2.5", "usage": {"total_tokens": BILLED}}),
    )
}

/// The same answer without `usage`.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let data: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"relevance_score": s, "index": i}))
        .collect();
    Reply::json(
        200,
        json!({"object": "list", "data": data, "model": "rerank-2.5"}),
    )
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut want = json!({
        "model": "rerank-2.5",
        "query": query,
        "documents": docs,
        "return_documents": false,
    });
    // Voyage calls it `top_k`, and its default is every document.
    if let Some(n) = top_n {
        want["top_k"] = json!(n);
    }
    assert_eq!(req.json(), want);
    assert_eq!(req.header("content-type"), Some("application/json"));
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        // Voyage's answer for a model it does not serve.
        (
            Reply::json(
                400,
                json!({"detail": "Model rerank-2.5 is not supported. Supported models are ['rerank-2.5-lite']."}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(
                400,
                json!({"detail": "The total number of tokens in the query and documents exceeds the limit."}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                422,
                json!({"detail": [{"loc": ["body", "top_k"], "msg": "Input should be greater than or equal to 1", "type": "greater_than_equal"}]}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(401, json!({"detail": "Provided API key is invalid."})),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(403, json!({"detail": "Forbidden"})),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(429, json!({"detail": "You have exceeded your rate limit."})),
            429,
            "rate_limited",
        ),
        (
            Reply::json(
                500,
                json!({"detail": "The server failed to process the request."}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                503,
                json!({"detail": "The server is overloaded or not ready yet."}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"data": "nope"})),
            502,
            "upstream_bad_response",
        ),
        (
            // A Cohere-shaped answer: Voyage's results live under `data`.
            Reply::json(
                200,
                json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
            ),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "voyage-rerank-2.5",
        path: "/v1/rerank",
        bearer: true,
        max_documents: 1000,
        success,
        reported_total: Some(BILLED),
        unbilled,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// rerank-2.5's query limit is 8,000 tokens, and with `truncation` on (its default) Voyage cuts a
/// longer query: the gateway refuses one over 8,000 tokens (a 400 naming `query`), a CJK one
/// among them though it is far under the old 32,000 characters, and sends one under the limit.
#[test]
fn a_query_over_8000_tokens_is_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let long = "rerank ".repeat(3500);
    assert!(switchyard::internals::tokens::count(&long) <= 8000);
    fake.push(success(&[(0, 0.9)], &["a"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "voyage-rerank-2.5", "query": long, "documents": ["a"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().pop().unwrap().json()["query"], long);

    // Short pieces (the comma splits them), as real text has: one long run of ideographs is
    // slow to count in a debug build.
    let cjk = "重新排序文档，".repeat(1500);
    assert!(cjk.chars().count() < 32_000, "refused below the old limit");
    for too_long in ["rerank ".repeat(8100), cjk] {
        assert!(switchyard::internals::tokens::count(&too_long) > 8000);
        let resp = post(
            &gw,
            "/api/v1/rerank",
            &json!({"model": "voyage-rerank-2.5", "query": too_long, "documents": ["a"]}),
        );
        assert_eq!(resp.status, 400, "{}", resp.text());
        let body = resp.json();
        assert_eq!(body["code"], "validation_error");
        let why = body["details"]["query"].as_str().unwrap();
        assert!(why.contains("tokens") && why.contains("8000"), "{why}");
    }
    assert_eq!(fake.requests().len(), 1, "nothing sent");
}
