//! Black Forest Labs FLUX end to end against an emulated BFL: a task is submitted with
//! `POST /v1/{model}` (`x-key` auth), answered with `{"id","polling_url"}`, polled at that URL
//! (`Pending` without progress → queued, with progress → running, then `Ready` with
//! `result.sample`, a moderation status, `Error` or `Task not found`), and its sample is served
//! from the fake's own host. Covers both response formats, fan-out (one task per image), Kontext's
//! aspect ratio and reference image, asynchronous tasks, the polling-URL check that keeps the key
//! on BFL's hosts, and native HTTP errors with retries.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{b64, fake_url, png, unb64};
use support::tasks::{finished, start, task};
use support::{client, post, TestGateway, KEY, PROVIDER_KEY};

const GENERATIONS: &str = "/api/v1/images/generations";
const RESULT_PATH: &str = "/v1/get_result?id=";

// ---- the emulated BFL ------------------------------------------------------------------------

/// How a task ends.
#[derive(Clone)]
enum Verdict {
    /// `Ready`, with the sample on the fake's own host.
    Ready,
    /// Another final status, with these extra fields in the answer.
    Status(&'static str, Value),
}

/// What the submit answer says about polling.
#[derive(Clone)]
enum Polling {
    /// `polling_url` on the fake itself (as BFL points at its own regional host).
    Own,
    /// No `polling_url`: the gateway must use `/v1/get_result?id=`.
    Absent,
    /// This URL, whatever it is.
    Url(String),
}

/// How the emulated BFL runs every task it is given.
#[derive(Clone)]
struct Script {
    /// Polls answered `Pending` without progress (queued), then with progress (running), before
    /// the verdict.
    queued: u32,
    running: u32,
    verdict: Verdict,
    polling: Polling,
    /// Answers to the first submissions, before any task is created (native errors).
    submit_errors: Vec<Reply>,
    /// Answers to the first polls, before the tasks' own (transient poll failures).
    poll_errors: Vec<Reply>,
    /// When set, the phase comes from here instead of counting polls: 0 queued, 1 running,
    /// 2 the verdict.
    gate: Option<Arc<AtomicU8>>,
}

impl Script {
    fn ready(queued: u32, running: u32) -> Script {
        Script {
            queued,
            running,
            verdict: Verdict::Ready,
            polling: Polling::Own,
            submit_errors: Vec::new(),
            poll_errors: Vec::new(),
            gate: None,
        }
    }

