//! Asynchronous image tasks: `async: true` answers at once with a running task, the result is read
//! back with `GET /api/v1/images/{task_id}` (only by its creator), through any instance sharing
//! the Redis store. Redis is found at `SWITCHYARD_TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`); without it the shared-store tests fail.

use std::time::Duration;
#[cfg(feature = "redis")]
use std::time::Instant;

#[cfg(feature = "redis")]
use switchyard::internals::store::tasks::TaskStore;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
#[cfg(feature = "redis")]
use support::redis;
use support::tasks::{finished, start, task};
use support::{client, image_conformance as ic, post, TestGateway, KEY};

#[test]
fn an_async_task_runs_in_the_background_and_is_read_by_its_creator_only() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // The provider answers only after the task id went back to the caller.
    fake.push(Reply::json(
        200,
        json!({"created": 9, "data": [{"b64_json": "iVBORw0KGgo=", "revised_prompt": "r"}]}),
    ));
    let id = start(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "a fox", "async": true, "quality": "high",
               "response_format": "b64_json"}),
    );
    let done = finished(&gw, &id);
    assert_eq!(done["task_id"], id);
    assert_eq!(done["data"][0]["b64_json"], "iVBORw0KGgo=");
    assert_eq!(done["data"][0]["revised_prompt"], "r");
    assert!(done.get("error").is_none());
    // Same translation as a sync call.
    let sent = fake.requests()[0].json();
    assert_eq!(sent["quality"], "high");
    assert!(sent.get("async").is_none(), "async reached the provider");

    // Another caller, an unknown id and a malformed one: the same 404.
    for (id, key) in [
        (id.as_str(), "hashed-secret-key"),
        ("6f1c2d4e-0000-4000-8000-000000000000", KEY),
        ("nope", KEY),
    ] {
        let resp = task(&gw, id, key);
        assert_eq!(resp.status, 404, "{id}");
        assert_eq!(resp.json()["code"], "not_found");
    }
    let resp = client::request(gw.addr, "GET", &format!("/api/v1/images/{id}"), &[], b"");
    assert_eq!(resp.status, 401);
}

#[test]
fn failures_are_reported_in_the_task() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        400,
        json!({"error": {"message": "rejected by the safety system", "type": "invalid_request_error", "code": "content_policy_violation"}}),
    ));
    let id = start(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "async": true}),
    );
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "failed");
    assert_eq!(done["data"], json!([]));
    assert_eq!(done["error"]["code"], "content_policy_violation");
    assert!(done["error"]["message"]
        .as_str()
        .unwrap()
        .contains("safety"));
    // Validation still answers at once.
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "async": true, "size": "1x1"}),
    );
    assert_eq!(resp.status, 400);
}

