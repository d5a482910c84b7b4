//! Rerank end to end with a fake Cohere v2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{post, TestGateway};

#[test]
fn results_sorted_documents_reattached_usage_counted() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"id": "r1", "results": [{"index": 2, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.5}],
               "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}),
    ));
    let docs = [
        "Paris is the capital of France.",
        "Berlin is in Germany.",
        "The Seine flows through Paris.",
    ];
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "capital of France", "documents": docs, "top_n": 2, "max_tokens_per_doc": 512}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["model"], "rerank-v3.5");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["index"], 0);
    assert_eq!(results[0]["document"], docs[0]);
    assert_eq!(results[0]["relevance_score"], 0.9);
    // Equal scores: lower index first.
    assert_eq!(results[1]["index"], 1);
    assert_eq!(results[1]["document"], docs[1]);
    let usage = &body["usage"];
    let q = usage["query_tokens"].as_u64().unwrap();
    let d = usage["documents_tokens"].as_u64().unwrap();
    assert_eq!(q, 3, "cl100k_base tokens of the query");
    assert!(d > 15, "{usage}");
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), q + d);
    assert_eq!(body["metadata"]["search_units"], 1.0);
    assert!(body["metadata"].is_object());

    let sent = fake.requests()[0].clone();
    assert_eq!(sent.path, "/v2/rerank");
    assert_eq!(
        sent.json(),
        json!({"model": "rerank-v3.5", "query": "capital of France", "documents": docs, "top_n": 2, "max_tokens_per_doc": 512})
    );
}

#[test]
fn default_top_n_is_all_documents_and_bad_indexes_are_caught() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(200, json!({"results": [{"index": 1, "relevance_score": 0.2}, {"index": 0, "relevance_score": 0.7}]})));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]}),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["results"].as_array().unwrap().len(), 2);
    assert!(fake.requests()[0].json().get("top_n").is_none());

    fake.push(Reply::json(
        200,
        json!({"results": [{"index": 7, "relevance_score": 0.2}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]}),
    );
    assert_eq!(resp.status, 502);
    assert_eq!(resp.json()["code"], "upstream_bad_response");
}

#[test]
fn a_thousand_documents_of_a_kilobyte_each() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let docs: Vec<String> = (0..1000)
        .map(|i| format!("{i:04} {}", "lorem ipsum dolor ".repeat(56)))
        .collect();
    let results: Vec<_> = (0..1000)
        .map(|i| json!({"index": i, "relevance_score": (i as f64) / 1000.0}))
        .collect();
    fake.push(Reply::json(200, json!({"results": results})));
    let body = json!({"model": "rerank-v3.5", "query": "lorem", "documents": docs});
    assert!(body.to_string().len() > 1_000_000);
    let resp = post(&gw, "/api/v1/rerank", &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 1000);
    assert_eq!(results[0]["index"], 999);
    assert_eq!(results[0]["document"], docs[999].as_str());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["documents"].as_array().unwrap().len(), 1000);
    assert_eq!(sent["documents"][17], docs[17].as_str());
}

#[test]
fn cohere_errors_are_translated() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for (status, code) in [
        (400, "invalid_request"),
        (498, "upstream_auth_failed"),
        (429, "rate_limited"),
        (503, "upstream_error"),
    ] {
        fake.push(Reply::json(
            status,
            json!({"id": "x", "message": "invalid request: list of documents must not be empty"}),
        ));
        let resp = post(
            &gw,
            "/api/v1/rerank",
            &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"]}),
        );
        assert_eq!(resp.json()["code"], code, "native {status}");
    }
}
