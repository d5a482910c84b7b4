//! Redis going away mid-run and coming back, against a real `redis-server` this test starts (and
//! kills, and restarts on the same port) itself. It proves the promise: while Redis is
//! unreachable, asynchronous requests fail fast with a 503 `store_unavailable` in the Error object
//! shape (and reach no provider), reading a task or a hosted image answers the same 503 rather
//! than a 404 or a hang, synchronous base64 requests keep working; and once Redis answers again
//! the same gateway, never restarted, runs asynchronous tasks again by itself.
//!
//! `redis-server` must be on PATH (CI installs it); without it the test fails, never skips.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Reply};
use support::image_conformance::{b64, get_hosted, png};
use support::tasks::{finished, start, task};
use support::{client, post, redis, TestGateway, KEY};

const GENERATIONS: &str = "/api/v1/images/generations";

/// A `redis-server` child on a fixed loopback port, killed when dropped (a failing test leaves no
/// server behind).
struct RedisServer {
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Start one on `port`, nothing persisted (it comes back empty after a restart), and wait
    /// until it answers PING.
    fn start(port: u16) -> RedisServer {
        let mut server = RedisServer { port, child: None };
        server.spawn();
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "redis-server already running");
        let port = self.port.to_string();
        let child = Command::new("redis-server")
            .args(["--port", &port, "--save", "", "--appendonly", "no"])
            .args(["--bind", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server (is it on PATH?): {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers_ping() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("redis-server on port {port} exited at startup: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not answer PING within 10 s"
            );
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }

    /// Kill it (SIGKILL: no goodbye to its clients) and reap it; the port is closed on return.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port.
    fn restart(&mut self) {
        self.spawn();
    }

    /// A raw `PING` answered `+PONG`.
    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200))
        else {
            return false;
        };
        let timeout = Some(Duration::from_millis(500));
        if stream.set_read_timeout(timeout).is_err()
            || stream.set_write_timeout(timeout).is_err()
            || stream.write_all(b"PING\r\n").is_err()
        {
            return false;
        }
        let mut answer = [0u8; 7];
        stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The one image the fake OpenAI returns for every request.
fn image() -> Vec<u8> {
    png(64, 1)
}

fn async_body(prompt: &str) -> Value {
    json!({"model": "gpt-image-2", "prompt": prompt, "async": true, "response_format": "b64_json"})
}

/// A 503 in the Error object shape, code `store_unavailable`.
fn assert_store_unavailable(resp: &client::Response, what: &str) {
    assert_eq!(resp.status, 503, "{what}: {}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "store_unavailable", "{what}: {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: no message: {body}"
    );
}

/// A finished task that succeeded with the fake's image as base64.
fn assert_succeeded_with_image(gw: &TestGateway, id: &str) {
    let done = finished(gw, id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(done["task_id"], id);
    assert_eq!(done["data"][0]["b64_json"], b64(&image()), "{done}");
}

#[test]
fn async_fails_fast_while_redis_is_down_sync_keeps_working_and_the_gateway_recovers_by_itself() {
    // Restarted below on the same port, which no other test's socket may take meanwhile.
    let mut redis_server = RedisServer::start(support::free_port());
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&image())}]}),
    ));
    let gw = redis::gateway_at(&fake, &redis_server.url(), &redis::run_prefix(), 300);

    // (1) Redis up: an async task completes, and a sync `url` answer is hosted and served.
    let first = start(&gw, async_body("before"));
    assert_succeeded_with_image(&gw, &first);
    let resp = post(
        &gw,
        GENERATIONS,
        &json!({"model": "gpt-image-2", "prompt": "hosted", "response_format": "url"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let url = resp.json()["data"][0]["url"].as_str().unwrap().to_string();
    let file = get_hosted(&gw, &url);
    assert_eq!(file.status, 200, "{}", file.text());
    assert_eq!(file.body, image());
    assert_eq!(fake.requests().len(), 2);

    // (2) Redis killed mid-run.
    redis_server.kill();
    assert!(!redis_server.answers_ping(), "redis-server still answers");

    // An async request fails fast, in the Error object shape, and reaches no provider.
    let before = fake.requests().len();
    let started = Instant::now();
    let resp = post(&gw, GENERATIONS, &async_body("while down"));
    let took = started.elapsed();
    assert_store_unavailable(&resp, "async request without Redis");
    assert!(took < Duration::from_secs(2), "async 503 took {took:?}");
    assert_eq!(
        fake.requests().len(),
        before,
        "an async request that could not be recorded reached the provider"
    );

    // A sync base64 request does not need Redis.
    let resp = post(
        &gw,
        GENERATIONS,
        &json!({"model": "gpt-image-2", "prompt": "sync while down", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"][0]["b64_json"], b64(&image()));
    assert_eq!(fake.requests().len(), before + 1);

    // Reading a task answers the same 503 (Redis may know it: not a 404), and fast.
    let started = Instant::now();
    let resp = task(&gw, &first, KEY);
    let took = started.elapsed();
    assert_store_unavailable(&resp, "reading a task without Redis");
    assert!(took < Duration::from_secs(2), "task read 503 took {took:?}");

    // So does the hosted link from before: the store may hold it.
    assert_store_unavailable(&get_hosted(&gw, &url), "a hosted link without Redis");

    // (3) Redis back on the same port, empty; the gateway is not restarted.
    redis_server.restart();
    let before = fake.requests().len();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut failures = 0u32;
    let id = loop {
        let resp = post(&gw, GENERATIONS, &async_body("after"));
        if resp.status == 200 {
            let out = resp.json();
            assert_eq!(out["task_status"], "running", "{out}");
            break out["task_id"].as_str().unwrap().to_string();
        }
        assert_store_unavailable(&resp, "async request after Redis returned");
        failures += 1;
        assert!(
            Instant::now() < deadline,
            "the gateway did not recover within 10 s of Redis returning ({failures} failed tries)"
        );
        std::thread::park_timeout(Duration::from_millis(50));
    };
    assert_succeeded_with_image(&gw, &id);
    // Only the accepted task reached the provider; the refused tries (if any) did not.
    assert_eq!(fake.requests().len(), before + 1, "{failures} failed tries");
    // The restarted Redis is empty: the task from before is gone, and says so plainly.
    let resp = task(&gw, &first, KEY);
    assert_eq!(resp.status, 404, "{}", resp.text());
    assert_eq!(resp.json()["code"], "not_found");
}
