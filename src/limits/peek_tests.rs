//! `peek`, tested on each backend: it shows what admissions and charges counted, in the current
//! windows and slots, and reading it — however often — counts nothing and takes no slot: a
//! caller whose `requests_per_minute` and `concurrent` have exactly one left still gets its
//! request in after many peeks. In Redis (exact and approximate modes) on the test Redis
//! (`SWITCHYARD_TEST_REDIS_URL`, default `redis://127.0.0.1:6379`) under a prefix of its own.

use super::peek::Peek;
use super::{Limiter, Meter};
use crate::auth::limits::{LimitSet, OnStoreError};
use crate::caps::lifecycle::Clock;
use crate::metrics::Metrics;
use crate::money::Amount;

const OPEN: OnStoreError = OnStoreError::Open;

/// A clock standing at the current second (Redis expires a slot set by the limiter's clock, so it
/// must not stand in the past).
fn clock() -> Clock {
    Clock::manual(Clock::System.now())
}

fn set() -> LimitSet {
    serde_yaml::from_str(
        "{requests_per_minute: 3, concurrent: 2, characters_per_day: 1000, \
         budget: {currency: USD, per_day: \"5\"}}",
    )
    .unwrap()
}

/// Each window's name, used and end; the slots' quota and use.
type Summary = (Vec<(&'static str, u64, u64)>, Option<(u64, u64)>);

/// A peek's [`Summary`].
fn summary(p: &Peek) -> Summary {
    let w = p
        .windows
        .iter()
        .map(|r| (r.limit.name, r.used, r.resets_at))
        .collect();
    (w, p.concurrent)
}

/// The same story on every backend: two admissions (one slot kept), one charge, many peeks,
/// then the last request and slot still fit.
async fn peeks_count_nothing(limits: &Limiter, settle: impl AsyncFn(&Limiter, &Peek) -> Peek) {
    let set = set();
    let now = u64::try_from(limits.clock.now()).unwrap();
    let (minute_end, day_end) = ((now / 60 + 1) * 60, (now / 86_400 + 1) * 86_400);
    let first = limits
        .admit("key:a", &set, Meter::Characters, None, OPEN)
        .await
        .unwrap();
    let second = limits
        .admit("key:a", &set, Meter::Characters, None, OPEN)
        .await
        .unwrap();
    limits
        .charge(
            "key:a",
            &set,
            (Meter::Characters, 120),
            Amount::parse("1.25"),
            second,
            false,
        )
        .await;
    let want = (
        vec![
            ("requests_per_minute", 2, minute_end),
            ("characters_per_day", 120, day_end),
            ("budget_per_day", 1_250_000_000, day_end),
        ],
        Some((2, 1)),
    );
    let seen = limits.peek("key:a", &set).await.unwrap();
    let seen = settle(limits, &seen).await;
    assert_eq!(summary(&seen), want);
    for _ in 0..20 {
        assert_eq!(summary(&limits.peek("key:a", &set).await.unwrap()), want);
    }
    // Another caller: nothing, and not made a caller of by being read.
    let other = limits.peek("key:b", &set).await.unwrap();
    assert!(other.windows.iter().all(|r| r.used == 0), "{other:?}");
    assert_eq!(other.concurrent, Some((2, 0)));
    // The third request of the minute and the second slot are still there.
    let third = limits
        .admit("key:a", &set, Meter::Characters, None, OPEN)
        .await
        .unwrap();
    assert!(third.is_some());
    drop((first, third));
}

#[tokio::test]
async fn in_memory() {
    let limits = Limiter::new(None, Metrics::off(), clock());
    peeks_count_nothing(&limits, async |_, p| p.clone()).await;
    // A caller without any limit set reads as none.
    let none = limits.peek("key:a", &LimitSet::default()).await.unwrap();
    assert_eq!(none, Peek::default());
}

#[cfg(feature = "redis")]
fn conn() -> crate::store::redis_conn::RedisConn {
    use crate::store::redis_conn::{RedisConn, RedisSettings};
    let url = std::env::var("SWITCHYARD_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut settings = RedisSettings::new(url);
    settings.key_prefix = format!("switchyard-test:{}:", uuid::Uuid::new_v4());
    RedisConn::new(&settings).unwrap()
}

/// Peek until the charge, sent off the request's path, shows (it is owed until the worker's next
/// pass, or the approximate mode's next reconciliation).
#[cfg(feature = "redis")]
async fn charged(limits: &Limiter, seen: &Peek) -> Peek {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = seen.clone();
    while seen.windows.iter().any(|r| r.used == 0) {
        assert!(std::time::Instant::now() < deadline, "{seen:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        seen = limits.peek("key:a", &set()).await.unwrap();
    }
    seen
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn in_redis() {
    let limits = Limiter::new(Some(&conn()), Metrics::off(), clock());
    peeks_count_nothing(&limits, charged).await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn in_the_approximate_mode_with_what_another_instance_counted() {
    use crate::auth::limits::Approximate;
    let conn = conn();
    let mode = Some(Approximate {
        sync: std::time::Duration::from_millis(20),
        share_percent: 100,
    });
    let limits = Limiter::with_mode(Some(&conn), Metrics::off(), clock(), mode);
    peeks_count_nothing(&limits, charged).await;
    // Another instance on the same Redis sees this one's counts once they are reconciled.
    let other = Limiter::with_mode(Some(&conn), Metrics::off(), clock(), mode);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let seen = other.peek("key:a", &set()).await.unwrap();
        let requests = seen.windows.first().map_or(0, |r| r.used);
        if requests == 3 && seen.concurrent == Some((2, 0)) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{seen:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
