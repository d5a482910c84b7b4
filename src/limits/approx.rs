//! Approximate limits (`auth.limits_mode: approximate`): admission decided from this instance's
//! own counts, with no Redis call on the request's path, and reconciled with Redis off it
//! (`sync`).
//!
//! Per caller and per window, an instance knows the total in Redis at its last reconciliation
//! (`global`, every instance's use in it) and what it has used since (`pending`, and `in_flight`
//! while a reconciliation carries it). A check passes where `global + unsynced + need` fits in
//! the quota, as the exact mode's does against the true total, and where the instance's
//! unreconciled use stays within its **share** of the limit (`auth.limits_local_share_percent`
//! of the quota, at least 1): past it ([`Outcome::ShareSpent`]) the request waits for the
//! reconciliation it asks for (`Counts::reconciled`, bounded) and is decided again, refused with
//! `Retry-After: 1` only if it still does not fit. A request whose own need is larger
//! than the share is let through only right after a reconciliation (nothing unreconciled).
//!
//! The bound that follows: what one instance has admitted that the others cannot see is at most
//! its share (or one such large request), and the instance whose view is the freshest stays
//! within the quota, so N instances together admit at most `quota + N × share` of a window (for
//! a known cost larger than the share, `N ×` that cost). `concurrent` is approximate the same
//! way: an instance takes at most its share of new slots beyond what it last reported, against
//! what the others reported, so N instances hold at most `concurrent + N × share` at once. Usage
//! charged after the fact (rerank tokens, the real cost) overshoots as in the exact mode (by what
//! the requests in flight use), and reaches the other instances within one interval.
//!
//! A caller's use early in its share asks for an early reconciliation (at half the share), so
//! that a busy caller rarely meets [`Outcome::ShareSpent`].
//!
//! While reconciliations fail (Redis slow or down) and `auth.limits_on_store_error` is `open`,
//! shares are not applied: each instance checks the whole quota against its own counts (N
//! instances then admit at most N × the quota between them), and sends what it counted once
//! Redis answers again. `closed` refuses instead (the limiter, `super::Limiter::admit`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::check::{Check, Counter, Outcome};
use super::window::Now;
use crate::auth::limits::{Approximate, Window};
use crate::caps::lifecycle::Clock;
use crate::metrics::Metrics;
use crate::store::redis_conn::RedisConn;

/// For how many reconciliations after its last use a caller's counts are still read back, so
/// that a caller that comes back within about a second finds them fresh.
const REFRESH: u8 = 20;

/// A limit's share of `quota` at `percent`: at least 1.
pub(super) fn share(quota: u64, percent: u64) -> u64 {
    let part = u128::from(quota) * u128::from(percent) / 100;
    u64::try_from(part).unwrap_or(u64::MAX).max(1)
}

/// One limit's count in one window, as this instance knows it.
#[derive(Debug)]
pub(super) struct Entry {
    pub name: &'static str,
    pub kind: Window,
    pub window: u64,
    pub ttl: u64,
    /// The total in Redis at the last reconciliation (this instance's use included).
    pub global: u64,
    /// Used here since, not yet sent.
    pub pending: u64,
    /// Sent with the reconciliation under way, its reply not yet applied.
    pub in_flight: u64,
}

impl Entry {
    fn unsynced(&self) -> u64 {
        self.pending.saturating_add(self.in_flight)
    }

    fn view(&self) -> u64 {
        self.global.saturating_add(self.unsynced())
    }
}

/// One caller's counts on this instance.
#[derive(Debug, Default)]
pub(super) struct Scope {
    pub entries: Vec<Entry>,
    /// `concurrent`'s quota, once a check asked for a slot.
    pub slots: Option<u64>,
    /// Slots held here now.
    pub active: u64,
    /// Slots held here as Redis last heard (what the other instances see of this one).
    pub reported: u64,
    /// Slots the other instances held at the last reconciliation.
    pub others: u64,
    /// Reconciliations left in which this caller is sent though unused ([`REFRESH`]).
    pub refresh: u8,
}

