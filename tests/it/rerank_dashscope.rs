//! DashScope (native text-rerank endpoint) through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, RerankCase};

/// The billed total every success answer reports.
const TOTAL: u64 = 79;

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({
            "output": {"results": results},
            "usage": {"total_tokens": TOTAL},
            "request_id": "5a1b8c2e-0000-0000-0000-000000000000"
        }),
    )
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut parameters = json!({"return_documents": false});
    if let Some(n) = top_n {
        parameters["top_n"] = json!(n);
    }
    assert_eq!(
        req.json(),
        json!({
            "model": "gte-rerank-v2",
            "input": {"query": query, "documents": docs},
            "parameters": parameters
        })
    );
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            Reply::json(
                400,
                json!({"request_id": "r1", "code": "InvalidParameter", "message": "Range of top_n should be [1, 500] (key sk-provider-secret-0001)"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                401,
                json!({"request_id": "r2", "code": "InvalidApiKey", "message": "Invalid API-key provided."}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                429,
                json!({"request_id": "r3", "code": "Throttling.RateQuota", "message": "Requests rate limit exceeded, please try again later."}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::json(
                500,
                json!({"request_id": "r4", "code": "InternalError", "message": "An internal error has occured, please try again later or contact service support."}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                400,
                json!({"request_id": "r5", "code": "DataInspectionFailed", "message": "Input data may contain inappropriate content."}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(
                400,
                json!({"request_id": "r6", "code": "Arrearage", "message": "Access denied, please make sure your account is in good standing."}),
            ),
            502,
            "upstream_error",
        ),
        // DashScope can report an error with HTTP 200.
        (
            Reply::json(
                200,
                json!({"request_id": "r7", "code": "InvalidParameter", "message": "Range of top_n should be [1, 500]"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                200,
                json!({"request_id": "r8", "code": "Throttling.RateQuota", "message": "Requests rate limit exceeded"}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::json(
                200,
                json!({"request_id": "r9", "code": "DataInspectionFailed", "message": "Input data may contain inappropriate content."}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(200, json!({"results": "nope"})),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::json(
                200,
                json!({"output": {"results": [{"index": 99, "relevance_score": 0.5}]}}),
            ),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "gte-rerank-v2",
        path: "/api/v1/services/rerank/text-rerank/text-rerank",
        bearer: true,
        max_documents: 500,
        success,
        reported_total: Some(TOTAL),
        check_request: check,
        errors,
    }
);
