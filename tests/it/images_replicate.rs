//! Replicate end to end against a fake Replicate: a prediction is created with
//! `POST /v1/models/{owner}/{name}/predictions` (`Authorization: Bearer`, `Prefer: wait=5`,
//! `{"input": {…}}`) and answered with a prediction object; one that finished within the wait
//! carries its `output` (one URL or a list), one still `starting`/`processing` is read at
//! `GET /v1/predictions/{id}` until it `succeeded`, `failed` or was `canceled`. Errors are
//! problem-details JSON (`{"title","detail","status"}`).
//!
//! The shared conformance cases run against the synchronous-within-the-wait answer (the first
//! thing Replicate answers a fast model with); the rest covers polling, the public `pending` and
//! `running` states of an asynchronous task, failed predictions, native HTTP errors with retries,
//! and the token never reaching the caller.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, fake_url, image_conformance, png, unb64, Answers, ImageCase,
};
use support::tasks::{finished, start, task};
use support::{client, post, TestGateway, KEY, PROVIDER_KEY};

const GENERATIONS: &str = "/api/v1/images/generations";
const SCHNELL_PATH: &str = "/v1/models/black-forest-labs/flux-schnell/predictions";
const PRO_PATH: &str = "/v1/models/black-forest-labs/flux-1.1-pro/predictions";
const POLL_PREFIX: &str = "/v1/predictions/";

// ---- native answers --------------------------------------------------------------------------

/// A prediction object as Replicate writes it.
fn prediction(id: &str, status: &str, output: Value, error: Value) -> Value {
    json!({
        "id": id,
        "model": "black-forest-labs/flux-schnell",
        "version": "hidden",
        "input": {"prompt": conformance::PROMPT},
        "logs": "",
        "output": output,
        "data_removed": false,
        "error": error,
        "status": status,
        "created_at": "2026-11-28T09:00:00.000Z",
        "urls": {
            "cancel": format!("https://api.replicate.com/v1/predictions/{id}/cancel"),
            "get": format!("https://api.replicate.com/v1/predictions/{id}"),
            "stream": "https://stream.replicate.com/v1/files/abc",
            "web": format!("https://replicate.com/p/{id}")
        }
    })
}

/// FLUX schnell finished within `Prefer: wait`: a list of output URLs on the fake's own host.
fn list_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let urls: Vec<String> = (0..images.len())
        .map(|i| fake_url(fake, &format!("xezq/p1/out-{i}.png")))
        .collect();
    Reply::json(201, prediction("p1", "succeeded", json!(urls), Value::Null))
}

/// FLUX1.1 [pro] finished: one output URL (its output schema is a single URI).
fn single_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    assert_eq!(images.len(), 1, "FLUX1.1 [pro] makes one image a run");
    Reply::json(
        201,
        prediction(
            "p1",
            "succeeded",
            json!(fake_url(fake, "xezq/p1/output.png")),
            Value::Null,
        ),
    )
}

fn problem(status: u16, title: &str, detail: &str) -> Reply {
    Reply::json(
        status,
        json!({"title": title, "detail": format!("{detail} (token {PROVIDER_KEY})"), "status": status}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            problem(
                422,
                "Input validation failed",
                "- input.seed: Invalid type. Expected: integer",
            ),
            400,
            "invalid_request",
        ),
        (
            problem(
                401,
                "Unauthenticated",
                "You did not pass a valid authentication token",
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            problem(
                404,
                "Not found",
                "The requested resource could not be found",
            ),
            503,
            "model_unavailable",
        ),
        (
            problem(
                429,
                "Request was throttled",
                "Your rate limit for prediction creation is reduced",
            ),
            429,
            "rate_limited",
        ),
        (
            problem(500, "Internal server error", "Something went wrong"),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                201,
                prediction(
                    "p9",
                    "failed",
                    Value::Null,
                    json!(
                        "NSFW content detected. Try running it again, or try a different prompt."
                    ),
                ),
            ),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(201, prediction("p9", "succeeded", json!([]), Value::Null)),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn input(req: &Recorded) -> Value {
    let body = req.json();
    assert_eq!(
        body.as_object().map(|o| o.len()),
        Some(1),
        "the body is `{{\"input\": …}}` alone: {body}"
    );
    body["input"].clone()
}

fn num_outputs(req: &Recorded) -> u64 {
    input(req)["num_outputs"]
        .as_u64()
        .expect("no num_outputs in the native input")
}

/// Sent to Replicate: its token as a Bearer, and none of the caller's credentials.
fn assert_provider_auth(req: &Recorded) {
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str()),
        "{} {}",
        req.method,
        req.path
    );
    assert!(req.header("service-api-key").is_none());
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached the provider in {name}"
        );
    }
}

