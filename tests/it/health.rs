//! Health-aware routing: weights spread first attempts; a target that keeps failing is ejected
//! (requests go to the other and it receives nothing), probed after its cooldown and given
//! traffic again once healthy; a key the provider rejects is ejected at once and logged once;
//! an ejection (and a retirement: a provider saying the model is gone) made through one instance
//! is honoured by another on the same Redis; `/metrics` shows it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::logs::Binary;
use crate::support::fake::{FakeProvider, Reply};
use crate::support::{self, client, free_port, wait_listening, TestGateway};

fn ok() -> Reply {
    Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    )
}

fn down() -> Reply {
    Reply::json(500, json!({"message": "internal error"}))
}

/// The standard config plus two Cohere accounts (`acct-a` at `a`, `acct-b` at `b`), a model
/// `pool` over them with weights `wa`:`wb`, `routing.ejection` as `ejection`, a metrics listener
/// on `metrics` and `extra` lines in the `switchyard:` section.
fn config(
    ports: (u16, u16),
    a: &FakeProvider,
    b: &FakeProvider,
    (wa, wb): (u32, u32),
    ejection: &str,
    metrics: u16,
    extra: &str,
) -> String {
    let timeouts = "timeouts: {connect_ms: 500, total_connect_ms: 1000, read_ms: 1500}";
    support::config(&a.base_url(), ports)
        .replacen(
            "switchyard:\n",
            &format!(
                "switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics}\"}}\n  routing: {{ejection: {ejection}}}\n{extra}"
            ),
            1,
        )
        .replacen(
            "    disabled:\n",
            &format!(
                "    acct-a: {{kind: cohere, api_key: \"key-a\", base_url: \"{}\", {timeouts}}}\n    \
                 acct-b: {{kind: cohere, api_key: \"key-b\", base_url: \"{}\", {timeouts}}}\n    disabled:\n",
                a.base_url(),
                b.base_url()
            ),
            1,
        )
        .replacen(
            "  models:\n",
            &format!(
                "  models:\n    pool: {{family: cohere-rerank, targets: [{{provider: acct-a, model: ra, weight: {wa}}}, {{provider: acct-b, model: rb, weight: {wb}}}]}}\n"
            ),
            1,
        )
}

fn rerank(addr: SocketAddr, retries: u32) -> client::Response {
    client::post_json(
        addr,
        "/api/v1/rerank",
        &support::auth(),
        &json!({"model": "pool", "query": "q", "documents": ["a"], "retries": retries}),
    )
}

/// The value of the series `name{labels}` in a scrape of `metrics` (labels as Prometheus writes
/// them, sorted), if it is there.
fn metric(metrics: SocketAddr, series: &str) -> Option<f64> {
    let resp = client::request(metrics, "GET", "/metrics", &[], b"");
    assert_eq!(resp.status, 200);
    resp.text().lines().find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

const EJECTED_A: &str = "switchyard_target_ejected{native_model=\"ra\",provider=\"acct-a\"}";
const EJECTIONS_A: &str =
    "switchyard_targets_ejected_total{native_model=\"ra\",provider=\"acct-a\"}";

/// Poll `done` every 20 ms until it holds; fails the test after `limit`.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

#[test]
fn weights_spread_first_attempts() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(ok());
    b.set_default(ok());
    let m = free_port();
    let gw = TestGateway::start_with(|ports| config(ports, &a, &b, (3, 1), "{}", m, ""));
    for _ in 0..200 {
        assert_eq!(rerank(gw.addr, 0).status, 200);
    }
    // The schedule is deterministic (smooth weighted round robin over a 4-slot cycle), so with
    // every attempt succeeding the split is exact.
    assert_eq!((a.requests().len(), b.requests().len()), (150, 50));
    assert!(a.requests().iter().all(|r| r.json()["model"] == "ra"));
    assert!(b
        .requests()
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer key-b")));
}

#[test]
fn a_standby_target_serves_only_while_the_others_are_ejected() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(ok());
    b.set_default(ok());
    let m = free_port();
    let ejection = "{consecutive_failures: 2, base_cooldown_ms: 60000, max_cooldown_ms: 60000}";
    let gw = TestGateway::start_with(|ports| config(ports, &a, &b, (1, 0), ejection, m, ""));
    for _ in 0..10 {
        assert_eq!(rerank(gw.addr, 0).status, 200);
    }
    assert_eq!((a.requests().len(), b.requests().len()), (10, 0));
    a.set_default(down());
    // Two failures (the retry of each goes to the standby), then a is ejected.
    for _ in 0..2 {
        assert_eq!(rerank(gw.addr, 1).status, 200);
    }
    for _ in 0..10 {
        assert_eq!(rerank(gw.addr, 0).status, 200);
    }
    assert_eq!((a.requests().len(), b.requests().len()), (12, 12));
}

