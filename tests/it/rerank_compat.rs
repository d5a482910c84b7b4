//! The rerank compatibility surfaces (`/compat/cohere/v1|v2/rerank`, `/compat/jina/v1/rerank`,
//! `/v1/rerank`): each client's request shape in, its answer and error shapes out, over the same
//! models, auth, retries and usage as `/api/v1/rerank`.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Reply};
use support::{client, TestGateway, KEY};

/// POST as Cohere's and Jina's clients do: `Authorization: Bearer KEY`.
fn post_bearer(gw: &TestGateway, path: &str, body: &Value) -> client::Response {
    let bearer = format!("Bearer {KEY}");
    client::post_json(gw.addr, path, &[("Authorization", bearer.as_str())], body)
}

const DOCS: [&str; 3] = [
    "Paris is the capital of France.",
    "Berlin is in Germany.",
    "The Seine flows through Paris.",
];

fn cohere_scores() -> Reply {
    Reply::json(
        200,
        json!({"id": "native-1", "results": [{"index": 2, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}],
               "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}),
    )
}

#[test]
fn cohere_v2_answer_shape_without_documents() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(cohere_scores());
    // As Cohere's SDK sends it: options left unset may come as null.
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v2/rerank",
        &json!({"model": "rerank-v3.5", "query": "capital of France", "documents": DOCS, "top_n": 10, "max_tokens_per_doc": 512, "priority": null}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert!(
        body["id"].as_str().is_some_and(|id| id.len() == 36),
        "{body}"
    );
    assert_eq!(body["meta"]["api_version"]["version"], "2");
    assert_eq!(body["meta"]["billed_units"]["search_units"], 1.0);
    assert!(body["meta"]["tokens"]["input_tokens"].as_u64().unwrap() > 9);
    // top_n 10 over 3 documents: all three, best first, no documents (Cohere's default).
    assert_eq!(
        body["results"],
        json!([{"index": 0, "relevance_score": 0.9}, {"index": 2, "relevance_score": 0.5}, {"index": 1, "relevance_score": 0.1}])
    );
    assert!(body.get("usage").is_none() && body.get("model").is_none());
    // The provider got the gateway's usual request: top_n as many as there are documents, the
    // native field passed on, the null option left out.
    let sent = fake.requests()[0].json();
    assert_eq!(
        sent,
        json!({"model": "rerank-v3.5", "query": "capital of France", "documents": DOCS, "top_n": 3, "max_tokens_per_doc": 512})
    );
}

#[test]
fn cohere_v2_return_documents_as_litellm_sends_it() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(cohere_scores());
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v2/rerank",
        &json!({"model": "rerank-v3.5", "query": "capital of France", "documents": DOCS, "top_n": 2, "return_documents": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.json()["results"],
        json!([{"index": 0, "relevance_score": 0.9, "document": {"text": DOCS[0]}}, {"index": 2, "relevance_score": 0.5, "document": {"text": DOCS[2]}}])
    );
    // Documents are never asked of the provider: the gateway re-attaches the caller's own.
    assert!(fake.requests()[0].json().get("return_documents").is_none());
}

#[test]
fn cohere_v1_object_documents_rank_by_text_and_come_back_whole() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let docs = json!([{"text": "Berlin is in Germany.", "title": "Germany"}, "Paris is the capital of France."]);
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v1/rerank",
        &json!({"model": "local-bm25", "query": "capital of France", "documents": docs, "rank_fields": ["text"], "return_documents": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["meta"]["api_version"]["version"], "1");
    assert!(body["meta"].get("billed_units").is_none(), "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["index"], 1);
    assert_eq!(
        results[0]["document"],
        json!({"text": "Paris is the capital of France."})
    );
    assert_eq!(results[1]["document"], docs[0]);

    // Without return_documents (Cohere's default is false): no documents.
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v1/rerank",
        &json!({"model": "local-bm25", "query": "capital", "documents": ["capital", "x"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.json()["results"][0].get("document").is_none());
}

#[test]
fn cohere_v1_native_fields_reach_cohere_v1() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"id": "x", "results": [{"index": 0, "relevance_score": 0.3}]}),
    ));
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v1/rerank",
        &json!({"model": "rerank-english-v3.0", "query": "q", "documents": ["a"], "max_chunks_per_doc": 4, "return_documents": false}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/rerank");
    assert_eq!(sent.json()["max_chunks_per_doc"], 4);
}

#[test]
fn cohere_errors_have_cohere_shape() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Validation: 400, every problem in `message`.
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v2/rerank",
        &json!({"model": "local-bm25", "query": "q", "documents": ["a", {"title": "no text"}], "rank_fields": ["title"], "top_n": 0}),
    );
    assert_eq!(resp.status, 400);
    let body = resp.json();
    let message = body["message"].as_str().unwrap();
    for field in ["documents[1]", "rank_fields"] {
        assert!(message.contains(field), "{message}");
    }
    assert_eq!(body["code"], "validation_error");
    // The gateway's own validation, after translation.
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v2/rerank",
        &json!({"model": "local-bm25", "query": "q", "documents": ["a", ""], "top_n": 0, "max_tokens_per_doc": 5}),
    );
    assert_eq!(resp.status, 400);
    let message = resp.json()["message"].as_str().unwrap().to_string();
    for field in ["documents[1]", "top_n", "max_tokens_per_doc"] {
        assert!(message.contains(field), "{message}");
    }
    // Auth: the gateway's keys, Cohere's shape.
    let resp = client::post_json(
        gw.addr,
        "/compat/cohere/v1/rerank",
        &[("Authorization", "Bearer wrong")],
        &json!({"model": "local-bm25", "query": "q", "documents": ["a"]}),
    );
    assert_eq!(resp.status, 401);
    assert_eq!(resp.json()["code"], "unauthorized");
    assert!(resp.json()["message"].is_string());
    // A provider's rate limit, after the caller's retries.
    fake.set_default(Reply::json(429, json!({"message": "slow down"})));
    let resp = post_bearer(
        &gw,
        "/compat/cohere/v2/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "retries": 1}),
    );
    assert_eq!(resp.status, 429);
    assert_eq!(resp.json()["code"], "rate_limited");
    assert_eq!(fake.requests().len(), 2, "one try and the caller's retry");
}

