//! DashScope Wan images end to end against an emulator of its asynchronous task API
//! (`support::wan`): the submit carries `X-DashScope-Async: enable` and always `n`, a synchronous
//! request waits through `PENDING` and `RUNNING` for the result (or for the deadline: 504), an
//! asynchronous one shows `pending`, `running`, then the result, and every failure state reaches
//! the caller as the right error.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Reply};
use support::image_conformance::{b64, unb64};
use support::tasks::{finished, start, task};
use support::wan::{extended, result_png, End, Wan, SUBMIT_PATH, TASKS_PATH};
use support::{config, post, TestGateway, KEY, PROVIDER_KEY};

const MODEL: &str = "wanx2.1-t2i-turbo";
const GENERATIONS: &str = "/api/v1/images/generations";

fn submits(fake: &FakeProvider) -> Vec<Value> {
    fake.requests()
        .iter()
        .filter(|r| r.path == SUBMIT_PATH)
        .map(|r| r.json())
        .collect()
}

#[test]
fn a_sync_request_waits_for_the_task_and_answers_with_its_images() {
    let fake = FakeProvider::start();
    let wan = Wan::install(&fake, End::Succeed);
    let gw = TestGateway::start(&fake);

    let resp = post(
        &gw,
        GENERATIONS,
        &json!({"model": MODEL, "prompt": "a lighthouse", "negative_prompt": "fog",
                "size": "1280x720", "n": 2, "watermark": true, "seed": 7,
                "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["task_status"], "succeed");
    let ids = wan.task_ids();
    assert_eq!(ids.len(), 1, "one task for two images (n up to 4 per task)");
    let id = &ids[0];
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, item) in data.iter().enumerate() {
        assert_eq!(unb64(item["b64_json"].as_str().unwrap()), result_png(id, i));
    }
    // Pending, running, then the result.
    assert_eq!(wan.polls(id), 3);

    let reqs = fake.requests();
    let submit = reqs.iter().find(|r| r.path == SUBMIT_PATH).unwrap();
    assert_eq!(submit.header("x-dashscope-async"), Some("enable"));
    assert_eq!(
        submit.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    assert_eq!(submit.header("service-api-key"), None);
    assert_eq!(
        submit.json(),
        json!({"model": MODEL, "input": {"prompt": "a lighthouse", "negative_prompt": "fog"},
               "parameters": {"size": "1280*720", "n": 2, "watermark": true, "seed": 7}})
    );
    for poll in reqs.iter().filter(|r| r.path.starts_with(TASKS_PATH)) {
        assert_eq!(poll.method, "GET");
        assert_eq!(
            poll.header("authorization"),
            Some(format!("Bearer {PROVIDER_KEY}").as_str())
        );
        assert!(poll.body.is_empty());
    }
    // The downloads of the results carry no credentials.
    for get in reqs.iter().filter(|r| r.path.starts_with("/results/")) {
        assert_eq!(get.header("authorization"), None);
    }
    assert!(!resp.text().contains(PROVIDER_KEY));
}

#[test]
fn n_is_always_sent_and_urls_pass_through() {
    let fake = FakeProvider::start();
    let wan = Wan::install(&fake, End::Succeed);
    let gw = TestGateway::start(&fake);
    let resp = post(&gw, GENERATIONS, &json!({"model": MODEL, "prompt": "p"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    // DashScope's own default would be 4 billed images.
    assert_eq!(submits(&fake)[0]["parameters"]["n"], 1);
    assert_eq!(submits(&fake)[0]["parameters"]["watermark"], false);
    let id = &wan.task_ids()[0];
    assert_eq!(
        resp.json()["data"],
        json!([{"url": format!("{}/results/{id}/0.png", fake.base_url())}])
    );
}

#[test]
fn failure_states_reach_the_caller() {
    let cases: Vec<(End, u16, &str)> = vec![
        (
            End::Failed(
                "DataInspectionFailed",
                "Output data may contain inappropriate content.",
            ),
            400,
            "content_policy_violation",
        ),
        (
            End::PartlyFailed("DataInspectionFailed"),
            400,
            "content_policy_violation",
        ),
        // Wan refuses prompts it suspects of infringing intellectual property the same way.
        (
            End::Failed(
                "IPInfringementSuspect",
                "Input data is suspected of being involved in IP infringement.",
            ),
            400,
            "content_policy_violation",
        ),
        (
            End::Failed("InternalError.Algo", "algorithm process error"),
            502,
            "upstream_error",
        ),
        (End::Canceled, 502, "upstream_error"),
        (End::Unknown, 502, "upstream_error"),
    ];
    for (end, status, code) in cases {
        let fake = FakeProvider::start();
        let wan = Wan::install(&fake, end.clone());
        let gw = TestGateway::start(&fake);
        let resp = post(
            &gw,
            GENERATIONS,
            &json!({"model": MODEL, "prompt": "p", "retries": 2}),
        );
        assert_eq!(resp.status, status, "{end:?}: {}", resp.text());
        assert_eq!(resp.json()["code"], code, "{end:?}");
        // The task's verdict is final: no second task.
        assert_eq!(wan.submitted(), 1, "{end:?}");
    }
}

#[test]
fn submit_errors_are_classified_and_retried_when_they_may_pass() {
    // An invalid key: the operator's problem, not retried, the key never echoed.
    let fake = FakeProvider::start();
    fake.push(Reply::json(
        401,
        json!({"request_id": "r", "code": "InvalidApiKey",
               "message": format!("Invalid API-key provided: {PROVIDER_KEY}")}),
    ));
    let gw = TestGateway::start(&fake);
    let resp = post(
        &gw,
        GENERATIONS,
        &json!({"model": MODEL, "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 502);
    assert_eq!(resp.json()["code"], "upstream_auth_failed");
    assert!(!resp.text().contains(PROVIDER_KEY));
    assert_eq!(fake.requests().len(), 1, "an auth failure is not retried");

    // Throttled, then accepted: the retry submits again and the task completes.
    let fake = FakeProvider::start();
    let wan = Wan::install(&fake, End::Succeed);
    let throttled = AtomicBool::new(false);
    fake.set_handler(move |req| {
        if req.path == SUBMIT_PATH && !throttled.swap(true, Ordering::SeqCst) {
            return Some(Reply::json(
                429,
                json!({"request_id": "r", "code": "Throttling.RateQuota",
                       "message": "Requests rate limit exceeded"}),
            ));
        }
        wan.answer(req)
    });
    let gw = TestGateway::start(&fake);
    let resp = post(
        &gw,
        GENERATIONS,
        &json!({"model": MODEL, "prompt": "p", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(submits(&fake).len(), 2);
}

#[test]
fn a_sync_request_gives_up_at_its_deadline() {
    let fake = FakeProvider::start();
    let _wan = Wan::install(&fake, End::Held);
    let gw = TestGateway::start_with(|ports| {
        config(&fake.base_url(), ports).replace(
            "poll_interval_ms: 20",
            "poll_interval_ms: 20, sync_wait_seconds: 1",
        )
    });
    let started = std::time::Instant::now();
    let resp = post(&gw, GENERATIONS, &json!({"model": MODEL, "prompt": "p"}));
    let took = started.elapsed();
    assert_eq!(resp.status, 504, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_timeout");
    assert!(
        took >= std::time::Duration::from_millis(900) && took < std::time::Duration::from_secs(5),
        "{took:?}"
    );
}

#[test]
fn an_async_task_shows_pending_then_running_then_its_images() {
    let fake = FakeProvider::start();
    let wan = Wan::install_paced(&fake, End::Held, 10, 1);
    let gw = TestGateway::start(&fake);
    let id = start(
        &gw,
        json!({"model": MODEL, "prompt": "p", "n": 3, "async": true, "response_format": "b64_json"}),
    );
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let body = task(&gw, &id, KEY).json();
        let status = body["task_status"].as_str().unwrap().to_string();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status == "running" && seen.contains(&"pending".to_string()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "states seen: {seen:?}"
        );
        std::thread::park_timeout(std::time::Duration::from_millis(10));
    }
    wan.finish();
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    let native = &wan.task_ids()[0];
    let data = done["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    assert_eq!(data[2]["b64_json"], b64(&result_png(native, 2)));
}

#[test]
fn an_async_task_refused_by_moderation_fails_with_its_code() {
    let fake = FakeProvider::start();
    let _wan = Wan::install(
        &fake,
        End::Failed(
            "DataInspectionFailed",
            "Input data may contain inappropriate content.",
        ),
    );
    let gw = TestGateway::start(&fake);
    let id = start(&gw, json!({"model": MODEL, "prompt": "p", "async": true}));
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "failed");
    assert_eq!(done["error"]["code"], "content_policy_violation");
    assert!(done["error"]["message"]
        .as_str()
        .unwrap()
        .contains("inappropriate"));
    assert_eq!(done["data"], json!([]));
}

/// With `prompt_extend` on, DashScope rewrites the prompt and reports the rewrite per image as
/// `actual_prompt`: it reaches the caller as `revised_prompt`.
#[test]
fn the_extended_prompt_is_the_revised_prompt() {
    let fake = FakeProvider::start();
    let _wan = Wan::install(&fake, End::Succeed);
    let gw = TestGateway::start(&fake);
    let resp = post(
        &gw,
        GENERATIONS,
        &json!({"model": MODEL, "prompt": "a lighthouse", "n": 2, "prompt_extend": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(submits(&fake)[0]["parameters"]["prompt_extend"], true);
    let data = resp.json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 2);
    for item in &data {
        assert_eq!(item["revised_prompt"], extended("a lighthouse"), "{item}");
    }
}

/// A Wan model DashScope does not serve (retired, misspelt or not enabled for the account): its
/// `400 InvalidParameter "Model not exist."` is 503 `model_unavailable` naming the public and native
/// model, not retried.
#[test]
fn a_model_the_provider_no_longer_serves_is_named() {
    for (status, body) in [
        (
            400,
            json!({"request_id": "r", "code": "InvalidParameter", "message": "Model not exist."}),
        ),
        (
            403,
            json!({"request_id": "r", "code": "Model.AccessDenied", "message": "Model access denied."}),
        ),
    ] {
        let fake = FakeProvider::start();
        fake.push(Reply::json(status, body.clone()));
        let gw = TestGateway::start(&fake);
        let resp = post(
            &gw,
            GENERATIONS,
            &json!({"model": MODEL, "prompt": "p", "retries": 2}),
        );
        assert_eq!(resp.status, 503, "{body}: {}", resp.text());
        let out = resp.json();
        assert_eq!(out["code"], "model_unavailable", "{body}");
        let message = out["message"].as_str().unwrap();
        assert!(message.contains(&format!("model {MODEL} ")), "{message}");
        assert!(
            message.contains(&format!(
                "provider dashscope does not serve its configured model {MODEL}"
            )),
            "{message}"
        );
        assert!(
            message.contains(body["message"].as_str().unwrap()),
            "{message}"
        );
        assert_eq!(fake.requests().len(), 1, "not retried");
    }
}
