//! Per-caller limits (`auth.api_keys[].limits`, `auth.jwt.limits`): counting what a caller uses
//! and refusing what goes past its limits, with one budget shared by every instance on one Redis,
//! or per process without one.
//!
//! A request meets its limits once on its path, and its usage once more at its end:
//! - [`Limiter::admit`]: the request counts against `requests_per_minute`, takes one of its
//!   `concurrent` slots (a [`Lease`], given back when dropped — the gateway keeps it until the
//!   answer has been sent), and is refused if a usage budget of its operation is already spent;
//!   then, when its cost is known up front ([`Known`]: speech characters, images asked for, and
//!   what that is known to cost in money), that must fit in what is left. Both in one call. A
//!   rerank (whose usage is not known before it runs) is admitted after authentication, before
//!   its body is read; speech and images once their body is validated, so their known cost is
//!   checked with their admission (`gateway::limited` decides which);
//! - [`Limiter::charge`], when the answer is complete: what it actually used (rerank tokens from
//!   the answer's usage, characters spoken, images delivered) and what it cost are added to its
//!   windows, in one call. A request that ended before its admission (a speech or image request
//!   whose body was refused) is counted against `requests_per_minute` there instead.
//!
//! A refusal by the known cost leaves the counters as the two calls this once was (admission,
//! then the known cost) left them: the request counted against `requests_per_minute`, no slot
//! held, nothing else charged (`check::Check`).
//!
//! A money budget (`budget: {currency, per_day, per_month}`) is two more windowed counters
//! (`budget_per_day`, `budget_per_month`) in nano-units of its currency, under the same rules:
//! spent means refused at admission, a known cost must fit, the real cost is charged at the end.
//! The gateway converts costs into the budget's currency before they reach this module.
//!
//! Usage is charged after the fact, so requests running side by side each see the budget before
//! the others' usage: a window can overshoot by what the requests in flight at its end use. This
//! is the price of not knowing usage up front (rerank tokens); `concurrent` bounds it.
//!
//! With Redis the end-of-request charge is off the request's path and not a call of its own:
//! noted as owed as the answer goes out, and sent for all the requests of one caller that
//! finished together in one call, after one pass of the worker's scheduler — or inside the
//! caller's next admission on this instance, applied before that is checked (`Limiter::charge`).
//! The bound above is unchanged in kind: a request counts as in flight until its charge is
//! applied — that pass and one Redis round trip after its answer, at most the store's timeout
//! (`store.timeout_ms`) when Redis is slow, after which an unapplied charge is dropped and
//! counted as a store error. On the path a request meets Redis at most once: rerank
//! at its admission, speech and images at their admission with their known cost, once the body
//! is validated (a speech or image request whose body is refused meets it not at all on its
//! path).
//!
//! Each check is one call: with Redis, one Lua script (atomic, one round trip, bounded by the
//! store's timeout; `redis`), else the same rules on a mutex-guarded map ([`memory`]). In the
//! approximate mode (`auth.limits_mode: approximate`, with Redis) a check meets no Redis on the
//! request's path: it is decided from this instance's counts within its share of each limit
//! (`approx`, which states the bound: N instances admit at most `quota + N × share`), and one
//! task per limiter reconciles the counts with Redis every `auth.limits_sync_ms`, or early when a
//! caller's share runs low (`sync`). Without Redis the mode changes nothing. Windows
//! are fixed UTC minutes, days and calendar months ([`window`]), read from the limiter's clock
//! (the system's; a test's hand-set one). A caller without limits never reaches this module.

#[cfg(feature = "redis")]
mod approx;
#[cfg(feature = "redis")]
mod batch;
pub(crate) mod check;
#[cfg(feature = "redis")]
mod leases;
pub(crate) mod memory;
#[cfg(feature = "redis")]
mod owed;
// Read by `GET /api/v1/usage`, which needs the usage ledger.
#[cfg_attr(not(feature = "ledger"), allow(dead_code))]
pub(crate) mod peek;
#[cfg(feature = "redis")]
pub(crate) mod redis;
#[cfg(feature = "redis")]
mod sync;
pub(crate) mod window;

#[cfg(all(test, feature = "redis"))]
#[allow(clippy::unwrap_used, clippy::panic)]
mod approx_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod peek_tests;

use std::sync::Arc;