fn assert_submission(req: &Recorded, path: &str) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, path);
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("prefer"), Some("wait=5"));
    assert_provider_auth(req);
}

fn check_schnell_full(req: &Recorded) {
    assert_submission(req, SCHNELL_PATH);
    assert_eq!(
        input(req),
        json!({"prompt": conformance::PROMPT, "aspect_ratio": "16:9", "num_outputs": 2,
               "output_format": "jpg", "seed": 42, "num_inference_steps": 4, "go_fast": false,
               "megapixels": "1", "output_quality": 90, "disable_safety_checker": false})
    );
}

fn check_pro_full(req: &Recorded) {
    assert_submission(req, PRO_PATH);
    assert_eq!(
        input(req),
        json!({"prompt": conformance::PROMPT, "aspect_ratio": "custom", "width": 1280,
               "height": 640, "output_format": "webp", "seed": 7, "safety_tolerance": 5,
               "prompt_upsampling": true, "output_quality": 95})
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    flux_schnell_conformance,
    ImageCase {
        model: "replicate-flux-schnell",
        base: json!({}),
        full: json!({
            "aspect_ratio": "16:9",
            "n": 2,
            "output_format": "jpg",
            "seed": 42,
            "num_inference_steps": 4,
            "go_fast": false,
            "megapixels": "1",
            "output_quality": 90,
            "disable_safety_checker": false
        }),
        check_full: check_schnell_full,
        answer: list_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "1344x768",
            "768x1344",
            "1568x672",
            "672x1568",
            "1216x832",
            "832x1216",
            "1120x896",
            "896x1120",
        ],
        rejected_sizes: &["2048x2048", "1152x896", "1024x1000", "auto"],
        qualities: &[],
        rejected_qualities: &["hd", "standard", "low"],
        max_n: 8,
        per_call_n: 4,
        native_n: Some(num_outputs),
        rejected: vec![
            ("strength", json!(0.5)),
            ("mask", json!(conformance::b64(&png(100, 9)))),
            ("negative_prompt", json!("blurry")),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("watermark", json!(true)),
            ("aspect_ratio", json!("4:3")),
            ("guidance", json!(3.5)),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: None,
        errors,
    }
);

image_conformance!(
    flux_pro_conformance,
    ImageCase {
        model: "replicate-flux-1.1-pro",
        base: json!({}),
        full: json!({
            "size": "1280x640",
            "output_format": "webp",
            "seed": 7,
            "safety_tolerance": 5,
            "prompt_upsampling": true,
            "output_quality": 95
        }),
        check_full: check_pro_full,
        answer: single_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "1344x768",
            "768x1344",
            "1152x896",
            "896x1152",
            "1120x896",
            "1440x1440",
            "256x1024",
        ],
        rejected_sizes: &["2048x2048", "1000x1000", "128x128", "auto"],
        qualities: &[],
        rejected_qualities: &["hd", "standard", "low"],
        max_n: 4,
        per_call_n: 1,
        native_n: None,
        rejected: vec![
            ("strength", json!(0.5)),
            ("negative_prompt", json!("blurry")),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("watermark", json!(true)),
            ("aspect_ratio", json!("21:9")),
            ("num_inference_steps", json!(4)),
            ("go_fast", json!(true)),
        ],
        reference: None,
        errors,
    }
);

// ---- the emulated prediction lifecycle -------------------------------------------------------

fn submits(fake: &FakeProvider) -> Vec<Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect()
}

fn polls(fake: &FakeProvider) -> Vec<Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with(POLL_PREFIX))
        .collect()
}

fn generate(gw: &TestGateway, body: Value) -> client::Response {
    let resp = post(gw, GENERATIONS, &body);
    assert!(
        !resp.text().contains(PROVIDER_KEY),
        "provider token leaked: {}",
        resp.text()
    );
    resp
}

fn ok(resp: &client::Response) -> Value {
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.json()
}

fn failed(resp: &client::Response, status: u16, code: &str) -> String {
    assert_eq!(resp.status, status, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], code, "{body}");
    body["message"].as_str().unwrap().to_string()
}