    fn ending(status: &'static str, extra: Value) -> Script {
        Script {
            verdict: Verdict::Status(status, extra),
            ..Script::ready(1, 1)
        }
    }
}

/// The image task `task-{n}` produces.
fn image_for(n: u32) -> Vec<u8> {
    png(3000, n as u8)
}

/// Answer as BFL would: tasks numbered `task-1`, `task-2`… in the order submitted.
fn emulate(fake: &FakeProvider, script: Script) {
    let base = fake.base_url();
    let results = fake_url(fake, "");
    let mut submit_errors: VecDeque<Reply> = script.submit_errors.iter().cloned().collect();
    let mut poll_errors: VecDeque<Reply> = script.poll_errors.iter().cloned().collect();
    let mut polls: HashMap<String, u32> = HashMap::new();
    let mut created = 0u32;
    fake.set_handler(move |req: &Recorded| {
        if req.method == "POST" && req.path.starts_with("/v1/") {
            if let Some(reply) = submit_errors.pop_front() {
                return Some(reply);
            }
            if let Some(reply) = refused_references(req) {
                return Some(reply);
            }
            created += 1;
            let id = format!("task-{created}");
            polls.insert(id.clone(), 0);
            let mut answer = json!({"id": id});
            match &script.polling {
                Polling::Own => answer["polling_url"] = json!(format!("{base}{RESULT_PATH}{id}")),
                Polling::Absent => {}
                Polling::Url(u) => answer["polling_url"] = json!(u),
            }
            return Some(Reply::json(200, answer));
        }
        if req.method == "GET" {
            if let Some(id) = req.path.strip_prefix(RESULT_PATH) {
                if let Some(reply) = poll_errors.pop_front() {
                    return Some(reply);
                }
                let Some(count) = polls.get_mut(id) else {
                    return Some(Reply::json(
                        200,
                        json!({"id": id, "status": "Task not found"}),
                    ));
                };
                *count += 1;
                let phase = match &script.gate {
                    Some(g) => g.load(Ordering::SeqCst),
                    None if *count <= script.queued => 0,
                    None if *count <= script.queued + script.running => 1,
                    None => 2,
                };
                let answer = match (phase, &script.verdict) {
                    (0, _) => {
                        json!({"id": id, "status": "Pending", "result": null, "progress": null})
                    }
                    (1, _) => {
                        json!({"id": id, "status": "Pending", "result": null, "progress": 0.5})
                    }
                    (_, Verdict::Ready) => json!({
                        "id": id,
                        "status": "Ready",
                        "result": {"sample": format!("{results}{id}.png"), "prompt": "p", "seed": 1,
                                   "start_time": 1.7e9, "end_time": 1.7e9, "duration": 2.5},
                        "progress": null
                    }),
                    (_, Verdict::Status(status, extra)) => {
                        let mut a =
                            json!({"id": id, "status": status, "result": null, "progress": null});
                        for (k, v) in extra.as_object().into_iter().flatten() {
                            a[k] = v.clone();
                        }
                        a
                    }
                };
                return Some(Reply::json(200, answer));
            }
            if let Some(name) = req.path.strip_prefix("/results/task-") {
                let n: u32 = name.trim_end_matches(".png").parse().ok()?;
                return Some(Reply::bytes(200, "image/png", image_for(n)));
            }
        }
        None
    });
}

// ---- reading what the fake received ----------------------------------------------------------

/// BFL's 422 for references its inputs do not have: FLUX.2 takes `input_image` and then
/// `input_image_2` … `input_image_8`, the others nothing past `input_image` (FastAPI refuses unknown
/// fields of these models as `extra_forbidden`).
fn refused_references(req: &Recorded) -> Option<Reply> {
    let body: Value = serde_json::from_slice(&req.body).ok()?;
    let flux2 = req.path.starts_with("/v1/flux-2-");
    let keys: Vec<&String> = body.as_object()?.keys().collect();
    let bad = keys.iter().find(|k| match k.strip_prefix("input_image_") {
        None => false,
        Some(n) => {
            !flux2 || !matches!(n.parse::<u32>(), Ok(2..=8)) || body.get("input_image").is_none()
        }
    })?;
    Some(Reply::json(
        422,
        json!({"detail": [{"loc": ["body", bad], "msg": "Extra inputs are not permitted",
                           "type": "extra_forbidden"}]}),
    ))
}

fn submits(fake: &FakeProvider) -> Vec<Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect()
}

fn polls(fake: &FakeProvider) -> Vec<Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with(RESULT_PATH))
        .collect()
}

fn downloads(fake: &FakeProvider) -> Vec<Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/results/"))
        .collect()
}

/// Sent to BFL's API: the provider key as `x-key`, and none of the caller's credentials.
fn assert_provider_auth(req: &Recorded) {
    assert_eq!(
        req.header("x-key"),
        Some(PROVIDER_KEY),
        "{} {}",
        req.method,
        req.path
    );
    assert_no_caller_credentials(req);
}

fn assert_no_caller_credentials(req: &Recorded) {
    for h in ["authorization", "service-api-key"] {
        assert!(
            req.header(h).is_none(),
            "{h} reached the provider: {}",
            req.path
        );
    }
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached the provider in {name}"
        );
    }
}

/// A download of a result: no credentials at all.
fn assert_anonymous(req: &Recorded) {
    assert!(req.header("x-key").is_none(), "download carried the x-key");
    assert_no_caller_credentials(req);
}