use crate::auth::limits::{Approximate, Limit, LimitSet, Meter, OnStoreError};
use crate::caps::lifecycle::Clock;
use crate::common::error::{GatewayError, LimitRefusal};
use crate::metrics::{self, Metrics};
use crate::money::Amount;
use crate::store::files::StoreError;
use crate::store::redis_conn::RedisConn;
use check::{Check, Counter, Outcome, RefusedBy};
use window::Now;

enum Backend {
    Memory(Arc<memory::Counts>),
    #[cfg(feature = "redis")]
    Redis(redis::Counts),
    /// `auth.limits_mode: approximate` with Redis: this instance's counts, reconciled off the
    /// request's path (`approx`, `sync`).
    #[cfg(feature = "redis")]
    Approx(approx::Counts),
}

/// The gateway's limit accounting. Runtime state: it lives in `GatewayState`, keyed by the
/// principal's id, so budgets and slots outlive a reload of the configuration.
pub(crate) struct Limiter {
    backend: Backend,
    metrics: Metrics,
    /// What time it is for windows: the system's, or a test's (`config::Loader::limits_clock`).
    clock: Clock,
}

/// What a request is known to use before it runs, checked with its admission
/// ([`Limiter::admit`]): `used` of its operation's meter (speech characters, images asked for)
/// and `cost` in money, already converted into the budget's currency (`None`: not known).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Known {
    pub(crate) used: u64,
    pub(crate) cost: Option<Amount>,
}

/// A concurrent slot, held until dropped (its backend's slot gives it back on drop).
pub(crate) struct Lease {
    _slot: LeaseInner,
}

enum LeaseInner {
    Memory {
        _slot: memory::Slot,
    },
    #[cfg(feature = "redis")]
    Redis {
        _slot: redis::Slot,
    },
    #[cfg(feature = "redis")]
    Approx {
        _slot: approx::Slot,
    },
}

impl Limiter {
    /// In Redis when `redis` is given (every instance on it shares the budgets), else in this
    /// process; windows read from `clock`.
    #[cfg(test)]
    pub(crate) fn new(redis: Option<&RedisConn>, metrics: Metrics, clock: Clock) -> Limiter {
        Limiter::with_mode(redis, metrics, clock, None)
    }

    /// [`Limiter::new`], approximate when `approximate` is given and Redis is (without Redis the
    /// mode changes nothing: every check is in this process already).
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub(crate) fn with_mode(
        redis: Option<&RedisConn>,
        metrics: Metrics,
        clock: Clock,
        approximate: Option<Approximate>,
    ) -> Limiter {
        let backend = match (redis, approximate) {
            #[cfg(feature = "redis")]
            (Some(conn), Some(a)) => Backend::Approx(approx::Counts::new(
                conn.clone(),
                metrics.clone(),
                clock.clone(),
                a,
            )),
            #[cfg(feature = "redis")]
            (Some(conn), None) => Backend::Redis(redis::Counts::new(conn.clone(), metrics.clone())),
            #[cfg(not(feature = "redis"))]
            (Some(conn), _) => match *conn {},
            (None, _) => Backend::Memory(Arc::new(memory::Counts::default())),
        };
        Limiter {
            backend,
            metrics,
            clock,
        }
    }

    fn now(&self) -> Now {
        Now::by(&self.clock)
    }