#[test]
fn jina_answer_shape_on_both_paths() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for path in ["/compat/jina/v1/rerank", "/v1/rerank"] {
        // LlamaIndex's JinaRerank sends its default top_n even for fewer documents.
        let resp = post_bearer(
            &gw,
            path,
            &json!({"model": "local-bm25", "query": "capital of France", "documents": ["Berlin is in Germany.", "Paris is the capital of France."], "top_n": 5}),
        );
        assert_eq!(resp.status, 200, "{path}: {}", resp.text());
        let body = resp.json();
        assert_eq!(body["model"], "local-bm25");
        assert!(
            body["usage"]["total_tokens"].as_u64().unwrap() > 5,
            "{body}"
        );
        let results = body["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0]["index"], 1);
        // Jina returns documents unless told not to, as `{"text": …}`.
        assert_eq!(
            results[0]["document"],
            json!({"text": "Paris is the capital of France."})
        );
        assert!(
            results[0]["relevance_score"].as_f64().unwrap()
                > results[1]["relevance_score"].as_f64().unwrap()
        );
    }
    let resp = post_bearer(
        &gw,
        "/compat/jina/v1/rerank",
        &json!({"model": "local-bm25", "query": "q", "documents": [{"text": "q"}], "return_documents": false}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.json()["results"],
        json!([{"index": 0, "relevance_score": resp.json()["results"][0]["relevance_score"]}])
    );
}

#[test]
fn jina_provider_behind_the_jina_surface() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(200, json!({"model": "jina-reranker-v2-base-multilingual", "usage": {"total_tokens": 42}, "results": [{"index": 1, "relevance_score": 0.8}, {"index": 0, "relevance_score": 0.2}]})));
    let resp = post_bearer(
        &gw,
        "/v1/rerank",
        &json!({"model": "jina-reranker-v2", "query": "q", "documents": ["a", "b"], "top_n": 3}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["model"], "jina-reranker-v2");
    assert_eq!(body["usage"], json!({"total_tokens": 42}));
    assert_eq!(
        body["results"][0],
        json!({"index": 1, "relevance_score": 0.8, "document": {"text": "b"}})
    );
    assert_eq!(fake.requests()[0].json()["top_n"], 2);
}

#[test]
fn jina_errors_have_jina_shape() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = post_bearer(
        &gw,
        "/compat/jina/v1/rerank",
        &json!({"model": "no-such-model", "query": "q", "documents": ["a"], "rank_fields": ["text"]}),
    );
    assert_eq!(resp.status, 400);
    let body = resp.json();
    let detail = body["detail"].as_str().unwrap();
    // Jina has no rank_fields: an unknown field like any other.
    assert!(
        detail.contains("model: unknown model") && detail.contains("rank_fields"),
        "{detail}"
    );
    let resp = client::post_json(
        gw.addr,
        "/v1/rerank",
        &[],
        &json!({"model": "local-bm25", "query": "q", "documents": ["a"]}),
    );
    assert_eq!(resp.status, 401);
    assert!(resp.json()["detail"].is_string());
    // The rerank body limit (4 MiB in the test config) holds here too, in Jina's shape.
    let big = "x".repeat(5 << 20);
    let resp = post_bearer(
        &gw,
        "/compat/jina/v1/rerank",
        &json!({"model": "local-bm25", "query": "q", "documents": [big]}),
    );
    assert_eq!(resp.status, 413);
    assert_eq!(resp.json()["code"], "payload_too_large");
    assert!(resp.json()["detail"].as_str().unwrap().contains("4194304"));
}

#[test]
fn native_return_documents_and_large_top_n() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(cohere_scores());
    let resp = support::post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "capital of France", "documents": DOCS, "top_n": 50, "return_documents": false}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(
        body["results"],
        json!([{"index": 0, "relevance_score": 0.9}, {"index": 2, "relevance_score": 0.5}, {"index": 1, "relevance_score": 0.1}])
    );
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(fake.requests()[0].json()["top_n"], 3);
    // return_documents true is today's answer: each result carries the caller's string.
    let resp = support::post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "local-bm25", "query": "Seine", "documents": DOCS, "top_n": 1, "return_documents": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.json()["results"],
        json!([{"index": 2, "relevance_score": resp.json()["results"][0]["relevance_score"], "document": DOCS[2]}])
    );
}
