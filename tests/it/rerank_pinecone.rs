//! Pinecone's hosted rerank (`POST /rerank`) through the rerank conformance cases, against a fake
//! that speaks Pinecone Inference's `RerankRequest`/`RerankResult` (API version 2026-07) and
//! checks the `Api-Key` and version headers and the body it received; then the billed rerank
//! units in the answer's metadata, and the model's `parameters` passed through.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway, KEY, PROVIDER_KEY};

fn answer(scores: &[(usize, f64)], units: bool) -> Reply {
    let data: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "score": s}))
        .collect();
    let mut body = json!({"model": "bge-reranker-v2-m3", "data": data});
    if units {
        body["usage"] = json!({"rerank_units": 1});
    }
    Reply::json(200, body)
}

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    answer(scores, true)
}

fn unbilled(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    answer(scores, false)
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let documents: Vec<_> = docs.iter().map(|d| json!({"text": d})).collect();
    let mut body = json!({
        "model": "bge-reranker-v2-m3",
        "query": query,
        "documents": documents,
        "return_documents": false,
    });
    if let Some(n) = top_n {
        body["top_n"] = json!(n);
    }
    assert_eq!(req.json(), body);
    assert_eq!(req.header("api-key"), Some(PROVIDER_KEY));
    assert_eq!(req.header("x-pinecone-api-version"), Some("2026-07"));
    assert!(req.header("authorization").is_none());
    assert_eq!(req.header("content-type"), Some("application/json"));
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached Pinecone in {name}"
        );
    }
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": {"code": code, "message": message}, "status": status}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            error(
                400,
                "INVALID_ARGUMENT",
                "Bad request. The request body included invalid request parameters.",
            ),
            400,
            "invalid_request",
        ),
        (
            error(401, "UNAUTHENTICATED", "Invalid API key."),
            502,
            "upstream_auth_failed",
        ),
        (
            error(404, "NOT_FOUND", "Model bge-reranker-v2-m3 not found."),
            503,
            "model_unavailable",
        ),
        (
            error(429, "QUOTA_EXCEEDED", "Request quota exceeded."),
            429,
            "rate_limited",
        ),
        (
            error(500, "UNKNOWN", "Internal server error"),
            502,
            "upstream_error",
        ),
        (
            // Cohere's names: Pinecone's are `data` and `score`.
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
        model: "pinecone-bge-reranker",
        path: "/rerank",
        bearer: false,
        max_documents: 100,
        success,
        reported_total: None,
        unbilled,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// The rerank units Pinecone bills are in the answer's metadata; `parameters` pass through.
#[test]
fn rerank_units_and_parameters() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(answer(&[(1, 0.75), (0, 0.5)], true));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "pinecone-bge-reranker", "query": "q", "documents": ["a", "b"],
            "parameters": {"truncate": "END"}}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["metadata"]["rerank_units"], 1);
    assert_eq!(out["results"][0]["index"], 1);
    assert_eq!(
        fake.requests()[0].json()["parameters"],
        json!({"truncate": "END"})
    );
}

/// Pinecone removed `pinecone-rerank-v0` (2025-12-29) and serves every `cohere-rerank-3.5`
/// request with `cohere-rerank-4-fast` since 2026-08-01: configured as the default configuration
/// does (each retired name with a successor), a request naming a retired model is sent as its
/// successor's native model, and the answer names the model that served it
/// (`Switchyard-Served-Model`, `model`) instead of presenting 4 Fast as 3.5.
#[test]
fn retired_models_are_served_by_their_successors() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + "    pinecone-bge-reranker-v2-m3: {family: pinecone-rerank, targets: [{provider: pinecone, model: bge-reranker-v2-m3}]}\n"
            + "    pinecone-rerank-v0: {family: pinecone-rerank, successor: pinecone-bge-reranker-v2-m3, targets: [{provider: pinecone, model: pinecone-rerank-v0}]}\n"
            + "    pinecone-cohere-rerank-4-fast: {family: pinecone-cohere-rerank, targets: [{provider: pinecone, model: cohere-rerank-4-fast}]}\n"
            + "    pinecone-cohere-rerank-3.5: {family: pinecone-cohere-rerank, successor: pinecone-cohere-rerank-4-fast, targets: [{provider: pinecone, model: cohere-rerank-3.5}]}\n"
    });
    for (i, (public, native, serving)) in [
        (
            "pinecone-cohere-rerank-3.5",
            "cohere-rerank-4-fast",
            "pinecone-cohere-rerank-4-fast",
        ),
        (
            "pinecone-rerank-v0",
            "bge-reranker-v2-m3",
            "pinecone-bge-reranker-v2-m3",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        fake.push(answer(&[(0, 0.5)], true));
        let resp = post(
            &gw,
            "/api/v1/rerank",
            &json!({"model": public, "query": "q", "documents": ["a"]}),
        );
        assert_eq!(resp.status, 200, "{public}: {}", resp.text());
        assert_eq!(fake.requests()[i].json()["model"], native, "{public}");
        assert_eq!(
            resp.header("switchyard-served-model"),
            Some(serving),
            "{public}"
        );
        assert_eq!(resp.json()["model"], serving, "{public}");
    }
}