impl Scope {
    fn find(&self, c: &Counter) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.name == c.limit.name && e.window == c.window)
    }

    /// Add `n` to `c`'s count here, making its entry if this instance had none (with `n` 0: so
    /// that reconciliations read it back, though this instance adds nothing to it).
    fn add(&mut self, c: &Counter, n: u64) {
        match self
            .entries
            .iter_mut()
            .find(|e| e.name == c.limit.name && e.window == c.window)
        {
            Some(e) => e.pending = e.pending.saturating_add(n),
            None => self.entries.push(Entry {
                name: c.limit.name,
                kind: c.limit.window,
                window: c.window,
                ttl: c.ttl,
                global: 0,
                pending: n,
                in_flight: 0,
            }),
        }
    }

    /// The first of `counters` (at position `from` of the check) that does not fit: over the
    /// quota as this instance sees it, or past this instance's share.
    fn over(&self, counters: &[Counter], from: usize, percent: u64) -> Option<Outcome> {
        counters.iter().enumerate().find_map(|(i, c)| {
            if c.need == 0 {
                return None;
            }
            let (used, unsynced) = self.find(c).map_or((0, 0), |e| (e.view(), e.unsynced()));
            let at = from + i;
            if used.saturating_add(c.need) > c.limit.quota {
                return Some(Outcome::Refused { at, used });
            }
            let past_share = unsynced.saturating_add(c.need) > share(c.limit.quota, percent);
            (unsynced > 0 && past_share).then_some(Outcome::ShareSpent { at, used })
        })
    }

    /// Whether a slot of `quota` can be taken here (`at`: the slot's position in the check).
    fn slot_over(&self, quota: u64, at: usize, percent: u64) -> Option<Outcome> {
        let used = self.others.saturating_add(self.active);
        if used >= quota {
            return Some(Outcome::Refused { at, used });
        }
        let new = self.active.saturating_sub(self.reported);
        (new > 0 && new + 1 > share(quota, percent)).then_some(Outcome::ShareSpent { at, used })
    }

    /// `check` against this caller's counts, applied as [`Check`] says: whether it took a slot,
    /// or what refused it.
    fn decide(&mut self, check: &Check, percent: u64) -> Result<bool, Outcome> {
        // Every counter checked is read back from now on (a spent budget is learned so even by an
        // instance that never charged it).
        for c in check.counters.iter().chain(&check.known) {
            self.add(c, 0);
        }
        let n = check.counters.len();
        if let Some(over) = self.over(&check.counters, 0, percent) {
            return Err(over);
        }
        if let Some(quota) = check.slot {
            self.slots = Some(quota);
            if let Some(over) = self.slot_over(quota, n, percent) {
                return Err(over);
            }
        }
        for c in check.counters.iter().filter(|c| c.add > 0) {
            self.add(c, c.add);
        }
        // Read after the admission's charge, as the exact mode's script does.
        if let Some(over) = self.over(&check.known, n + 1, percent) {
            return Err(over);
        }
        if check.slot.is_some() {
            self.active += 1;
        }
        Ok(check.slot.is_some())
    }

    /// Whether this caller has used half of a share since it was last reconciled: time for an
    /// early reconciliation.
    fn running_low(&self, quotas: impl Fn(&Entry) -> Option<u64>, percent: u64) -> bool {
        let counters = self.entries.iter().any(|e| {
            quotas(e).is_some_and(|q| e.unsynced().saturating_mul(2) >= share(q, percent))
        });
        let new = self.active.saturating_sub(self.reported);
        let slots = self
            .slots
            .is_some_and(|q| new > 0 && new.saturating_mul(2) >= share(q, percent));
        counters || slots
    }
}