#[cfg(feature = "redis")]
#[test]
fn a_task_created_through_one_instance_is_read_through_another() {
    let prefix = redis::run_prefix();
    let fake = FakeProvider::start();
    let a = redis::gateway(&fake, &prefix);
    let b = redis::gateway(&fake, &prefix);
    let img = ic::png(2048, 3);
    fake.push(Reply::json(
        200,
        json!({"data": [{"b64_json": ic::b64(&img)}]}),
    ));
    let id = start(
        &a,
        json!({"model": "gpt-image-1", "prompt": "p", "async": true}),
    );
    let done = finished(&b, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    // The hosted link minted by A's task is served by B too.
    let url = done["data"][0]["url"].as_str().unwrap();
    let path = url.split_once(&a.addr.to_string()).unwrap().1;
    let file = client::request(b.addr, "GET", path, &[], b"");
    assert_eq!(file.body, img);
}

#[cfg(feature = "redis")]
#[test]
fn a_task_whose_instance_died_is_reported_failed() {
    let prefix = redis::run_prefix();
    let fake = FakeProvider::start();
    let gw = redis::gateway(&fake, &prefix);
    // A running task last heard of two minutes ago, as a dead instance would leave it.
    let store = switchyard::internals::store::tasks::RedisTaskStore::new({
        let mut s =
            switchyard::internals::store::redis_files::RedisSettings::new(redis::redis_url());
        s.key_prefix = prefix.clone();
        s
    })
    .unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // It had already sent its call to the provider: nothing can re-run or resume it.
    let record = switchyard::internals::store::tasks::TaskRecord {
        sent: true,
        ..switchyard::internals::store::tasks::TaskRecord::started(
            "key:tester".into(),
            "gpt-image-2".into(),
            "gone".into(),
            now_ms / 1000 - 120,
            now_ms - 120_000,
        )
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(store.put(&id, &record, Duration::from_secs(60)))
        .unwrap();
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "failed");
    assert_eq!(done["error"]["code"], "instance_lost");
}

#[cfg(feature = "redis")]
#[test]
fn without_the_store_async_fails_fast_and_sync_keeps_working() {
    let fake = FakeProvider::start();
    let gw = redis::gateway_at(&fake, "redis://127.0.0.1:1", "unused:", 500);
    let started = Instant::now();
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "async": true}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.json()["code"], "store_unavailable");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        fake.requests().is_empty(),
        "an unrecorded task reached the provider"
    );
    fake.push(Reply::json(
        200,
        json!({"data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
}

/// `async: true` with a request its model cannot honour: the same 400 with `details` as without
/// `async`, at once — no task id, and nothing reaches the provider.
fn refused_at_once(gw: &TestGateway, fake: &FakeProvider, body: serde_json::Value, field: &str) {
    for is_async in [true, false] {
        let mut body = body.clone();
        body["async"] = json!(is_async);
        let resp = post(gw, "/api/v1/images/generations", &body);
        assert_eq!(resp.status, 400, "async {is_async}: {}", resp.text());
        let answer = resp.json();
        assert_eq!(answer["code"], "validation_error", "{answer}");
        assert!(answer["details"][field].is_string(), "{answer}");
        assert!(
            answer.get("task_id").is_none(),
            "a task was accepted: {answer}"
        );
    }
    // A task accepted anyway would call the provider in the background.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        fake.requests().is_empty(),
        "a refused request reached the provider"
    );
}

#[test]
fn openai_refusals_come_before_a_task_is_accepted() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // OpenAI: transparent backgrounds need PNG or WebP.
    refused_at_once(
        &gw,
        &fake,
        json!({"model": "gpt-image-2", "prompt": "p", "background": "transparent",
               "output_format": "jpg"}),
        "background",
    );
    // An edit whose mask (given as bytes) is not a PNG.
    let jpeg = [&[0xFF, 0xD8, 0xFF, 0xE0][..], &[1u8; 64][..]].concat();
    refused_at_once(
        &gw,
        &fake,
        json!({"model": "gpt-image-2", "prompt": "p", "image": ic::b64(&ic::png(100, 1)),
               "mask": format!("data:image/jpeg;base64,{}", ic::b64(&jpeg))}),
        "mask",
    );
    // An image type the edits endpoint does not take.
    refused_at_once(
        &gw,
        &fake,
        json!({"model": "gpt-image-2", "prompt": "p", "image": ic::b64(b"GIF89a\x01\x00\x01\x00")}),
        "image",
    );
}

#[test]
fn other_providers_refusals_come_before_a_task_is_accepted() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Ark: a sequential set is one call, so it does not combine with `n`.
    refused_at_once(
        &gw,
        &fake,
        json!({"model": "seedream-4", "prompt": "p", "n": 3,
               "extra_body": {"sequential_image_generation": "auto"}}),
        "n",
    );
    // Stability: with a reference image the result keeps its aspect ratio.
    refused_at_once(
        &gw,
        &fake,
        json!({"model": "stable-image-ultra", "prompt": "p", "image": ic::b64(&ic::png(100, 2)),
               "size": "1024x1024"}),
        "size",
    );
}