    /// A request of `scope` (the principal's id) with `set` starts: counts it against
    /// `requests_per_minute`, takes a `concurrent` slot, and refuses it when a budget of the
    /// operation's `meter`, or its money budget, is already spent. With `known`, what it is
    /// known to use before it runs must then fit in what is left of each window too — in the
    /// same call, and nothing of it charged ([`Limiter::charge`] charges what it really used
    /// and cost).
    pub(crate) async fn admit(
        &self,
        scope: &str,
        set: &LimitSet,
        meter: Meter,
        known: Option<Known>,
        on_error: OnStoreError,
    ) -> Result<Option<Lease>, GatewayError> {
        let now = self.now();
        let mut check = Check {
            slot: set.concurrent,
            ..Check::default()
        };
        check.counters.extend(
            set.limits_of(Meter::Requests)
                .map(|l| counter(now, l, 1, 1)),
        );
        // Spent means nothing left: 1 more would not fit. Every operation costs money, so a spent
        // money budget refuses them all. A request that meters nothing but itself (a host's
        // route behind `embed::AuthModule`, which costs nothing here) is counted once, above.
        if meter != Meter::Requests {
            check.counters.extend(
                set.limits_of(meter)
                    .chain(set.limits_of(Meter::Money))
                    .map(|l| counter(now, l, 1, 0)),
            );
        }
        if let Some(k) = known {
            check.known.extend(
                set.limits_of(meter)
                    .map(|l| counter(now, l, k.used.max(1), 0)),
            );
            if let Some(cost) = k.cost {
                check.known.extend(
                    set.limits_of(Meter::Money)
                        .map(|l| counter(now, l, cost.nanos().max(1), 0)),
                );
            }
        }
        if check.counters.is_empty() && check.slot.is_none() && check.known.is_empty() {
            return Ok(None);
        }
        let result = match &self.backend {
            Backend::Memory(counts) => Ok(counts.apply(scope, &check).map(|slot| {
                slot.map(|s| Lease {
                    _slot: LeaseInner::Memory { _slot: s },
                })
            })),
            #[cfg(feature = "redis")]
            Backend::Redis(counts) => counts.apply(scope, &check, now).await.map(|r| {
                r.map(|slot| {
                    slot.map(|s| Lease {
                        _slot: LeaseInner::Redis { _slot: s },
                    })
                })
            }),
            #[cfg(feature = "redis")]
            Backend::Approx(counts) => {
                // Out of touch with Redis: `closed` refuses (the failed reconciliations are
                // counted where they fail), `open` goes on with this instance's counts.
                if on_error == OnStoreError::Closed && counts.failing() {
                    return Err(GatewayError::Store(
                        "limits: the last reconciliation with Redis failed".into(),
                    ));
                }
                Ok(Self::admit_approx(counts, scope, &check).await)
            }
        };
        match result {
            Ok(Ok(lease)) => Ok(lease),
            Ok(Err(outcome)) => Err(self.refuse(scope, set, &check, outcome, now, known)),
            Err(e) => self.store_failed(e, on_error).map(|()| None),
        }
    }

    /// [`Limiter::admit`] in the approximate mode: from this instance's counts. A request the
    /// quota has room for but this instance's share has not waits for the reconciliation its check asked for (at most one
    /// interval and one store timeout) and is decided again, rather than refused while the quota
    /// has room: Redis meets a request's path only then.
    #[cfg(feature = "redis")]
    async fn admit_approx(
        counts: &approx::Counts,
        scope: &str,
        check: &Check,
    ) -> Result<Option<Lease>, Outcome> {
        sync::start(&counts.shared);
        let mut decided = counts.apply(scope, check);
        if matches!(decided, Err(Outcome::ShareSpent { .. })) {
            counts.reconciled().await;
            decided = counts.apply(scope, check);
        }
        decided.map(|slot| {
            slot.map(|s| Lease {
                _slot: LeaseInner::Approx { _slot: s },
            })
        })
    }

