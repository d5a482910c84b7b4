//! Rerank end to end with a fake Cohere v2.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{auth, client, post, TestGateway};

/// POST `body` exactly as written (no re-serialization), so a test controls the escapes on the wire.
fn post_raw(gw: &TestGateway, body: &str) -> client::Response {
    let mut headers = auth().to_vec();
    headers.push(("Content-Type", "application/json"));
    client::request(gw.addr, "POST", "/api/v1/rerank", &headers, body.as_bytes())
}

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
    // 3 cl100k_base tokens, scored with each of the 3 documents as Cohere counts it.
    assert_eq!(q, 3 * 3, "cl100k_base tokens of the query, per document");
    assert!(d > 15, "{usage}");
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), q + d);
    assert_eq!(body["metadata"]["total_tokens_source"], "gateway");
    assert_eq!(body["metadata"]["query_tokens_counted"], "per_document");
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

#[test]
fn escaped_documents_reach_the_provider_and_come_back_unchanged() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"results": (0..8).map(|i| json!({"index": i, "relevance_score": 1.0 - i as f64 / 10.0})).collect::<Vec<_>>()}),
    ));
    // Escapes of every kind, a surrogate pair, and raw (unescaped) non-ASCII text.
    let body = r#"{"model":"rerank-v3.5","query":"q","documents":["say \"hi\"","back\\slash","line\nbreak","caf\u00e9","sep\u2028arator","smile \ud83d\ude00","naïve 日本","a\/b"]}"#;
    let expected = [
        "say \"hi\"",
        "back\\slash",
        "line\nbreak",
        "café",
        "sep\u{2028}arator",
        "smile \u{1F600}",
        "naïve 日本",
        "a/b",
    ];
    let resp = post_raw(&gw, body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    let got: Vec<&str> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document"].as_str().unwrap())
        .collect();
    assert_eq!(got, expected);

    let sent = &fake.requests()[0];
    assert_eq!(sent.json()["documents"], json!(expected));
    assert_eq!(sent.json()["query"], "q");
    // Both copies are the caller's literals, escapes as sent (not re-escaped by the gateway).
    let literals = &body[body.find('[').unwrap()..=body.rfind(']').unwrap()];
    assert!(sent.text().contains(literals), "{}", sent.text());
    for literal in [
        r#""caf\u00e9""#,
        r#""smile \ud83d\ude00""#,
        r#""naïve 日本""#,
        r#""a\/b""#,
    ] {
        assert!(
            resp.text().contains(literal),
            "{literal} in {}",
            resp.text()
        );
    }
}

#[test]
fn documents_the_json_decoder_refuses_are_a_validation_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for docs in [
        r#"["ok","\ud800"]"#,
        r#"["ok","x\udc00y"]"#,
        r#"["ok",1]"#,
        r#""ok""#,
    ] {
        let body = format!(r#"{{"model":"rerank-v3.5","query":"q","documents":{docs}}}"#);
        let resp = post_raw(&gw, &body);
        assert_eq!(resp.status, 400, "{docs}: {}", resp.text());
        let out = resp.json();
        assert_eq!(out["code"], "validation_error", "{out}");
        assert_eq!(
            out["details"]["documents"], "must be an array of strings",
            "{docs}: {out}"
        );
    }
    // Blank once decoded: escapes do not hide an empty document.
    let resp = post_raw(
        &gw,
        r#"{"model":"rerank-v3.5","query":"q","documents":["ok","\u0020\n\t"]}"#,
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["details"]["documents[1]"], "must not be empty");
    assert!(fake.requests().is_empty());
}