#[test]
fn a_failing_target_is_ejected_probed_and_taken_back() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(down());
    b.set_default(ok());
    let m = free_port();
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    let ejection = "{consecutive_failures: 3, base_cooldown_ms: 4000, max_cooldown_ms: 60000}";
    let gw = TestGateway::start_with(|ports| config(ports, &a, &b, (1, 1), ejection, m, ""));
    wait_listening(metrics);
    // Every request succeeds (its retry moves to b) until a has failed three times in a row.
    let mut sent = 0;
    while a.requests().len() < 3 {
        assert_eq!(rerank(gw.addr, 1).status, 200);
        sent += 1;
        assert!(sent < 20, "a never received three requests");
    }
    assert_eq!(metric(metrics, EJECTED_A), Some(1.0));
    assert_eq!(metric(metrics, EJECTIONS_A), Some(1.0));
    // Ejected: nothing reaches a, and nobody waits for it.
    let b_before = b.requests().len();
    for _ in 0..10 {
        let resp = rerank(gw.addr, 1);
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    assert_eq!(a.requests().len(), 3, "an ejected target received requests");
    assert_eq!(b.requests().len(), b_before + 10);
    // Healthy again: after the cooldown one request probes it, and then it shares the traffic.
    a.set_default(ok());
    wait_for("the probe", Duration::from_secs(20), || {
        assert_eq!(rerank(gw.addr, 1).status, 200);
        a.requests().len() > 3
    });
    assert_eq!(metric(metrics, EJECTED_A), Some(0.0));
    let before = a.requests().len();
    for _ in 0..10 {
        assert_eq!(rerank(gw.addr, 0).status, 200);
    }
    assert_eq!(a.requests().len() - before, 5, "1:1 again after the probe");
}

#[test]
fn a_refused_port_is_ejected_and_no_longer_waited_for() {
    let (port, _reserved) = support::refused_port();
    let dead = FakeProvider::start();
    let b = FakeProvider::start();
    b.set_default(ok());
    let m = free_port();
    let ejection = "{consecutive_failures: 2, base_cooldown_ms: 60000, max_cooldown_ms: 60000}";
    let gw = TestGateway::start_with(|ports| {
        config(ports, &dead, &b, (1, 1), ejection, m, "").replacen(
            &format!("base_url: \"{}\"", dead.base_url()),
            &format!("base_url: \"http://127.0.0.1:{port}\""),
            // Every account at `dead` (the pool's acct-a among them) points at the refused port.
            usize::MAX,
        )
    });
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    wait_for("the ejection", Duration::from_secs(20), || {
        assert_eq!(rerank(gw.addr, 1).status, 200);
        metric(metrics, EJECTED_A) == Some(1.0)
    });
    let failures = |s: &str| {
        metric(
            metrics,
            &format!("switchyard_upstream_attempts_total{{native_model=\"ra\",outcome=\"{s}\",provider=\"acct-a\"}}"),
        )
    };
    let before = failures("connect");
    for _ in 0..10 {
        assert_eq!(rerank(gw.addr, 1).status, 200);
    }
    assert_eq!(
        failures("connect"),
        before,
        "attempts went to the ejected target"
    );
}

