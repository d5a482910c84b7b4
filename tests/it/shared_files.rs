//! Hosted images shared between gateway instances through a real Redis: a link minted by one
//! instance is served by another. Redis is found at `SWITCHYARD_TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`; `.ci/run` starts one); without it this test fails.

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{image_conformance as ic, post, redis};

#[test]
fn a_link_minted_by_one_instance_is_served_by_another() {
    let prefix = redis::run_prefix();
    let fake = FakeProvider::start();
    let a = redis::gateway(&fake, &prefix);
    let b = redis::gateway(&fake, &prefix);
    let img = ic::png(150_000, 4);
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": ic::b64(&img)}]}),
    ));
    let resp = post(
        &a,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "p"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let url = resp.json()["data"][0]["url"].as_str().unwrap().to_string();
    let path = url.split_once(&a.addr.to_string()).unwrap().1.to_string();
    let served = support::client::request(b.addr, "GET", &path, &[], b"");
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(served.header("content-type"), Some("image/png"));
    assert_eq!(
        served.body, img,
        "the other instance served different bytes"
    );

    // A store that cannot be reached is a 503 in the Error shape, not a hang or a lost image.
    let fake2 = FakeProvider::start();
    let down = redis::gateway_at(&fake2, "redis://127.0.0.1:1", "unused:", 500);
    fake2.push(Reply::json(
        200,
        json!({"data": [{"b64_json": ic::b64(&img)}]}),
    ));
    let resp = post(
        &down,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "p"}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.json()["code"], "store_unavailable");
    // b64_json needs no store, so it still works.
    fake2.push(Reply::json(
        200,
        json!({"data": [{"b64_json": ic::b64(&img)}]}),
    ));
    let resp = post(
        &down,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
}
