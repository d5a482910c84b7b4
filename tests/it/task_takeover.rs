//! Takeover of tasks whose gateway instance died, with the shared Redis store: a task is never
//! stuck. Its provider tasks are polled again by another instance; a task that had not yet sent
//! anything is run again from its request; one whose call may have reached a provider that
//! answers directly fails with `instance_lost`. Takeover happens on a read, or by the
//! supervisor's sweep with nobody reading. The dead instance is simulated by writing its last
//! record straight into the store (the multi-process tests in `task_failover.rs` kill real ones).
//! Redis is found at `SWITCHYARD_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`).

use std::time::{Duration, Instant};

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::image_conformance::{b64, png};
use support::tasks::{finished, task};
use support::wan::{result_png, End, Wan, SUBMIT_PATH, TASKS_PATH};
use support::{client, redis, TestGateway, KEY, PROVIDER_KEY};
use switchyard::internals::common::images::Delivery;
use switchyard::internals::common::images::NativeTask;
use switchyard::internals::store::tasks::RedisTaskStore;
use switchyard::internals::store::tasks::TaskRecord;
use switchyard::internals::store::tasks::TaskStore;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The last record a dead instance left: running, silent for two minutes.
fn left_behind(model: &str) -> TaskRecord {
    TaskRecord {
        region: "cn".into(),
        base: "http://gateway.example".into(),
        ..TaskRecord::started(
            "key:tester".into(),
            model.into(),
            "dead-instance".into(),
            now_ms() / 1000 - 120,
            now_ms() - 120_000,
        )
    }
}

fn put(prefix: &str, id: &str, record: &TaskRecord) {
    let store = RedisTaskStore::new({
        let mut s =
            switchyard::internals::store::redis_files::RedisSettings::new(redis::redis_url());
        s.key_prefix = prefix.to_string();
        s
    })
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(store.put(id, record, Duration::from_secs(600)))
        .unwrap();
}

/// Submit a task to the emulated DashScope directly, as the dead instance did.
fn submitted_task(fake: &FakeProvider) -> String {
    let resp = client::post_json(
        fake.addr(),
        SUBMIT_PATH,
        &[("X-DashScope-Async", "enable")],
        &json!({"model": "wanx2.1-t2i-turbo", "input": {"prompt": "p"}, "parameters": {"n": 2}}),
    );
    assert_eq!(resp.status, 200);
    resp.json()["output"]["task_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn wan_record(native_id: &str) -> TaskRecord {
    TaskRecord {
        sent: true,
        native: vec![Some(NativeTask {
            provider: "dashscope".into(),
            id: native_id.into(),
            polling_url: None,
        })],
        delivery: Some(Delivery {
            url: false,
            mime: "image/png".into(),
            images: 1,
        }),
        ..left_behind("wanx2.1-t2i-turbo")
    }
}

#[test]
fn a_read_takes_over_and_resumes_the_provider_task() {
    let fake = FakeProvider::start();
    let wan = Wan::install(&fake, End::Succeed);
    let native = submitted_task(&fake);
    let prefix = redis::run_prefix();
    let id = uuid::Uuid::new_v4().to_string();
    put(&prefix, &id, &wan_record(&native));

    let gw = redis::gateway(&fake, &prefix);
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    let data = done["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[1]["b64_json"], b64(&result_png(&native, 1)));
    // Resumed, not run again: the only submit is the dead instance's.
    assert_eq!(wan.submitted(), 1);
    assert!(wan.polls(&native) >= 3);
    let polls: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(TASKS_PATH))
        .collect();
    assert!(polls
        .iter()
        .all(|p| p.header("authorization") == Some(&format!("Bearer {PROVIDER_KEY}"))));
}

#[test]
fn the_sweep_takes_over_with_nobody_reading() {
    let fake = FakeProvider::start();
    let wan = Wan::install(&fake, End::Held);
    let native = submitted_task(&fake);
    let prefix = redis::run_prefix();
    let id = uuid::Uuid::new_v4().to_string();
    put(&prefix, &id, &wan_record(&native));

    let _gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            .replace(
                "  images: {",
                &format!(
                    "  store: {{redis_url: \"{}\", key_prefix: \"{prefix}\"}}\n  images: {{",
                    redis::redis_url()
                ),
            )
            .replace(
                "poll_interval_ms: 20",
                "poll_interval_ms: 20, task_heartbeat_ms: 100, task_lost_after_ms: 300",
            )
    });
    // Nobody reads the task; the provider sees it polled again all the same.
    let deadline = Instant::now() + Duration::from_secs(10);
    while wan.polls(&native) < 2 {
        assert!(
            Instant::now() < deadline,
            "the sweep never took the task over"
        );
        std::thread::park_timeout(Duration::from_millis(20));
    }
    assert_eq!(wan.submitted(), 1);
}

