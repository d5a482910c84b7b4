//! Mixedbread through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};

/// The billed total the fake reports; the public `total_tokens` must be exactly this.
const BILLED: u64 = 120;

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let data: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "score": s, "object": "rank_result"}))
        .collect();
    Reply::json(
        200,
        json!({
            "object": "list",
            "model": "mixedbread-ai/mxbai-rerank-large-v2",
            "data": data,
            "top_k": scores.len(),
            "return_input": false,
            "usage": {"prompt_tokens": BILLED, "total_tokens": BILLED, "completion_tokens": 0},
        }),
    )
}

/// The same answer without `usage`.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let data: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "score": s, "object": "rank_result"}))
        .collect();
    Reply::json(200, json!({"object": "list", "data": data}))
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut want = json!({
        "model": "mixedbread-ai/mxbai-rerank-large-v2",
        "query": query,
        "input": docs,
        "return_input": false,
    });
    // Mixedbread calls it `top_k`, and its default is every document.
    if let Some(n) = top_n {
        want["top_k"] = json!(n);
    }
    assert_eq!(req.json(), want);
    assert_eq!(req.header("content-type"), Some("application/json"));
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            Reply::json(
                422,
                json!({"detail": [{"loc": ["body", "input"], "msg": "List should have at most 1000 items", "type": "too_long"}]}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(400, json!({"detail": "Malformed request"})),
            400,
            "invalid_request",
        ),
        (
            Reply::json(401, json!({"detail": "Invalid API key"})),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(402, json!({"detail": "Insufficient balance"})),
            502,
            "upstream_error",
        ),
        (
            Reply::json(429, json!({"detail": "Rate limit exceeded"})),
            429,
            "rate_limited",
        ),
        (
            Reply::json(500, json!({"detail": "Internal Server Error"})),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"data": "nope"})),
            502,
            "upstream_bad_response",
        ),
        (
            // Voyage/Cohere score name: Mixedbread's is `score`.
            Reply::json(200, json!({"data": [{"index": 0, "relevance_score": 0.5}]})),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "mxbai-rerank-large-v2",
        path: "/v1/reranking",
        bearer: true,
        max_documents: 1000,
        success,
        reported_total: Some(BILLED),
        unbilled,
        query_counting: QueryCounting::Once,
        check_request: check,
        errors,
    }
);
