//! The approximate mode's bound, tested: three limiters (three instances) on one real Redis
//! under concurrent load admit no more than `quota + 3 × share` of a window, count every
//! admission once in Redis, and after a reconciliation every one of them refuses once the
//! window is spent; the same for a money budget and for `concurrent` slots. And a reconciling
//! task lost with its runtime is replaced.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::approx::share;
use super::{Backend, Known, Lease, Limiter};
use crate::auth::limits::{Approximate, LimitSet, Meter, OnStoreError};
use crate::caps::lifecycle::{Clock, Date};
use crate::common::error::GatewayError;
use crate::metrics::Metrics;
use crate::money::Amount;
use crate::store::redis_conn::{RedisConn, RedisSettings};

const OPEN: OnStoreError = OnStoreError::Open;
const SHARE: u64 = 10;

/// `n` approximate limiters, each with its own connection, on the test Redis under one prefix
/// of their own (`SWITCHYARD_TEST_REDIS_URL`, default `redis://127.0.0.1:6379`), their windows
/// read from one hand-set clock 5 s into a UTC minute; and one more connection to look.
fn instances(n: usize) -> (Vec<Arc<Limiter>>, RedisConn) {
    let url = std::env::var("SWITCHYARD_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut settings = RedisSettings::new(url);
    settings.key_prefix = format!("switchyard-test:{}:", uuid::Uuid::new_v4());
    let clock = Clock::manual(Date::parse("2026-12-02").map_or(0, |d| d.unix()) + 5);
    let mode = Approximate {
        sync: Duration::from_millis(20),
        share_percent: SHARE,
    };
    let limiters = (0..n)
        .map(|_| {
            let conn = RedisConn::new(&settings).unwrap();
            Arc::new(Limiter::with_mode(
                Some(&conn),
                Metrics::off(),
                clock.clone(),
                Some(mode),
            ))
        })
        .collect();
    (limiters, RedisConn::new(&settings).unwrap())
}

fn syncs(l: &Limiter) -> usize {
    match &l.backend {
        Backend::Approx(c) => c.shared.syncs.load(Ordering::Relaxed),
        _ => panic!("not approximate"),
    }
}

/// Wait until every limiter has reconciled twice more (once with all it had, once more to read
/// the others' last).
async fn reconciled(limiters: &[Arc<Limiter>]) {
    let before: Vec<usize> = limiters.iter().map(|l| syncs(l)).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while limiters.iter().zip(&before).any(|(l, b)| syncs(l) < b + 2) {
        assert!(Instant::now() < deadline, "no reconciliation within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// What a refusal was: by the limit itself (`Retry-After` past 1 s), or by this instance's
/// share for now (1 s).
fn refused_for_good(r: &Result<Option<Lease>, GatewayError>) -> Option<bool> {
    match r {
        Ok(_) => None,
        Err(GatewayError::RateLimited(r)) => Some(r.retry_after > 1),
        Err(e) => panic!("{e:?}"),
    }
}

async fn total(conn: &RedisConn, pattern: &str) -> u64 {
    let pattern = format!("{{{}{pattern}", conn.key_prefix());
    let keys: Vec<String> = conn
        .run(|mut c| {
            let p = pattern.clone();
            async move { redis::cmd("KEYS").arg(p).query_async(&mut c).await }
        })
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    conn.run(|mut c| {
        let k = keys[0].clone();
        async move { redis::cmd("GET").arg(k).query_async(&mut c).await }
    })
    .await
    .unwrap()
}

/// Eight callers' threads per instance admit until each is refused by the limit itself.
async fn load(limiters: &[Arc<Limiter>], set: &LimitSet, known: Option<Known>) -> u64 {
    let admitted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for l in limiters {
        for _ in 0..8 {
            let (l, set, admitted) = (l.clone(), set.clone(), admitted.clone());
            tasks.push(tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(20);
                loop {
                    assert!(Instant::now() < deadline, "never refused for good");
                    let r = l.admit("key:a", &set, Meter::Characters, known, OPEN).await;
                    match refused_for_good(&r) {
                        Some(true) => return,
                        Some(false) => tokio::task::yield_now().await,
                        None => {
                            admitted.fetch_add(1, Ordering::Relaxed);
                            let cost = known.and_then(|k| k.cost);
                            let used = (Meter::Characters, 1);
                            l.charge("key:a", &set, used, cost, r.ok().flatten(), false)
                                .await;
                            tokio::task::yield_now().await;
                        }
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    admitted.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_admit_at_most_the_quota_and_three_shares_then_all_refuse() {
    let (limiters, conn) = instances(3);
    let quota = 600;
    let set: LimitSet = serde_yaml::from_str(&format!("{{requests_per_minute: {quota}}}")).unwrap();
    let admitted = load(&limiters, &set, None).await;
    let bound = 3 * share(quota, SHARE);
    assert!(
        admitted >= quota && admitted <= quota + bound,
        "{admitted} admitted of {quota} (+{bound})"
    );
    // Every admission reaches Redis, once.
    reconciled(&limiters).await;
    assert_eq!(
        total(&conn, "limits:key:a}:requests_per_minute:*").await,
        admitted
    );
    // Reconciled: every instance refuses, by the limit (not a share), and admits nothing more.
    for l in &limiters {
        let r = l.admit("key:a", &set, Meter::Characters, None, OPEN).await;
        assert_eq!(refused_for_good(&r), Some(true));
    }
    reconciled(&limiters).await;
    assert_eq!(
        total(&conn, "limits:key:a}:requests_per_minute:*").await,
        admitted
    );
}

/// A small quota's share is one request: back-to-back requests past it wait for the
/// reconciliation they ask for and are admitted, not refused while the quota has room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_share_wait_for_a_reconciliation_rather_than_being_refused() {
    let (limiters, conn) = instances(1);
    let quota = 10;
    assert_eq!(share(quota, SHARE), 1);
    let set: LimitSet = serde_yaml::from_str(&format!("{{requests_per_minute: {quota}}}")).unwrap();
    for i in 0..quota {
        let r = limiters[0]
            .admit("key:a", &set, Meter::Characters, None, OPEN)
            .await;
        assert!(r.is_ok(), "request {i} of {quota} refused: {:?}", r.err());
    }
    let r = limiters[0]
        .admit("key:a", &set, Meter::Characters, None, OPEN)
        .await;
    assert_eq!(refused_for_good(&r), Some(true));
    reconciled(&limiters).await;
    assert_eq!(
        total(&conn, "limits:key:a}:requests_per_minute:*").await,
        quota
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_spend_a_money_budget_within_the_bound() {
    let (limiters, conn) = instances(3);
    // $3 a day, $0.01 a request, known up front and charged at the end: 300 requests.
    let set: LimitSet = serde_yaml::from_str("budget: {currency: USD, per_day: \"3\"}").unwrap();
    let cost = Amount::parse("0.01").unwrap();
    let known = Known {
        used: 1,
        cost: Some(cost),
    };
    let admitted = load(&limiters, &set, Some(known)).await;
    // The bound in requests: three shares ($0.30 each), and what was in flight when the budget
    // ran out (each of the 24 tasks' one request, checked but not yet charged).
    let per_share = share(3_000_000_000, SHARE) / cost.nanos();
    let bound = 3 * per_share + 24;
    assert!(
        (299..=300 + bound).contains(&admitted),
        "{admitted} admitted of 300 (+{bound})"
    );
    reconciled(&limiters).await;
    let spent = total(&conn, "limits:key:a}:budget_per_day:*").await;
    assert_eq!(spent, admitted * cost.nanos());
    for l in &limiters {
        let r = l
            .admit("key:a", &set, Meter::Characters, Some(known), OPEN)
            .await;
        assert_eq!(refused_for_good(&r), Some(true));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_hold_at_most_the_slots_and_three_shares() {
    let (limiters, _conn) = instances(3);
    let quota = 60;
    let set: LimitSet = serde_yaml::from_str(&format!("{{concurrent: {quota}}}")).unwrap();
    // Every instance takes slots, side by side, until refused by the limit; all are held.
    let mut held = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut full = [false; 3];
    while !full.iter().all(|f| *f) {
        assert!(Instant::now() < deadline, "never full");
        let tries = limiters
            .iter()
            .map(|l| l.admit("key:a", &set, Meter::Tokens, None, OPEN));
        for (i, r) in futures_util::future::join_all(tries)
            .await
            .into_iter()
            .enumerate()
        {
            match r {
                Ok(lease) => held.push(lease),
                Err(GatewayError::RateLimited(r)) if r.retry_after == 1 && r.remaining == 0 => {
                    full[i] = true
                }
                Err(GatewayError::RateLimited(_)) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let bound = 3 * share(quota, SHARE);
    let taken = held.len() as u64;
    assert!(
        taken >= quota && taken <= quota + bound,
        "{taken} slots of {quota} (+{bound})"
    );
    // Given back: once reconciled, every instance has slots again.
    held.clear();
    reconciled(&limiters).await;
    for l in &limiters {
        let r = l.admit("key:a", &set, Meter::Tokens, None, OPEN).await;
        assert!(matches!(r, Ok(Some(_))), "{:?}", r.map(|l| l.is_some()));
    }
}

#[test]
fn a_reconciling_task_whose_runtime_is_gone_is_replaced() {
    let (limiters, _conn) = instances(1);
    let set: LimitSet = serde_yaml::from_str("{requests_per_minute: 1000}").unwrap();
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let first = runtime();
    first.block_on(async {
        let l = &limiters[0];
        assert!(l
            .admit("key:a", &set, Meter::Tokens, None, OPEN)
            .await
            .is_ok());
        reconciled(&limiters).await;
    });
    // The task is gone with its runtime; the next checks, on another, start one again.
    drop(first);
    runtime().block_on(async {
        let l = &limiters[0];
        let before = syncs(l);
        let deadline = Instant::now() + Duration::from_secs(15);
        while syncs(l) == before {
            assert!(Instant::now() < deadline, "no reconciliation since");
            // Its share runs out meanwhile (nothing reconciles it): refused for now, not lost.
            let r = l.admit("key:a", &set, Meter::Tokens, None, OPEN).await;
            assert_ne!(refused_for_good(&r), Some(true));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}
