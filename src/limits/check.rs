//! What one limit check is, whichever backend applies it: the counters it reads and charges, the
//! concurrent slot it may take, what must fit after those, its outcome, and the rule that decides
//! it.

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

/// What one call checks, in this order: `counters`, then a concurrent slot to take (its quota)
/// if any, then `known` — what the request is known to use, which must fit in what is left.
///
/// `known` is the second of what were two calls (admission, then the known cost once the body is
/// validated) made one: a refusal by a `known` counter leaves the store as that second call's
/// refusal did, after the first had passed — `counters` charged (the request counted against
/// `requests_per_minute`), and no slot held (the first call's slot was given back as the
/// refused request ended). A refusal anywhere before applies nothing. `known` counters add
/// nothing.
#[derive(Debug, Default)]
pub(crate) struct Check {
    pub counters: Vec<Counter>,
    pub slot: Option<u64>,
    pub known: Vec<Counter>,
}

/// What refused a check ([`Check::refused_by`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum RefusedBy<'a> {
    /// One of the admission's counters (what is already spent).
    Counter(&'a Counter),
    /// The concurrent slots.
    Slot,
    /// One of what the request is known to use.
    Known(&'a Counter),
}

impl Check {
    /// What refused the check at position `at` of an [`Outcome::Refused`] (`None`: past them).
    pub(crate) fn refused_by(&self, at: usize) -> Option<RefusedBy<'_>> {
        let n = self.counters.len();
        match at {
            _ if at < n => self.counters.get(at).map(RefusedBy::Counter),
            _ if at == n => Some(RefusedBy::Slot),
            _ => self.known.get(at - n - 1).map(RefusedBy::Known),
        }
    }
}

/// A check's result: passed (and applied), or the first thing that did not fit and what was used
/// of it. `at` counts in the order checked: `counters` (`0..n`), the concurrent slots (`n`), then
/// `known` (`n + 1..`); [`Check::refused_by`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Passed,
    Refused {
        at: usize,
        used: u64,
    },
    /// Approximate mode only (`approx`): it would fit in what this instance last knew, but the
    /// instance has admitted its share of that limit since it last reconciled with Redis; the
    /// reconciliation it asked for lands within about a round trip (`Retry-After: 1`).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    ShareSpent {
        at: usize,
        used: u64,
    },
}

/// The rule both backends apply to a list of counters starting at position `from` of the check:
/// the first counter where `used + need > quota` refuses; `None` when all fit.
pub(crate) fn first_over(
    counters: &[Counter],
    from: usize,
    used: impl Fn(&Counter) -> u64,
) -> Option<Outcome> {
    counters.iter().enumerate().find_map(|(i, c)| {
        let u = used(c);
        (c.need > 0 && u.saturating_add(c.need) > c.limit.quota).then_some(Outcome::Refused {
            at: from + i,
            used: u,
        })
    })
}
