//! The response cache (issue 29): exact answers to speech and rerank requests, kept so the same
//! request is never paid for twice, and identical requests in flight collapsed onto one.
//!
//! - [`key`]: what makes two requests the same (a digest of the fields that change the answer,
//!   built by the operations, which know their fields), and the scope it is kept under.
//! - [`memory`]: entries in this process, bounded in bytes, evicted by TinyUFO (TinyLFU admission,
//!   S3-FIFO eviction: popular entries stay); [`redis`](self::redis): entries in Redis, shared by
//!   instances, with a TTL and a per-entry size cap.
//! - [`flight`]: requests in flight: the first with a key leads (asks the provider), the others
//!   follow it and receive its answer's bytes as they are written; a failed leader's followers
//!   try again, one of them becoming the next leader.
//!
//! Only complete, checked answers are stored: the operations hand an entry over only once the
//! answer ended as it should (a speech stream's last byte, an SSE stream's closing event; never a
//! stream cut short, an error event or a provider error).

mod codec;
mod flight;
pub(crate) mod key;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

pub(crate) use flight::{Follow, Leader, Reader};
pub(crate) use key::{Key, KeyBuilder};
pub(crate) use settings::{CacheSettings, Policy, StoreKind};

use crate::metrics::Metrics;
use crate::money::{Amount, Currency};
use crate::store::redis_conn::RedisConn;

/// A stored answer: its body as written to the client, and what is needed to answer a hit as a
/// miss was answered (its usage, what it cost when it was made, when it was made).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The answer's body: raw audio, the SSE events, or the rerank JSON.
    pub(crate) body: Bytes,
    /// What the answer is about and cost.
    pub(crate) meta: Meta,
}

/// An entry's facts beside its body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// Unix seconds when the answer was made (a hit's `Age`).
    pub(crate) stored_at: u64,
    /// Unix seconds after which the entry is not served.
    pub(crate) expires_at: u64,
    /// What it used: speech characters, rerank tokens.
    pub(crate) usage: u64,
    /// What the answer cost at its target's price when it was made (`None`: not known); what a
    /// hit saves.
    pub(crate) cost: Option<(Amount, Currency)>,
    /// How the body is written.
    pub(crate) form: Form,
    /// Speech: the input and output tokens the provider reported (`None`: not reported), for
    /// the closing event of an SSE answer served from a raw-audio entry.
    pub(crate) tokens: (Option<u64>, Option<u64>),
}

/// How an entry's body is written. A speech request is served from an entry of either form
/// (`stream_format` variants of one request share it: the audio is the same), re-framed when
/// the forms differ; an entry of the request's own form is served byte for byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Form {
    /// The answer's body as it was written: rerank or image JSON, raw audio.
    #[default]
    Body,
    /// Speech as the gateway's SSE events (`speech.audio.delta` … `speech.audio.done`).
    Events,
}

impl Entry {
    /// Seconds since the answer was made (`Age`).
    pub(crate) fn age(&self) -> u64 {
        now_secs().saturating_sub(self.meta.stored_at)
    }
}

/// Unix seconds now.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// Where entries are kept.
enum Store {
    // Boxed: TinyUFO's queues make it far larger than the Redis handle.
    Memory(Box<memory::MemoryStore>),
    #[cfg(feature = "redis")]
    Redis(self::redis::RedisStore),
}

/// What a new request with a key becomes.
pub(crate) enum Joined {
    /// Nobody is answering this key: this request asks the provider, and its answer is handed
    /// to the followers and stored through the leader.
    Lead(Leader),
    /// Another request is answering it: read its answer.
    Follow(Reader),
}

/// The response cache: its store and the requests in flight. One per gateway state (it
/// outlives configuration reloads; each request reads its model's [`Policy`] from its own
/// settings snapshot).
pub(crate) struct Cache {
    store: Store,
    /// Keys being answered now, by flight digest.
    flights: Arc<Mutex<HashMap<[u8; 32], Arc<flight::Flight>>>>,
    max_entry_bytes: usize,
    metrics: Metrics,
}

