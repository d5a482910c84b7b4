//! The bounded hand-over between the request path and the ledger's writer.
//!
//! A request's record goes into a queue under a mutex held for one `push_back` (never across an
//! await: the request path never waits on the database). The bound counts every record not yet
//! written — those waiting and those the writer holds while it retries — so memory stays bounded
//! however long the database is away; a record that does not fit is dropped at once and counted
//! (the count is exact: one increment per record refused, plus those still unwritten when the
//! server stops).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use super::record::Record;
use crate::metrics::{inc, Metrics};

/// The queue and its counters, shared by the `Ledger` handles and the writer.
pub(crate) struct Queue {
    state: Mutex<State>,
    /// Most records not yet written.
    bound: usize,
    /// A full batch is waiting: the writer need not wait for its flush interval.
    batch: usize,
    pub(crate) wake: Notify,
    dropped: AtomicU64,
    written: AtomicU64,
    metrics: Metrics,
}

struct State {
    waiting: VecDeque<Record>,
    /// Records the writer took and has not written yet.
    in_hand: usize,
}

impl Queue {
    pub(crate) fn new(bound: usize, batch: usize, metrics: Metrics) -> Queue {
        Queue {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                in_hand: 0,
            }),
            bound,
            batch: batch.max(1),
            wake: Notify::new(),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
            metrics,
        }
    }

    /// A panic elsewhere while the lock was held leaves the queue consistent (every change under
    /// it is one step), so a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `record`, or drop and count it when the bound is reached. Returns whether it was
    /// queued.
    pub(crate) fn push(&self, record: Record) -> bool {
        let waiting = {
            let mut state = self.lock();
            if state.waiting.len() + state.in_hand >= self.bound {
                drop(state);
                self.count_dropped(1);
                return false;
            }
            state.waiting.push_back(record);
            state.waiting.len()
        };
        if waiting == self.batch {
            self.wake.notify_one();
        }
        true
    }

    /// Up to `max` of the oldest waiting records, now in the writer's hand.
    pub(crate) fn take(&self, max: usize) -> Vec<Record> {
        let mut state = self.lock();
        let n = max.min(state.waiting.len());
        state.in_hand += n;
        state.waiting.drain(..n).collect()
    }

    /// `n` records the writer held are in the database.
    pub(crate) fn written(&self, n: usize) {
        self.release(n);
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        self.metrics
            .with(|f| inc(&f.ledger_records, &["written"], n as u64));
    }

    /// `n` records the writer held are given up (the server is stopping): counted as dropped.
    pub(crate) fn lost(&self, n: usize) {
        self.release(n);
        self.count_dropped(n as u64);
    }

    fn release(&self, n: usize) {
        let mut state = self.lock();
        state.in_hand = state.in_hand.saturating_sub(n);
    }

    fn count_dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
        self.metrics
            .with(|f| inc(&f.ledger_records, &["dropped"], n));
    }

    /// Records not yet written (waiting and in the writer's hand).
    pub(crate) fn held(&self) -> usize {
        let state = self.lock();
        state.waiting.len() + state.in_hand
    }

    /// Records waiting for the writer to take them.
    pub(crate) fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Records dropped since start.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Records written since start.
    pub(crate) fn written_total(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// The bound on records not yet written.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: u16) -> Record {
        Record::new("public", "/api/v1/rerank", 200 + i)
    }

    #[test]
    fn the_bound_counts_records_in_the_writers_hand_and_drops_are_exact() {
        let q = Queue::new(3, 2, Metrics::off());
        assert!(q.push(record(0)));
        assert!(q.push(record(1)));
        let batch = q.take(2);
        assert_eq!(batch.len(), 2);
        assert!(q.push(record(2)));
        // Two in hand, one waiting: the bound of 3 is reached.
        assert!(!q.push(record(3)));
        assert!(!q.push(record(4)));
        assert_eq!((q.held(), q.dropped()), (3, 2));
        q.written(2);
        assert_eq!(q.held(), 1);
        assert!(q.push(record(5)));
        let rest = q.take(10);
        assert_eq!(
            rest.iter().map(|r| r.status).collect::<Vec<_>>(),
            [202, 205]
        );
        q.lost(2);
        assert_eq!((q.held(), q.dropped(), q.written_total()), (0, 4, 2));
    }
}
