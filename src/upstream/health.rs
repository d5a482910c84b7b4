//! Targets' health (outlier detection): which targets (provider account + native model) the
//! attempt loop should avoid for a while because they keep failing.
//!
//! Each target has a [`Cell`]: closed (healthy), ejected until a time, or half-open (its cooldown
//! has ended and one request, the probe, holds a lease on it). `consecutive_failures` failures in
//! a row eject it for `base_cooldown`, doubled on every further ejection in a row up to
//! `max_cooldown`; a success closes it and forgets its ejections. A provider rejecting the
//! account's key ejects every target of the account at once (the key is wrong for all of them),
//! logged once per account until it succeeds again. A provider saying the target's *model* is gone
//! (retired without notice, or not enabled for the account: `UnknownModel`) retires that one
//! target: it is held out for `retired_cooldown` (hours, not seconds), is never taken in panic
//! mode, and is warned of once; then one request probes it as after any ejection. The account's
//! other targets are not touched. This follows Envoy's outlier detection
//! (consecutive 5xx/gateway failures, ejection time growing with the number of ejections:
//! <https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier>), with a
//! single probe instead of Envoy's un-ejection of the host into full traffic.
//!
//! The table is keyed by names (account, native model), not by configuration objects, so it
//! survives a configuration reload; a `Target` caches its cell (see `catalog`). Times are wall
//! clock milliseconds, so ejections can be shared between instances through Redis: local
//! ejections go to an outbox that a background service drains (see `server`), and ejections seen
//! from other instances are adopted with [`Health::adopt`]. The request path never waits on Redis.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::error::UpstreamErrorKind;
use crate::metrics::Metrics;

/// When a target is ejected and for how long (`routing.ejection` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EjectionPolicy {
    /// Failures in a row that eject a target; never 0.
    pub consecutive_failures: u32,
    pub base_cooldown: Duration,
    pub max_cooldown: Duration,
    /// How long a target whose provider said its model is gone is held out before a probe.
    pub retired_cooldown: Duration,
}

impl Default for EjectionPolicy {
    fn default() -> Self {
        EjectionPolicy {
            consecutive_failures: 3,
            base_cooldown: Duration::from_secs(5),
            max_cooldown: Duration::from_secs(300),
            retired_cooldown: Duration::from_secs(6 * 3600),
        }
    }
}

/// Where time comes from: the system's wall clock, or a test's hand.
#[derive(Clone, Default)]
pub enum Clock {
    #[default]
    System,
    Fake(Arc<AtomicU64>),
}

impl Clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            Clock::Fake(ms) => ms.load(Ordering::Relaxed),
        }
    }
}

/// What a failed attempt means for its target's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The target failed: counts towards its ejection.
    Failed,
    /// The provider rejected the account's key: every target of the account is ejected.
    KeyRejected,
    /// The provider no longer serves the target's model (or not to this account): that target
    /// alone is held out for the retired cooldown.
    Retired,
    /// Says nothing about the target (the request's fault, a rate limit, an unknown voice).
    Neutral,
}

impl Verdict {
    /// Connect errors, timeouts, 5xx and wrong answers count; 4xx the request caused do not.
    /// Rate limits do not either: the retry policy honours `Retry-After`, and a throttled key is
    /// not a broken one.
    pub(crate) fn of(kind: UpstreamErrorKind) -> Verdict {
        match kind {
            UpstreamErrorKind::Connect
            | UpstreamErrorKind::Timeout
            | UpstreamErrorKind::Failure
            | UpstreamErrorKind::WrongAnswer => Verdict::Failed,
            UpstreamErrorKind::AuthRejected => Verdict::KeyRejected,
            UpstreamErrorKind::UnknownModel => Verdict::Retired,
            UpstreamErrorKind::RateLimited
            | UpstreamErrorKind::InvalidRequest
            | UpstreamErrorKind::ContentPolicy
            | UpstreamErrorKind::UnknownVoice
            | UpstreamErrorKind::BadResponse => Verdict::Neutral,
        }
    }
}