fn generate(gw: &TestGateway, body: Value) -> client::Response {
    let resp = post(gw, GENERATIONS, &body);
    assert!(
        !resp.text().contains(PROVIDER_KEY),
        "provider key leaked: {}",
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

/// Start an asynchronous generation and wait for it to fail; the task's `error`.
fn failed_task(gw: &TestGateway, mut body: Value) -> Value {
    body["async"] = json!(true);
    let id = start(gw, body);
    let done = finished(gw, &id);
    assert_eq!(done["task_status"], "failed", "{done}");
    assert_eq!(done["data"], json!([]));
    assert!(!done.to_string().contains(PROVIDER_KEY));
    done["error"].clone()
}

// ---- round trips -----------------------------------------------------------------------------

#[test]
fn sync_round_trip_sends_bfls_native_request_and_polls_until_ready() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(&fake, Script::ready(2, 2));
    // The caller authenticates with a Bearer token: it must not reach BFL either.
    let resp = client::post_json(
        gw.addr,
        GENERATIONS,
        &[("Authorization", &format!("Bearer {KEY}"))],
        &json!({"model": "flux-pro-1.1", "prompt": "a lighthouse", "size": "1344x768",
                "output_format": "jpg", "seed": 42, "safety_tolerance": 3, "prompt_upsampling": false}),
    );
    let out = ok(&resp);
    assert_eq!(out["task_status"], "succeed");
    assert!(out["created"].as_i64().unwrap() > 0);
    assert_eq!(out["data"], json!([{"url": fake_url(&fake, "task-1.png")}]));
    assert!(!resp.text().contains(PROVIDER_KEY));

    let sent = submits(&fake);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/flux-pro-1.1");
    assert_eq!(sent[0].header("content-type"), Some("application/json"));
    assert_eq!(
        sent[0].json(),
        json!({"prompt": "a lighthouse", "width": 1344, "height": 768, "output_format": "jpeg",
               "seed": 42, "safety_tolerance": 3, "prompt_upsampling": false})
    );
    // Two queued polls, two running, then Ready: polled at the URL BFL gave, with the key.
    let polled = polls(&fake);
    assert_eq!(polled.len(), 5);
    for p in &polled {
        assert_eq!(p.path, format!("{RESULT_PATH}task-1"));
    }
    for r in fake.requests() {
        assert_provider_auth(&r);
    }
    // The URL is passed through: nothing was downloaded.
    assert!(downloads(&fake).is_empty());

    // The same with `Service-API-Key` and defaults: 1024x1024, png.
    let out = ok(&generate(
        &gw,
        json!({"model": "flux-pro-1.1", "prompt": "p"}),
    ));
    assert_eq!(out["data"][0]["url"], fake_url(&fake, "task-2.png"));
    let sent = submits(&fake);
    assert_eq!(
        sent[1].json(),
        json!({"prompt": "p", "width": 1024, "height": 1024, "output_format": "png"})
    );
    for r in fake.requests() {
        assert_provider_auth(&r);
    }
}

#[test]
fn without_a_polling_url_the_task_is_read_at_get_result() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(
        &fake,
        Script {
            polling: Polling::Absent,
            ..Script::ready(1, 1)
        },
    );
    let out = ok(&generate(
        &gw,
        json!({"model": "flux-pro-1.1", "prompt": "p"}),
    ));
    assert_eq!(out["data"][0]["url"], fake_url(&fake, "task-1.png"));
    let polled = polls(&fake);
    assert_eq!(polled.len(), 3);
    for p in &polled {
        assert_eq!(p.path, "/v1/get_result?id=task-1");
        assert_provider_auth(p);
    }
}

