//! What one limit check is, whichever backend applies it: the counters it reads and charges, the
//! concurrent slot it may take, its outcome, and the rule that decides it.

use crate::auth::limits::Limit;

/// One windowed counter a check reads, and charges when the check passes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counter {
    pub limit: Limit,
    /// The window's number ([`super::window::Now::window`]).
    pub window: u64,
    /// The check fails when what is used plus this exceeds the quota (0: never fails).
    pub need: u64,
    /// Added when the check passes.
    pub add: u64,
    /// Seconds the counter must live (Redis expires it; in memory, a window past is replaced).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub ttl: u64,
}

/// What one call checks: counters, and a concurrent slot to take (its quota) if any.
#[derive(Debug, Default)]
pub(crate) struct Check {
    pub counters: Vec<Counter>,
    pub slot: Option<u64>,
}

/// A check's result: passed (and applied), or the first thing that did not fit and what was used
/// of it. `at == counters.len()` means the concurrent slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Passed,
    Refused { at: usize, used: u64 },
}

/// The rule both backends apply: the first counter where `used + need > quota` refuses;
/// `None` when all fit.
pub(crate) fn first_over(check: &Check, used: impl Fn(usize, &Counter) -> u64) -> Option<Outcome> {
    check.counters.iter().enumerate().find_map(|(i, c)| {
        let u = used(i, c);
        (c.need > 0 && u.saturating_add(c.need) > c.limit.quota)
            .then_some(Outcome::Refused { at: i, used: u })
    })
}