/// What the approximate mode shares between its handles, its slots and its reconciling task.
pub(super) struct Shared {
    pub scopes: Mutex<HashMap<String, Scope>>,
    pub settings: Approximate,
    /// This instance's name among those reporting slots to Redis.
    pub instance: String,
    pub conn: RedisConn,
    pub metrics: Metrics,
    pub clock: Clock,
    /// The last reconciliation failed (Redis slow or down): `limits_on_store_error: closed`
    /// refuses until one succeeds.
    pub failing: AtomicBool,
    /// Asks the reconciling task for an early reconciliation.
    pub wake: Arc<Notify>,
    /// Told when a reconciliation has gone round (landed, failed or had nothing to send).
    pub landed: Notify,
    /// Reconciliations begun (counted before each takes what it sends), and the number of the
    /// last one gone round: a request waiting for its own use to be reconciled waits for one
    /// begun after that use was counted.
    pub begun: std::sync::atomic::AtomicU64,
    pub done: std::sync::atomic::AtomicU64,
    /// The reconciling task was started (on the first check: a runtime is needed).
    pub started: AtomicBool,
    /// When the reconciling task last went round (wall-clock ms): one that stopped going round
    /// (its runtime was shut down) is replaced (`sync::start`).
    pub last_tick: std::sync::atomic::AtomicU64,
    /// Reconciliations done, for the tests.
    #[cfg(test)]
    pub syncs: std::sync::atomic::AtomicUsize,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, Scope>> {
        // Plain numbers that no panic leaves half-written.
        self.scopes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every caller's counts on this instance (a handle: clones share them).
#[derive(Clone)]
pub(crate) struct Counts {
    pub(super) shared: Arc<Shared>,
}

/// A concurrent slot held on this instance; given back (locally, reported at the next
/// reconciliation) when dropped.
pub(crate) struct Slot {
    shared: Arc<Shared>,
    scope: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(s) = self.shared.lock().get_mut(&self.scope) {
            s.active = s.active.saturating_sub(1);
        }
    }
}

impl Counts {
    pub(crate) fn new(conn: RedisConn, metrics: Metrics, clock: Clock, a: Approximate) -> Counts {
        Counts {
            shared: Arc::new(Shared {
                scopes: Mutex::new(HashMap::new()),
                settings: a,
                instance: uuid::Uuid::new_v4().to_string(),
                conn,
                metrics,
                clock,
                failing: AtomicBool::new(false),
                wake: Arc::new(Notify::new()),
                landed: Notify::new(),
                begun: std::sync::atomic::AtomicU64::new(0),
                done: std::sync::atomic::AtomicU64::new(0),
                started: AtomicBool::new(false),
                last_tick: std::sync::atomic::AtomicU64::new(0),
                #[cfg(test)]
                syncs: std::sync::atomic::AtomicUsize::new(0),
            }),
        }
    }

    /// Once a reconciliation begun after now has gone round (asked for now), or after one
    /// interval and one store timeout, whichever comes first. One already under way may have
    /// taken its batch before this caller's last use was counted, so it does not do.
    pub(crate) async fn reconciled(&self) {
        let want = self.shared.begun.load(Ordering::Acquire) + 1;
        let within = self.shared.settings.sync + self.shared.conn.timeout();
        let wait = async {
            loop {
                // Made before `done` is read: `notify_waiters` reaches a `Notified` from its
                // creation, so a reconciliation landing in between is not missed.
                let landed = self.shared.landed.notified();
                if self.shared.done.load(Ordering::Acquire) >= want {
                    return;
                }
                self.shared.wake.notify_one();
                landed.await;
            }
        };
        // Past the deadline the request is decided again as things stand (refused by its share).
        let _ = tokio::time::timeout(within, wait).await;
    }

    /// Whether the last reconciliation failed.
    pub(crate) fn failing(&self) -> bool {
        self.shared.failing.load(Ordering::Relaxed)
    }

    /// Apply `check` for `scope` to this instance's counts: the slot it took (if it asked for
    /// one), or the refusal, with the same rules for what a refusal applies as the exact mode's
    /// ([`Check`]).
    pub(crate) fn apply(&self, scope: &str, check: &Check) -> Result<Option<Slot>, Outcome> {
        // Out of touch with Redis (and `open`, else the limiter refused already): shares bound
        // nothing then, and the whole quota is this instance's to check (`approx` docs).
        let percent = if self.failing() {
            100
        } else {
            self.shared.settings.share_percent
        };
        let mut scopes = self.shared.lock();
        if !scopes.contains_key(scope) {
            scopes.insert(scope.to_string(), Scope::default());
        }
        let Some(s) = scopes.get_mut(scope) else {
            return Ok(None);
        };
        s.refresh = REFRESH;
        let decided = s.decide(check, percent);
        let share_spent = matches!(decided, Err(Outcome::ShareSpent { .. }));
        let low = share_spent || s.running_low(|e| quota_of(check, e), percent);
        drop(scopes);
        if low {
            self.shared.wake.notify_one();
        }
        decided.map(|slot| {
            slot.then(|| Slot {
                shared: self.shared.clone(),
                scope: scope.to_string(),
            })
        })
    }

