//! Image generation end to end with a fake OpenAI (gpt-image-2).

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{image_conformance, post, TestGateway};

#[test]
fn gpt_image_result_in_the_public_shape() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 1713833628, "data": [{"b64_json": "iVBORw0KGgo=", "revised_prompt": "a red fox in snow"}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "a fox", "aspect_ratio": "16:9", "quality": "high",
                "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["created"], 1713833628);
    assert_eq!(body["data"][0]["b64_json"], "iVBORw0KGgo=");
    assert_eq!(body["data"][0]["revised_prompt"], "a red fox in snow");
    assert!(body["data"][0].get("url").is_none());
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
        json!({"model": "gpt-image-2", "prompt": "a fox", "n": 1, "size": "2048x1152", "quality": "high", "output_format": "png"})
    );
}

#[test]
fn response_format_is_never_asked_of_gpt_image() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 5, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "response_format": "b64_json", "size": "1024x1536"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"][0]["b64_json"], "iVBORw0KGgo=");
    let sent = fake.requests()[0].json();
    assert!(sent.get("response_format").is_none(), "{sent}");
    assert_eq!(sent["size"], "1024x1536");
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
            &json!({"model": "gpt-image-2", "prompt": "p"}),
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
        json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    // Far above Pingora's 64 KiB retry buffer (docs/architecture.md, "The upstream exchange").
    let prompt = "a ".repeat(1900);
    let user = "u".repeat(200_000);
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": prompt, "user": user, "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["user"].as_str().unwrap().len(), 200_000);
}

/// The standard test config with the SSRF guard on (the default for a real deployment).
fn guarded(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            .replace("allow_private_urls: true", "allow_private_urls: false")
    })
}

#[test]
fn reference_urls_to_loopback_are_refused_without_a_connection() {
    let provider = FakeProvider::start();
    // The "internal service" an attacker would aim at.
    let internal = FakeProvider::start();
    let port = internal.addr().port();
    let gw = guarded(&provider);
    let b64 = image_conformance::b64(&image_conformance::png(100, 1));
    for url in [
        format!("http://127.0.0.1:{port}/admin.png"),
        format!("http://localhost:{port}/admin.png"),
        format!("http://[::1]:{port}/admin.png"),
        format!("https://127.0.0.1:{port}/admin.png"),
    ] {
        // GPT image edits and Stability take the image as bytes, so the gateway would fetch it.
        for (model, field, extra) in [
            ("gpt-image-2", "image", json!({"image": url})),
            ("gpt-image-2", "mask", json!({"image": b64, "mask": url})),
            ("stable-image-ultra", "image", json!({"image": url})),
        ] {
            let mut body = json!({"model": model, "prompt": "p"});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            let resp = post(&gw, "/api/v1/images/generations", &body);
            assert_eq!(resp.status, 400, "{url} via {model}: {}", resp.text());
            let details = resp.json()["details"][field]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert!(
                details.contains("refused") && details.contains("loopback"),
                "{url}: {details}"
            );
        }
    }
    assert_eq!(
        internal.connections(),
        0,
        "the guard let a connection through"
    );
    assert!(
        provider.requests().is_empty(),
        "a refused request reached the provider"
    );
}

#[test]
fn reference_url_download_failures_are_the_callers_400() {
    let provider = FakeProvider::start();
    let host = FakeProvider::start();
    let gw = TestGateway::start(&provider);
    let url = format!("{}/missing.png", host.base_url());
    let cases = [
        (Reply::json(404, json!({"error": "nope"})), "HTTP 404"),
        (
            Reply::bytes(200, "text/html", b"<html>not an image</html>".to_vec()),
            "not a PNG",
        ),
        (
            Reply::bytes(302, "text/plain", Vec::new()).with_header("location", "/moved.png"),
            "",
        ),
    ];
    // The redirect case is followed: the next reply (a real image) completes it.
    for (reply, expect) in cases {
        host.push(reply);
        if expect.is_empty() {
            host.push(Reply::bytes(
                200,
                "image/png",
                image_conformance::png(80, 2),
            ));
            provider.push(Reply::json(200, json!({"image": image_conformance::b64(&image_conformance::png(50, 3)), "finish_reason": "SUCCESS", "seed": 1})));
        }
        let resp = post(
            &gw,
            "/api/v1/images/generations",
            &json!({"model": "stable-image-ultra", "prompt": "p", "image": url}),
        );
        if expect.is_empty() {
            assert_eq!(resp.status, 200, "redirect not followed: {}", resp.text());
            assert_eq!(host.requests().last().unwrap().path, "/moved.png");
        } else {
            assert_eq!(resp.status, 400, "{}", resp.text());
            let d = resp.json()["details"]["image"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(d.contains(expect), "{d}");
        }
    }
}

#[test]
fn malformed_image_inputs_are_refused_per_field() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "image": "data:image/png,xyz", "strength": 2}),
    );
    assert_eq!(resp.status, 400);
    let d = resp.json()["details"].clone();
    assert!(d["image"].as_str().unwrap().contains("base64"), "{d}");
    assert!(
        d["strength"].as_str().unwrap().contains("between 0 and 1"),
        "{d}"
    );
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "mask": image_conformance::b64(&image_conformance::png(40, 1))}),
    );
    assert_eq!(resp.status, 400);
    assert!(resp.json()["details"]["mask"]
        .as_str()
        .unwrap()
        .contains("together with `image`"));
    assert!(fake.requests().is_empty());
}

#[test]
fn hosted_files_answer_head_and_unknown_ids() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = image_conformance::png(5000, 9);
    fake.push(Reply::json(
        200,
        json!({"created": 7, "data": [{"b64_json": image_conformance::b64(&img)}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "p"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let url = resp.json()["data"][0]["url"].as_str().unwrap().to_string();
    let path = url.split_once(&gw.addr.to_string()).unwrap().1.to_string();
    // No credentials needed: the link is the capability.
    let head = support::client::request(gw.addr, "HEAD", &path, &[], b"");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("5000"));
    assert!(head.body.is_empty());
    let cache = image_conformance::get_hosted(&gw, &url);
    assert_eq!(cache.body, img);
    let max_age: u64 = cache
        .header("cache-control")
        .and_then(|v| v.strip_prefix("private, max-age="))
        .unwrap()
        .parse()
        .unwrap();
    assert!((3500..=3600).contains(&max_age), "{max_age}");
    for bad in [
        "/api/v1/files/short",
        "/api/v1/files/..%2F..%2Fetc%2Fpasswd",
    ] {
        let r = support::client::request(gw.addr, "GET", bad, &[], b"");
        assert_eq!(r.status, 404, "{bad}");
        assert_eq!(r.json()["code"], "not_found");
    }
    let post_file = support::client::request(gw.addr, "POST", &path, &support::auth(), b"");
    assert_eq!(post_file.status, 405);
}

#[test]
fn links_use_the_configured_public_base_url() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports).replace(
            "images: {allow_private_urls: true,",
            "images: {public_base_url: \"https://ai.example.com/\", allow_private_urls: true,",
        )
    });
    fake.push(Reply::json(
        200,
        json!({"data": [{"b64_json": image_conformance::b64(&image_conformance::png(64, 1))}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "p"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let url = resp.json()["data"][0]["url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with("https://ai.example.com/api/v1/files/"),
        "{url}"
    );
}
