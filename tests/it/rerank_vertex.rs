//! Google's Vertex AI ranking API (`POST /v1/projects/{project}/locations/global/rankingConfigs/
//! default_ranking_config:rank`) through the rerank conformance cases, against a fake that speaks
//! Discovery Engine's `RankRequest`/`RankResponse` (records by id, sorted by score, proto3 JSON)
//! and checks the bearer token minted by the shared fake Google token endpoint
//! (`support::google_token`). Then what is the ranking API's own: ids the request never sent are a
//! bad answer, a record without `score` scored 0, and neither the private key nor the token in
//! the log.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::google_token::{self, SHARED_TOKEN};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway, KEY, PROVIDER_KEY};

/// The standard test config's account: the key's project, the default `global` location.
const PATH: &str =
    "/v1/projects/switchyard-test/locations/global/rankingConfigs/default_ranking_config:rank";

/// Google's answer: each scored document as a record whose id is the one the gateway sent.
fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let records: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"id": i.to_string(), "score": s}))
        .collect();
    // No usage: the ranking API reports none.
    Reply::json(200, json!({"records": records}))
}

fn check_auth(req: &Recorded, token: &str) {
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached Google in {name}"
        );
        assert!(!value.contains(PROVIDER_KEY), "{name}");
    }
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let records: Vec<_> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| json!({"id": i.to_string(), "content": d}))
        .collect();
    let mut body = json!({
        "model": "semantic-ranker-default-004",
        "query": query,
        "records": records,
        "ignoreRecordDetailsInResponse": true,
    });
    if let Some(n) = top_n {
        body["topN"] = json!(n);
    }
    assert_eq!(req.json(), body);
    assert_eq!(req.method, "POST");
    assert_eq!(req.header("content-type"), Some("application/json"));
    check_auth(req, SHARED_TOKEN);
}

fn google_error(status: u16, google: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": {"code": status, "message": message, "status": google}}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                "Request contains an invalid argument.",
            ),
            400,
            "invalid_request",
        ),
        // The model or the project's ranking config is not there: the configuration's fault.
        (
            google_error(404, "NOT_FOUND", "Model semantic-ranker-x not found."),
            503,
            "model_unavailable",
        ),
        // The Discovery Engine API is not enabled on the project, or the account may not use it.
        (
            google_error(
                403,
                "PERMISSION_DENIED",
                "Discovery Engine API has not been used in project 1 before or it is disabled.",
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            google_error(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token.",
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded."),
            429,
            "rate_limited",
        ),
        (
            google_error(500, "INTERNAL", "Internal error encountered."),
            502,
            "upstream_error",
        ),
        (
            // A Cohere-shaped answer is not the ranking API's.
            Reply::json(
                200,
                json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
            ),
            502,
            "upstream_bad_response",
        ),
        (
            // An id the gateway never sent.
            Reply::json(200, json!({"records": [{"id": "doc-7", "score": 0.5}]})),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "vertex-semantic-ranker",
        path: PATH,
        bearer: false,
        max_documents: 200,
        success,
        reported_total: None,
        unbilled: success,
        query_counting: QueryCounting::Once,
        check_request: check,
        errors,
    }
);

/// proto3 JSON leaves out a score equal to 0: such a record is read as scored 0, not refused.
#[test]
fn a_record_without_a_score_scores_zero() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"records": [{"id": "1", "score": 0.25}, {"id": "0"}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "vertex-semantic-ranker", "query": "q", "documents": ["a", "b"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["results"][0]["index"], 1);
    assert_eq!(out["results"][1]["index"], 0);
    assert_eq!(out["results"][1]["relevance_score"], 0.0);
    assert_eq!(out["metadata"]["total_tokens_source"], "gateway");
}

/// The gateway binary at `trace`: neither the service account's private key nor the access
/// token appears in its log, though the token crosses the wire on every request.
#[test]
fn the_private_key_and_the_token_never_reach_the_log() {
    const TOKEN: &str = "ya29.LOGTEST-ranking-token-7a8b";
    let tokens = google_token::start(3600, |_| TOKEN.to_string());
    let google = FakeProvider::start();
    google.set_default(Reply::json(
        200,
        json!({"records": [{"id": "0", "score": 0.5}]}),
    ));
    let key = google_token::key_file();
    let token_url = format!("{}/token", tokens.base_url());
    let base = google.base_url();
    let gw = crate::logs::Binary::start(
        |port| {
            format!(
                r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:{port}"}}]
  retries: {{max: 0}}
  auth:
    api_keys: [{{name: caller, key: "{KEY}"}}]
  providers:
    ranking: {{kind: vertex-ranking, credentials_file: "{key}", token_url: "{token_url}", base_url: "{base}"}}
  models:
    ranker: {{family: vertex-ranking, targets: [{{provider: ranking, model: semantic-ranker-fast-004}}]}}
"#
            )
        },
        "trace",
    );
    let resp = support::client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &[("Authorization", format!("Bearer {KEY}").as_str())],
        &json!({"model": "ranker", "query": "q", "documents": ["a"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = &google.requests()[0];
    check_auth(sent, TOKEN);
    assert_eq!(sent.path, PATH);
    assert_eq!(sent.json()["model"], "semantic-ranker-fast-004");
    let text = gw.output_when("an access line", |t| t.contains(" access] "));
    assert!(
        text.contains("Writing request header:"),
        "no request dump at trace"
    );
    let key_file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&key).unwrap()).unwrap();
    let private = key_file["private_key"].as_str().unwrap();
    let body_line = private.lines().nth(5).unwrap();
    for secret in [TOKEN, body_line, KEY] {
        assert!(!text.contains(secret), "{secret} is in the log:\n{text}");
    }
    let assertion = tokens.requests()[0].text();
    let jwt = assertion.split("assertion=").nth(1).unwrap();
    assert!(!text.contains(jwt), "the assertion is in the log");
}
