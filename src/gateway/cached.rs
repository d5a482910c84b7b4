//! The response cache as the operations use it (issue 29; the cache itself is `crate::cache`):
//! what a request's `Cache-Control` asks, the plan for a request to a cache-enabled model (its key,
//! whether to look up and store), what its answer says of the cache (`Switchyard-Cache`, `Age`,
//! `Switchyard-Cache-Key`), what a hit costs and is charged, and what the proxy layer records.
//!
//! Values of `Switchyard-Cache`: `hit` (served from the cache), `collapsed` (served from an
//! identical request in flight), `miss` (asked the provider; stored when complete), `bypass`
//! (the caller's `Cache-Control: no-cache`: not looked up, not collapsed).

use std::sync::Arc;

use super::costing::RequestCost;
use super::outcome::Call;
pub(crate) use super::outcome::{CacheUse, Status};
use crate::cache::{Cache, Key, KeyBuilder, Meta, Policy};
use crate::catalog::Model;
use crate::cost::{Basis, Cost, Planned};
use crate::money::{Amount, Currency};

/// The header saying what the cache did.
pub(crate) const HEADER: &str = "Switchyard-Cache";
/// The header naming the answer's cache key (what an operator purges).
pub(crate) const KEY_HEADER: &str = "Switchyard-Cache-Key";

/// A request to a cache-enabled model: its key and what its `Cache-Control` allows.
pub(crate) struct Plan {
    pub(crate) cache: Arc<Cache>,
    pub(crate) key: Key,
    pub(crate) policy: Policy,
    /// Look up (and collapse onto requests in flight): not with `no-cache`.
    pub(crate) lookup: bool,
    /// Store the answer: not with `no-store`.
    pub(crate) store: bool,
    /// Whether hits are charged to the caller's limits (`cache.hits_count_against_limits`).
    pub(crate) hits_count: bool,
}

impl Plan {
    /// The plan for `call` to `model` (`None`: the model is not cached); `fields` adds the
    /// fields that change the answer to the key.
    pub(crate) fn of(
        call: &Call<'_>,
        model: &Model,
        operation: &str,
        fields: impl FnOnce(&mut KeyBuilder),
    ) -> Option<Plan> {
        let policy = model.cache?;
        let (no_cache, no_store) = directives(call);
        let scope = if policy.shared { "" } else { call.owner() };
        let mut b = KeyBuilder::new(&model.name, operation, scope);
        // The request as a provider sees it: which native models may answer it.
        for t in &model.targets {
            b.field("account", t.provider.name.as_bytes());
            b.field("native_model", t.native_model.as_bytes());
        }
        fields(&mut b);
        Some(Plan {
            cache: call.state.cache().clone(),
            key: b.finish(),
            policy,
            lookup: !no_cache,
            store: !no_store,
            hits_count: call.settings.cache.hits_count,
        })
    }

    /// An entry's facts for an answer made now.
    pub(crate) fn meta(&self, usage: u64, cost: Option<&RequestCost>) -> Meta {
        let now = crate::cache::now_secs();
        Meta {
            stored_at: now,
            expires_at: now.saturating_add(self.policy.ttl.as_secs()),
            usage,
            cost: cost.and_then(RequestCost::cost).and_then(|c| {
                // An estimate (a lower bound) is not what a hit saves.
                c.partial.is_none().then_some((c.amount, c.currency))
            }),
        }
    }

    /// The headers an answer of this plan carries: what the cache did, the key, and `Age` for
    /// a hit.
    pub(crate) fn headers(
        &self,
        status: Status,
        age: Option<u64>,
    ) -> [Option<(&'static str, String)>; 3] {
        [
            Some((HEADER, status.as_str().to_string())),
            Some((KEY_HEADER, self.key.hex())),
            age.map(|a| ("Age", a.to_string())),
        ]
    }

    /// What an answer served without the provider costs this request: nothing, unless hits
    /// count against limits (then what it cost when made). `planned` prices it at the model's
    /// first target when the entry does not know (a collapsed request's head).
    pub(crate) fn served_cost(
        &self,
        model: &Model,
        saved: Option<(Amount, Currency)>,
        planned: Option<&Planned<'_>>,
    ) -> RequestCost {
        let (amount, currency) =
            match (saved, planned) {
                (Some(s), _) => s,
                (None, Some(planned)) => {
                    match model
                        .targets
                        .first()
                        .map(|t| RequestCost::known(t, planned))
                    {
                        Some(RequestCost::Known(c)) => (c.amount, c.currency),
                        Some(other) => return other,
                        None => return RequestCost::Unpriced,
                    }
                }
                (None, None) => return RequestCost::NotBillable(
                    "served from the response cache; what the answer cost when made is not known"
                        .into(),
                ),
            };
        RequestCost::Known(Cost {
            amount: if self.hits_count {
                amount
            } else {
                Amount::ZERO
            },
            currency,
            basis: Basis::Gateway,
            partial: None,
        })
    }
}

/// The caller's `Cache-Control`: `(no-cache, no-store)`.
fn directives(call: &Call<'_>) -> (bool, bool) {
    let (mut no_cache, mut no_store) = (false, false);
    for value in call
        .session
        .req_header()
        .headers
        .get_all(http::header::CACHE_CONTROL)
    {
        let Ok(value) = value.to_str() else { continue };
        for d in value.split(',') {
            let d = d.trim();
            no_cache |= d.eq_ignore_ascii_case("no-cache");
            no_store |= d.eq_ignore_ascii_case("no-store");
        }
    }
    (no_cache, no_store)
}