#[test]
fn n_images_are_one_task_each() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(&fake, Script::ready(1, 2));
    let out = ok(&generate(
        &gw,
        json!({"model": "flux-pro-1.1", "prompt": "p", "n": 2, "aspect_ratio": "9:16"}),
    ));
    let mut urls: Vec<String> = out["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["url"].as_str().unwrap().to_string())
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        vec![fake_url(&fake, "task-1.png"), fake_url(&fake, "task-2.png")]
    );
    let sent = submits(&fake);
    assert_eq!(sent.len(), 2, "one submission per image");
    for s in &sent {
        assert_eq!(
            s.json(),
            json!({"prompt": "p", "width": 768, "height": 1344, "output_format": "png"})
        );
    }
    // Each task polled until Ready: 1 queued + 2 running + 1 ready.
    for id in ["task-1", "task-2"] {
        let n = polls(&fake)
            .iter()
            .filter(|p| p.path == format!("{RESULT_PATH}{id}"))
            .count();
        assert_eq!(n, 4, "polls of {id}");
    }
    // More than the family allows is refused before anything is sent.
    let resp = generate(&gw, json!({"model": "flux-pro-1.1", "prompt": "p", "n": 5}));
    assert_eq!(resp.status, 400);
    assert!(resp.json()["details"]["n"].as_str().is_some());
    assert_eq!(submits(&fake).len(), 2);
}

#[test]
fn b64_json_downloads_each_sample_without_credentials() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(&fake, Script::ready(0, 1));
    let out = ok(&generate(
        &gw,
        json!({"model": "flux-pro-1.1", "prompt": "p", "n": 2, "response_format": "b64_json"}),
    ));
    let mut got: Vec<Vec<u8>> = out["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert!(d.get("url").is_none(), "{d}");
            unb64(d["b64_json"].as_str().unwrap())
        })
        .collect();
    got.sort();
    let mut want = vec![image_for(1), image_for(2)];
    want.sort();
    assert_eq!(got, want);
    let fetched = downloads(&fake);
    assert_eq!(fetched.len(), 2);
    for d in &fetched {
        assert_anonymous(d);
    }
}

#[test]
fn kontext_sends_the_reference_image_and_aspect_ratio() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(&fake, Script::ready(1, 1));
    let reference = png(90_000, 7);
    let out = ok(&generate(
        &gw,
        json!({"model": "flux-kontext-pro", "prompt": "make the sky green",
               "image": format!("data:image/png;base64,{}", b64(&reference)),
               "aspect_ratio": "16:9", "output_format": "jpg", "seed": 5}),
    ));
    assert_eq!(out["data"][0]["url"], fake_url(&fake, "task-1.png"));
    let sent = submits(&fake);
    assert_eq!(sent[0].path, "/v1/flux-kontext-pro");
    assert_eq!(
        sent[0].json(),
        json!({"prompt": "make the sky green", "aspect_ratio": "16:9",
               "input_image": b64(&reference), "output_format": "jpeg", "seed": 5})
    );
    assert_provider_auth(&sent[0]);

    // A URL goes to BFL as given (BFL fetches it); with no size the edit keeps its proportions.
    let host = FakeProvider::start();
    host.set_default(Reply::bytes(200, "image/png", reference.clone()));
    let url = format!("{}/images/reference.png", host.base_url());
    ok(&generate(
        &gw,
        json!({"model": "flux-kontext-pro", "prompt": "p", "image": url}),
    ));
    assert_eq!(
        submits(&fake)[1].json(),
        json!({"prompt": "p", "input_image": url, "output_format": "png"})
    );
    assert!(host.requests().is_empty(), "the gateway fetched the URL");

    // Text-to-image: the size's ratio, never pixels.
    ok(&generate(
        &gw,
        json!({"model": "flux-kontext-pro", "prompt": "p", "size": "896x1152"}),
    ));
    assert_eq!(
        submits(&fake)[2].json(),
        json!({"prompt": "p", "aspect_ratio": "3:4", "output_format": "png"})
    );
}

