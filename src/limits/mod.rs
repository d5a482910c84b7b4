//! Per-caller limits (`auth.api_keys[].limits`, `auth.jwt.limits`): counting what a caller uses
//! and refusing what goes past its limits, with one budget shared by every instance on one Redis,
//! or per process without one.
//!
//! A request meets its limits twice, and its usage once more at its end:
//! - [`Limiter::admit`], after authentication and before the body is read: the request counts
//!   against `requests_per_minute`, takes one of its `concurrent` slots (a [`Lease`], given back
//!   when dropped — the gateway keeps it until the answer has been sent), and is refused if a
//!   usage budget of its operation is already spent;
//! - [`Limiter::check_known`], once the body is validated, when the request's cost is known up
//!   front (speech characters, images asked for) or what it is known to cost in money: refused
//!   if it exceeds what is left;
//! - [`Limiter::charge`], when the answer is complete: what it actually used (rerank tokens from
//!   the answer's usage, characters spoken, images delivered) and what it cost are added to its
//!   windows, in one call.
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
//! With Redis the end-of-request charge is off the request's path: queued on the shared
//! connection as the answer goes out and applied by Redis in the order sent (its reply awaited on
//! a task of its own; `Limiter::charge`). The bound above is unchanged in kind: a request counts as
//! in flight until its charge is applied — one Redis round trip after its answer, at most the
//! store's timeout (`store.timeout_ms`) when Redis is slow, after which an unapplied charge is
//! dropped and counted as a store error. On the path a request meets Redis once for rerank
//! (admission) and twice for speech and images (admission, then the check of what they are known
//! to cost once the body is validated).
//!
//! Each check is one call: with Redis, one Lua script (atomic, one round trip, bounded by the
//! store's timeout; `redis`), else the same rules on a mutex-guarded map ([`memory`]). Windows
//! are fixed UTC minutes, days and calendar months ([`window`]), read from the limiter's clock
//! (the system's; a test's hand-set one). A caller without limits never reaches this module.

pub(crate) mod check;
pub(crate) mod memory;
#[cfg(feature = "redis")]
pub(crate) mod redis;
pub(crate) mod window;

use std::sync::Arc;

use crate::auth::limits::{Limit, LimitSet, Meter, OnStoreError};
use crate::caps::lifecycle::Clock;
use crate::common::error::{GatewayError, LimitRefusal};
use crate::metrics::{self, Metrics};
use crate::money::Amount;
use crate::store::files::StoreError;
use crate::store::redis_conn::RedisConn;
use check::{Check, Counter, Outcome};
use window::Now;

enum Backend {
    Memory(Arc<memory::Counts>),
    #[cfg(feature = "redis")]
    Redis(redis::Counts),
}

/// The gateway's limit accounting. Runtime state: it lives in `GatewayState`, keyed by the
/// principal's id, so budgets and slots outlive a reload of the configuration.
pub(crate) struct Limiter {
    backend: Backend,
    metrics: Metrics,
    /// What time it is for windows: the system's, or a test's (`config::Loader::limits_clock`).
    clock: Clock,
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
}

