//! The response cache as the operations use it (issue 29; the cache itself is `crate::cache`):
//! what a request's `Cache-Control` asks, the plan for a request to a cache-enabled model (its key,
//! whether to look up and store), what its answer says of the cache (`Switchyard-Cache`, `Age`,
//! `Switchyard-Cache-Key`), what a hit costs and is charged, and what the proxy layer records.
//!
//! Values of `Switchyard-Cache`: `hit` (served from the cache), `collapsed` (served from an
//! identical request in flight), `miss` (asked the provider; stored when complete), `bypass`
//! (the caller's `Cache-Control: no-cache`: not looked up, not collapsed).

use std::sync::Arc;

use bytes::Bytes;

use super::costing::RequestCost;
pub(crate) use super::outcome::{CacheUse, Status};
use super::outcome::{Call, Outcome};
use crate::cache::{Cache, Follow, Joined, Key, KeyBuilder, Leader, Meta, Policy};
use crate::catalog::Model;
use crate::cost::{Basis, Cost, Planned};
use crate::engine::trace;
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
            ..Meta::default()
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

/// Where a complete-JSON request (rerank, images) stands after the cache was asked.
pub(crate) enum Looked {
    /// Served without the provider: the body, its facts, a hit's or a collapsed request's
    /// status and (a hit) its age.
    Served(Bytes, Meta, Status, Option<u64>),
    /// Ask the provider: this request leads (its answer goes to the followers and the store).
    Lead(Leader, Status),
}

impl Plan {
    /// Look the request up (a hit), else join the identical request in flight (collapsed: its
    /// whole answer), else lead; a `no-cache` request leads alone (`bypass`).
    pub(crate) async fn look(&self) -> Looked {
        let start = trace::now();
        let looked = self.look_up().await;
        let status = match &looked {
            Looked::Served(_, _, status, _) | Looked::Lead(_, status) => *status,
        };
        lookup_span(start, status);
        looked
    }

    async fn look_up(&self) -> Looked {
        if !self.lookup {
            return Looked::Lead(self.cache.solo(&self.key), Status::Bypass);
        }
        loop {
            if let Some(entry) = self.cache.get(&self.key).await {
                let age = entry.age();
                return Looked::Served(entry.body, entry.meta, Status::Hit, Some(age));
            }
            match self.cache.join(&self.key) {
                Joined::Lead(leader) => return Looked::Lead(leader, Status::Miss),
                Joined::Follow(mut reader) => {
                    let mut pieces = Vec::new();
                    loop {
                        match reader.next().await {
                            Follow::Piece(p) => pieces.push(p),
                            Follow::Done(meta) => {
                                let body = Bytes::from(pieces.concat());
                                return Looked::Served(body, meta, Status::Collapsed, None);
                            }
                            // The leader failed: try again (lead, or follow the next leader).
                            Follow::Failed => break,
                        }
                    }
                }
            }
        }
    }

    /// Note in `out` (and `headers`) that a complete-JSON answer was served without the provider:
    /// what the cache did, what it saved, what the caller is charged (nothing, unless hits
    /// count). The operation notes the usage itself.
    pub(crate) fn served(
        &self,
        out: &mut Outcome,
        headers: &mut Vec<(&'static str, String)>,
        status: Status,
        age: Option<u64>,
        meta: &Meta,
    ) {
        headers.extend(self.headers(status, age).into_iter().flatten());
        out.cache = Some(CacheUse {
            status,
            saved: meta.cost,
        });
        if let Some(model) = out.model.clone() {
            out.cost = Some(self.served_cost(&model, meta.cost, None));
        }
        if !self.hits_count {
            out.charge = Some(Default::default());
        }
    }

    /// Note in `out` (and `headers`) that this request asks the provider (`status`: a miss or a
    /// bypass), before it does, so an error answer says so too.
    pub(crate) fn leads(
        &self,
        out: &mut Outcome,
        headers: &mut Vec<(&'static str, String)>,
        status: Status,
    ) {
        headers.extend(self.headers(status, None).into_iter().flatten());
        out.cache = Some(CacheUse {
            status,
            saved: None,
        });
    }
}

/// Record the cache lookup begun at `start` (when the request's spans are recorded): what it
/// found (`hit`, `collapsed`, `miss`, `bypass`).
pub(crate) fn lookup_span(start: Option<std::time::SystemTime>, status: Status) {
    trace::span(
        None,
        "cache_lookup",
        crate::telemetry::Kind::Internal,
        start,
        |s| s.set("switchyard.cache.result", status.as_str()),
    );
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