    /// What a finished request used: added to every window of `meter`, and what it cost
    /// (`cost`, in the budget's currency) to the money budget's. Its concurrent slot (`lease`),
    /// if any, is given back in the same Redis call. A request that ended before it was admitted
    /// (`unadmitted`: its admission waited for its body, which was refused) is counted against
    /// `requests_per_minute` here, where it fits, as its admission would have counted it. A
    /// store error is only counted and logged (the answer has been sent; there is nobody left to
    /// refuse).
    ///
    /// With Redis, the call does not wait for Redis: the charge and the slot are noted as owed
    /// and sent with what the requests finishing beside this one owe, one call per caller, once
    /// the worker has run the tasks ready now — or inside the caller's next admission on this
    /// instance if that comes first, applied before it is checked, so that request finds this
    /// charge applied and this slot free (`redis` module docs).
    pub(crate) async fn charge(
        &self,
        scope: &str,
        set: &LimitSet,
        (meter, used): (Meter, u64),
        cost: Option<Amount>,
        lease: Option<Lease>,
        unadmitted: bool,
    ) {
        let now = self.now();
        let money = cost.map_or(0, Amount::nanos);
        let mut counters = Vec::new();
        if unadmitted {
            // Need 1: a request its admission would have refused is not counted.
            counters.extend(
                set.limits_of(Meter::Requests)
                    .map(|l| counter(now, l, 1, 1)),
            );
        }
        if used > 0 {
            counters.extend(set.limits_of(meter).map(|l| counter(now, l, 0, used)));
        }
        if money > 0 {
            counters.extend(
                set.limits_of(Meter::Money)
                    .map(|l| counter(now, l, 0, money)),
            );
        }
        let check = Check {
            counters,
            ..Check::default()
        };
        let result = match (&self.backend, lease) {
            // Nothing to charge: a slot is given back as it drops.
            _ if check.counters.is_empty() => return,
            #[cfg(feature = "redis")]
            (Backend::Redis(counts), lease) => {
                let slot = match lease {
                    Some(Lease {
                        _slot: LeaseInner::Redis { _slot: slot },
                    }) => Some(slot),
                    _ => None,
                };
                counts.charge(scope, &check, slot);
                return;
            }
            #[cfg(feature = "redis")]
            (Backend::Approx(counts), lease) => {
                sync::start(&counts.shared);
                counts.charge(scope, &check);
                drop(lease);
                return;
            }
            // A memory slot is given back when dropped, after the charge.
            (_, lease) => {
                let charged = self.run(scope, &check, now).await;
                drop(lease);
                charged
            }
        };
        if let Err(e) = result {
            self.metrics.store_error("limits");
            log::warn!("limits: usage of a request not counted: {e}");
        }
    }

    /// A check without a slot.
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    async fn run(&self, scope: &str, check: &Check, now: Now) -> Result<Outcome, StoreError> {
        let result = match &self.backend {
            Backend::Memory(counts) => Ok(counts.apply(scope, check).map(|_| ())),
            #[cfg(feature = "redis")]
            Backend::Redis(counts) => counts.apply(scope, check, now).await.map(|r| r.map(|_| ())),
            #[cfg(feature = "redis")]
            Backend::Approx(counts) => {
                sync::start(&counts.shared);
                Ok(counts.apply(scope, check).map(|_| ()))
            }
        };
        result.map(|r| match r {
            Ok(()) => Outcome::Passed,
            Err(outcome) => outcome,
        })
    }

    fn refuse(
        &self,
        scope: &str,
        set: &LimitSet,
        check: &Check,
        outcome: Outcome,
        now: Now,
        known: Option<Known>,
    ) -> GatewayError {
        let (at, used, share_spent) = match outcome {
            Outcome::Refused { at, used } => (at, used, false),
            Outcome::ShareSpent { at, used } => (at, used, true),
            Outcome::Passed => {
                return GatewayError::Internal("limits: a passed check refused".into());
            }
        };
        let counted = |c: &Counter, cost: u64| {
            let money = c.limit.meter == Meter::Money;
            LimitRefusal {
                limit: c.limit.name,
                quota: c.limit.quota,
                window: Some(now.length(c.limit.window)),
                remaining: c.limit.quota.saturating_sub(used),
                // This instance's share is spent until its reconciliation lands (`approx`).
                retry_after: if share_spent {
                    1
                } else {
                    now.seconds_left(c.limit.window)
                },
                cost,
                currency: if money { set.budget_currency() } else { None },
            }
        };
        let refusal = match check.refused_by(at) {
            // Already spent: the refusal needs nothing of its own.
            Some(RefusedBy::Counter(c)) => counted(c, 0),
            Some(RefusedBy::Known(c)) => {
                let k = known.unwrap_or_default();
                let cost = if c.limit.meter == Meter::Money {
                    k.cost.map_or(0, Amount::nanos)
                } else {
                    k.used
                };
                counted(c, cost)
            }
            Some(RefusedBy::Slot) | None => {
                let quota = check.slot.unwrap_or(0);
                LimitRefusal {
                    limit: "concurrent",
                    quota,
                    window: None,
                    remaining: quota.saturating_sub(used),
                    retry_after: 1,
                    cost: 0,
                    currency: None,
                }
            }
        };
        self.metrics
            .rate_limited(metrics::key_label(scope), refusal.limit);
        GatewayError::RateLimited(refusal)
    }

