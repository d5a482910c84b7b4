//! The built-in local reranker end to end: no key, no network, sensible rankings, and usable as a
//! last-resort fallback target.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{post, TestGateway};

#[test]
fn ranks_in_process_without_any_provider() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let docs = [
        "Bananas are a good source of potassium.",
        "Paris is the capital and largest city of France.",
        "北京是中国的首都。",
        "France borders Spain and Italy.",
    ];
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "local-bm25", "query": "capital of France", "documents": docs, "top_n": 2}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["index"], 1);
    assert_eq!(results[0]["document"], docs[1]);
    assert_eq!(results[1]["index"], 3);
    let s0 = results[0]["relevance_score"].as_f64().unwrap();
    assert!(s0 > 0.0 && s0 < 1.0);
    assert_eq!(out["metadata"]["scorer"], "bm25");
    let usage = &out["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["query_tokens"].as_u64().unwrap() + usage["documents_tokens"].as_u64().unwrap()
    );

    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "local-bm25", "query": "中国的首都", "documents": docs}),
    );
    assert_eq!(resp.json()["results"][0]["index"], 2);
    assert_eq!(
        fake.connections(),
        0,
        "the local reranker reached the network"
    );
}

#[test]
fn serves_as_the_last_resort_target() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(503, json!({"message": "down"})));
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports).replace(
            "targets: [{provider: cohere, model: rerank-v3.5}]",
            "targets: [{provider: cohere, model: rerank-v3.5}, {provider: builtin, model: bm25}]",
        )
    });
    let body = json!({"model": "rerank-v3.5", "query": "potassium", "documents": ["paris", "bananas have potassium"], "retries": 1});
    let resp = post(&gw, "/api/v1/rerank", &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["results"][0]["index"], 1);
    assert_eq!(fake.requests().len(), 1);
}

/// Nothing is billed: usage is the gateway's count with the query once; and a document that
/// matches nothing scores `0.0`, never `-0.0`.
#[test]
fn usage_is_counted_once_and_zero_is_positive() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Only stop words in the query: every score is zero.
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "local-bm25", "query": "what is the", "documents": ["apples", "pears"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(!resp.text().contains("-0"), "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["results"][0]["relevance_score"], 0.0);
    assert_eq!(out["metadata"]["query_tokens_counted"], "once");
    assert_eq!(out["metadata"]["total_tokens_source"], "gateway");
    assert_eq!(
        out["usage"]["query_tokens"],
        switchyard::internals::tokens::count("what is the") as u64
    );
}
