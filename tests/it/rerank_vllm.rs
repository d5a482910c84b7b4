//! vLLM's rerank API (`/v1/rerank`) through the rerank conformance cases.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

/// The prompt tokens vLLM reports; the public `total_tokens` must be exactly this.
const BILLED: u64 = 77;

fn results(scores: &[(usize, f64)], docs: &[&str]) -> Vec<serde_json::Value> {
    // vLLM always echoes each document as `{text}` (and `multi_modal`): the gateway skips it.
    scores
        .iter()
        .map(|(i, s)| {
            json!({"index": i, "document": {"text": docs.get(*i).copied().unwrap_or(""), "multi_modal": null},
                   "relevance_score": s})
        })
        .collect()
}

fn success(scores: &[(usize, f64)], docs: &[&str]) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "rerank-8a1f",
            "model": "Qwen/Qwen3-Reranker-0.6B",
            "usage": {"prompt_tokens": BILLED, "total_tokens": BILLED},
            "results": results(scores, docs),
        }),
    )
}

fn unbilled(scores: &[(usize, f64)], docs: &[&str]) -> Reply {
    Reply::json(
        200,
        json!({"id": "rerank-8a1f", "model": "Qwen/Qwen3-Reranker-0.6B", "results": results(scores, docs)}),
    )
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let mut want = json!({"model": "Qwen/Qwen3-Reranker-0.6B", "query": query, "documents": docs});
    if let Some(n) = top_n {
        want["top_n"] = json!(n);
    }
    // No flags: vLLM has no "return documents".
    assert_eq!(req.json(), want);
    assert_eq!(req.header("content-type"), Some("application/json"));
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        // The served-model check: the configuration names a model the server does not serve.
        (
            Reply::json(
                404,
                json!({"error": {"message": "The model `Qwen/Qwen3-Reranker-0.6B` does not exist.", "type": "NotFoundError", "param": "model", "code": 404}}),
            ),
            503,
            "model_unavailable",
        ),
        // The same from an older release (flat `ErrorResponse`).
        (
            Reply::json(
                404,
                json!({"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError", "param": null, "code": 404}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(
                400,
                json!({"error": {"message": "This model's maximum context length is 512 tokens.", "type": "BadRequestError", "param": null, "code": 400}}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(401, json!({"error": "Unauthorized"})),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                500,
                json!({"error": {"message": "EngineCore encountered an issue", "type": "InternalServerError", "param": null, "code": 500}}),
            ),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"data": [{"index": 0, "score": 0.5}]})),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "vllm-reranker",
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

/// vLLM's own fields travel verbatim; one it does not take is refused by the gateway.
#[test]
fn native_fields_pass_and_others_are_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(success(&[(0, 0.7)], &["a"]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "vllm-reranker", "query": "q", "documents": ["a"], "truncate_prompt_tokens": 256}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.json()["truncate_prompt_tokens"], 256);

    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "vllm-reranker", "query": "q", "documents": ["a"], "truncate": "END"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.text().contains("truncate"), "{}", resp.text());
    assert_eq!(fake.requests().len(), 1);
}
