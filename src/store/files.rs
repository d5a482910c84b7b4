//! Where the gateway keeps images it hosts itself (`response_format: url` with a provider that
//! answers with bytes or base64), served by `GET /api/v1/files/{id}`.
//!
//! [`FileStore`] is the seam: [`MemoryStore`] is the embedded default for a single instance; a
//! shared store (so a URL minted by one instance is served by all) implements the same trait.
//! Ids are 192 random bits from the OS-seeded CSPRNG, so a link is its own capability: it cannot
//! be guessed, and it stops working after the configured time.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine;
use bytes::Bytes;
use rand::RngCore;

/// A hosted file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// The `Content-Type` it is served with.
    pub content_type: String,
    /// Its contents.
    pub bytes: Bytes,
}

/// Why the store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The file alone is larger than the memory store's capacity (`images.file_store_bytes`).
    #[error("file of {size} bytes is larger than the store's {limit}-byte capacity")]
    TooLarge {
        /// The file's size, in bytes.
        size: usize,
        /// The store's capacity, in bytes.
        limit: usize,
    },
    /// The store could not be used (Redis down, refusing or too slow; a poisoned lock): why.
    #[error("file store unavailable: {0}")]
    Unavailable(String),
}

impl From<StoreError> for crate::common::error::GatewayError {
    fn from(e: StoreError) -> Self {
        crate::common::error::GatewayError::Store(e.to_string())
    }
}

/// Hosted files by id, each kept for a limited time.
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Keep `file` under `id` for `ttl`.
    async fn put(&self, id: &str, file: StoredFile, ttl: Duration) -> Result<(), StoreError>;
    /// The file and the time it has left, if it exists and has not expired.
    async fn get(&self, id: &str) -> Result<Option<(StoredFile, Duration)>, StoreError>;
}

/// A fresh unguessable file id (URL-safe, 32 characters).
pub fn new_id() -> String {
    let mut raw = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut raw);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// Whether `id` has the shape [`new_id`] makes (so junk never reaches a store lookup).
pub fn valid_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

struct Entry {
    file: StoredFile,
    expires: Instant,
}

#[derive(Default)]
struct Inner {
    files: HashMap<String, Entry>,
    /// Ids in insertion order, with their expiry: the front is what goes first.
    order: VecDeque<(Instant, String)>,
    bytes: usize,
}

impl Inner {
    fn remove(&mut self, id: &str) {
        if let Some(e) = self.files.remove(id) {
            self.bytes -= e.file.bytes.len();
        }
    }
}

/// The single-instance store: files in process memory, at most `max_bytes` in all (the oldest
/// go first when a new one needs room), each until its expiry.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_bytes: usize,
}

impl MemoryStore {
    /// An empty store holding at most `max_bytes` of files.
    pub fn new(max_bytes: usize) -> MemoryStore {
        MemoryStore {
            inner: Mutex::new(Inner::default()),
            max_bytes,
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>, StoreError> {
        self.inner
            .lock()
            .map_err(|_| StoreError::Unavailable("memory store lock poisoned".into()))
    }
}

#[async_trait]
impl FileStore for MemoryStore {
    async fn put(&self, id: &str, file: StoredFile, ttl: Duration) -> Result<(), StoreError> {
        let size = file.bytes.len();
        if size > self.max_bytes {
            return Err(StoreError::TooLarge {
                size,
                limit: self.max_bytes,
            });
        }
        let now = Instant::now();
        let mut inner = self.lock()?;
        // Expired files first, then the oldest until the new one fits. Entries in `order` whose
        // file is gone (replaced ids) are skipped.
        while let Some((expires, old)) = inner.order.front().cloned() {
            let stale = expires <= now || inner.bytes + size > self.max_bytes;
            if !stale {
                break;
            }
            inner.order.pop_front();
            if inner.files.get(&old).is_some_and(|e| e.expires == expires) {
                inner.remove(&old);
            }
        }
        inner.remove(id);
        let expires = now + ttl;
        inner.bytes += size;
        inner.order.push_back((expires, id.to_string()));
        inner.files.insert(id.to_string(), Entry { file, expires });
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<(StoredFile, Duration)>, StoreError> {
        let now = Instant::now();
        let inner = self.lock()?;
        Ok(inner
            .files
            .get(id)
            .filter(|e| e.expires > now)
            .map(|e| (e.file.clone(), e.expires - now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: usize) -> StoredFile {
        StoredFile {
            content_type: "image/png".into(),
            bytes: Bytes::from(vec![7u8; n]),
        }
    }

    #[tokio::test]
    async fn keeps_files_until_they_expire() {
        let s = MemoryStore::new(1000);
        s.put("a", file(10), Duration::from_secs(60)).await.unwrap();
        s.put("b", file(10), Duration::ZERO).await.unwrap();
        let (got, left) = s.get("a").await.unwrap().unwrap();
        assert_eq!(got, file(10));
        assert!(left > Duration::from_secs(59));
        assert!(s.get("b").await.unwrap().is_none(), "expired file served");
        assert!(s.get("zzz").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn oldest_files_make_room() {
        let s = MemoryStore::new(100);
        for id in ["a", "b", "c"] {
            s.put(id, file(40), Duration::from_secs(60)).await.unwrap();
        }
        assert!(
            s.get("a").await.unwrap().is_none(),
            "oldest kept past the cap"
        );
        assert!(s.get("b").await.unwrap().is_some());
        assert!(s.get("c").await.unwrap().is_some());
        assert_eq!(
            s.put("d", file(101), Duration::from_secs(60)).await,
            Err(StoreError::TooLarge {
                size: 101,
                limit: 100
            })
        );
    }

    #[test]
    fn ids_are_unguessable_and_checked() {
        let a = new_id();
        assert!(valid_id(&a), "{a}");
        assert_ne!(a, new_id());
        assert!(!valid_id("../../etc/passwd"));
        assert!(!valid_id(&"a".repeat(31)));
    }
}
