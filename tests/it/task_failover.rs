//! Gateway instances as separate processes (the real binary) sharing one Redis, with a DashScope
//! Wan task in flight (`support::wan` emulates its task API):
//! - the instance polling the task is killed (SIGKILL): another instance notices its silence,
//!   takes the task over, polls the same provider task to the end (no second submission) and
//!   delivers the result;
//! - the instance is stopped gracefully (SIGTERM): its job gets the grace period, and when that
//!   is not enough the task is handed over at once rather than after the silence threshold;
//!   when it is enough, the job finishes there;
//! - a task started and an image hosted through one process are read through the other.
//!
//! The two instances hold different DashScope keys, so the provider's log shows which instance
//! polled. Redis is found at `SWITCHYARD_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use serde_json::json;
use support::fake::FakeProvider;
use support::image_conformance::b64;
use support::tasks::{finished_within, start};
use support::wan::{result_png, End, Wan, TASKS_PATH};
use support::{free_port, redis, wait_listening, TestGateway, PROVIDER_KEY};

const KEY_B: &str = "sk-instance-b-0002";
const MODEL: &str = "wanx2.1-t2i-turbo";

/// One gateway process; killed when dropped.
struct Instance {
    child: Child,
    gw: TestGateway,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Instance {
    /// Start the binary with the standard test config, the shared store under `prefix`, the
    /// DashScope key `key`, `grace` seconds of graceful shutdown and `lost_after_ms` of silence
    /// before a task is taken over (heartbeats and sweeps every 200 ms).
    fn start(
        fake: &FakeProvider,
        prefix: &str,
        key: &str,
        grace: u64,
        lost_after_ms: u64,
    ) -> Instance {
        let _starting = support::gateway_starting();
        let ports = (free_port(), free_port());
        let yaml = support::config(&fake.base_url(), ports)
            .replace("grace_period_seconds: 0", &format!("grace_period_seconds: {grace}"))
            .replace(
                "  images: {",
                &format!(
                    "  store: {{redis_url: \"{}\", key_prefix: \"{prefix}\"}}\n  images: {{",
                    redis::redis_url()
                ),
            )
            .replace(
                "poll_interval_ms: 20",
                &format!(
                    "poll_interval_ms: 50, task_heartbeat_ms: 200, task_lost_after_ms: {lost_after_ms}"
                ),
            )
            .replace(
                &format!("dashscope: {{kind: dashscope, api_key: \"{PROVIDER_KEY}\""),
                &format!("dashscope: {{kind: dashscope, api_key: \"{key}\""),
            );
        let dir = std::env::temp_dir().join(format!(
            "switchyard-failover-{}-{}",
            std::process::id(),
            ports.0
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("gateway.yaml");
        std::fs::write(&file, yaml).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["-c", file.to_str().unwrap()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", ports.0).parse().unwrap();
        wait_listening(addr);
        Instance {
            child,
            gw: TestGateway::attach(addr),
        }
    }

    fn terminate(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "could not send SIGTERM");
    }

    /// Wait for the process to exit on its own; how long it took.
    fn exited_within(&mut self, limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.child.try_wait().unwrap().is_some() {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "the instance did not exit within {limit:?}"
            );
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }
}

/// Polls of the provider task made with `key`.
fn polls_with(fake: &FakeProvider, key: &str) -> usize {
    let bearer = format!("Bearer {key}");
    fake.requests()
        .iter()
        .filter(|r| r.path.starts_with(TASKS_PATH) && r.header("authorization") == Some(&bearer))
        .count()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} (waited {limit:?})");
        std::thread::park_timeout(Duration::from_millis(20));
    }
    started.elapsed()
}

/// Start an async Wan task through `a` and wait until `a` is polling its provider task.
fn task_polled_by_a(fake: &FakeProvider, wan: &Wan, a: &Instance) -> (String, String) {
    let id = start(
        &a.gw,
        json!({"model": MODEL, "prompt": "a harbour", "n": 2, "async": true,
               "response_format": "b64_json"}),
    );
    wait_for("instance A never polled", Duration::from_secs(10), || {
        polls_with(fake, PROVIDER_KEY) >= 3
    });
    let native = wan.task_ids().pop().unwrap();
    (id, native)
}

fn assert_delivered(done: &serde_json::Value, native: &str) {
    assert_eq!(done["task_status"], "succeed", "{done}");
    let data = done["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, item) in data.iter().enumerate() {
        assert_eq!(item["b64_json"], b64(&result_png(native, i)));
    }
}

#[test]
fn a_killed_instance_s_task_is_finished_by_another() {
    let fake = FakeProvider::start();
    let wan = Wan::install_paced(&fake, End::Held, 1, 1);
    let prefix = redis::run_prefix();
    let mut a = Instance::start(&fake, &prefix, PROVIDER_KEY, 0, 1000);
    let b = Instance::start(&fake, &prefix, KEY_B, 0, 1000);
    let (id, native) = task_polled_by_a(&fake, &wan, &a);

    // Mid-poll: the provider still says RUNNING.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    wait_for(
        "instance B never took the task over",
        Duration::from_secs(10),
        || polls_with(&fake, KEY_B) >= 1,
    );
    wan.finish();
    let done = finished_within(&b.gw, &id, Duration::from_secs(10));
    assert_delivered(&done, &native);
    assert_eq!(wan.submitted(), 1, "resumed, not submitted again");
}

