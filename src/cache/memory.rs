//! Entries in this process's memory, bounded in bytes, on Pingora's TinyUFO: TinyLFU admission
//! (a new entry displaces others only if it is asked for more often) and S3-FIFO eviction, so
//! popular answers stay while one-off ones pass through.
//!
//! TinyUFO weighs an entry in `u16` units; this store weighs in KiB (an entry's body and its key,
//! rounded up), so an entry may be up to 64 MiB and the bound is kept to the KiB. TinyUFO keeps
//! only a 64-bit hash of its key, so each value carries its full digest, checked on every read: a
//! hash collision is a miss, never another request's answer. Purging a model moves it to a new
//! generation, part of every key: its old entries are never read again and age out as TinyUFO
//! evicts them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tinyufo::TinyUfo;

use super::{Entry, Key};
use crate::metrics::Metrics;

/// The unit of TinyUFO's weights.
const UNIT: usize = 1024;
/// What an entry costs beside its body: its key, metadata and TinyUFO's bookkeeping.
const OVERHEAD: usize = 160;

struct Held {
    digest: [u8; 32],
    generation: u64,
    entry: Entry,
}

pub(super) struct MemoryStore {
    ufo: TinyUfo<([u8; 32], u64), Arc<Held>>,
    /// Each purged model's generation (absent: 0).
    generations: Mutex<HashMap<String, u64>>,
    /// Bytes held (bodies and overhead), as weighed.
    bytes: AtomicU64,
    metrics: Metrics,
}

impl MemoryStore {
    pub(super) fn new(max_bytes: usize, metrics: Metrics) -> MemoryStore {
        let units = (max_bytes / UNIT).max(1);
        // TinyUFO sizes its frequency sketch from an estimate of the entries it will hold.
        let estimated = (max_bytes / (16 * UNIT)).clamp(64, 1 << 20);
        MemoryStore {
            ufo: TinyUfo::new(units, estimated),
            generations: Mutex::default(),
            bytes: AtomicU64::new(0),
            metrics,
        }
    }

    fn generation(&self, model: &str) -> u64 {
        match self.generations.lock() {
            Ok(g) => g.get(model).copied().unwrap_or(0),
            Err(poisoned) => poisoned.into_inner().get(model).copied().unwrap_or(0),
        }
    }

    pub(super) fn get(&self, key: &Key) -> Option<Entry> {
        let generation = self.generation(&key.model);
        let held = self.ufo.get(&(key.digest, generation))?;
        (held.digest == key.digest && held.generation == generation).then(|| held.entry.clone())
    }

    pub(super) fn put(&self, key: &Key, entry: Entry) -> bool {
        let size = entry.body.len() + OVERHEAD;
        let Ok(weight) = u16::try_from(size.div_ceil(UNIT)) else {
            return false;
        };
        let generation = self.generation(&key.model);
        let ufo_key = (key.digest, generation);
        // Replacing an entry: its weight leaves first, so the count stays exact.
        self.release(self.ufo.remove(&ufo_key));
        let held = Arc::new(Held {
            digest: key.digest,
            generation,
            entry,
        });
        self.bytes
            .fetch_add(weight_bytes(weight), Ordering::Relaxed);
        let evicted = self.ufo.put(ufo_key, held, weight);
        let mut count = 0;
        for kv in evicted {
            self.bytes
                .fetch_sub(weight_bytes(kv.weight), Ordering::Relaxed);
            count += 1;
        }
        if count > 0 {
            self.metrics
                .with(|f| crate::metrics::inc(&f.cache_evictions, &[], count));
        }
        self.report();
        true
    }

    pub(super) fn remove(&self, key: &Key) -> bool {
        let generation = self.generation(&key.model);
        let removed = self.ufo.remove(&(key.digest, generation));
        let found = removed.is_some();
        self.release(removed);
        self.report();
        found
    }

    fn release(&self, removed: Option<Arc<Held>>) {
        if let Some(held) = removed {
            let size = held.entry.body.len() + OVERHEAD;
            let weight = u16::try_from(size.div_ceil(UNIT)).unwrap_or(u16::MAX);
            self.bytes
                .fetch_sub(weight_bytes(weight), Ordering::Relaxed);
        }
    }

    pub(super) fn purge_model(&self, model: &str) {
        let mut g = match self.generations.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *g.entry(model.to_string()).or_insert(0) += 1;
    }

    /// Bytes held, as weighed (bodies and overhead, in whole KiB per entry).
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn report(&self) {
        let bytes = self.bytes();
        self.metrics.cache_bytes(bytes);
    }
}

fn weight_bytes(weight: u16) -> u64 {
    u64::from(weight) * UNIT as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{KeyBuilder, Meta};
    use bytes::Bytes;

    fn key(i: usize) -> Key {
        let mut b = KeyBuilder::new("m", "speech", "");
        b.field("input", i.to_string().as_bytes());
        b.finish()
    }

    fn entry(len: usize) -> Entry {
        Entry {
            body: Bytes::from(vec![7u8; len]),
            meta: Meta::default(),
        }
    }

    #[test]
    fn stays_within_its_bound_under_a_larger_workload() {
        let store = MemoryStore::new(256 * 1024, Metrics::off());
        for i in 0..2000 {
            store.put(&key(i), entry(10_000));
            assert!(store.bytes() <= 256 * 1024, "{} after {i}", store.bytes());
        }
        // Something is held, and what is held is whole.
        let held: Vec<_> = (0..2000).filter_map(|i| store.get(&key(i))).collect();
        assert!(!held.is_empty());
        assert!(held.iter().all(|e| e.body.len() == 10_000));
    }

    #[test]
    fn popular_entries_stay() {
        let store = MemoryStore::new(64 * 1024, Metrics::off());
        store.put(&key(0), entry(4000));
        for i in 1..500 {
            // The popular entry is read between every one-off.
            assert!(store.get(&key(0)).is_some(), "evicted after {i}");
            store.put(&key(i), entry(4000));
        }
    }

    #[test]
    fn purging_a_model_or_a_key() {
        let store = MemoryStore::new(1 << 20, Metrics::off());
        store.put(&key(1), entry(10));
        store.put(&key(2), entry(10));
        assert!(store.remove(&key(1)));
        assert!(store.get(&key(1)).is_none());
        assert!(store.get(&key(2)).is_some());
        store.purge_model("m");
        assert!(store.get(&key(2)).is_none());
        store.put(&key(2), entry(10));
        assert!(store.get(&key(2)).is_some());
    }
}
