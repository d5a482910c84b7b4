//! SiliconFlow through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};

/// The billed (input) token total every success answer reports.
const TOTAL: u64 = 123;

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({
            "id": "0193c4a1d2e3f4",
            "results": results,
            "tokens": {"input_tokens": TOTAL, "output_tokens": 0}
        }),
    )
}

/// The same answer without `tokens`.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(200, json!({"id": "0193c4a1d2e3f5", "results": results}))
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut expected = json!({
        "model": "BAAI/bge-reranker-v2-m3",
        "query": query,
        "documents": docs,
        "return_documents": false
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
                json!({"code": 20015, "message": "The parameter is invalid. Please check again.", "data": null}),
            ),
            400,
            "invalid_request",
        ),
        // A rejected key comes as plain text, not the JSON envelope.
        (
            Reply::bytes(401, "text/plain; charset=utf-8", b"Invalid token".to_vec()),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(401, json!("Api key is invalid")),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                429,
                json!({"code": 50603, "message": "TPM limit reached.", "data": null}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::json(
                503,
                json!({"code": 50505, "message": "Model service overloaded. Please try again later.", "data": null}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                403,
                json!({"code": 30001, "message": "Sorry, your account balance is insufficient", "data": null}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                400,
                json!({"code": 20012, "message": "Model does not exist. Please check it carefully.", "data": null}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(200, json!({"results": "nope"})),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::bytes(200, "application/json", b"{\"results\": [".to_vec()),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "bge-reranker-v2-m3",
        path: "/v1/rerank",
        bearer: true,
        max_documents: 1000,
        success,
        reported_total: Some(TOTAL),
        unbilled,
        query_counting: QueryCounting::Once,
        check_request: check,
        errors,
    }
);