/// Queue a prediction `id` that answers `starting` to its submission, then `states` to its polls.
fn script(fake: &FakeProvider, id: &str, states: &[Value]) {
    fake.push(Reply::json(
        201,
        prediction(id, "starting", Value::Null, Value::Null),
    ));
    for s in states {
        fake.push(Reply::json(200, s.clone()));
    }
}

#[test]
fn a_slow_prediction_is_polled_by_id_until_it_succeeds() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let urls = json!([
        fake_url(&fake, "xezq/a/out-0.png"),
        fake_url(&fake, "xezq/a/out-1.png")
    ]);
    script(
        &fake,
        "gm3qorzdhg",
        &[
            prediction("gm3qorzdhg", "starting", Value::Null, Value::Null),
            prediction("gm3qorzdhg", "processing", Value::Null, Value::Null),
            prediction("gm3qorzdhg", "succeeded", urls.clone(), Value::Null),
        ],
    );
    // The caller authenticates with a Bearer token: it must not reach Replicate.
    let resp = client::post_json(
        gw.addr,
        GENERATIONS,
        &[("Authorization", &format!("Bearer {KEY}"))],
        &json!({"model": "replicate-flux-schnell", "prompt": "a lighthouse", "n": 2,
                "aspect_ratio": "9:21", "seed": 3}),
    );
    let out = ok(&resp);
    assert!(!resp.text().contains(PROVIDER_KEY));
    assert_eq!(out["task_status"], "succeed");
    assert_eq!(out["data"], json!([{"url": urls[0]}, {"url": urls[1]}]));
    let sent = submits(&fake);
    assert_eq!(sent.len(), 1);
    assert_submission(&sent[0], SCHNELL_PATH);
    assert_eq!(
        input(&sent[0]),
        json!({"prompt": "a lighthouse", "aspect_ratio": "9:21", "num_outputs": 2,
               "output_format": "png", "seed": 3})
    );
    let polled = polls(&fake);
    assert_eq!(polled.len(), 3);
    for p in &polled {
        assert_eq!(p.path, "/v1/predictions/gm3qorzdhg");
        assert!(p.body.is_empty());
        assert_provider_auth(p);
    }
}

#[test]
fn five_images_of_schnell_are_two_predictions() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // The two predictions are submitted side by side: each is answered with what it asked for.
    let base = fake.base_url();
    fake.set_handler(move |r| {
        (r.method == "POST").then(|| {
            let urls: Vec<String> = (0..num_outputs(r))
                .map(|i| format!("{base}/results/xezq/p1/out-{i}.png"))
                .collect();
            Reply::json(201, prediction("p1", "succeeded", json!(urls), Value::Null))
        })
    });
    let out = ok(&generate(
        &gw,
        json!({"model": "replicate-flux-schnell", "prompt": "p", "n": 5}),
    ));
    assert_eq!(out["data"].as_array().unwrap().len(), 5);
    // The two predictions are submitted side by side: either may reach the fake first.
    let mut asked: Vec<u64> = submits(&fake).iter().map(num_outputs).collect();
    asked.sort_unstable();
    assert_eq!(asked, [1, 4]);
}

#[test]
fn a_prediction_short_of_images_is_retried_and_never_passed_on_short() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Replicate drops an output its safety checker flags and lists the rest: 1 of 2.
    fake.push(list_answer(&[png(64, 1)], &fake));
    fake.push(list_answer(&[png(64, 1), png(64, 2)], &fake));
    let out = ok(&generate(
        &gw,
        json!({"model": "replicate-flux-schnell", "prompt": "p", "n": 2, "retries": 1}),
    ));
    assert_eq!(out["data"].as_array().unwrap().len(), 2);
    assert_eq!(submits(&fake).len(), 2, "the short answer was retried");

    // Short every time: the caller gets an error saying so, not one image of two.
    fake.push(list_answer(&[png(64, 1)], &fake));
    fake.push(list_answer(&[png(64, 1)], &fake));
    let msg = failed(
        &generate(
            &gw,
            json!({"model": "replicate-flux-schnell", "prompt": "p", "n": 2, "retries": 1}),
        ),
        502,
        "upstream_bad_response",
    );
    assert!(msg.contains("returned 1 of the 2 images"), "{msg}");
    assert_eq!(submits(&fake).len(), 4);
}

