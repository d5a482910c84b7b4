//! Zhipu (BigModel) through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

/// The billed token total every success answer reports.
const TOTAL: u64 = 72;

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    Reply::json(
        200,
        json!({
            "created": 1732083164,
            "id": "20241120141244890ab4ee4af84acf",
            "request_id": "1111111111",
            "results": results,
            "usage": {"prompt_tokens": TOTAL, "total_tokens": TOTAL}
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
        json!({"created": 1732083164, "id": "20241120141244890ab4ee4af84acf", "results": results}),
    )
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut expected = json!({
        "model": "rerank",
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
                json!({"error": {"code": "1214", "message": "Invalid top_n parameter. Please check the documentation"}}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                401,
                json!({"error": {"code": "1002", "message": "Invalid Authentication Token"}}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                429,
                json!({"error": {"code": "1302", "message": "High concurrency usage of this API, please reduce concurrency"}}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::json(
                500,
                json!({"error": {"code": "500", "message": "Internal Error"}}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                400,
                json!({"error": {"code": "1301", "message": "System detected potentially unsafe or sensitive content in input or generation."}}),
            ),
            400,
            "content_policy_violation",
        ),
        // Zhipu answers an account in arrears with 429; it is not a rate limit.
        (
            Reply::json(
                429,
                json!({"error": {"code": "1113", "message": "Your account is in arrears, please recharge and try again"}}),
            ),
            502,
            "upstream_error",
        ),
        // The error envelope with HTTP 200.
        (
            Reply::json(
                200,
                json!({"error": {"code": "1214", "message": "Invalid documents parameter"}}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                200,
                json!({"error": {"code": "1301", "message": "unsafe or sensitive content"}}),
            ),
            400,
            "content_policy_violation",
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
        model: "zhipu-rerank",
        path: "/api/paas/v4/rerank",
        bearer: true,
        max_documents: 128,
        success,
        reported_total: Some(TOTAL),
        unbilled,
        query_counting: QueryCounting::Once,
        check_request: check,
        errors,
    }
);

/// `return_raw_scores`, `request_id` and `user_id` are documented Zhipu request fields: they travel
/// verbatim, and the request id Zhipu echoes reaches `metadata`.
#[test]
fn zhipu_native_fields_pass_through() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"id": "x", "request_id": "my-req-1", "results": [{"index": 0, "relevance_score": 3.2}],
               "usage": {"prompt_tokens": 9, "total_tokens": 9}}),
    ));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "zhipu-rerank", "query": "q", "documents": ["a"],
                "return_raw_scores": true, "request_id": "my-req-1", "user_id": "u-42"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests().pop().unwrap().json();
    assert_eq!(sent["return_raw_scores"], true);
    assert_eq!(sent["request_id"], "my-req-1");
    assert_eq!(sent["user_id"], "u-42");
    let out = resp.json();
    assert_eq!(out["metadata"]["request_id"], "my-req-1");
    assert_eq!(out["results"][0]["relevance_score"], 3.2);
}

/// Zhipu takes documents of at most 4,096 characters: a longer one is refused before sending (a
/// 400 naming that document), one of exactly 4,096 goes through.
#[test]
fn a_document_over_4096_characters_is_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let longest = "文".repeat(4096);
    fake.push(success(&[(0, 0.9), (1, 0.1)], &["a", "b"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "zhipu-rerank", "query": "q", "documents": ["a", longest]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), 1);

    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "zhipu-rerank", "query": "q", "documents": ["a", "b", "文".repeat(4097)]}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    let why = body["details"]["documents[2]"].as_str().unwrap();
    assert!(why.contains("4097") && why.contains("4096"), "{why}");
    assert!(body["details"].get("documents[1]").is_none(), "{body}");
    assert_eq!(fake.requests().len(), 1, "nothing sent");

    // The models listing shows the limit requests meet; a model without one shows none.
    let models = support::client::request(gw.addr, "GET", "/api/v1/models", &support::auth(), b"");
    assert_eq!(models.status, 200, "{}", models.text());
    let listed = models.json();
    let caps = |id: &str| {
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed"))["capabilities"]
            .clone()
    };
    assert_eq!(
        caps("zhipu-rerank")["document_limit"],
        json!({"max": 4096, "unit": "characters"})
    );
    assert!(caps("rerank-v3.5").get("document_limit").is_none());
}
