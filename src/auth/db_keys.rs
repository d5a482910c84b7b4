//! The keys kept as data (issue 47: the `tenants` module's tables in the ledger's PostgreSQL), as
//! the request path sees them: an in-memory snapshot, digest → key, swapped whole by the
//! `tenants` module's sync task and read with one atomic load per request. No database round
//! trip is on the request's path.
//!
//! The snapshot lives here, below `auth`'s [`super::Authenticator`], so that authentication can
//! consult it without importing the layer that fills it. A key revoked or disabled is simply not
//! in the snapshot; expiry is checked at each request (it passes between two snapshots).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;

use super::limits::LimitSet;

/// A tenant as its keys carry it: its name, the scope its limits are counted under
/// (`tenant:<name>`), its limits and the models it may use.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TenantScope {
    /// The tenant's name (the ledger's `tenant` column).
    pub(crate) name: String,
    /// `tenant:<name>`: the id its limits are counted under.
    pub(crate) id: String,
    /// The tenant's own limits, shared by every key of it (`None`: none).
    pub(crate) limits: Option<Arc<LimitSet>>,
    /// The models its keys may use (`None`: every model).
    pub(crate) allowed_models: Option<Arc<[String]>>,
}

/// One database key, as found by one of its digests.
#[derive(Debug)]
pub(crate) struct DbKey {
    /// `key:<tenant>/<name>`.
    pub(crate) principal: String,
    /// The key's own limits (`None`: none).
    pub(crate) limits: Option<Arc<LimitSet>>,
    /// The models the key may use (`None`: every model its tenant may).
    pub(crate) allowed_models: Option<Arc<[String]>>,
    /// The tenant it belongs to.
    pub(crate) tenant: Arc<TenantScope>,
    /// When this digest stops working: the key's expiry, or for a rotated key's previous
    /// secret the end of its overlap (whichever comes first); `None`: never.
    pub(crate) valid_until: Option<SystemTime>,
}

/// One snapshot of every usable database key, by SHA-256 digest of its secret.
#[derive(Debug, Default)]
pub(crate) struct DbKeys {
    by_digest: HashMap<[u8; 32], Arc<DbKey>>,
}

impl DbKeys {
    /// A snapshot of `keys`, each under its digest.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn new(keys: impl IntoIterator<Item = ([u8; 32], Arc<DbKey>)>) -> DbKeys {
        DbKeys {
            by_digest: keys.into_iter().collect(),
        }
    }

    /// The key whose secret has `digest`, if it is usable at `now`.
    pub(crate) fn find(&self, digest: &[u8; 32], now: SystemTime) -> Option<&Arc<DbKey>> {
        self.by_digest
            .get(digest)
            .filter(|k| k.valid_until.is_none_or(|until| now < until))
    }

    /// How many digests the snapshot holds (a rotated key's previous secret counts).
    pub(crate) fn len(&self) -> usize {
        self.by_digest.len()
    }
}

/// The handle the sync task swaps snapshots through and the authenticator reads them from:
/// shared by every settings snapshot of one gateway, so a reload keeps it.
#[derive(Clone, Default)]
pub(crate) struct DbKeyHandle(Arc<ArcSwap<DbKeys>>);

impl DbKeyHandle {
    /// The snapshot in force.
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<DbKeys>> {
        self.0.load()
    }

    /// Put `keys` in force.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn store(&self, keys: DbKeys) {
        self.0.store(Arc::new(keys));
    }
}

impl std::fmt::Debug for DbKeyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DbKeyHandle({} digests)", self.load().len())
    }
}

/// Whether `model` is within `allowed` (`None`: every model).
pub(crate) fn allows(allowed: Option<&[String]>, model: &str) -> bool {
    allowed.is_none_or(|list| list.iter().any(|m| m == model))
}