#[test]
fn async_round_trip_shows_pending_then_running_then_succeed() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let gate = Arc::new(AtomicU8::new(0));
    emulate(
        &fake,
        Script {
            gate: Some(gate.clone()),
            ..Script::ready(0, 0)
        },
    );
    let id = start(
        &gw,
        json!({"model": "flux-pro-1.1", "prompt": "p", "async": true, "response_format": "b64_json"}),
    );
    // BFL's `Pending` without progress is the public `pending`, with progress `running`.
    wait_for_state(&gw, &id, "pending");
    gate.store(1, Ordering::SeqCst);
    wait_for_state(&gw, &id, "running");
    gate.store(2, Ordering::SeqCst);
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert!(done.get("error").is_none());
    assert_eq!(
        unb64(done["data"][0]["b64_json"].as_str().unwrap()),
        image_for(1)
    );
    assert_eq!(submits(&fake).len(), 1);
    assert!(submits(&fake)[0].json().get("async").is_none());
    for p in polls(&fake) {
        assert_provider_auth(&p);
    }
    for d in downloads(&fake) {
        assert_anonymous(&d);
    }
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

// ---- task verdicts ---------------------------------------------------------------------------

#[test]
fn moderated_tasks_are_content_policy_violations() {
    for (status, reason) in [
        ("Request Moderated", "Derivative Works"),
        ("Content Moderated", "Sexual Content"),
    ] {
        let fake = FakeProvider::start();
        let gw = TestGateway::start(&fake);
        emulate(
            &fake,
            Script::ending(status, json!({"details": {"Moderation Reasons": [reason]}})),
        );
        let msg = failed(
            &generate(
                &gw,
                json!({"model": "flux-pro-1.1", "prompt": "p", "retries": 2}),
            ),
            400,
            "content_policy_violation",
        );
        assert!(
            msg.contains(status) && msg.contains(reason),
            "{status}: {msg}"
        );
        // The verdict is final: polled once more than the pending polls, never resubmitted.
        assert_eq!(polls(&fake).len(), 3, "{status}");
        assert_eq!(submits(&fake).len(), 1, "{status}");

        let error = failed_task(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"}));
        assert_eq!(error["code"], "content_policy_violation", "{status}");
        assert!(error["message"].as_str().unwrap().contains(reason));
    }
}

#[test]
fn a_failed_generation_ends_the_wait_at_once() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(
        &fake,
        Script::ending(
            "Error",
            json!({"details": {"message": "generation failed"}}),
        ),
    );
    failed(
        &generate(
            &gw,
            json!({"model": "flux-pro-1.1", "prompt": "p", "retries": 2}),
        ),
        502,
        "upstream_error",
    );
    // Not polled again after the verdict, not resubmitted.
    assert_eq!(polls(&fake).len(), 3);
    assert_eq!(submits(&fake).len(), 1);
    let error = failed_task(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"}));
    assert_eq!(error["code"], "upstream_error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("generation failed"),
        "BFL's reason reaches the caller: {error}"
    );
}

#[test]
fn a_task_bfl_no_longer_knows_fails() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(&fake, Script::ending("Task not found", json!({})));
    failed(
        &generate(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"})),
        502,
        "upstream_error",
    );
    assert_eq!(polls(&fake).len(), 3);
    let error = failed_task(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"}));
    assert_eq!(error["code"], "upstream_error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("no longer knows the task"),
        "BFL's reason reaches the caller: {error}"
    );
}

#[test]
fn a_failed_poll_is_tolerated() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(
        &fake,
        Script {
            poll_errors: vec![
                Reply::json(503, json!({"detail": "Service Unavailable"})),
                Reply::json(429, json!({"detail": "slow down"})),
            ],
            ..Script::ready(0, 1)
        },
    );
    let out = ok(&generate(
        &gw,
        json!({"model": "flux-pro-1.1", "prompt": "p"}),
    ));
    assert_eq!(out["data"][0]["url"], fake_url(&fake, "task-1.png"));
    // Two failed polls, one running, one ready; still one submission.
    assert_eq!(polls(&fake).len(), 4);
    assert_eq!(submits(&fake).len(), 1);
}

// ---- the polling URL check -------------------------------------------------------------------

#[test]
fn polling_urls_off_bfls_hosts_are_never_polled() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Another server on the same address, and the fake under another name: the key must reach
    // neither.
    let evil = FakeProvider::start();
    evil.set_default(Reply::json(
        200,
        json!({"id": "task-1", "status": "Pending"}),
    ));
    let port = fake.addr().port();
    for url in [
        "https://evil.example/v1/get_result?id=x".to_string(),
        "http://api.bfl.ai.evil.example/v1/get_result?id=x".to_string(),
        format!("{}{RESULT_PATH}task-1", evil.base_url()),
        format!("http://localhost:{port}{RESULT_PATH}task-1"),
    ] {
        let before = fake.requests().len();
        emulate(
            &fake,
            Script {
                polling: Polling::Url(url.clone()),
                ..Script::ready(0, 0)
            },
        );
        let msg = failed(
            &generate(
                &gw,
                json!({"model": "flux-pro-1.1", "prompt": "p", "retries": 2}),
            ),
            502,
            "upstream_bad_response",
        );
        assert!(msg.contains("polling_url"), "{url}: {msg}");
        // One submission, not retried; nothing polled anywhere.
        let sent = fake.requests();
        assert_eq!(sent.len(), before + 1, "{url}");
        assert_eq!(sent[before].method, "POST");
        assert!(evil.requests().is_empty(), "{url} was polled");

        let before = fake.requests().len();
        let error = failed_task(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"}));
        assert_eq!(error["code"], "upstream_bad_response", "{url}");
        assert_eq!(fake.requests().len(), before + 1, "{url}");
        assert!(evil.requests().is_empty(), "{url} was polled");
    }
}

// ---- native HTTP errors ----------------------------------------------------------------------

#[test]
fn submit_errors_map_to_public_codes() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let detail = |text: &str| json!({"detail": format!("{text} (key {PROVIDER_KEY})")});
    // (reply, retries asked, public status, code, submissions expected, text in the message)
    let cases = [
        (
            Reply::json(400, detail("Invalid request")),
            2,
            400,
            "invalid_request",
            1,
            Some("Invalid request"),
        ),
        (
            Reply::json(402, detail("Insufficient credits")),
            2,
            502,
            "upstream_error",
            1,
            None,
        ),
        (
            Reply::json(403, detail("Not authenticated - Invalid Authentication")),
            2,
            502,
            "upstream_auth_failed",
            1,
            None,
        ),
        (
            Reply::json(
                422,
                json!({"detail": [{"loc": ["body", "safety_tolerance"],
                    "msg": "Input should be less than or equal to 6", "type": "less_than_equal"}]}),
            ),
            2,
            400,
            "invalid_request",
            1,
            Some("body.safety_tolerance: Input should be less than or equal to 6"),
        ),
        (
            Reply::json(429, detail("You have exceeded the number of active tasks")),
            0,
            429,
            "rate_limited",
            1,
            None,
        ),
        (
            Reply::json(500, detail("Internal Server Error")),
            0,
            502,
            "upstream_error",
            1,
            None,
        ),
        (
            Reply::json(503, detail("Service Unavailable")),
            1,
            502,
            "upstream_error",
            2,
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
                json!({"model": "flux-pro-1.1", "prompt": "p", "retries": retries}),
            ),
            status,
            code,
        );
        if let Some(t) = text {
            assert!(msg.contains(t), "{code}: {msg}");
        }
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
    emulate(
        &fake,
        Script {
            submit_errors: vec![
                Reply::json(
                    429,
                    json!({"detail": "You have exceeded the number of active tasks"}),
                )
                .with_header("retry-after", "0"),
                Reply::json(503, json!({"detail": "Service Unavailable"})),
            ],
            ..Script::ready(0, 1)
        },
    );
    let out = ok(&generate(
        &gw,
        json!({"model": "flux-pro-1.1", "prompt": "p", "retries": 2}),
    ));
    assert_eq!(out["data"][0]["url"], fake_url(&fake, "task-1.png"));
    let sent = submits(&fake);
    assert_eq!(sent.len(), 3);
    for s in &sent {
        assert_provider_auth(s);
        assert_eq!(s.body, sent[0].body, "a retry sends the same request");
    }

    // Without retries the 429 is the caller's.
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(
        &fake,
        Script {
            submit_errors: vec![Reply::json(429, json!({"detail": "too many active tasks"}))],
            ..Script::ready(0, 1)
        },
    );
    failed(
        &generate(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"})),
        429,
        "rate_limited",
    );
    assert_eq!(submits(&fake).len(), 1);
}

// ---- today's models and BFL's own failure answers --------------------------------------------

/// The test config plus today's FLUX models beyond `flux-pro-1.1` and Kontext, and a retired one.
fn config_with_flux_models(fake: &FakeProvider, ports: (u16, u16)) -> String {
    support::config(&fake.base_url(), ports)
        + "    flux-2-pro: {family: flux-2, targets: [{provider: bfl, model: flux-2-pro}]}\n"
        + "    flux-ultra: {family: flux-ultra, targets: [{provider: bfl, model: flux-pro-1.1-ultra}]}\n"
        + "    flux-pro: {family: flux, targets: [{provider: bfl, model: flux-pro}]}\n"
}

#[test]
fn flux2_round_trip_sends_pixels_or_follows_the_reference_image() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| config_with_flux_models(&fake, ports));
    emulate(&fake, Script::ready(1, 1));
    // Any size FLUX.2 takes (multiples of 16, at most 4 MP), not only the listed ones.
    ok(&generate(
        &gw,
        json!({"model": "flux-2-pro", "prompt": "p", "size": "1920x1088", "disable_pup": true}),
    ));
    let sent = submits(&fake);
    assert_eq!(sent[0].path, "/v1/flux-2-pro");
    assert_eq!(
        sent[0].json(),
        json!({"prompt": "p", "width": 1920, "height": 1088, "output_format": "png", "disable_pup": true})
    );
    assert_provider_auth(&sent[0]);
    // An edit: the reference image as `input_image`, and no size so the output follows it.
    ok(&generate(
        &gw,
        json!({"model": "flux-2-pro", "prompt": "make it blue", "image": "https://img.example/a.png"}),
    ));
    assert_eq!(
        submits(&fake)[1].json(),
        json!({"prompt": "make it blue", "input_image": "https://img.example/a.png", "output_format": "png"})
    );
    // FLUX1.1 [pro] Ultra takes a ratio.
    ok(&generate(
        &gw,
        json!({"model": "flux-ultra", "prompt": "p", "aspect_ratio": "21:9", "raw": true}),
    ));
    let sent = submits(&fake);
    assert_eq!(sent[2].path, "/v1/flux-pro-1.1-ultra");
    assert_eq!(
        sent[2].json(),
        json!({"prompt": "p", "aspect_ratio": "21:9", "output_format": "png", "raw": true})
    );
    // A size FLUX.2 cannot make is the caller's 400, never sent.
    let resp = generate(
        &gw,
        json!({"model": "flux-2-pro", "prompt": "p", "size": "2064x2064"}),
    );
    failed(&resp, 400, "validation_error");
    assert!(
        resp.json()["details"].get("size").is_some(),
        "{}",
        resp.text()
    );
    assert_eq!(submits(&fake).len(), 3);
}