/// OpenAI's usage and what it made reach the caller of an asynchronous task too.
#[test]
fn an_async_tasks_result_carries_the_providers_usage() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 9, "data": [{"b64_json": "iVBORw0KGgo="}], "output_format": "webp",
               "size": "1536x1024", "quality": "low", "background": "opaque",
               "usage": {"input_tokens": 12, "output_tokens": 272, "total_tokens": 284,
                         "input_tokens_details": {"text_tokens": 12, "image_tokens": 0}}}),
    ));
    let id = start(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "a fox", "async": true, "size": "auto",
               "quality": "low", "output_format": "webp", "response_format": "b64_json"}),
    );
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(
        done["usage"],
        json!({"input_tokens": 12, "output_tokens": 272, "total_tokens": 284,
               "input_tokens_details": {"image_tokens": 0, "text_tokens": 12}})
    );
    assert_eq!(done["output_format"], "webp");
    assert_eq!(done["size"], "1536x1024");
    assert_eq!(done["quality"], "low");
    assert_eq!(done["background"], "opaque");
}

/// A mask given as a URL can only be checked once the task has fetched it: a JPEG mask then fails
/// the task with the same code and `details` the synchronous 400 has, and OpenAI is never called.
#[test]
fn a_url_mask_refused_once_fetched_fails_the_task_with_details() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let jpeg = [&[0xFF, 0xD8, 0xFF, 0xE0][..], &[1u8; 64][..]].concat();
    fake.push(Reply::bytes(200, "image/jpeg", jpeg));
    let id = start(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "async": true,
               "image": ic::b64(&ic::png(100, 1)),
               "mask": format!("{}/uploads/mask.jpg", fake.base_url())}),
    );
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "failed", "{done}");
    assert_eq!(done["error"]["code"], "validation_error");
    assert!(
        done["error"]["details"]["mask"]
            .as_str()
            .is_some_and(|m| m.contains("PNG")),
        "{done}"
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "only the mask's download");
    assert_eq!(sent[0].method, "GET");
}

/// Defect 6: what is known when a task would be accepted is refused then. A model with no usable
/// target — its provider has no API key; every target past its shutdown, with no successor —
/// answers an `async` request with the very `503 model_unavailable` a synchronous one gets, and
/// no task is made (nothing to read back, nothing sent to the provider).
#[test]
fn an_async_request_for_a_model_with_no_usable_target_is_refused_like_a_sync_one() {
    use switchyard::internals::caps::lifecycle::Clock;
    const DEC_10: i64 = 1_796_083_200 + 9 * 86_400;
    let fake = FakeProvider::start();
    let url = fake.base_url();
    let clock = Clock::manual(support::TEST_NOW);
    let gw = TestGateway::start_at(
        |ports| {
            support::config(&url, ports)
                + "    image-off: {family: gpt-image-2, targets: [{provider: disabled, model: gpt-image-2}]}\n"
                + "    image-doomed: {family: gpt-image-2, targets: [{provider: openai, model: gpt-image-doomed, lifecycle: {deprecated: 2026-10-01, shutdown: 2026-12-10, replacement: [gpt-image-2]}}]}\n"
        },
        clock.clone(),
    );
    let generate = |model: &str, is_async: bool| {
        let mut body = json!({"model": model, "prompt": "a fox", "response_format": "b64_json"});
        if is_async {
            body["async"] = json!(true);
        }
        post(&gw, "/api/v1/images/generations", &body)
    };
    let check = |model: &str, reason: &str| {
        let sync = generate(model, false);
        assert_eq!(sync.status, 503, "{}", sync.text());
        let accepted = generate(model, true);
        assert_eq!(accepted.status, 503, "{model}: {}", accepted.text());
        let (sync, accepted) = (sync.json(), accepted.json());
        assert_eq!(accepted["code"], "model_unavailable", "{accepted}");
        assert_eq!(accepted["message"], sync["message"], "{model}");
        assert!(
            accepted["message"].as_str().unwrap().contains(reason),
            "{accepted}"
        );
        assert!(accepted.get("task_id").is_none(), "{accepted}");
    };
    check("image-off", "no API key configured");
    // Midnight of the shutdown day: the model is gone, and it names its replacement.
    clock.set(DEC_10);
    check("image-doomed", "2026-12-10");
    assert!(fake.requests().is_empty(), "a provider was called");
}
