//! Asynchronous image tasks from the caller's side: start one (`async: true`), read it
//! (`GET /api/v1/images/{task_id}`), and poll it until it is finished.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{client, post, TestGateway, KEY};

/// `GET /api/v1/images/{id}` as the holder of `key`.
pub fn task(gw: &TestGateway, id: &str, key: &str) -> client::Response {
    client::request(
        gw.addr,
        "GET",
        &format!("/api/v1/images/{id}"),
        &[("Service-API-Key", key)],
        b"",
    )
}

/// Poll the task until it is finished (a condition with a deadline, not a fixed wait); on the
/// way it must only ever be `pending` or `running`.
pub fn finished(gw: &TestGateway, id: &str) -> Value {
    finished_within(gw, id, Duration::from_secs(10))
}

/// [`finished`] with its own deadline.
pub fn finished_within(gw: &TestGateway, id: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let resp = task(gw, id, KEY);
        assert_eq!(resp.status, 200, "{}", resp.text());
        let body = resp.json();
        if body["task_status"] == "succeed" || body["task_status"] == "failed" {
            return body;
        }
        assert!(
            body["task_status"] == "running" || body["task_status"] == "pending",
            "{body}"
        );
        assert!(
            Instant::now() < deadline,
            "task {id} never finished: {body}"
        );
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

/// Start an asynchronous generation (`body` must carry `"async": true`) and return its task id,
/// checking the immediate answer's shape.
pub fn start(gw: &TestGateway, body: Value) -> String {
    let resp = post(gw, "/api/v1/images/generations", &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["task_status"], "running");
    assert_eq!(out["data"], json!([]));
    assert!(out["created"].as_i64().unwrap() > 0);
    let id = out["task_id"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok());
    id
}