#[test]
fn a_graceful_shutdown_hands_unfinished_tasks_over_at_once() {
    let fake = FakeProvider::start();
    let wan = Wan::install_paced(&fake, End::Held, 1, 1);
    let prefix = redis::run_prefix();
    // A minute of silence before a takeover: only the hand-over can make it quick.
    let mut a = Instance::start(&fake, &prefix, PROVIDER_KEY, 2, 60_000);
    let b = Instance::start(&fake, &prefix, KEY_B, 0, 60_000);
    let (id, native) = task_polled_by_a(&fake, &wan, &a);

    a.terminate();
    let taken = wait_for(
        "the task was not handed over",
        Duration::from_secs(15),
        || polls_with(&fake, KEY_B) >= 1,
    );
    // The job kept its grace period (2 s, less the hand-over margin) before leaving.
    assert!(
        taken >= Duration::from_millis(900),
        "handed over after {taken:?}"
    );
    a.exited_within(Duration::from_secs(15));
    wan.finish();
    let done = finished_within(&b.gw, &id, Duration::from_secs(10));
    assert_delivered(&done, &native);
    assert_eq!(wan.submitted(), 1);
}

#[test]
fn a_graceful_shutdown_lets_a_job_finish_within_the_grace_period() {
    let fake = FakeProvider::start();
    let wan = Wan::install_paced(&fake, End::Held, 1, 1);
    let prefix = redis::run_prefix();
    let mut a = Instance::start(&fake, &prefix, PROVIDER_KEY, 3, 60_000);
    let b = Instance::start(&fake, &prefix, KEY_B, 0, 60_000);
    let (id, native) = task_polled_by_a(&fake, &wan, &a);

    a.terminate();
    wan.finish();
    let done = finished_within(&b.gw, &id, Duration::from_secs(10));
    assert_delivered(&done, &native);
    assert_eq!(polls_with(&fake, KEY_B), 0, "finished by its own instance");
    a.exited_within(Duration::from_secs(15));
}

#[test]
fn a_task_and_a_hosted_image_from_one_process_are_served_by_another() {
    let fake = FakeProvider::start();
    let image = support::image_conformance::png(256, 3);
    fake.set_default(support::fake::Reply::json(
        200,
        json!({"created": 1_700_000_000, "data": [{"b64_json": b64(&image)}]}),
    ));
    let prefix = redis::run_prefix();
    let a = Instance::start(&fake, &prefix, PROVIDER_KEY, 0, 45_000);
    let b = Instance::start(&fake, &prefix, KEY_B, 0, 45_000);

    // A GPT image answer is base64: `url` makes instance A host it.
    let resp = support::post(
        &a.gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "p", "response_format": "url"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let link = resp.json()["data"][0]["url"].as_str().unwrap().to_string();
    let path = link
        .strip_prefix(&format!("http://{}", a.gw.addr))
        .unwrap()
        .to_string();
    let served = support::client::request(b.gw.addr, "GET", &path, &[], b"");
    assert_eq!(served.status, 200);
    assert_eq!(served.header("content-type"), Some("image/png"));
    assert_eq!(served.body, image);

    // A task started through A is read, finished, through B.
    let id = start(
        &a.gw,
        json!({"model": "gpt-image-1", "prompt": "p", "async": true, "response_format": "b64_json"}),
    );
    let done = finished_within(&b.gw, &id, Duration::from_secs(10));
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(done["data"][0]["b64_json"], b64(&image));
}