#[test]
fn a_task_lost_before_sending_anything_is_run_again() {
    let fake = FakeProvider::start();
    let image = png(64, 9);
    fake.set_default(Reply::json(
        200,
        json!({"created": 1_700_000_000, "data": [{"b64_json": b64(&image)}]}),
    ));
    let prefix = redis::run_prefix();
    let id = uuid::Uuid::new_v4().to_string();
    let record = TaskRecord {
        request: Some(
            json!({"model": "gpt-image-2", "prompt": "a fox", "async": true,
                   "response_format": "b64_json"})
            .to_string(),
        ),
        ..left_behind("gpt-image-2")
    };
    put(&prefix, &id, &record);

    let gw = redis::gateway(&fake, &prefix);
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(done["data"], json!([{"b64_json": b64(&image)}]));
    let sent = fake.requests();
    assert_eq!(
        sent.len(),
        1,
        "{:?}",
        sent.iter()
            .map(|r| (r.method.clone(), r.path.clone(), r.text()))
            .collect::<Vec<_>>()
    );
    assert_eq!(sent[0].json()["prompt"], "a fox");
}

#[test]
fn a_task_lost_after_calling_a_direct_provider_fails_as_instance_lost() {
    let fake = FakeProvider::start();
    let prefix = redis::run_prefix();
    let id = uuid::Uuid::new_v4().to_string();
    let record = TaskRecord {
        sent: true,
        ..left_behind("gpt-image-2")
    };
    put(&prefix, &id, &record);
    let gw = redis::gateway(&fake, &prefix);
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "failed");
    assert_eq!(done["error"]["code"], "instance_lost");
    assert!(fake.requests().is_empty(), "nothing is sent twice");
    // Settled: the next read says the same.
    assert_eq!(task(&gw, &id, KEY).json()["error"]["code"], "instance_lost");
}

#[test]
fn a_live_instance_keeps_its_task() {
    // Two instances on one store; the task's own instance is alive and heartbeating, so the
    // other one reading it never takes it over.
    let fake = FakeProvider::start();
    let wan = Wan::install_paced(&fake, End::Held, 1, 1);
    let prefix = redis::run_prefix();
    let fast = |ports| {
        support::config(&fake.base_url(), ports)
            .replace(
                "  images: {",
                &format!(
                    "  store: {{redis_url: \"{}\", key_prefix: \"{prefix}\"}}\n  images: {{",
                    redis::redis_url()
                ),
            )
            .replace(
                "poll_interval_ms: 20",
                "poll_interval_ms: 20, task_heartbeat_ms: 100, task_lost_after_ms: 400",
            )
    };
    let a = TestGateway::start_with(fast);
    let b = TestGateway::start_with(fast);
    let id = support::tasks::start(
        &a,
        json!({"model": "wanx2.1-t2i-turbo", "prompt": "p", "async": true}),
    );
    // Well past `task_lost_after`, read through B all along: still A's, still one submit.
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        let body = task(&b, &id, KEY).json();
        assert!(
            body["task_status"] == "running" || body["task_status"] == "pending",
            "{body}"
        );
        std::thread::park_timeout(Duration::from_millis(50));
    }
    assert_eq!(wan.submitted(), 1);
    wan.finish();
    assert_eq!(finished(&b, &id)["task_status"], "succeed");
}
