//! The cache's settings: the store (`switchyard.cache`, read once at start) and each model's
//! policy (`models.NAME.cache`, part of the catalog, so a reload changes it).

use std::time::Duration;

/// Where entries are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// This process's memory, bounded by `max_bytes`.
    #[default]
    Memory,
    /// The gateway's Redis (`switchyard.store`), shared by every instance using it.
    Redis,
}

/// `switchyard.cache`: the store every cache-enabled model's entries go to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CacheSettings {
    /// Memory or Redis.
    pub(crate) store: StoreKind,
    /// The memory store's bound on the bytes of entries it holds.
    pub(crate) max_bytes: usize,
    /// The largest answer kept (either store); larger answers are served, not kept.
    pub(crate) max_entry_bytes: usize,
    /// Whether an answer served from the cache is charged to its caller's limits (usage and
    /// money budgets) as if the provider had made it; by default it is not.
    pub(crate) hits_count: bool,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            store: StoreKind::Memory,
            max_bytes: 256 << 20,
            max_entry_bytes: 16 << 20,
            hits_count: false,
        }
    }
}

/// A model's `cache:`: how long its answers are kept and by whom they are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    /// How long an answer is served after it was made.
    pub(crate) ttl: Duration,
    /// Entries are shared by every caller (the operator's choice); by default each caller has
    /// its own, so no caller learns what another asked for.
    pub(crate) shared: bool,
}
