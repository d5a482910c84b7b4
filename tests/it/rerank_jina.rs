//! Jina through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};

/// The billed total the fake reports; the public `total_tokens` must be exactly this.
const BILLED: u64 = 815;

fn success(scores: &[(usize, f64)], docs: &[&str]) -> Reply {
    // Documents included in Jina's `{"text": ...}` form (what it sends when `return_documents` is
    // true) to show the gateway ignores them and re-attaches the caller's own strings.
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "document": {"text": docs[*i]}, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({"model": "jina-reranker-v2-base-multilingual", "usage": {"total_tokens": BILLED, "prompt_tokens": BILLED}, "results": results}),
    )
}

/// The same answer without `usage`.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({"model": "jina-reranker-v2-base-multilingual", "results": results}),
    )
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut want = json!({
        "model": "jina-reranker-v2-base-multilingual",
        "query": query,
        "documents": docs,
        "return_documents": false,
    });
    // Jina's own default is every document: `top_n` only when the caller chose one.
    if let Some(n) = top_n {
        want["top_n"] = json!(n);
    }
    assert_eq!(req.json(), want);
    assert_eq!(req.header("content-type"), Some("application/json"));
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        // Jina's code for a model it does not serve: the operator's configuration, named.
        (
            Reply::json(
                400,
                json!({"detail": "Model 'jina-reranker-v2-base-multilingual' not found", "code": "INPUT_MODEL_NOT_FOUND"}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(
                400,
                json!({"detail": "Number of documents exceeds the limit"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                422,
                json!({"detail": [{"loc": ["body", "top_n"], "msg": "ensure this value is greater than 0", "type": "value_error"}]}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                401,
                json!({"detail": "Failed to authenticate with the provided api key."}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                402,
                json!({"detail": "Account balance not enough to run this query, please recharge."}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                403,
                json!({"detail": "Insufficient account balance.", "code": "AUTHZ_INSUFFICIENT_BALANCE"}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                429,
                json!({"detail": "Request rate limit exceeded", "code": "RATE_REQUEST_LIMIT_EXCEEDED"}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::json(500, json!({"detail": "Internal Server Error"})),
            502,
            "upstream_error",
        ),
        (
            Reply::bytes(502, "text/html", b"<html>Bad Gateway</html>".to_vec()),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"results": "nope"})),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::bytes(200, "text/html", b"<html>maintenance</html>".to_vec()),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "jina-reranker-v2",
        path: "/v1/rerank",
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