    /// The store could not count a request: allowed (counted in the metrics) or refused,
    /// as `auth.limits_on_store_error` says.
    fn store_failed(&self, e: StoreError, on_error: OnStoreError) -> Result<(), GatewayError> {
        self.metrics.store_error("limits");
        match on_error {
            OnStoreError::Open => {
                log::warn!("limits: not counted, request allowed: {e}");
                Ok(())
            }
            OnStoreError::Closed => Err(GatewayError::Store(format!("limits: {e}"))),
        }
    }
}

fn counter(now: Now, limit: Limit, need: u64, add: u64) -> Counter {
    Counter {
        limit,
        window: now.window(limit.window),
        need,
        add,
        ttl: now.counter_ttl(limit.window),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::caps::lifecycle::Date;
    use crate::money::Currency;

    fn day(s: &str) -> i64 {
        Date::parse(s).unwrap().unix()
    }

    fn budget(yaml: &str) -> LimitSet {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn usd(s: &str) -> Amount {
        Amount::parse(s).unwrap()
    }

    fn refused(r: Result<(), GatewayError>) -> LimitRefusal {
        match r {
            Err(GatewayError::RateLimited(refusal)) => refusal,
            other => panic!("not refused: {other:?}"),
        }
    }

    const OPEN: OnStoreError = OnStoreError::Open;

    /// An admission with what it is known to use; its slot, if any, given back at once.
    async fn check_known(
        limits: &Limiter,
        scope: &str,
        set: &LimitSet,
        (meter, used): (Meter, u64),
        cost: Option<Amount>,
    ) -> Result<(), GatewayError> {
        limits
            .admit(scope, set, meter, Some(Known { used, cost }), OPEN)
            .await
            .map(|_| ())
    }
    const CHARS: (Meter, u64) = (Meter::Characters, 10);

    #[tokio::test]
    async fn a_days_budget_refuses_what_does_not_fit_and_resets_at_utc_midnight() {
        let clock = Clock::manual(day("2026-11-27") + 86_400 - 3_600);
        let limits = Limiter::new(None, Metrics::off(), clock.clone());
        let set = budget("budget: {currency: USD, per_day: \"1\"}");
        assert!(check_known(&limits, "a", &set, CHARS, Some(usd("1")))
            .await
            .is_ok());
        limits
            .charge("a", &set, CHARS, Some(usd("0.75")), None, false)
            .await;
        // 0.25 is left: 0.30 does not fit, and nothing was charged by the checks.
        let r = refused(check_known(&limits, "a", &set, CHARS, Some(usd("0.3"))).await);
        assert_eq!(
            (r.limit, r.quota, r.remaining, r.cost, r.retry_after),
            (
                "budget_per_day",
                1_000_000_000,
                250_000_000,
                300_000_000,
                3_600
            )
        );
        assert_eq!(r.currency, Currency::parse("USD"));
        assert!(check_known(&limits, "a", &set, CHARS, Some(usd("0.25")))
            .await
            .is_ok());
        // Another caller has its own budget.
        assert!(check_known(&limits, "b", &set, CHARS, Some(usd("1")))
            .await
            .is_ok());
        // Spent: every request is refused at admission, whatever its operation.
        limits
            .charge("a", &set, CHARS, Some(usd("0.25")), None, false)
            .await;
        let r = refused(
            limits
                .admit("a", &set, Meter::Images, None, OPEN)
                .await
                .map(|_| ()),
        );
        assert_eq!((r.limit, r.remaining, r.cost), ("budget_per_day", 0, 0));
        // A host's route (metering only itself) costs nothing here: not refused by it.
        assert!(limits
            .admit("a", &set, Meter::Requests, None, OPEN)
            .await
            .is_ok());
        // The next UTC day starts from nothing.
        clock.set(day("2026-11-28"));
        assert!(limits
            .admit("a", &set, Meter::Images, None, OPEN)
            .await
            .is_ok());
        assert!(check_known(&limits, "a", &set, CHARS, Some(usd("1")))
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn a_months_budget_outlives_its_days_and_resets_on_the_first() {
        let clock = Clock::manual(day("2026-11-02"));
        let limits = Limiter::new(None, Metrics::off(), clock.clone());
        let set = budget("budget: {currency: CNY, per_day: \"10\", per_month: \"15\"}");
        limits
            .charge("a", &set, CHARS, Some(usd("9")), None, false)
            .await;
        clock.set(day("2026-11-30") + 86_399);
        // A new day, but 6 of the month's 15 are left.
        let r = refused(check_known(&limits, "a", &set, CHARS, Some(usd("7"))).await);
        assert_eq!(
            (r.limit, r.remaining, r.retry_after),
            ("budget_per_month", 6_000_000_000, 1)
        );
        assert_eq!(r.window, Some(30 * 86_400));
        clock.set(day("2026-12-01"));
        assert!(check_known(&limits, "a", &set, CHARS, Some(usd("7")))
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn usage_and_money_are_checked_and_charged_together() {
        let clock = Clock::manual(day("2026-11-27"));
        let limits = Limiter::new(None, Metrics::off(), clock);
        let set = budget("{characters_per_day: 100, budget: {currency: USD, per_day: \"1\"}}");
        limits
            .charge(
                "a",
                &set,
                (Meter::Characters, 95),
                Some(usd("0.1")),
                None,
                false,
            )
            .await;
        // Characters do not fit (10 > 5 left), though the money would.
        let r = refused(check_known(&limits, "a", &set, CHARS, Some(usd("0.1"))).await);
        assert_eq!(
            (r.limit, r.cost, r.currency),
            ("characters_per_day", 10, None)
        );
        // No known cost: only the characters are checked.
        assert!(
            check_known(&limits, "a", &set, (Meter::Characters, 5), None)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_refused_known_use_leaves_the_request_counted_and_no_slot_held() {
        let clock = Clock::manual(day("2026-11-27"));
        let limits = Limiter::new(None, Metrics::off(), clock);
        let set = budget("{requests_per_minute: 3, concurrent: 1, characters_per_day: 10}");
        let known = |used| Some(Known { used, cost: None });
        // Admitted, but 12 characters do not fit: refused by them, with what they needed.
        let r = match limits
            .admit("a", &set, Meter::Characters, known(12), OPEN)
            .await
        {
            Err(GatewayError::RateLimited(r)) => r,
            other => panic!("not refused: {:?}", other.map(|l| l.is_some())),
        };
        assert_eq!(
            (r.limit, r.remaining, r.cost),
            ("characters_per_day", 10, 12)
        );
        // No slot is left held by it: the next request takes the one slot.
        let held = limits
            .admit("a", &set, Meter::Characters, known(5), OPEN)
            .await
            .unwrap();
        assert!(held.is_some());
        let r = match limits
            .admit("a", &set, Meter::Characters, known(1), OPEN)
            .await
        {
            Err(GatewayError::RateLimited(r)) => r,
            other => panic!("not refused: {:?}", other.map(|l| l.is_some())),
        };
        assert_eq!((r.limit, r.cost), ("concurrent", 0));
        drop(held);
        // The refused-by-its-characters request was counted (as its admission counted it
        // before), the refused-by-its-slot one was not: this is the third of three.
        assert!(limits
            .admit("a", &set, Meter::Characters, known(1), OPEN)
            .await
            .is_ok());
        let r = match limits
            .admit("a", &set, Meter::Characters, known(1), OPEN)
            .await
        {
            Err(GatewayError::RateLimited(r)) => r,
            other => panic!("not refused: {:?}", other.map(|l| l.is_some())),
        };
        assert_eq!((r.limit, r.remaining), ("requests_per_minute", 0));
    }

    #[tokio::test]
    async fn a_request_ended_before_its_admission_is_counted_at_its_charge() {
        let clock = Clock::manual(day("2026-11-27"));
        let limits = Limiter::new(None, Metrics::off(), clock);
        let set = budget("{requests_per_minute: 2}");
        let none = (Meter::Characters, 0);
        limits.charge("a", &set, none, None, None, true).await;
        // Nothing else is charged for it, and a charge of an admitted request adds no request.
        limits.charge("a", &set, none, None, None, false).await;
        assert!(limits
            .admit("a", &set, Meter::Characters, None, OPEN)
            .await
            .is_ok());
        // Full: one its admission would have refused finds the window full, as the next does.
        limits.charge("a", &set, none, None, None, true).await;
        let r = match limits.admit("a", &set, Meter::Characters, None, OPEN).await {
            Err(GatewayError::RateLimited(r)) => r,
            other => panic!("not refused: {:?}", other.map(|l| l.is_some())),
        };
        assert_eq!((r.limit, r.remaining), ("requests_per_minute", 0));
    }
}
