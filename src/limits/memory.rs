//! Limits counted in this process (no Redis configured): the same rules as the Redis script, on
//! a map under one mutex, held only for the few comparisons of one check (never across an
//! `await`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::check::{first_over, Check, Outcome};
use super::window::Now;
use crate::auth::limits::Window;

/// Callers seen before this many are kept; past it, callers with nothing current are forgotten
/// (JWT subjects are as many as the identity provider makes).
const PRUNE_ABOVE: usize = 10_000;

/// One caller's counters: a limit's name, its window kind and number, and what is used in it.
#[derive(Default)]
struct Scope {
    counters: Vec<(&'static str, Window, u64, u64)>,
    active: u64,
}

impl Scope {
    fn used(&self, name: &str, window: u64) -> u64 {
        self.counters
            .iter()
            .find(|(n, _, w, _)| *n == name && *w == window)
            .map_or(0, |(.., used)| *used)
    }
}

/// Every caller's counters in this process.
#[derive(Default)]
pub(crate) struct Counts {
    scopes: Mutex<HashMap<String, Scope>>,
}

/// A concurrent slot taken in this process; given back when dropped.
pub(crate) struct Slot {
    counts: Arc<Counts>,
    scope: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(scope) = self.counts.lock().get_mut(&self.scope) {
            scope.active = scope.active.saturating_sub(1);
        }
    }
}

impl Counts {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Scope>> {
        // The map holds plain numbers that no panic leaves half-written.
        self.scopes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `scope` has used of each counter (a limit's name and its window's number) and the
    /// slots it holds now. Reads only: nothing is counted, no slot taken, no caller added.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn peek(&self, scope: &str, counters: &[(&str, u64)]) -> (Vec<u64>, u64) {
        let scopes = self.lock();
        match scopes.get(scope) {
            Some(s) => (
                counters.iter().map(|(n, w)| s.used(n, *w)).collect(),
                s.active,
            ),
            None => (vec![0; counters.len()], 0),
        }
    }

    /// Apply `check` for `scope`: `Ok` with the slot it took (if it asked for one), or the
    /// refusal — with nothing applied, or, refused by what it is known to use, with its
    /// admission's counters charged and no slot taken (as [`Check`] says).
    pub(crate) fn apply(
        self: &Arc<Self>,
        scope: &str,
        check: &Check,
    ) -> Result<Option<Slot>, Outcome> {
        let now = Now::current();
        let mut scopes = self.lock();
        if !scopes.contains_key(scope) {
            if scopes.len() >= PRUNE_ABOVE {
                scopes.retain(|_, s| {
                    s.active > 0 || s.counters.iter().any(|(_, k, w, _)| *w == now.window(*k))
                });
            }
            scopes.insert(scope.to_string(), Scope::default());
        }
        let Some(s) = scopes.get_mut(scope) else {
            return Ok(None);
        };
        let n = check.counters.len();
        if let Some(over) = first_over(&check.counters, 0, |c| s.used(c.limit.name, c.window)) {
            return Err(over);
        }
        if let Some(quota) = check.slot {
            if s.active >= quota {
                return Err(Outcome::Refused {
                    at: n,
                    used: s.active,
                });
            }
        }
        for c in check.counters.iter().filter(|c| c.add > 0) {
            match s.counters.iter_mut().find(|(n, ..)| *n == c.limit.name) {
                // A counter of an older window starts again from zero.
                Some(entry) if entry.2 != c.window => {
                    *entry = (c.limit.name, c.limit.window, c.window, c.add)
                }
                Some(entry) => entry.3 = entry.3.saturating_add(c.add),
                None => s
                    .counters
                    .push((c.limit.name, c.limit.window, c.window, c.add)),
            }
        }
        // Read after the admission's charge, as a second call would have.
        if let Some(over) = first_over(&check.known, n + 1, |c| s.used(c.limit.name, c.window)) {
            return Err(over);
        }
        if check.slot.is_none() {
            return Ok(None);
        }
        s.active += 1;
        Ok(Some(Slot {
            counts: self.clone(),
            scope: scope.to_string(),
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::auth::limits::{Limit, Meter};
    use crate::limits::check::Counter;

    fn rpm(quota: u64, window: u64, need: u64, add: u64) -> Counter {
        Counter {
            limit: Limit {
                name: "requests_per_minute",
                meter: Meter::Requests,
                window: Window::Minute,
                quota,
            },
            window,
            need,
            add,
            ttl: 60,
        }
    }

    #[test]
    fn counts_refuse_at_the_quota_and_restart_with_the_window() {
        let counts = Arc::new(Counts::default());
        let check = |w| Check {
            counters: vec![rpm(2, w, 1, 1)],
            ..Check::default()
        };
        assert!(counts.apply("a", &check(7)).is_ok());
        assert!(counts.apply("a", &check(7)).is_ok());
        assert_eq!(
            counts.apply("a", &check(7)).err(),
            Some(Outcome::Refused { at: 0, used: 2 })
        );
        // Another caller has its own budget; the next window starts from zero.
        assert!(counts.apply("b", &check(7)).is_ok());
        assert!(counts.apply("a", &check(8)).is_ok());
    }

    #[test]
    fn slots_are_given_back_when_dropped() {
        let counts = Arc::new(Counts::default());
        let check = Check {
            slot: Some(1),
            ..Check::default()
        };
        let held = counts.apply("a", &check).unwrap();
        assert!(held.is_some());
        assert_eq!(
            counts.apply("a", &check).err(),
            Some(Outcome::Refused { at: 0, used: 1 })
        );
        drop(held);
        assert!(counts.apply("a", &check).unwrap().is_some());
    }

    #[test]
    fn a_refused_check_applies_nothing() {
        let counts = Arc::new(Counts::default());
        let check = Check {
            counters: vec![rpm(5, 1, 1, 1)],
            slot: Some(1),
            ..Check::default()
        };
        let _held = counts.apply("a", &check).unwrap();
        assert!(counts.apply("a", &check).is_err());
        // The refused request was not counted: 1 of 5 used.
        let probe = Check {
            counters: vec![rpm(5, 1, 4, 0)],
            ..Check::default()
        };
        assert!(counts.apply("a", &probe).is_ok());
        let over = Check {
            counters: vec![rpm(5, 1, 5, 0)],
            ..Check::default()
        };
        assert_eq!(
            counts.apply("a", &over).err(),
            Some(Outcome::Refused { at: 0, used: 1 })
        );
    }

    #[test]
    fn a_refusal_by_the_known_use_charges_the_admission_and_takes_no_slot() {
        let counts = Arc::new(Counts::default());
        let check = |need| Check {
            counters: vec![rpm(5, 1, 1, 1)],
            slot: Some(1),
            known: vec![rpm(5, 1, need, 0)],
        };
        // 1 (this request, counted first) + 5 does not fit: refused at the first known counter,
        // after the counter and the slot.
        assert_eq!(
            counts.apply("a", &check(5)).err(),
            Some(Outcome::Refused { at: 2, used: 1 })
        );
        // Counted, and no slot held: the next one takes it.
        let held = counts.apply("a", &check(3)).unwrap();
        assert!(held.is_some());
        let probe = Check {
            counters: vec![rpm(5, 1, 3, 0)],
            ..Check::default()
        };
        assert!(counts.apply("a", &probe).is_ok());
        let over = Check {
            counters: vec![rpm(5, 1, 4, 0)],
            ..Check::default()
        };
        assert_eq!(
            counts.apply("a", &over).err(),
            Some(Outcome::Refused { at: 0, used: 2 })
        );
    }
}