/// Whether a target may take a request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Healthy,
    /// Its cooldown ended and this request is its probe.
    Probe,
    /// Ejected until this time (ms since the epoch).
    Ejected(u64),
}

/// One target's state. `until` alone answers the request path (one atomic load when healthy);
/// the rest changes under `lock`.
pub struct Cell {
    account: String,
    native_model: String,
    /// 0: closed. Otherwise ejected until this time; once it has passed, the first request to
    /// claim it (compare-and-swap to a lease) is the probe.
    until: AtomicU64,
    failures: AtomicU32,
    /// Ejections in a row (each doubles the cooldown); reset by a success.
    ejections: AtomicU32,
    /// 0: not retired. Otherwise the provider said the model is gone, and the target is held out
    /// as retired until this time (ms since the epoch); cleared by a success.
    retired_until: AtomicU64,
    /// The table's clock, to tell whether a retirement still holds.
    clock: Clock,
    lock: Mutex<()>,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cell")
            .field("account", &self.account)
            .field("native_model", &self.native_model)
            .field("until", &self.until.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Cell {
    /// The time this target is ejected until (0: not ejected).
    pub fn ejected_until(&self) -> u64 {
        self.until.load(Ordering::Acquire)
    }

    /// Whether the provider said this target's model is gone and its retired cooldown has not
    /// ended yet: the attempt loop never takes it (not even in panic mode), and a model whose
    /// every target is retired is served by its successor.
    pub(crate) fn retired(&self) -> bool {
        let until = self.retired_until.load(Ordering::Acquire);
        until != 0 && self.clock.now_ms() < until
    }
}

/// Per account: its targets' cells, and whether its key's rejection was logged.
#[derive(Default)]
struct Account {
    cells: HashMap<String, Arc<Cell>>,
    key_rejection_logged: Arc<AtomicBool>,
}

/// An ejection shared between instances: (account, native model, ejected until, whether as
/// retired by its provider).
pub(crate) type Shared = (String, String, u64, bool);

/// The health table, held by `Upstream`.
pub struct Health {
    policy: RwLock<EjectionPolicy>,
    clock: Clock,
    metrics: Metrics,
    accounts: RwLock<HashMap<String, Account>>,
    /// Ejections made here not yet shared.
    outbox: Mutex<Vec<Shared>>,
    /// Whether anything drains the outbox ([`Health::share`]); without it nothing is put there,
    /// or it would grow with every ejection for as long as the process runs.
    shared: AtomicBool,
}

impl Health {
    pub fn new(policy: EjectionPolicy, clock: Clock, metrics: Metrics) -> Health {
        Health {
            policy: RwLock::new(policy),
            clock,
            metrics,
            accounts: RwLock::default(),
            outbox: Mutex::default(),
            shared: AtomicBool::new(false),
        }
    }

    /// From now on, ejections made here go to the outbox for [`Health::take_outbox`] (called
    /// by whatever shares them with other instances, before it starts draining).
    pub fn share(&self) {
        self.shared.store(true, Ordering::Relaxed);
    }

    /// Replace the thresholds (a configuration reload); targets' state is kept.
    pub fn set_policy(&self, policy: EjectionPolicy) {
        if let Ok(mut p) = self.policy.write() {
            *p = policy;
        }
    }

    fn policy(&self) -> EjectionPolicy {
        self.policy.read().map(|p| *p).unwrap_or_default()
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The cell of `account`'s `native_model`, made on first use (once per target: `Target`
    /// keeps it).
    pub fn cell(&self, account: &str, native_model: &str) -> Arc<Cell> {
        if let Ok(accounts) = self.accounts.read() {
            if let Some(c) = accounts
                .get(account)
                .and_then(|a| a.cells.get(native_model))
            {
                return c.clone();
            }
        }
        let fresh = || {
            Arc::new(Cell {
                account: account.to_string(),
                native_model: native_model.to_string(),
                until: AtomicU64::new(0),
                failures: AtomicU32::new(0),
                ejections: AtomicU32::new(0),
                retired_until: AtomicU64::new(0),
                clock: self.clock.clone(),
                lock: Mutex::new(()),
            })
        };
        match self.accounts.write() {
            Ok(mut accounts) => accounts
                .entry(account.to_string())
                .or_default()
                .cells
                .entry(native_model.to_string())
                .or_insert_with(fresh)
                .clone(),
            // A poisoned table: an untracked cell (always healthy) rather than a panic.
            Err(_) => fresh(),
        }
    }

    /// Whether `cell` may take a request now; claims the probe when its cooldown has ended.
    pub fn admit(&self, cell: &Cell) -> Admission {
        let until = cell.until.load(Ordering::Acquire);
        if until == 0 {
            return Admission::Healthy;
        }
        let now = self.now_ms();
        if now < until {
            return Admission::Ejected(until);
        }
        // The probe holds a lease as long as the last cooldown, so a probe that never reports
        // (its request was cancelled) does not keep the target out for good.
        let lease = now + self.cooldown(cell.ejections.load(Ordering::Relaxed).max(1));
        match cell
            .until
            .compare_exchange(until, lease, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Admission::Probe,
            Err(0) => Admission::Healthy,
            Err(other) => Admission::Ejected(other),
        }
    }

    /// An attempt at `cell` succeeded.
    pub fn success(&self, cell: &Cell) {
        // The common case, healthy and no failure pending: two loads, no lock (a retired cell
        // is ejected too, so `until` is not 0).
        if cell.until.load(Ordering::Acquire) == 0 && cell.failures.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Ok(_guard) = cell.lock.lock() else { return };
        let was_ejected = cell.until.swap(0, Ordering::AcqRel) != 0;
        cell.failures.store(0, Ordering::Relaxed);
        cell.ejections.store(0, Ordering::Relaxed);
        if cell.retired_until.swap(0, Ordering::AcqRel) != 0 {
            log::info!(
                "target {} / {} serves its model again (no longer retired)",
                cell.account,
                cell.native_model
            );
            self.metrics
                .set_target_retired(&cell.account, &cell.native_model, 0);
        }
        if was_ejected {
            log::info!(
                "target {} / {} is healthy again",
                cell.account,
                cell.native_model
            );
            self.gauge(cell, 0);
        }
        if let Ok(accounts) = self.accounts.read() {
            if let Some(a) = accounts.get(&cell.account) {
                a.key_rejection_logged.store(false, Ordering::Relaxed);
            }
        }
    }

    /// An attempt at `cell` failed with `kind`.
    pub fn failure(&self, cell: &Cell, kind: UpstreamErrorKind) {
        match Verdict::of(kind) {
            Verdict::Neutral => {}
            Verdict::Failed => {
                let Ok(_guard) = cell.lock.lock() else { return };
                let failures = cell.failures.fetch_add(1, Ordering::Relaxed) + 1;
                // A failed probe (or a failure while ejected elsewhere) ejects again at once.
                if cell.until.load(Ordering::Acquire) != 0
                    || failures >= self.policy().consecutive_failures
                {
                    self.eject(cell, "failing");
                }
            }
            Verdict::KeyRejected => self.key_rejected(&cell.account),
            Verdict::Retired => self.retire(cell),
        }
    }

    /// The provider said `cell`'s model is gone: hold that target out for the retired cooldown,
    /// warn once (until it serves again), and share it.
    fn retire(&self, cell: &Cell) {
        let Ok(_guard) = cell.lock.lock() else { return };
        let cooldown = self.policy().retired_cooldown.as_millis() as u64;
        let until = self.now_ms().saturating_add(cooldown);
        let before = cell.retired_until.swap(until, Ordering::AcqRel);
        cell.until.store(until, Ordering::Release);
        cell.failures.store(0, Ordering::Relaxed);
        cell.ejections.fetch_max(1, Ordering::Relaxed);
        if before == 0 {
            // The account's and model's names only, never the key.
            log::warn!(
                "target {} / {} retired: its provider says it does not serve model {} (shut \
                 down, or not enabled for this account); held out for {cooldown} ms, then probed; \
                 the account's other models are not affected",
                cell.account,
                cell.native_model,
                cell.native_model
            );
        }
        self.metrics
            .target_ejected(&cell.account, &cell.native_model);
        self.gauge(cell, 1);
        self.metrics
            .set_target_retired(&cell.account, &cell.native_model, 1);
        self.push(cell, until, true);
    }

    /// Put an ejection in the outbox, when something shares it.
    fn push(&self, cell: &Cell, until: u64, retired: bool) {
        if self.shared.load(Ordering::Relaxed) {
            if let Ok(mut outbox) = self.outbox.lock() {
                outbox.push((
                    cell.account.clone(),
                    cell.native_model.clone(),
                    until,
                    retired,
                ));
            }
        }
    }

    /// The longest an ejection made here can last (ms), so shared ones are kept as long.
    #[cfg(feature = "redis")]
    pub(crate) fn longest_ejection_ms(&self) -> u64 {
        let p = self.policy();
        p.retired_cooldown.max(p.max_cooldown).as_millis() as u64
    }

    /// The account's key was rejected: eject every target of the account, and say so once.
    fn key_rejected(&self, account: &str) {
        let (cells, logged) = match self.accounts.read() {
            Ok(accounts) => match accounts.get(account) {
                Some(a) => (
                    a.cells.values().cloned().collect::<Vec<_>>(),
                    a.key_rejection_logged.clone(),
                ),
                None => return,
            },
            Err(_) => return,
        };
        if !logged.swap(true, Ordering::Relaxed) {
            // The account's name only, never its key.
            log::error!(
                "provider account {account}: the provider rejects its API key; its targets are \
                 ejected (probed again after each cooldown) until the key is fixed"
            );
        }
        for cell in &cells {
            if let Ok(_guard) = cell.lock.lock() {
                self.eject(cell, "key rejected");
            }
        }
    }

    /// Eject `cell` (its lock held) for its next cooldown.
    fn eject(&self, cell: &Cell, why: &str) {
        let ejections = cell.ejections.fetch_add(1, Ordering::Relaxed) + 1;
        let cooldown = self.cooldown(ejections);
        // A retired target stays out for its retirement even when it also fails otherwise.
        let retired = cell.retired_until.load(Ordering::Acquire);
        let until = (self.now_ms() + cooldown).max(if cell.retired() { retired } else { 0 });
        cell.until.store(until, Ordering::Release);
        cell.failures.store(0, Ordering::Relaxed);
        log::warn!(
            "target {} / {} ejected for {cooldown} ms ({why}; ejection {ejections} in a row)",
            cell.account,
            cell.native_model
        );
        self.metrics
            .target_ejected(&cell.account, &cell.native_model);
        self.gauge(cell, 1);
        self.push(cell, until, false);
    }

    /// The cooldown of the `n`th ejection in a row (n ≥ 1), in ms.
    fn cooldown(&self, n: u32) -> u64 {
        let p = self.policy();
        let base = p.base_cooldown.as_millis() as u64;
        let max = p.max_cooldown.as_millis() as u64;
        base.saturating_mul(1u64 << n.saturating_sub(1).min(32))
            .min(max)
    }

    fn gauge(&self, cell: &Cell, value: i64) {
        self.metrics
            .set_target_ejected(&cell.account, &cell.native_model, value);
    }

    /// Ejections made here since the last call, to share with other instances.
    pub fn take_outbox(&self) -> Vec<Shared> {
        self.outbox
            .lock()
            .map(|mut o| std::mem::take(&mut *o))
            .unwrap_or_default()
    }

    /// Ejections that could not be shared, kept for the next try.
    pub fn requeue(&self, entries: impl IntoIterator<Item = Shared>) {
        if let Ok(mut outbox) = self.outbox.lock() {
            outbox.extend(entries);
        }
    }

    /// Another instance ejected `account`'s `native_model` until `until` (`retired`: because its
    /// provider said the model is gone): honour it here too (unless this instance already holds
    /// it out longer). Not counted as an ejection here.
    pub fn adopt(&self, account: &str, native_model: &str, until: u64, retired: bool) {
        if until <= self.now_ms() {
            return;
        }
        let cell = self.cell(account, native_model);
        let Ok(_guard) = cell.lock.lock() else { return };
        if retired && cell.retired_until.load(Ordering::Acquire) < until {
            if cell.retired_until.swap(until, Ordering::AcqRel) == 0 {
                log::warn!(
                    "target {account} / {native_model} retired by another instance (its provider \
                     says it does not serve the model) until {until}"
                );
            }
            self.metrics.set_target_retired(account, native_model, 1);
        }
        let current = cell.until.load(Ordering::Acquire);
        if current < until {
            if current == 0 {
                log::info!(
                    "target {account} / {native_model} ejected by another instance until {until}"
                );
                // Later ejections here start from this one's cooldown.
                cell.ejections.fetch_max(1, Ordering::Relaxed);
            }
            cell.until.store(until, Ordering::Release);
            self.gauge(&cell, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ms: &Arc<AtomicU64>) -> Health {
        let policy = EjectionPolicy {
            consecutive_failures: 3,
            base_cooldown: Duration::from_millis(1_000),
            max_cooldown: Duration::from_millis(3_000),
            retired_cooldown: Duration::from_millis(60_000),
        };
        Health::new(policy, Clock::Fake(ms.clone()), Metrics::off())
    }

    const FAIL: UpstreamErrorKind = UpstreamErrorKind::Failure;

    #[test]
    fn ejects_after_consecutive_failures_and_probes_after_the_cooldown() {
        let clock = Arc::new(AtomicU64::new(10_000));
        let h = table(&clock);
        h.share();
        let c = h.cell("a", "m");
        h.failure(&c, FAIL);
        h.failure(&c, FAIL);
        assert_eq!(h.admit(&c), Admission::Healthy);
        h.failure(&c, FAIL);
        assert_eq!(h.admit(&c), Admission::Ejected(11_000));
        clock.store(10_999, Ordering::Relaxed);
        assert_eq!(h.admit(&c), Admission::Ejected(11_000));
        clock.store(11_000, Ordering::Relaxed);
        // One probe only; the others still see it ejected.
        assert_eq!(h.admit(&c), Admission::Probe);
        assert!(matches!(h.admit(&c), Admission::Ejected(_)));
        h.success(&c);
        assert_eq!(h.admit(&c), Admission::Healthy);
        assert_eq!(
            h.take_outbox(),
            vec![("a".into(), "m".into(), 11_000, false)]
        );
    }

    #[test]
    fn nothing_is_kept_to_share_when_nothing_shares() {
        let clock = Arc::new(AtomicU64::new(0));
        let h = table(&clock);
        let c = h.cell("a", "m");
        for _ in 0..3 {
            h.failure(&c, FAIL);
        }
        assert!(matches!(h.admit(&c), Admission::Ejected(_)));
        assert!(h.take_outbox().is_empty());
    }

    #[test]
    fn a_success_between_failures_resets_the_count() {
        let clock = Arc::new(AtomicU64::new(0));
        let h = table(&clock);
        let c = h.cell("a", "m");
        for _ in 0..5 {
            h.failure(&c, FAIL);
            h.failure(&c, FAIL);
            h.success(&c);
        }
        assert_eq!(h.admit(&c), Admission::Healthy);
    }

    #[test]
    fn a_failed_probe_doubles_the_cooldown_up_to_the_max() {
        let clock = Arc::new(AtomicU64::new(0));
        let h = table(&clock);
        let c = h.cell("a", "m");
        for _ in 0..3 {
            h.failure(&c, UpstreamErrorKind::Timeout);
        }
        let mut expect = 0;
        for cooldown in [1_000, 2_000, 3_000, 3_000] {
            expect += cooldown;
            assert_eq!(h.admit(&c), Admission::Ejected(expect));
            clock.store(expect, Ordering::Relaxed);
            assert_eq!(h.admit(&c), Admission::Probe);
            h.failure(&c, FAIL);
        }
    }

    #[test]
    fn a_probe_that_never_reports_lets_another_through_later() {
        let clock = Arc::new(AtomicU64::new(0));
        let h = table(&clock);
        let c = h.cell("a", "m");
        for _ in 0..3 {
            h.failure(&c, FAIL);
        }
        clock.store(1_000, Ordering::Relaxed);
        assert_eq!(h.admit(&c), Admission::Probe);
        clock.store(2_000, Ordering::Relaxed);
        assert_eq!(h.admit(&c), Admission::Probe);
    }

    #[test]
    fn the_requests_own_faults_do_not_count() {
        let clock = Arc::new(AtomicU64::new(0));
        let h = table(&clock);
        let c = h.cell("a", "m");
        for kind in [
            UpstreamErrorKind::InvalidRequest,
            UpstreamErrorKind::ContentPolicy,
            UpstreamErrorKind::RateLimited,
            UpstreamErrorKind::BadResponse,
        ] {
            for _ in 0..5 {
                h.failure(&c, kind);
            }
        }
        assert_eq!(h.admit(&c), Admission::Healthy);
    }

    #[test]
    fn a_rejected_key_ejects_every_target_of_its_account_at_once() {
        let clock = Arc::new(AtomicU64::new(0));
        let h = table(&clock);
        let (m1, m2, other) = (h.cell("a", "m1"), h.cell("a", "m2"), h.cell("b", "m1"));
        h.failure(&m1, UpstreamErrorKind::AuthRejected);
        assert_eq!(h.admit(&m1), Admission::Ejected(1_000));
        assert_eq!(h.admit(&m2), Admission::Ejected(1_000));
        assert_eq!(h.admit(&other), Admission::Healthy);
    }

    #[test]
    fn adopted_ejections_hold_until_their_time() {
        let clock = Arc::new(AtomicU64::new(100));
        let h = table(&clock);
        h.share();
        h.adopt("a", "m", 5_000, false);
        h.adopt("a", "m", 50, false); // past: ignored
        let c = h.cell("a", "m");
        assert_eq!(h.admit(&c), Admission::Ejected(5_000));
        assert!(h.take_outbox().is_empty(), "not shared back");
        clock.store(5_000, Ordering::Relaxed);
        assert_eq!(h.admit(&c), Admission::Probe);
    }

    #[test]
    fn a_model_gone_retires_its_target_alone_for_the_retired_cooldown() {
        let clock = Arc::new(AtomicU64::new(1_000));
        let h = table(&clock);
        h.share();
        let (dead, sibling) = (h.cell("a", "dead"), h.cell("a", "alive"));
        h.failure(&dead, UpstreamErrorKind::UnknownModel);
        assert_eq!(
            Verdict::of(UpstreamErrorKind::UnknownModel),
            Verdict::Retired
        );
        // Held out for the retired cooldown, not the failure cooldown; the account's other
        // target is untouched.
        assert_eq!(h.admit(&dead), Admission::Ejected(61_000));
        assert!(dead.retired());
        assert_eq!(h.admit(&sibling), Admission::Healthy);
        assert!(!sibling.retired());
        assert_eq!(
            h.take_outbox(),
            vec![("a".into(), "dead".into(), 61_000, true)]
        );
        // Past the cooldown: no longer retired, and one probe is let through.
        clock.store(61_000, Ordering::Relaxed);
        assert!(!dead.retired());
        assert_eq!(h.admit(&dead), Admission::Probe);
        // The probe finds it still gone: retired again for the whole cooldown.
        h.failure(&dead, UpstreamErrorKind::UnknownModel);
        assert!(dead.retired());
        assert_eq!(h.admit(&dead), Admission::Ejected(121_000));
        // A later success clears it as any ejection.
        clock.store(121_000, Ordering::Relaxed);
        assert_eq!(h.admit(&dead), Admission::Probe);
        h.success(&dead);
        assert!(!dead.retired());
        assert_eq!(h.admit(&dead), Admission::Healthy);
    }

    #[test]
    fn a_retirement_from_another_instance_is_adopted_as_retired() {
        let clock = Arc::new(AtomicU64::new(100));
        let h = table(&clock);
        h.adopt("a", "m", 9_000, true);
        let c = h.cell("a", "m");
        assert!(c.retired());
        assert_eq!(h.admit(&c), Admission::Ejected(9_000));
        h.adopt("a", "other", 9_000, false);
        assert!(
            !h.cell("a", "other").retired(),
            "a plain ejection is not a retirement"
        );
    }
}