    /// What a finished request used (`check`'s counters; one with a need counts only where it
    /// fits, as this instance sees it), added to this instance's counts, sent at the next
    /// reconciliation.
    pub(crate) fn charge(&self, scope: &str, check: &Check) {
        let percent = self.shared.settings.share_percent;
        let mut scopes = self.shared.lock();
        if !scopes.contains_key(scope) {
            scopes.insert(scope.to_string(), Scope::default());
        }
        let Some(s) = scopes.get_mut(scope) else {
            return;
        };
        s.refresh = REFRESH;
        for c in check.counters.iter().filter(|c| c.add > 0) {
            let used = s.find(c).map_or(0, Entry::view);
            if c.need == 0 || used.saturating_add(c.need) <= c.limit.quota {
                s.add(c, c.add);
            }
        }
        let low = s.running_low(|e| quota_of(check, e), percent);
        drop(scopes);
        if low {
            self.shared.wake.notify_one();
        }
    }
}

/// The quota of `e`'s limit, when `check` names it (the counts do not keep quotas: a reload may
/// change them, and each check carries the ones in force).
fn quota_of(check: &Check, e: &Entry) -> Option<u64> {
    check
        .counters
        .iter()
        .chain(&check.known)
        .find(|c| c.limit.name == e.name && c.window == e.window)
        .map(|c| c.limit.quota)
}

/// What one reconciliation sends for one caller: each counter's limit name and window (its key's
/// end), what to add to it and its TTL; and the slots held here, when the caller has `concurrent`.
#[derive(Debug, Default)]
pub(super) struct Outgoing {
    pub counters: Vec<(&'static str, u64, u64, u64)>,
    pub slots: Option<u64>,
}

impl Scope {
    /// What to send for this caller now (`None`: nothing, it has been idle a while): what it
    /// used since (moved to `in_flight`), and the current windows' counters to read back.
    pub(super) fn take(&mut self, now: Now) -> Option<Outgoing> {
        let dirty = self.entries.iter().any(|e| e.pending > 0) || self.active != self.reported;
        if self.refresh == 0 && !dirty && self.active == 0 {
            return None;
        }
        self.refresh = self.refresh.saturating_sub(1);
        let mut out = Outgoing::default();
        for e in &mut self.entries {
            if e.pending == 0 && e.window != now.window(e.kind) {
                continue;
            }
            // Only what this reconciliation carries: were another under way, its part stays its.
            let delta = std::mem::take(&mut e.pending);
            e.in_flight = e.in_flight.saturating_add(delta);
            out.counters.push((e.name, e.window, delta, e.ttl));
        }
        if self.slots.is_some() {
            out.slots = Some(self.active);
        }
        (!out.counters.is_empty() || out.slots.is_some()).then_some(out)
    }

    /// The reconciliation's answer for this caller: each counter's total and the other
    /// instances' slots (`None`: it failed, and what it carried is sent again next time).
    pub(super) fn settle(&mut self, sent: &Outgoing, reply: Option<&[u64]>, now: Now) {
        for (i, (name, window, delta, _)) in sent.counters.iter().enumerate() {
            let Some(e) = self
                .entries
                .iter_mut()
                .find(|e| e.name == *name && e.window == *window)
            else {
                continue;
            };
            e.in_flight = e.in_flight.saturating_sub(*delta);
            match reply.and_then(|r| r.get(i)) {
                Some(total) => e.global = *total,
                None => e.pending = e.pending.saturating_add(*delta),
            }
        }
        if let (Some(reply), Some(active)) = (reply, sent.slots) {
            self.others = reply.get(sent.counters.len()).copied().unwrap_or(0);
            self.reported = active;
        }
        // Past windows, fully sent, are done with.
        self.entries
            .retain(|e| e.unsynced() > 0 || e.window == now.window(e.kind));
    }

    /// Nothing left to send or hold: the caller can be forgotten.
    pub(super) fn idle(&self) -> bool {
        self.refresh == 0
            && self.entries.iter().all(|e| e.unsynced() == 0)
            && self.active == 0
            && self.reported == 0
    }
}
