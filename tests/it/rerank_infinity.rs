//! Infinity's rerank API (`/rerank`) through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

fn results(scores: &[(usize, f64)]) -> Vec<serde_json::Value> {
    scores
        .iter()
        .map(|(i, s)| json!({"relevance_score": s, "index": i, "document": null}))
        .collect()
}

/// Infinity's `usage` is a length total (characters by default), never taken as tokens.
fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    Reply::json(
        200,
        json!({
            "object": "rerank",
            "results": results(scores),
            "model": "BAAI/bge-reranker-v2-m3",
            "usage": {"prompt_tokens": 999, "total_tokens": 999},
            "id": "infinity-5b1e",
            "created": 1_764_000_000,
        }),
    )
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut want = json!({"model": "BAAI/bge-reranker-v2-m3", "query": query, "documents": docs});
    if let Some(n) = top_n {
        want["top_n"] = json!(n);
    }
    want["return_documents"] = json!(false);
    want["raw_scores"] = json!(false);
    assert_eq!(req.json(), want);
    // No key is configured, so none may be sent.
    assert_eq!(req.header("authorization"), None);
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            Reply::json(
                400,
                json!({"error": {"message": "Invalid model: 'Engine for model name `BAAI/bge-reranker-v2-m3` not found. Available model names are [\"e5\"]'", "type": null, "param": null, "code": 400}}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(
                400,
                json!({"error": {"message": "ModelNotDeployedError: model=`BAAI/bge-reranker-v2-m3` does not support `rerank`. Reason: the loaded moded cannot fullyfill `rerank`.", "type": null, "param": null, "code": 400}}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(
                422,
                json!({"detail": [{"loc": ["body", "documents"], "msg": "List should have at most 2048 items", "type": "too_long"}]}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                429,
                json!({"error": {"message": "model BAAI/bge-reranker-v2-m3 is currently overloaded", "type": null, "param": null, "code": 429}}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::json(401, json!({"detail": "Unauthorized"})),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                500,
                json!({"error": {"message": "InternalServerError: CUDA out of memory", "type": null, "param": null, "code": 500}}),
            ),
            502,
            "upstream_error",
        ),
        (
            // Infinity's pre-2024 answer kept results under `data`.
            Reply::json(
                200,
                json!({"object": "rerank", "data": [{"index": 0, "relevance_score": 0.5}]}),
            ),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "infinity-reranker",
        path: "/rerank",
        bearer: false,
        max_documents: 2048,
        success,
        reported_total: None,
        unbilled: success,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// Infinity's length figure reaches `metadata`, labelled as Infinity's, while `total_tokens` is
/// the gateway's count.
#[test]
fn infinity_usage_is_reported_but_not_billed() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(success(&[(1, 0.9), (0, 0.1)], &["a", "b"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "infinity-reranker", "query": "q", "documents": ["a", "b"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["metadata"]["infinity_usage_total"], 999);
    assert_eq!(out["metadata"]["total_tokens_source"], "gateway");
    assert_ne!(out["usage"]["total_tokens"], 999);
    assert_eq!(out["results"][0]["index"], 1);
}
