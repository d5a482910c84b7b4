//! What finished requests owe the limits in Redis and has not been sent yet: their usage and
//! their concurrent slots to give back, gathered per caller so that the requests finishing
//! together cost Redis one call per caller (issue 32: the end-of-request charge batched off the
//! request's path), and so that a caller's next admission carries what it owes in its own call.
//!
//! Plain data: `redis::Counts` decides when what is owed is sent (`Owed::take`), and the script
//! applies it before anything else in that call.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::check::Counter;

/// One counter owed: `add` to the window `window` of the limit `name`, where `need` fits
/// (0: always; a request ended before its admission counts against `requests_per_minute` only
/// where its admission would have let it in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owing {
    pub name: &'static str,
    pub window: u64,
    pub quota: u64,
    pub need: u64,
    pub add: u64,
    pub ttl: u64,
}

/// What one caller owes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Debt {
    pub counters: Vec<Owing>,
    /// Ids of leases to give back.
    pub returned: Vec<String>,
    /// How many finished requests this is (for the log when it cannot be sent).
    pub requests: usize,
}

impl Debt {
    /// Add one finished request's `counters` and its lease `returned`. Unconditional charges of
    /// one window add up (one `INCRBY` of the sum); a conditional one stays on its own, since
    /// "both or neither" is not what two requests each counted where it fits would get.
    fn add(&mut self, counters: &[Counter], returned: Option<String>) {
        for c in counters {
            let owing = Owing {
                name: c.limit.name,
                window: c.window,
                quota: c.limit.quota,
                need: c.need,
                add: c.add,
                ttl: c.ttl,
            };
            let same = |o: &&mut Owing| {
                o.need == 0 && owing.need == 0 && o.name == owing.name && o.window == owing.window
            };
            match self.counters.iter_mut().find(same) {
                Some(o) => {
                    o.add = o.add.saturating_add(owing.add);
                    o.ttl = o.ttl.max(owing.ttl);
                }
                None => self.counters.push(owing),
            }
        }
        self.returned.extend(returned);
        self.requests += 1;
    }
}

/// What every caller owes, by the caller's key tag.
#[derive(Default)]
pub(crate) struct Owed {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_tag: HashMap<String, Debt>,
    /// A sending of everything owed is on its way ([`Owed::take_all`] not yet called since it
    /// was asked for): what is noted meanwhile goes with it. Not "anything owed": an admission
    /// taking its caller's debt must not make every next request ask for a sending of its own.
    sending: bool,
}

impl Owed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Note what a finished request owes. True when no sending of what is owed is on its way:
    /// the caller that gets true sees that everything owed is sent ([`Owed::take_all`]).
    pub(crate) fn note(&self, tag: &str, counters: &[Counter], returned: Option<String>) -> bool {
        let mut inner = self.lock();
        match inner.by_tag.get_mut(tag) {
            Some(debt) => debt.add(counters, returned),
            None => {
                let mut debt = Debt::default();
                debt.add(counters, returned);
                inner.by_tag.insert(tag.to_string(), debt);
            }
        }
        !std::mem::replace(&mut inner.sending, true)
    }

    /// What the caller `tag` owes, taken (nothing, the common case, costs a lookup).
    pub(crate) fn take(&self, tag: &str) -> Option<Debt> {
        let mut inner = self.lock();
        if inner.by_tag.is_empty() {
            return None;
        }
        inner.by_tag.remove(tag)
    }

    /// Everything owed, taken by the sending that was asked for: what is noted from now on asks
    /// for another.
    pub(crate) fn take_all(&self) -> HashMap<String, Debt> {
        let mut inner = self.lock();
        inner.sending = false;
        std::mem::take(&mut inner.by_tag)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::auth::limits::{Limit, Meter, Window};

    fn counter(name: &'static str, window: u64, need: u64, add: u64, ttl: u64) -> Counter {
        Counter {
            limit: Limit {
                name,
                meter: Meter::Tokens,
                window: Window::Minute,
                quota: 100,
            },
            window,
            need,
            add,
            ttl,
        }
    }

    #[test]
    fn one_callers_charges_of_one_window_add_up_and_others_stay_apart() {
        let owed = Owed::default();
        assert!(owed.note("{a}", &[counter("tokens_per_minute", 7, 0, 10, 50)], None));
        assert!(!owed.note(
            "{a}",
            &[
                counter("tokens_per_minute", 7, 0, 5, 60),
                // The next window is another counter.
                counter("tokens_per_minute", 8, 0, 1, 60),
            ],
            Some("lease-1".into()),
        ));
        assert!(!owed.note("{b}", &[counter("tokens_per_minute", 7, 0, 3, 50)], None));
        let a = owed.take("{a}").unwrap();
        assert_eq!(a.requests, 2);
        assert_eq!(a.returned, vec!["lease-1".to_string()]);
        assert_eq!(
            a.counters
                .iter()
                .map(|o| (o.window, o.add, o.ttl))
                .collect::<Vec<_>>(),
            vec![(7, 15, 60), (8, 1, 60)]
        );
        // Taken means gone; the other caller's is still owed, until all is taken.
        assert_eq!(owed.take("{a}"), None);
        // A caller's debt taken by its admission asks for no other sending: one is on its way.
        assert!(!owed.note("{a}", &[], Some("lease-2".into())));
        assert!(owed.take("{a}").is_some());
        assert!(!owed.note("{a}", &[], Some("lease-3".into())));
        let all = owed.take_all();
        assert_eq!(all.len(), 2);
        assert_eq!(all["{b}"].counters[0].add, 3);
        assert!(owed.take_all().is_empty());
        // Owed after the sending took everything: the noter is told to see it sent.
        assert!(owed.note("{b}", &[], Some("lease-4".into())));
    }

    #[test]
    fn requests_counted_where_they_fit_are_not_summed() {
        let owed = Owed::default();
        let unadmitted = counter("requests_per_minute", 7, 1, 1, 60);
        owed.note("{a}", &[unadmitted], None);
        owed.note("{a}", &[unadmitted], None);
        let a = owed.take("{a}").unwrap();
        assert_eq!(a.counters, vec![a.counters[0]; 2]);
        assert_eq!((a.counters[0].need, a.counters[0].add), (1, 1));
    }
}