#[test]
fn a_polled_prediction_short_of_images_fails_the_request() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let one = json!([fake_url(&fake, "xezq/s/out-0.png")]);
    script(
        &fake,
        "short1",
        &[prediction("short1", "succeeded", one, Value::Null)],
    );
    let msg = failed(
        &generate(
            &gw,
            json!({"model": "replicate-flux-schnell", "prompt": "p", "n": 2}),
        ),
        502,
        "upstream_bad_response",
    );
    assert!(msg.contains("returned 1 of the 2 images"), "{msg}");
    // A finished prediction is never submitted again.
    assert_eq!(submits(&fake).len(), 1);
}

#[test]
fn async_round_trip_shows_pending_then_running_then_succeed() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let gate = Arc::new(AtomicU8::new(0));
    let g = gate.clone();
    let out_url = fake_url(&fake, "xezq/b/out-0.png");
    let img = png(5_000, 7);
    let served = img.clone();
    fake.set_handler(move |req: &Recorded| {
        if req.method == "POST" {
            return Some(Reply::json(
                201,
                prediction("async1", "starting", Value::Null, Value::Null),
            ));
        }
        if req.path.starts_with("/results/") {
            return Some(Reply::bytes(200, "image/png", served.clone()));
        }
        let (status, output) = match g.load(Ordering::SeqCst) {
            0 => ("starting", Value::Null),
            1 => ("processing", Value::Null),
            _ => ("succeeded", json!([out_url])),
        };
        Some(Reply::json(
            200,
            prediction("async1", status, output, Value::Null),
        ))
    });
    let id = start(
        &gw,
        json!({"model": "replicate-flux-schnell", "prompt": "p", "async": true,
               "response_format": "b64_json"}),
    );
    // `starting` is the public `pending`, `processing` is `running`.
    wait_for_state(&gw, &id, "pending");
    gate.store(1, Ordering::SeqCst);
    wait_for_state(&gw, &id, "running");
    gate.store(2, Ordering::SeqCst);
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(unb64(done["data"][0]["b64_json"].as_str().unwrap()), img);
    assert_eq!(submits(&fake).len(), 1);
    assert!(input(&submits(&fake)[0]).get("async").is_none());
    for p in polls(&fake) {
        assert_provider_auth(&p);
    }
    // The output was downloaded without any credential.
    let downloads: Vec<Recorded> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/results/"))
        .collect();
    assert_eq!(downloads.len(), 1);
    assert!(downloads[0].header("authorization").is_none());
}

/// Read the task until it shows `state` (it may only be pending or running meanwhile).
fn wait_for_state(gw: &TestGateway, id: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = task(gw, id, KEY);
        assert_eq!(resp.status, 200, "{}", resp.text());
        let body = resp.json();
        if body["task_status"] == state {
            return;
        }
        assert!(
            body["task_status"] == "pending" || body["task_status"] == "running",
            "{body}"
        );
        assert!(Instant::now() < deadline, "task {id} never {state}: {body}");
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

// ---- failed predictions ----------------------------------------------------------------------

#[test]
fn failed_and_canceled_predictions_end_the_wait_and_are_never_resubmitted() {
    // (final prediction, public status, code, text in the message)
    let cases = [
        (
            json!("NSFW content detected. Try running it again, or try a different prompt."),
            "failed",
            400,
            "content_policy_violation",
            "NSFW content detected",
        ),
        (
            json!(format!("CUDA error: out of memory (token {PROVIDER_KEY})")),
            "failed",
            502,
            "upstream_error",
            "CUDA error: out of memory",
        ),
        (Value::Null, "canceled", 502, "upstream_error", "canceled"),
        (Value::Null, "aborted", 502, "upstream_error", "aborted"),
    ];
    for (error, state, status, code, text) in cases {
        let fake = FakeProvider::start();
        let gw = TestGateway::start(&fake);
        script(
            &fake,
            "f1",
            &[
                prediction("f1", "processing", Value::Null, Value::Null),
                prediction("f1", state, Value::Null, error.clone()),
            ],
        );
        let msg = failed(
            &generate(
                &gw,
                json!({"model": "replicate-flux-schnell", "prompt": "p", "retries": 2}),
            ),
            status,
            code,
        );
        assert!(msg.contains(text), "{state}: {msg}");
        assert!(!msg.contains(PROVIDER_KEY));
        // The verdict is final: not polled again, not resubmitted (a new run would be billed).
        assert_eq!(polls(&fake).len(), 2, "{state}");
        assert_eq!(submits(&fake).len(), 1, "{state}");
    }
}

#[test]
fn an_asynchronous_task_reports_the_failed_prediction() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    script(
        &fake,
        "f2",
        &[prediction(
            "f2",
            "failed",
            Value::Null,
            json!("Content flagged as potentially sensitive"),
        )],
    );
    let id = start(
        &gw,
        json!({"model": "replicate-flux-1.1-pro", "prompt": "p", "async": true}),
    );
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "failed", "{done}");
    assert_eq!(done["error"]["code"], "content_policy_violation", "{done}");
    assert!(done["error"]["message"]
        .as_str()
        .unwrap()
        .contains("potentially sensitive"));
    assert!(!done.to_string().contains(PROVIDER_KEY));
}