/// FLUX.2 fuses up to 8 references: the first goes as `input_image`, the rest as `input_image_2`
/// onwards (URLs unchanged, bytes as plain base64); a ninth is the caller's 400, and Kontext keeps
/// one.
#[test]
fn flux2_takes_up_to_eight_reference_images() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| config_with_flux_models(&fake, ports));
    emulate(&fake, Script::ready(1, 1));
    let data = b64(&png(200, 3));
    let mut refs: Vec<String> = (1..=7)
        .map(|i| format!("https://img.example/{i}.png"))
        .collect();
    refs.insert(1, data.clone());
    ok(&generate(
        &gw,
        json!({"model": "flux-2-pro", "prompt": "all eight, side by side", "image": refs}),
    ));
    let sent = submits(&fake)[0].json();
    let mut want = json!({"prompt": "all eight, side by side", "output_format": "png",
                          "input_image": "https://img.example/1.png", "input_image_2": data});
    for (i, n) in (2..=7).zip(3..=8) {
        want[format!("input_image_{n}")] = json!(format!("https://img.example/{i}.png"));
    }
    assert_eq!(sent, want);

    let nine: Vec<String> = (0..9)
        .map(|i| format!("https://img.example/{i}.png"))
        .collect();
    let resp = generate(
        &gw,
        json!({"model": "flux-2-pro", "prompt": "p", "image": nine}),
    );
    failed(&resp, 400, "validation_error");
    assert!(resp.json()["details"]["image"]
        .as_str()
        .unwrap()
        .contains("at most 8"));
    let resp = generate(
        &gw,
        json!({"model": "flux-kontext-pro", "prompt": "p",
               "image": ["https://img.example/1.png", "https://img.example/2.png"]}),
    );
    failed(&resp, 400, "validation_error");
    assert_eq!(submits(&fake).len(), 1, "refused requests reached BFL");
}

