//! Approximate limits (`auth.limits_mode: approximate`) over real sockets: two gateways on one
//! Redis share a request budget within the stated bound and, once reconciled, both refuse; with
//! Redis down they go on counting locally (`open`, each failed reconciliation counted in
//! `switchyard_store_errors_total{during="limits"}`) or refuse (`closed`). The bound under
//! concurrent load, three instances at once, is tested in `src/limits/approx_tests.rs`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::limits::{early_in_a_minute, limited, rerank, LIMITED};
use crate::support::client;
use crate::support::fake::FakeProvider;
use crate::support::{free_port, redis, TestGateway};

/// `auth:` lines for the approximate mode, reconciling every 20 ms.
const APPROXIMATE: &str = "    limits_mode: approximate\n    limits_sync_ms: 20\n";

/// A `429` by the limit itself (`Retry-After` past 1 s), not by an instance's share for now.
fn refused_for_good(resp: &client::Response) -> bool {
    resp.status == 429
        && resp
            .header("retry-after")
            .and_then(|r| r.parse::<u64>().ok())
            .is_some_and(|r| r > 1)
}

#[test]
fn two_gateways_share_a_budget_within_the_bound_and_both_refuse_once_reconciled() {
    let fake = FakeProvider::start();
    let (prefix, url) = (redis::run_prefix(), redis::redis_url());
    // 40 a minute; each instance's share is 10% of it: 4.
    let make = |ports| {
        limited(
            &fake,
            ports,
            "{requests_per_minute: 40}",
            Some((&url, &prefix)),
            APPROXIMATE,
        )
    };
    let (a, b) = (TestGateway::start_with(make), TestGateway::start_with(make));
    early_in_a_minute();
    let mut admitted = 0;
    let mut done = [false, false];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done.iter().all(|d| *d) {
        assert!(
            Instant::now() < deadline,
            "never refused: {admitted} admitted"
        );
        for (i, gw) in [&a, &b].into_iter().enumerate() {
            let resp = rerank(gw.addr, LIMITED);
            match resp.status {
                200 => admitted += 1,
                _ if refused_for_good(&resp) => done[i] = true,
                // This instance's share is spent until its reconciliation lands.
                429 => assert_eq!(resp.header("retry-after"), Some("1")),
                _ => panic!("{}", resp.text()),
            }
        }
    }
    assert!(
        (40..=40 + 2 * 4).contains(&admitted),
        "{admitted} admitted of 40 (+8)"
    );
    // Reconciled: both refuse, by the limit.
    for gw in [&a, &b] {
        let resp = rerank(gw.addr, LIMITED);
        assert!(refused_for_good(&resp), "{}", resp.text());
    }
}

#[cfg(feature = "metrics")]
fn store_errors(metrics: SocketAddr) -> u64 {
    let scrape = client::request(metrics, "GET", "/metrics", &[], b"").text();
    scrape
        .lines()
        .find_map(|l| l.strip_prefix("switchyard_store_errors_total{during=\"limits\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(feature = "metrics")]
#[test]
fn with_redis_down_open_counts_locally_and_counts_failed_reconciliations() {
    let fake = FakeProvider::start();
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let prefix = redis::run_prefix();
    let metrics_port = free_port();
    let gw = TestGateway::start_with(|ports| {
        limited(
            &fake,
            ports,
            "{requests_per_minute: 3}",
            Some((&dead, &prefix)),
            APPROXIMATE,
        )
        .replace(
            "switchyard:\n",
            &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics_port}\"}}\n"),
        )
    });
    early_in_a_minute();
    let metrics: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    crate::support::wait_listening(metrics);
    // Let the first reconciliation fail, so that this instance counts the whole quota itself.
    let first = rerank(gw.addr, LIMITED);
    assert_eq!(first.status, 200, "{}", first.text());
    let deadline = Instant::now() + Duration::from_secs(10);
    while store_errors(metrics) == 0 {
        assert!(
            Instant::now() < deadline,
            "no failed reconciliation counted"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..2 {
        let resp = rerank(gw.addr, LIMITED);
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    // Still limited, from its own counts: the fourth is refused by the limit.
    let resp = rerank(gw.addr, LIMITED);
    assert!(refused_for_good(&resp), "{}", resp.text());
    // Every failed reconciliation is counted, not once per request: more come while it lasts.
    let seen = store_errors(metrics);
    while store_errors(metrics) <= seen {
        assert!(
            Instant::now() < deadline,
            "failed reconciliations stopped being counted"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn with_redis_down_closed_refuses_once_a_reconciliation_failed() {
    let fake = FakeProvider::start();
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let prefix = redis::run_prefix();
    let extra = format!("{APPROXIMATE}    limits_on_store_error: closed\n");
    let gw = TestGateway::start_with(|ports| {
        limited(
            &fake,
            ports,
            "{requests_per_minute: 1000}",
            Some((&dead, &prefix)),
            &extra,
        )
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let resp = rerank(gw.addr, LIMITED);
        if resp.status != 200 {
            break resp;
        }
        assert!(Instant::now() < deadline, "never refused");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.json()["code"], "store_unavailable");
    // A key without limits never needs the store.
    assert_eq!(rerank(gw.addr, crate::support::KEY).status, 200);
}