#[test]
fn a_failed_poll_is_tolerated() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let url = fake_url(&fake, "xezq/c/output.png");
    // Submitted, then two polls that fail in a way that may pass (503, 429), then the output.
    fake.push(Reply::json(
        201,
        prediction("t1", "starting", Value::Null, Value::Null),
    ));
    fake.push(problem(503, "Service unavailable", "try again"));
    fake.push(problem(429, "Request was throttled", "slow down"));
    fake.push(Reply::json(
        200,
        prediction("t1", "succeeded", json!(url), Value::Null),
    ));
    let out = ok(&generate(
        &gw,
        json!({"model": "replicate-flux-1.1-pro", "prompt": "p"}),
    ));
    assert_eq!(out["data"][0]["url"], url);
    assert_eq!(polls(&fake).len(), 3);
    assert_eq!(submits(&fake).len(), 1);
}

// ---- native HTTP errors ----------------------------------------------------------------------

#[test]
fn submit_errors_map_to_public_codes_and_retry_where_they_may() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // (reply, retries asked, public status, code, submissions expected, text in the message)
    let cases = [
        (
            problem(401, "Unauthenticated", "Invalid token"),
            2,
            502,
            "upstream_auth_failed",
            1,
            None,
        ),
        (
            problem(402, "Payment required", "You have insufficient credit"),
            2,
            502,
            "upstream_error",
            1,
            None,
        ),
        (
            problem(
                422,
                "Input validation failed",
                "- input.aspect_ratio: must be one of",
            ),
            2,
            400,
            "invalid_request",
            1,
            Some("input.aspect_ratio"),
        ),
        (
            problem(429, "Request was throttled", "slow down"),
            0,
            429,
            "rate_limited",
            1,
            None,
        ),
        (
            problem(500, "Internal server error", "oops"),
            0,
            502,
            "upstream_error",
            1,
            None,
        ),
        (
            problem(503, "Service unavailable", "later"),
            1,
            502,
            "upstream_error",
            2,
            None,
        ),
        // Last: a model the provider does not serve is held out afterwards (retired).
        (
            problem(
                404,
                "Not found",
                "The requested resource could not be found",
            ),
            2,
            503,
            "model_unavailable",
            1,
            None,
        ),
    ];
    for (reply, retries, status, code, expected, text) in cases {
        let before = submits(&fake).len();
        for _ in 0..expected {
            fake.push(reply.clone());
        }
        let msg = failed(
            &generate(
                &gw,
                json!({"model": "replicate-flux-schnell", "prompt": "p", "retries": retries}),
            ),
            status,
            code,
        );
        if let Some(t) = text {
            assert!(msg.contains(t), "{code}: {msg}");
        }
        assert!(!msg.contains(PROVIDER_KEY));
        assert_eq!(
            submits(&fake).len() - before,
            expected,
            "{code} submissions"
        );
    }
    assert!(polls(&fake).is_empty());
}

#[test]
fn a_rate_limited_submission_is_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(problem(429, "Request was throttled", "slow down").with_header("retry-after", "0"));
    fake.push(problem(502, "Bad gateway", "upstream"));
    fake.push(list_answer(&[png(64, 1)], &fake));
    let out = ok(&generate(
        &gw,
        json!({"model": "replicate-flux-schnell", "prompt": "p", "retries": 2}),
    ));
    assert_eq!(out["data"].as_array().unwrap().len(), 1);
    let sent = submits(&fake);
    assert_eq!(sent.len(), 3);
    for s in &sent {
        assert_submission(s, SCHNELL_PATH);
        assert_eq!(s.body, sent[0].body, "a retry sends the same request");
    }
}