/// BFL's guides show a failed task as `{"status": "Error", "error": code, "message": text}`: the
/// reason reaches the caller, and a policy refusal is `content_policy_violation`.
#[test]
fn an_error_task_reports_bfls_reason_and_policy_refusals() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(
        &fake,
        Script::ending(
            "Error",
            json!({"error": "content_policy_violation", "message": "The prompt violated content policy"}),
        ),
    );
    let msg = failed(
        &generate(
            &gw,
            json!({"model": "flux-pro-1.1", "prompt": "p", "retries": 2}),
        ),
        400,
        "content_policy_violation",
    );
    assert!(msg.contains("The prompt violated content policy"), "{msg}");
    assert_eq!(submits(&fake).len(), 1, "a verdict is never resubmitted");
    let error = failed_task(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"}));
    assert_eq!(error["code"], "content_policy_violation", "{error}");

    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    emulate(
        &fake,
        Script::ending(
            "Error",
            json!({"error": "invalid_image", "message": "Input image could not be decoded"}),
        ),
    );
    let error = failed_task(&gw, json!({"model": "flux-pro-1.1", "prompt": "p"}));
    assert_eq!(error["code"], "upstream_error", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("invalid_image") && message.contains("could not be decoded"),
        "BFL's reason reaches the caller: {message}"
    );
}

/// A retired model (`flux-pro`, FLUX.1 [pro], no longer among BFL's endpoints) still configured:
/// BFL's route-not-found 404 is 503 `model_unavailable` naming both models, not retried.
#[test]
fn a_model_bfl_no_longer_serves_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| config_with_flux_models(&fake, ports));
    fake.push(Reply::json(404, json!({"detail": "Not Found"})));
    let resp = generate(
        &gw,
        json!({"model": "flux-pro", "prompt": "p", "retries": 2}),
    );
    let msg = failed(&resp, 503, "model_unavailable");
    assert!(msg.contains("model flux-pro "), "{msg}");
    assert!(
        msg.contains("provider bfl") && msg.contains("configured model flux-pro"),
        "{msg}"
    );
    assert_eq!(submits(&fake).len(), 1, "not retried");
    assert_eq!(submits(&fake)[0].path, "/v1/flux-pro");
}
