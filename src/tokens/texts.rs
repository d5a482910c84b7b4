//! A bounded cache of whole texts' token counts, shared by the worker threads, so that a text sent
//! again (a rerank document reranked for another query, as retrieval pipelines do; a client's
//! retry) is counted once and looked up afterwards.
//!
//! Counting a 230-character document costs about 650 ns; looking it up, its XXH3-128 hash and one
//! uncontended lock, about 26 ns (`hot_paths`' `tokens_230_chars`). The key is the hash and the
//! text's length, not the text: no document is copied or kept. The count stored is
//! [`super::count`]'s own, so a hit gives exactly what counting would. A wrong count needs a text
//! whose length and 128-bit hash both equal those of the one other text stored in its slot: a
//! chance of at most 2^-128 per lookup (2^-88 after 2^40 lookups), far below the rate of a hardware
//! fault, so `usage` stays exact.
//!
//! Fixed in size: 64 shards of 256 entries (16,384 texts, 32 bytes each, 512 KiB in all, each
//! shard allocated when first used), each shard behind its own small lock so worker threads rarely
//! meet; a slot is taken by the last text mapped to it (direct-mapped), so a miss costs a probe
//! and an overwrite, and memory never grows.

use std::sync::Mutex;

use xxhash_rust::xxh3::xxh3_128;

const SHARDS: usize = 64;
const SLOTS: usize = 256;
/// Texts shorter than this are counted every time: their hash and lock cost about what counting
/// them does.
const MIN_BYTES: usize = 32;

#[derive(Clone, Copy)]
struct Entry {
    hash: u128,
    /// The text's length in bytes; 0 marks an empty slot (no text this short is kept).
    len: u64,
    tokens: u64,
}

const EMPTY: Entry = Entry {
    hash: 0,
    len: 0,
    tokens: 0,
};

/// The shards; one cache serves the process ([`TEXTS`]), tests make their own.
struct Cache([Mutex<Vec<Entry>>; SHARDS]);

static TEXTS: Cache = Cache::new();

/// Tokens in `text`, as [`super::count`] gives them: remembered by its hash and length.
pub fn count(text: &str) -> usize {
    TEXTS.count(text, super::count)
}

impl Cache {
    const fn new() -> Cache {
        Cache([const { Mutex::new(Vec::new()) }; SHARDS])
    }

    /// `count_fresh(text)`, from the cache when `text` was counted before.
    fn count(&self, text: &str, count_fresh: impl FnOnce(&str) -> usize) -> usize {
        if text.len() < MIN_BYTES {
            return count_fresh(text);
        }
        let hash = xxh3_128(text.as_bytes());
        let len = text.len() as u64;
        let shard = &self.0[(hash as usize) % SHARDS];
        let slot = ((hash >> 64) as usize) % SLOTS;
        if let Ok(entries) = shard.lock() {
            if let Some(e) = entries.get(slot).filter(|e| e.hash == hash && e.len == len) {
                return e.tokens as usize;
            }
        }
        // Counted outside the lock: another thread may count the same text meanwhile, and both
        // store the same figure.
        let tokens = count_fresh(text);
        // A poisoned lock (impossible: nothing in it panics) only means the count is not kept.
        if let Ok(mut entries) = shard.lock() {
            if entries.is_empty() {
                entries.resize(SLOTS, EMPTY);
            }
            if let Some(e) = entries.get_mut(slot) {
                *e = Entry {
                    hash,
                    len,
                    tokens: tokens as u64,
                };
            }
        }
        tokens
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::Cache;

    /// `cache.count` with a counter of fresh counts; the sum of the text's bytes stands for its
    /// count, so a hit's figure is checked to be that text's.
    fn counted(cache: &Cache, text: &str, fresh: &Cell<usize>) -> usize {
        cache.count(text, |t| {
            fresh.set(fresh.get() + 1);
            figure(t)
        })
    }

    fn figure(text: &str) -> usize {
        text.bytes().map(usize::from).sum()
    }

    #[test]
    fn a_repeated_text_is_counted_once() {
        let (cache, fresh) = (Cache::new(), Cell::new(0));
        let text = "a text long enough to be remembered".to_string();
        assert_eq!(counted(&cache, &text, &fresh), figure(&text));
        assert_eq!(counted(&cache, &text, &fresh), figure(&text));
        assert_eq!(fresh.get(), 1);
        // Another text (here one byte longer) is counted afresh.
        let other = format!("{text}.");
        assert_eq!(counted(&cache, &other, &fresh), figure(&other));
        assert_eq!(fresh.get(), 2);
    }

    #[test]
    fn short_texts_are_counted_every_time() {
        let (cache, fresh) = (Cache::new(), Cell::new(0));
        assert_eq!(counted(&cache, "short", &fresh), figure("short"));
        assert_eq!(counted(&cache, "short", &fresh), figure("short"));
        assert_eq!(fresh.get(), 2);
    }

    /// Many more texts than slots: every figure is still the text's own, whatever was evicted.
    #[test]
    fn figures_stay_exact_past_the_bound() {
        let (cache, fresh) = (Cache::new(), Cell::new(0));
        let texts: Vec<String> = (0..3 * super::SHARDS * super::SLOTS)
            .map(|i| format!("document {i} of the eviction test, {}", "x".repeat(i % 7)))
            .collect();
        for round in 0..2 {
            for t in &texts {
                assert_eq!(counted(&cache, t, &fresh), figure(t), "round {round}");
            }
        }
        assert!(fresh.get() > texts.len(), "evicted texts are counted again");
    }

    #[test]
    fn gives_the_tokenizers_counts() {
        let doc = "Carson City is the capital city of the American state of Nevada. (Passage 0.)";
        assert_eq!(super::count(doc), super::super::count(doc));
        assert_eq!(super::count(doc), super::super::count(doc));
        assert_eq!(super::count("hi"), super::super::count("hi"));
    }
}