impl Cache {
    /// The cache `settings` describe; Redis when they name it (and `redis` is the gateway's
    /// connection; the configuration refuses a Redis cache without one).
    pub(crate) fn new(
        settings: &CacheSettings,
        redis: Option<&RedisConn>,
        metrics: Metrics,
    ) -> Cache {
        let store = match (settings.store, redis) {
            #[cfg(feature = "redis")]
            (StoreKind::Redis, Some(conn)) => {
                Store::Redis(self::redis::RedisStore::new(conn.clone(), metrics.clone()))
            }
            #[cfg(not(feature = "redis"))]
            (StoreKind::Redis, Some(conn)) => match *conn {},
            _ => Store::Memory(Box::new(memory::MemoryStore::new(
                settings.max_bytes,
                metrics.clone(),
            ))),
        };
        Cache {
            store,
            flights: Arc::default(),
            max_entry_bytes: settings.max_entry_bytes,
            metrics,
        }
    }

    /// The entry under `key`, if one is held and fresh.
    pub(crate) async fn get(&self, key: &Key) -> Option<Entry> {
        let now = now_secs();
        let entry = match &self.store {
            Store::Memory(m) => m.get(key),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.get(key).await,
        }?;
        (entry.meta.expires_at > now).then_some(entry)
    }

    /// Keep `entry` under `key` (an entry over the per-entry cap is not kept).
    pub(crate) async fn put(&self, key: &Key, entry: Entry) {
        if entry.body.len() > self.max_entry_bytes {
            self.stored("too_large");
            return;
        }
        let kept = match &self.store {
            Store::Memory(m) => m.put(key, entry),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.put(key, entry).await,
        };
        self.stored(if kept { "stored" } else { "error" });
    }

    fn stored(&self, outcome: &'static str) {
        self.metrics
            .with(|f| crate::metrics::inc(&f.cache_writes, &[outcome], 1));
    }

    /// Join the requests in flight for `key`: lead when there is none, else follow the leader.
    pub(crate) fn join(self: &Arc<Self>, key: &Key) -> Joined {
        let mut flights = match self.flights.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(f) = flights.get(&key.flight) {
            if let Some(reader) = f.follow() {
                return Joined::Follow(reader);
            }
        }
        let f = Arc::new(flight::Flight::new());
        flights.insert(key.flight, f.clone());
        Joined::Lead(Leader::new(self.clone(), key.clone(), f, true))
    }

    /// A leader nobody can follow (a `no-cache` request): its answer may still be stored.
    pub(crate) fn solo(self: &Arc<Self>, key: &Key) -> Leader {
        Leader::new(
            self.clone(),
            key.clone(),
            Arc::new(flight::Flight::new()),
            false,
        )
    }

    /// The flight of `flight` (a key's flight digest) is over: later requests with its key lead a new one (or hit).
    fn land(&self, digest: &[u8; 32], flight: &Arc<flight::Flight>) {
        let mut flights = match self.flights.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        if flights.get(digest).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            flights.remove(digest);
        }
    }

    /// Drop every entry of public model `model`; how many were dropped, when the store can tell
    /// (the memory store drops them by moving the model to a new generation: `None`).
    pub(crate) async fn purge_model(&self, model: &str) -> Result<Option<u64>, String> {
        match &self.store {
            Store::Memory(m) => {
                m.purge_model(model);
                Ok(None)
            }
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.purge_model(model).await.map(Some),
        }
    }

    /// Drop the entry of `model` whose key digest is `digest_hex` (as answers carry it in
    /// `Switchyard-Cache-Key`); whether there was one.
    pub(crate) async fn purge_key(&self, model: &str, digest_hex: &str) -> Result<bool, String> {
        let mut digest = [0u8; 32];
        hex::decode_to_slice(digest_hex, &mut digest)
            .map_err(|_| "a key is 64 hexadecimal digits".to_string())?;
        let key = Key::from_parts(model, digest);
        match &self.store {
            Store::Memory(m) => Ok(m.remove(&key)),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.remove(&key).await,
        }
    }
}