#[test]
fn a_rejected_key_is_ejected_at_once_and_logged_once() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(Reply::json(401, json!({"message": "invalid api token"})));
    b.set_default(ok());
    let m = free_port();
    let ejection = "{consecutive_failures: 5, base_cooldown_ms: 1000, max_cooldown_ms: 1000}";
    let gw = Binary::start(
        |port| config((port, free_port()), &a, &b, (1, 1), ejection, m, ""),
        "info",
    );
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    wait_listening(metrics);
    // The first request goes to a (the schedule starts there): one 401 ejects it, although
    // five failures in a row would be needed otherwise.
    assert_eq!(rerank(gw.addr, 1).status, 200);
    assert_eq!(a.requests().len(), 1);
    assert_eq!(metric(metrics, EJECTED_A), Some(1.0));
    // For a while longer than a few cooldowns: the key is probed again after each, and
    // rejected each time; the other requests go to b.
    let mut sent = 1;
    let deadline = Instant::now() + Duration::from_millis(3_500);
    while Instant::now() < deadline {
        let resp = rerank(gw.addr, 1);
        assert_eq!(resp.status, 200, "{}", resp.text());
        sent += 1;
    }
    let probes = a.requests().len();
    assert!(
        (2..=6).contains(&probes),
        "{probes} requests reached the rejected key"
    );
    assert!(sent > 2 * probes, "{sent} requests sent, {probes} to a");
    let text = gw.output_when("the key's rejection", |t| t.contains("rejects its API key"));
    let rejections: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("rejects its API key"))
        .collect();
    assert_eq!(rejections.len(), 1, "logged once: {rejections:#?}");
    assert!(rejections[0].contains("acct-a"));
    assert!(!text.contains("key-a"), "the key reached the log");
}

#[test]
fn an_ejection_through_one_instance_is_honoured_by_another() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(down());
    b.set_default(ok());
    let prefix = support::redis::run_prefix();
    let store = format!(
        "  store: {{redis_url: \"{}\", key_prefix: \"{prefix}\", timeout_ms: 2000}}\n",
        support::redis::redis_url()
    );
    let ejection = "{consecutive_failures: 2, base_cooldown_ms: 60000, max_cooldown_ms: 60000}";
    let (m1, m2) = (free_port(), free_port());
    let one = TestGateway::start_with(|p| config(p, &a, &b, (1, 1), ejection, m1, &store));
    let two = TestGateway::start_with(|p| config(p, &a, &b, (1, 1), ejection, m2, &store));
    let metrics_two: SocketAddr = format!("127.0.0.1:{m2}").parse().unwrap();
    wait_listening(metrics_two);
    while a.requests().len() < 2 {
        assert_eq!(rerank(one.addr, 1).status, 200);
    }
    wait_for(
        "the second instance to learn of it",
        Duration::from_secs(15),
        || metric(metrics_two, EJECTED_A) == Some(1.0),
    );
    let seen = a.requests().len();
    for _ in 0..10 {
        assert_eq!(rerank(two.addr, 1).status, 200);
    }
    assert_eq!(
        a.requests().len(),
        seen,
        "the other instance sent to the ejected target"
    );
    // Not counted as an ejection there: the first instance made it.
    assert_eq!(metric(metrics_two, EJECTIONS_A), None);
}

/// A target retired through one instance (its provider said the model is gone) is held out as
/// retired by another on the same Redis: that one serves the model's successor without asking
/// the dead target first.
#[test]
fn a_retirement_through_one_instance_is_honoured_by_another() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(Reply::json(
        404,
        json!({"message": "model 'ra' not found, make sure the correct model ID was used and that you have access to the model."}),
    ));
    b.set_default(ok());
    let prefix = support::redis::run_prefix();
    let store = format!(
        "  store: {{redis_url: \"{}\", key_prefix: \"{prefix}\", timeout_ms: 2000}}\n",
        support::redis::redis_url()
    );
    let models = "    gone: {family: cohere-rerank, successor: heir, targets: [{provider: acct-a, model: ra}]}\n\
                  \x20   heir: {family: cohere-rerank, targets: [{provider: acct-b, model: rb}]}\n";
    let (m1, m2) = (free_port(), free_port());
    let one = TestGateway::start_with(|p| config(p, &a, &b, (1, 1), "{}", m1, &store) + models);
    let two = TestGateway::start_with(|p| config(p, &a, &b, (1, 1), "{}", m2, &store) + models);
    let metrics_two: SocketAddr = format!("127.0.0.1:{m2}").parse().unwrap();
    wait_listening(metrics_two);
    let gone = |addr| {
        client::post_json(
            addr,
            "/api/v1/rerank",
            &support::auth(),
            &json!({"model": "gone", "query": "q", "documents": ["a"]}),
        )
    };
    let resp = gone(one.addr);
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("switchyard-served-model"), Some("heir"));
    assert_eq!(a.requests().len(), 1);
    let retired = "switchyard_target_retired{native_model=\"ra\",provider=\"acct-a\"}";
    wait_for(
        "the second instance to learn of it",
        Duration::from_secs(15),
        || metric(metrics_two, retired) == Some(1.0),
    );
    for _ in 0..3 {
        let resp = gone(two.addr);
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.header("switchyard-served-model"), Some("heir"));
    }
    assert_eq!(
        a.requests().len(),
        1,
        "the other instance asked the retired target"
    );
}

