//! Image generation end to end with a fake OpenAI (dall-e-3).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{post, TestGateway};

#[test]
fn dall_e_3_result_in_the_public_shape() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 1713833628, "data": [{"url": "https://img.example/a.png", "revised_prompt": "a red fox in snow"}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "dall-e-3", "prompt": "a fox", "aspect_ratio": "16:9", "quality": "hd"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["created"], 1713833628);
    assert_eq!(body["data"][0]["url"], "https://img.example/a.png");
    assert_eq!(body["data"][0]["revised_prompt"], "a red fox in snow");
    assert!(body["data"][0].get("b64_json").is_none());
    assert_eq!(body["task_status"], "succeed");
    let id = body["task_id"].as_str().unwrap();
    assert!(
        uuid::Uuid::parse_str(id).is_ok(),
        "task_id {id} is not a UUID"
    );

    let sent = fake.requests()[0].clone();
    assert_eq!(sent.path, "/v1/images/generations");
    assert_eq!(
        sent.json(),
        json!({"model": "dall-e-3", "prompt": "a fox", "n": 1, "size": "1792x1024", "quality": "hd", "response_format": "url"})
    );
}

#[test]
fn b64_json_is_asked_natively() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 5, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "dall-e-3", "prompt": "p", "response_format": "b64_json", "size": "1024x1792"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"][0]["b64_json"], "iVBORw0KGgo=");
    let sent = fake.requests()[0].json();
    assert_eq!(sent["response_format"], "b64_json");
    assert_eq!(sent["size"], "1024x1792");
}

#[test]
fn provider_errors_map_to_truthful_statuses() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let cases = [
        (
            Reply::json(
                400,
                json!({"error": {"message": "Your request was rejected as a result of our safety system.", "type": "invalid_request_error", "code": "content_policy_violation"}}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(
                401,
                json!({"error": {"message": "Incorrect API key provided: sk-prov*****0001", "type": "invalid_request_error", "code": "invalid_api_key"}}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            Reply::json(
                429,
                json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
            ),
            429,
            "rate_limited",
        ),
        (
            Reply::bytes(500, "text/html", b"<html>boom</html>".to_vec()),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"created": 1, "data": []})),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::bytes(200, "application/json", b"not json".to_vec()),
            502,
            "upstream_bad_response",
        ),
    ];
    for (reply, status, code) in cases {
        fake.push(reply);
        let resp = post(
            &gw,
            "/api/v1/images/generations",
            &json!({"model": "dall-e-3", "prompt": "p"}),
        );
        assert_eq!(resp.status, status, "{code}: {}", resp.text());
        let body = resp.json();
        assert_eq!(body["code"], code);
        let msg = body["message"].as_str().unwrap();
        assert!(
            !msg.contains("sk-prov"),
            "provider key fragment leaked: {msg}"
        );
        assert!(!msg.contains("<html>"), "raw provider body echoed: {msg}");
    }
}

#[test]
fn a_large_body_is_sent_whole() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"url": "https://img.example/x.png"}]}),
    ));
    // Far above Pingora's 64 KiB retry buffer (design.md §2).
    let prompt = "a ".repeat(1900);
    let user = "u".repeat(200_000);
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "dall-e-3", "prompt": prompt, "user": user}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["user"].as_str().unwrap().len(), 200_000);
}
