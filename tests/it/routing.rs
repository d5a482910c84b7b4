//! Entry points and regions: both listeners serve the same paths; a provider's regional base URL is
//! used for the entry point of that region; a retry moves to the model's next target.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{client, TestGateway};

fn ok() -> Reply {
    Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    )
}

#[test]
fn each_region_reaches_its_own_endpoint() {
    let default_fake = FakeProvider::start();
    let cn_fake = FakeProvider::start();
    default_fake.set_default(ok());
    cn_fake.set_default(ok());
    let cn_url = cn_fake.base_url();
    let gw = TestGateway::start_with(|ports| {
        support::config(&default_fake.base_url(), ports).replacen(
            &format!("      base_url: \"{}\"\n      timeouts", default_fake.base_url()),
            &format!("      base_url: \"{}\"\n      region_base_urls: {{cn: \"{cn_url}/regional\"}}\n      timeouts", default_fake.base_url()),
            1,
        )
    });
    let body = json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"]});
    // domestic = region cn
    let resp = client::post_json(gw.addr, "/api/v1/rerank", &support::auth(), &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let resp = client::post_json(gw.overseas, "/api/v1/rerank", &support::auth(), &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let cn = cn_fake.requests();
    assert_eq!(cn.len(), 1);
    assert_eq!(cn[0].path, "/regional/v2/rerank");
    assert_eq!(
        cn[0].header("host"),
        Some(cn_url.trim_start_matches("http://"))
    );
    let default = default_fake.requests();
    assert_eq!(default.len(), 1);
    assert_eq!(default[0].path, "/v2/rerank");
}

#[test]
fn a_retry_moves_to_the_next_target() {
    let first = FakeProvider::start();
    let second = FakeProvider::start();
    first.set_default(Reply::json(503, json!({"message": "down"})));
    second.set_default(ok());
    let second_url = second.base_url();
    let gw = TestGateway::start_with(|ports| {
        let base = support::config(&first.base_url(), ports);
        base.replace(
            "    disabled:\n",
            &format!("    backup:\n      kind: cohere\n      api_key: \"k2\"\n      base_url: \"{second_url}\"\n    disabled:\n"),
        )
        .replace(
            "targets: [{provider: cohere, model: rerank-v3.5}]",
            "targets: [{provider: cohere, model: rerank-v3.5}, {provider: backup, model: rerank-v3.5-b}]",
        )
    });
    let resp = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &support::auth(),
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(first.requests().len(), 1);
    let got = second.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].json()["model"], "rerank-v3.5-b");
    assert_eq!(got[0].header("authorization"), Some("Bearer k2"));
}
