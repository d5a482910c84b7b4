//! Per-caller limits (`auth.api_keys[].limits`, `auth.jwt.limits`): counting what a caller uses
//! and refusing what goes past its limits, with one budget shared by every instance on one Redis,
//! or per process without one.
//!
//! A request meets its limits twice, and its usage once more at its end:
//! - [`Limiter::admit`], after authentication and before the body is read: the request counts
//!   against `requests_per_minute`, takes one of its `concurrent` slots (a [`Lease`], given back
//!   when dropped — the gateway keeps it until the answer has been sent), and is refused if a
//!   usage budget of its operation is already spent;
//! - [`Limiter::check_usage`], once the body is validated, when the request's cost is known up
//!   front (speech characters, images asked for): refused if it exceeds what is left;
//! - [`Limiter::charge`], when the answer is complete: what it actually used (rerank tokens from
//!   the answer's usage, characters spoken, images delivered) is added to its windows.
//!
//! Usage is charged after the fact, so requests running side by side each see the budget before
//! the others' usage: a window can overshoot by what the requests in flight at its end use. This
//! is the price of not knowing usage up front (rerank tokens); `concurrent` bounds it.
//!
//! Each check is one call: with Redis, one Lua script (atomic, one round trip, bounded by the
//! store's timeout; `redis`), else the same rules on a mutex-guarded map ([`memory`]). Windows
//! are fixed UTC minutes and days ([`window`]). A caller without limits never reaches this module.

pub(crate) mod check;
pub(crate) mod memory;
#[cfg(feature = "redis")]
pub(crate) mod redis;
pub(crate) mod window;

use std::sync::Arc;

use crate::auth::limits::{Limit, LimitSet, Meter, OnStoreError};
use crate::common::error::{GatewayError, LimitRefusal};
use crate::metrics::{self, Metrics};
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
    /// process.
    pub(crate) fn new(redis: Option<&RedisConn>, metrics: Metrics) -> Limiter {
        let backend = match redis {
            #[cfg(feature = "redis")]
            Some(conn) => Backend::Redis(redis::Counts::new(conn.clone())),
            #[cfg(not(feature = "redis"))]
            Some(conn) => match *conn {},
            None => Backend::Memory(Arc::new(memory::Counts::default())),
        };
        Limiter { backend, metrics }
    }

    /// A request of `scope` (the principal's id) with `set` starts: counts it against
    /// `requests_per_minute`, takes a `concurrent` slot, and refuses it when a budget of the
    /// operation's `meter` is already spent.
    pub(crate) async fn admit(
        &self,
        scope: &str,
        set: &LimitSet,
        meter: Meter,
        on_error: OnStoreError,
    ) -> Result<Option<Lease>, GatewayError> {
        let now = Now::current();
        let mut check = Check {
            counters: Vec::new(),
            slot: set.concurrent,
        };
        check.counters.extend(
            set.limits_of(Meter::Requests)
                .map(|l| counter(now, l, 1, 1)),
        );
        // Spent means nothing left: 1 more would not fit. A request that meters nothing but
        // itself (a host's route behind `embed::AuthModule`) is counted once, above.
        if meter != Meter::Requests {
            check
                .counters
                .extend(set.limits_of(meter).map(|l| counter(now, l, 1, 0)));
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
            Ok(Err(outcome)) => Err(self.refuse(scope, &check, outcome, now, 0)),
            Err(e) => self.store_failed(e, on_error).map(|()| None),
        }
    }

    /// The request's cost in `meter` is known before it runs (`cost` characters, images):
    /// refused when it exceeds what is left of a window.
    pub(crate) async fn check_usage(
        &self,
        scope: &str,
        set: &LimitSet,
        meter: Meter,
        cost: u64,
        on_error: OnStoreError,
    ) -> Result<(), GatewayError> {
        let now = Now::current();
        let check = Check {
            counters: set
                .limits_of(meter)
                .map(|l| counter(now, l, cost.max(1), 0))
                .collect(),
            slot: None,
        };
        if check.counters.is_empty() {
            return Ok(());
        }
        match self.run(scope, &check, now).await {
            Ok(Outcome::Passed) => Ok(()),
            Ok(outcome) => Err(self.refuse(scope, &check, outcome, now, cost)),
            Err(e) => self.store_failed(e, on_error),
        }
    }

    /// What a finished request used: added to every window of `meter`. Its concurrent slot
    /// (`lease`), if any, is given back in the same Redis call. A store error is only counted
    /// and logged (the answer has been sent; there is nobody left to refuse).
    pub(crate) async fn charge(
        &self,
        scope: &str,
        set: &LimitSet,
        meter: Meter,
        used: u64,
        lease: Option<Lease>,
    ) {
        let now = Now::current();
        let check = Check {
            counters: if used == 0 {
                Vec::new()
            } else {
                set.limits_of(meter)
                    .map(|l| counter(now, l, 0, used))
                    .collect()
            },
            slot: None,
        };
        let result = match (&self.backend, lease) {
            // Nothing to charge: a slot is given back as it drops (one call of its own).
            _ if check.counters.is_empty() => return,
            #[cfg(feature = "redis")]
            (
                Backend::Redis(counts),
                Some(Lease {
                    _slot: LeaseInner::Redis { _slot: slot },
                }),
            ) => counts.apply_and_return(scope, &check, now, slot).await,
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
        };
        result.map(|r| match r {
            Ok(()) => Outcome::Passed,
            Err(outcome) => outcome,
        })
    }

    fn refuse(
        &self,
        scope: &str,
        check: &Check,
        outcome: Outcome,
        now: Now,
        cost: u64,
    ) -> GatewayError {
        let Outcome::Refused { at, used } = outcome else {
            return GatewayError::Internal("limits: a passed check refused".into());
        };
        let refusal = match check.counters.get(at) {
            Some(c) => LimitRefusal {
                limit: c.limit.name,
                quota: c.limit.quota,
                window: Some(c.limit.window.seconds()),
                remaining: c.limit.quota.saturating_sub(used),
                retry_after: now.seconds_left(c.limit.window),
                cost,
            },
            None => {
                let quota = check.slot.unwrap_or(0);
                LimitRefusal {
                    limit: "concurrent",
                    quota,
                    window: None,
                    remaining: quota.saturating_sub(used),
                    retry_after: 1,
                    cost: 0,
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
