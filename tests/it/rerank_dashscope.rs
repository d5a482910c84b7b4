//! DashScope (native text-rerank endpoint) through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

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

/// The same answer without `usage`.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({"output": {"results": results}, "request_id": "5a1b8c2e-0000-0000-0000-000000000001"}),
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
        unbilled,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// A gateway whose config also serves today's `qwen3-rerank` (the only text reranker in every
/// Model Studio region).
fn with_qwen3(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + "    qwen3-rerank: {family: dashscope-rerank, targets: [{provider: dashscope, model: qwen3-rerank}]}\n"
    })
}

/// The query limit is Model Studio's 4,000 tokens per item, not 4,000 characters: a long English
/// query well under 4,000 tokens goes through; one over 4,000 tokens (which the API would
/// truncate silently) is refused, naming the unit.
#[test]
fn qwen3_rerank_query_limit_is_in_tokens() {
    let fake = FakeProvider::start();
    let gw = with_qwen3(&fake);
    let long = "rerank ".repeat(1500);
    assert!(long.chars().count() > 4000);
    assert!(switchyard::internals::tokens::count(&long) < 4000);
    fake.push(success(&[(0, 0.9), (1, 0.1)], &["a", "b"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "qwen3-rerank", "query": long, "documents": ["a", "b"],
                "instruct": "Given a web search query, retrieve relevant passages."}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests().pop().unwrap().json();
    assert_eq!(sent["model"], "qwen3-rerank");
    assert_eq!(
        sent["parameters"]["instruct"],
        "Given a web search query, retrieve relevant passages."
    );
    let out = resp.json();
    // Billed figure reported: it is the total; the query counts once per document.
    assert_eq!(out["usage"]["total_tokens"], TOTAL);
    let q = switchyard::internals::tokens::count(&long) as u64;
    assert_eq!(out["usage"]["query_tokens"], 2 * q);
    assert_eq!(out["metadata"]["query_tokens_counted"], "per_document");

    let too_long = "rerank ".repeat(4100);
    assert!(switchyard::internals::tokens::count(&too_long) > 4000);
    let before = fake.requests().len();
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "qwen3-rerank", "query": too_long, "documents": ["a"]}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let why = resp.json()["details"]["query"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(why.contains("tokens") && why.contains("4000"), "{why}");
    assert_eq!(fake.requests().len(), before);
}