#[test]
fn requests_do_not_wait_for_a_target_ejected_for_timing_out() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    // Longer than acct-a's read timeout (1.5 s): every attempt at a times out.
    a.set_default(Reply::stall(Duration::from_secs(5)));
    b.set_default(ok());
    let m = free_port();
    let ejection = "{consecutive_failures: 2, base_cooldown_ms: 60000, max_cooldown_ms: 60000}";
    let gw = TestGateway::start_with(|ports| config(ports, &a, &b, (1, 1), ejection, m, ""));
    while a.requests().len() < 2 {
        assert_eq!(rerank(gw.addr, 1).status, 200);
    }
    let started = Instant::now();
    for _ in 0..5 {
        assert_eq!(rerank(gw.addr, 1).status, 200);
    }
    assert_eq!(a.requests().len(), 2, "an ejected target received requests");
    // One more timeout alone would have taken 1.5 s.
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1_500),
        "5 requests took {took:?}"
    );
}

#[test]
fn with_redis_down_targets_are_still_ejected_here() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(down());
    b.set_default(ok());
    let (port, _reserved) = support::refused_port();
    let store = format!(
        "  store: {{redis_url: \"redis://127.0.0.1:{port}\", key_prefix: \"{}\", timeout_ms: 200}}\n",
        support::redis::run_prefix()
    );
    let ejection = "{consecutive_failures: 2, base_cooldown_ms: 60000, max_cooldown_ms: 60000}";
    let m = free_port();
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    let gw = TestGateway::start_with(|p| config(p, &a, &b, (1, 1), ejection, m, &store));
    wait_listening(metrics);
    while a.requests().len() < 2 {
        assert_eq!(rerank(gw.addr, 1).status, 200);
    }
    for _ in 0..10 {
        assert_eq!(rerank(gw.addr, 1).status, 200);
    }
    assert_eq!(a.requests().len(), 2, "an ejected target received requests");
    assert_eq!(metric(metrics, EJECTED_A), Some(1.0));
    wait_for(
        "a failed exchange to be counted",
        Duration::from_secs(10),
        || {
            metric(metrics, "switchyard_store_errors_total{during=\"health\"}")
                .is_some_and(|n| n >= 1.0)
        },
    );
}

/// An account whose key the provider rejects is the operator's problem, not the caller's: with
/// no `retries` at all (the default, 0) the request moves on to the model's other account and is
/// served, and the rejected account is not tried again.
#[test]
fn a_rejected_key_moves_to_another_account_without_spending_retries() {
    let (a, b) = (FakeProvider::start(), FakeProvider::start());
    a.set_default(Reply::json(401, json!({"message": "invalid api token"})));
    b.set_default(ok());
    // `acct-b` is a standby (weight 0): the first attempt is certainly `acct-a`'s.
    let gw = TestGateway::start_with(|p| {
        config(
            p,
            &a,
            &b,
            (1, 0),
            "{consecutive_failures: 3}",
            free_port(),
            "",
        )
    });
    let resp = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &support::auth(),
        &json!({"model": "pool", "query": "q", "documents": ["a"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["results"][0]["index"], 0);
    assert_eq!(
        a.requests().len(),
        1,
        "the rejected account was tried again"
    );
    assert_eq!(b.requests().len(), 1);
    assert_eq!(
        b.requests()[0].header("authorization"),
        Some("Bearer key-b")
    );

    // Every account refused: then it is the operator's 502, still without a retry to spend.
    b.set_default(Reply::json(401, json!({"message": "invalid api token"})));
    let gw = TestGateway::start_with(|p| {
        config(
            p,
            &a,
            &b,
            (1, 1),
            "{consecutive_failures: 3}",
            free_port(),
            "",
        )
    });
    let resp = client::post_json(
        gw.addr,
        "/api/v1/rerank",
        &support::auth(),
        &json!({"model": "pool", "query": "q", "documents": ["a"]}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_auth_failed");
    assert_eq!(
        (a.requests().len(), b.requests().len()),
        (2, 2),
        "each tried once"
    );
}
