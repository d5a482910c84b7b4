//! NVIDIA NIM reranking through the rerank conformance cases (the hosted API catalog), and a
//! self-hosted NIM container (`/v1/ranking`, no key).

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway};

/// The prompt tokens a current NIM reports; the public `total_tokens` must be exactly this.
const BILLED: u64 = 321;

fn rankings(scores: &[(usize, f64)]) -> Vec<serde_json::Value> {
    scores
        .iter()
        .map(|(i, s)| json!({"index": i, "logit": s}))
        .collect()
}

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    Reply::json(
        200,
        json!({
            "rankings": rankings(scores),
            "usage": {"prompt_tokens": BILLED, "total_tokens": BILLED},
        }),
    )
}

/// An older NIM: no `usage`.
fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    Reply::json(200, json!({"rankings": rankings(scores)}))
}

fn passages(docs: &[&str]) -> Vec<serde_json::Value> {
    docs.iter().map(|d| json!({"text": d})).collect()
}

fn check(req: &Recorded, query: &str, docs: &[&str], _top_n: Option<usize>) {
    // The model keeps its dots in the body; NIM has no top_n, the gateway keeps the best itself.
    assert_eq!(
        req.json(),
        json!({
            "model": "nvidia/llama-3.2-nv-rerankqa-1b-v2",
            "query": {"text": query},
            "passages": passages(docs),
        })
    );
    assert_eq!(req.method, "POST");
    assert_eq!(req.header("content-type"), Some("application/json"));
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        // The model's function is not there for this account: the configuration's fault.
        (
            Reply::json(
                404,
                json!({"status": 404, "title": "Not Found", "detail": "Function 'f1': Not found for account 'acc'"}),
            ),
            503,
            "model_unavailable",
        ),
        (
            Reply::json(
                401,
                json!({"status": 401, "title": "Unauthorized", "detail": "Authentication failed"}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                400,
                json!({"object": "error", "message": "Input length 1024 exceeds maximum allowed token size 512"}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                422,
                json!({"detail": [{"loc": ["body", "passages"], "msg": "Field required", "type": "missing"}]}),
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(429, json!({"status": 429, "title": "Too Many Requests"})),
            429,
            "rate_limited",
        ),
        (
            Reply::json(
                500,
                json!({"status": 500, "title": "Internal Server Error"}),
            ),
            502,
            "upstream_error",
        ),
        (
            // Cohere's names: NIM's are `rankings` and `logit`.
            Reply::json(
                200,
                json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
            ),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::json(200, json!({"rankings": [{"index": 0, "score": 0.5}]})),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "nim-hosted-reranker",
        path: "/v1/retrieval/nvidia/llama-3_2-nv-rerankqa-1b-v2/reranking",
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

/// A self-hosted NIM: `/v1/ranking`, no credentials sent, `truncate` passed through, and negative
/// logits ranked as NIM ranks them.
#[test]
fn self_hosted_ranking() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"rankings": [{"index": 1, "logit": -1.25}, {"index": 0, "logit": -8.5}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "nim-reranker", "query": "q", "documents": ["a", "b"], "top_n": 1,
                "truncate": "END"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(
        out["results"],
        json!([{"index": 1, "relevance_score": -1.25, "document": "b"}])
    );
    assert_eq!(out["metadata"]["total_tokens_source"], "gateway");
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.path, "/v1/ranking");
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.json(),
        json!({"model": "nvidia/llama-nemotron-rerank-1b-v2", "query": {"text": "q"},
               "passages": [{"text": "a"}, {"text": "b"}], "truncate": "END"})
    );
}

/// A field NIM does not take is refused by the gateway, not dropped.
#[test]
fn unsupported_field_is_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "nim-reranker", "query": "q", "documents": ["a"], "max_tokens_per_doc": 5}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(
        resp.text().contains("max_tokens_per_doc"),
        "{}",
        resp.text()
    );
    assert!(fake.requests().is_empty());
}