impl Limiter {
    /// In Redis when `redis` is given (every instance on it shares the budgets), else in this
    /// process; windows read from `clock`.
    pub(crate) fn new(redis: Option<&RedisConn>, metrics: Metrics, clock: Clock) -> Limiter {
        let backend = match redis {
            #[cfg(feature = "redis")]
            Some(conn) => Backend::Redis(redis::Counts::new(conn.clone())),
            #[cfg(not(feature = "redis"))]
            Some(conn) => match *conn {},
            None => Backend::Memory(Arc::new(memory::Counts::default())),
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
    /// operation's `meter`, or its money budget, is already spent.
    pub(crate) async fn admit(
        &self,
        scope: &str,
        set: &LimitSet,
        meter: Meter,
        on_error: OnStoreError,
    ) -> Result<Option<Lease>, GatewayError> {
        let now = self.now();
        let mut check = Check {
            counters: Vec::new(),
            slot: set.concurrent,
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
        if check.counters.is_empty() && check.slot.is_none() {
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
        };
        match result {
            Ok(Ok(lease)) => Ok(lease),
            Ok(Err(outcome)) => Err(self.refuse(scope, set, &check, outcome, now, (0, 0))),
            Err(e) => self.store_failed(e, on_error).map(|()| None),
        }
    }

    /// What the request is known to use before it runs — `used` of `meter` (characters,
    /// images) and `cost` in money (converted into the budget's currency) — must fit in what is
    /// left of each window: one call for both, and nothing charged ([`Limiter::charge`] charges
    /// what it really used and cost).
    pub(crate) async fn check_known(
        &self,
        scope: &str,
        set: &LimitSet,
        (meter, used): (Meter, u64),
        cost: Option<Amount>,
        on_error: OnStoreError,
    ) -> Result<(), GatewayError> {
        let now = self.now();
        let mut counters: Vec<Counter> = set
            .limits_of(meter)
            .map(|l| counter(now, l, used.max(1), 0))
            .collect();
        if let Some(cost) = cost {
            counters.extend(
                set.limits_of(Meter::Money)
                    .map(|l| counter(now, l, cost.nanos().max(1), 0)),
            );
        }
        let check = Check {
            counters,
            slot: None,
        };
        if check.counters.is_empty() {
            return Ok(());
        }
        let costs = (used, cost.map_or(0, Amount::nanos));
        match self.run(scope, &check, now).await {
            Ok(Outcome::Passed) => Ok(()),
            Ok(outcome) => Err(self.refuse(scope, set, &check, outcome, now, costs)),
            Err(e) => self.store_failed(e, on_error),
        }
    }

    /// What a finished request used: added to every window of `meter`, and what it cost
    /// (`cost`, in the budget's currency) to the money budget's. Its concurrent slot (`lease`),
    /// if any, is given back in the same Redis call. A store error is only counted and logged
    /// (the answer has been sent; there is nobody left to refuse).
    ///
    /// With Redis, the call does not wait for Redis: the charge is handed to the connection
    /// (its command queued on it before this returns, where the connection is open) and its
    /// reply awaited on a task of its own, so the answer goes out without a round trip. Commands
    /// on one connection are applied in the order sent, so the caller's next request — checked
    /// after this answer went out — finds this charge applied and this slot free.
    pub(crate) async fn charge(
        &self,
        scope: &str,
        set: &LimitSet,
        (meter, used): (Meter, u64),
        cost: Option<Amount>,
        lease: Option<Lease>,
    ) {
        let now = self.now();
        let money = cost.map_or(0, Amount::nanos);
        let mut counters = Vec::new();
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
            slot: None,
        };
        let result = match (&self.backend, lease) {
            // Nothing to charge: a slot is given back as it drops (one call of its own).
            _ if check.counters.is_empty() => return,
            #[cfg(feature = "redis")]
            (Backend::Redis(counts), lease) => {
                let slot = match lease {
                    Some(Lease {
                        _slot: LeaseInner::Redis { _slot: slot },
                    }) => Some(slot),
                    _ => None,
                };
                self.charge_in_background(counts, scope, check, now, slot);
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

    /// [`Limiter::charge`] in Redis, off the request's path: polled once here (which queues its
    /// command on an open connection), then finished on a task of its own.
    #[cfg(feature = "redis")]
    fn charge_in_background(
        &self,
        counts: &redis::Counts,
        scope: &str,
        check: Check,
        now: Now,
        slot: Option<redis::Slot>,
    ) {
        use futures_util::FutureExt;
        let (counts, scope, metrics) = (counts.clone(), scope.to_string(), self.metrics.clone());
        let mut charge = Box::pin(async move {
            let result = match slot {
                Some(slot) => counts.apply_and_return(&scope, &check, now, slot).await,
                None => counts
                    .apply(&scope, &check, now)
                    .await
                    .map(|_| Outcome::Passed),
            };
            if let Err(e) = result {
                metrics.store_error("limits");
                log::warn!("limits: usage of a request not counted: {e}");
            }
        });
        if (&mut charge).now_or_never().is_none() {
            tokio::spawn(charge);
        }
    }

    /// A check without a slot.
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    async fn run(&self, scope: &str, check: &Check, now: Now) -> Result<Outcome, StoreError> {
        let result = match &self.backend {
            Backend::Memory(counts) => Ok(counts.apply(scope, check).map(|_| ())),
            #[cfg(feature = "redis")]
            Backend::Redis(counts) => counts.apply(scope, check, now).await.map(|r| r.map(|_| ())),
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
        (used_cost, money_cost): (u64, u64),
    ) -> GatewayError {
        let Outcome::Refused { at, used } = outcome else {
            return GatewayError::Internal("limits: a passed check refused".into());
        };
        let refusal = match check.counters.get(at) {
            Some(c) => {
                let money = c.limit.meter == Meter::Money;
                LimitRefusal {
                    limit: c.limit.name,
                    quota: c.limit.quota,
                    window: Some(now.length(c.limit.window)),
                    remaining: c.limit.quota.saturating_sub(used),
                    retry_after: now.seconds_left(c.limit.window),
                    cost: if money { money_cost } else { used_cost },
                    currency: if money { set.budget_currency() } else { None },
                }
            }
            None => {
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
    const CHARS: (Meter, u64) = (Meter::Characters, 10);

    #[tokio::test]
    async fn a_days_budget_refuses_what_does_not_fit_and_resets_at_utc_midnight() {
        let clock = Clock::manual(day("2026-11-27") + 86_400 - 3_600);
        let limits = Limiter::new(None, Metrics::off(), clock.clone());
        let set = budget("budget: {currency: USD, per_day: \"1\"}");
        assert!(limits
            .check_known("a", &set, CHARS, Some(usd("1")), OPEN)
            .await
            .is_ok());
        limits
            .charge("a", &set, CHARS, Some(usd("0.75")), None)
            .await;
        // 0.25 is left: 0.30 does not fit, and nothing was charged by the checks.
        let r = refused(
            limits
                .check_known("a", &set, CHARS, Some(usd("0.3")), OPEN)
                .await,
        );
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
        assert!(limits
            .check_known("a", &set, CHARS, Some(usd("0.25")), OPEN)
            .await
            .is_ok());
        // Another caller has its own budget.
        assert!(limits
            .check_known("b", &set, CHARS, Some(usd("1")), OPEN)
            .await
            .is_ok());
        // Spent: every request is refused at admission, whatever its operation.
        limits
            .charge("a", &set, CHARS, Some(usd("0.25")), None)
            .await;
        let r = refused(
            limits
                .admit("a", &set, Meter::Images, OPEN)
                .await
                .map(|_| ()),
        );
        assert_eq!((r.limit, r.remaining, r.cost), ("budget_per_day", 0, 0));
        // A host's route (metering only itself) costs nothing here: not refused by it.
        assert!(limits.admit("a", &set, Meter::Requests, OPEN).await.is_ok());
        // The next UTC day starts from nothing.
        clock.set(day("2026-11-28"));
        assert!(limits.admit("a", &set, Meter::Images, OPEN).await.is_ok());
        assert!(limits
            .check_known("a", &set, CHARS, Some(usd("1")), OPEN)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn a_months_budget_outlives_its_days_and_resets_on_the_first() {
        let clock = Clock::manual(day("2026-11-02"));
        let limits = Limiter::new(None, Metrics::off(), clock.clone());
        let set = budget("budget: {currency: CNY, per_day: \"10\", per_month: \"15\"}");
        limits.charge("a", &set, CHARS, Some(usd("9")), None).await;
        clock.set(day("2026-11-30") + 86_399);
        // A new day, but 6 of the month's 15 are left.
        let r = refused(
            limits
                .check_known("a", &set, CHARS, Some(usd("7")), OPEN)
                .await,
        );
        assert_eq!(
            (r.limit, r.remaining, r.retry_after),
            ("budget_per_month", 6_000_000_000, 1)
        );
        assert_eq!(r.window, Some(30 * 86_400));
        clock.set(day("2026-12-01"));
        assert!(limits
            .check_known("a", &set, CHARS, Some(usd("7")), OPEN)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn usage_and_money_are_checked_and_charged_together() {
        let clock = Clock::manual(day("2026-11-27"));
        let limits = Limiter::new(None, Metrics::off(), clock);
        let set = budget("{characters_per_day: 100, budget: {currency: USD, per_day: \"1\"}}");
        limits
            .charge("a", &set, (Meter::Characters, 95), Some(usd("0.1")), None)
            .await;
        // Characters do not fit (10 > 5 left), though the money would.
        let r = refused(
            limits
                .check_known("a", &set, CHARS, Some(usd("0.1")), OPEN)
                .await,
        );
        assert_eq!(
            (r.limit, r.cost, r.currency),
            ("characters_per_day", 10, None)
        );
        // No known cost: only the characters are checked.
        assert!(limits
            .check_known("a", &set, (Meter::Characters, 5), None, OPEN)
            .await
            .is_ok());
    }
}
