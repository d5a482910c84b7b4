//! The public models: the [`Catalog`] maps each public model name from the config to what it can do
//! (its family's capabilities with the model's overrides, see `crate::caps`) and its ordered
//! targets (provider + native model name), with their weights and the schedule that spreads
//! first attempts over them. Each target's lifecycle (shutdown date, replacement) and what the
//! model makes of it — the successor that takes over, the headers its answers carry — are in
//! `catalog/lifecycle.rs`.

mod lifecycle;

pub(crate) use lifecycle::header_safe;
pub(crate) use lifecycle::ModelLifecycle;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::caps::lifecycle::{Clock, Lifecycle};
use crate::caps::prices::Price;
use crate::caps::Caps;
use crate::common::Operation;
use crate::upstream::health::{Cell, Health};
use crate::upstream::provider::Provider;

/// Largest weight a target may carry (keeps a model's schedule small).
pub(crate) const MAX_WEIGHT: u32 = 100;

/// One place a model can be served from.
#[derive(Debug)]
pub struct Target {
    /// The provider account.
    pub provider: Arc<Provider>,
    /// The model name the account is sent (the target's `model` in the configuration).
    pub native_model: String,
    /// Its share of first attempts among the model's healthy targets; 0: standby, used only
    /// when every weighted target is ejected.
    pub weight: u32,
    /// When its provider deprecates and shuts down the native model (`None`: nothing known).
    #[doc(hidden)]
    pub lifecycle: Option<Arc<Lifecycle>>,
    /// What its native model costs at its provider (`None`: no price is known, or the operator
    /// declared it unpriced; never a price of 0).
    pub(crate) price: Option<Arc<Price>>,
    /// Its health cell, fetched by name from the health table on first use (so it is the same
    /// cell across configuration reloads).
    health: OnceLock<Arc<Cell>>,
}

impl Target {
    /// A target of `provider` serving `native_model`, with its share of first attempts.
    pub fn new(provider: Arc<Provider>, native_model: impl Into<String>, weight: u32) -> Target {
        Target {
            provider,
            native_model: native_model.into(),
            weight,
            lifecycle: None,
            price: None,
            health: OnceLock::new(),
        }
    }

    /// The same target (its health cell is found again by name, so it is the same cell).
    pub fn copy(&self) -> Target {
        Target {
            provider: self.provider.clone(),
            native_model: self.native_model.clone(),
            weight: self.weight,
            lifecycle: self.lifecycle.clone(),
            price: self.price.clone(),
            health: OnceLock::new(),
        }
    }

    /// Its cell in `health` (one atomic load once fetched).
    #[doc(hidden)]
    pub fn health<'h>(&'h self, health: &Health) -> &'h Cell {
        self.health
            .get_or_init(|| health.cell(&self.provider.name, &self.native_model))
    }
}

/// A public model name, resolved.
#[derive(Debug)]
pub struct Model {
    /// The public name callers ask for.
    pub name: String,
    /// The family's capabilities with this model's overrides from the config.
    pub caps: Caps,
    /// First attempts are spread over them by weight; retries move to another.
    pub targets: Vec<Target>,
    /// Target indices in the order first attempts take them: each target as often as its
    /// weight, interleaved (smooth weighted round robin, computed once).
    schedule: Vec<u16>,
    /// Position in `schedule` of the next request.
    next: AtomicUsize,
    /// Speech: voice names a client may send (OpenAI's `alloy`, …) → the provider's voice sent
    /// instead (`voice_map` in the config; empty: none).
    pub voice_map: BTreeMap<String, String>,
    /// Its targets' shutdown dates and what follows from them (empty for most models).
    pub lifecycle: ModelLifecycle,
    /// Its answers' response cache (`cache:` in the config; `None`: not cached).
    pub(crate) cache: Option<crate::cache::Policy>,
}

impl Model {
    /// A model served by `targets` (at least one).
    pub fn new(name: impl Into<String>, caps: Caps, targets: Vec<Target>) -> Model {
        let schedule = schedule(&targets);
        Model {
            name: name.into(),
            caps,
            targets,
            schedule,
            next: AtomicUsize::new(0),
            voice_map: BTreeMap::new(),
            lifecycle: ModelLifecycle::default(),
            cache: None,
        }
    }

    /// This model with its answers cached under `policy` (`None`: not cached).
    pub(crate) fn with_cache(mut self, policy: Option<crate::cache::Policy>) -> Model {
        self.cache = policy;
        self
    }

    /// This model with a voice map (speech; checked by the config).
    pub fn with_voice_map(mut self, voice_map: BTreeMap<String, String>) -> Model {
        self.voice_map = voice_map;
        self
    }

    /// Where this request's first attempt starts looking: an index into `targets`, then the
    /// schedule's following entries (`scheduled(k)`). Empty schedule (every weight 0): 0.
    pub fn start(&self) -> usize {
        if self.schedule.is_empty() {
            return 0;
        }
        self.next.fetch_add(1, Ordering::Relaxed) % self.schedule.len()
    }

    /// The target index at position `at` of the schedule (wrapping), if any target has weight.
    pub fn scheduled(&self, at: usize) -> Option<usize> {
        if self.schedule.is_empty() {
            return None;
        }
        self.schedule
            .get(at % self.schedule.len())
            .map(|&i| i as usize)
    }

    /// Length of the weighted schedule.
    pub fn schedule_len(&self) -> usize {
        self.schedule.len()
    }

    /// The operation this model serves.
    pub fn operation(&self) -> Operation {
        self.caps.operation()
    }

    /// Targets whose provider has credentials and still serves their model; a disabled
    /// provider's targets, and targets past their shutdown, are skipped.
    pub fn enabled_targets(&self) -> impl Iterator<Item = &Target> {
        let now = self.lifecycle_now();
        self.targets
            .iter()
            .filter(move |t| t.provider.enabled() && !now.is_some_and(|n| t.gone(n)))
    }
}

/// Smooth weighted round robin (as nginx's upstream module): each round, every target gains its
/// weight, the one with the most is chosen and loses the total. Over one cycle (the weights' sum)
/// each target appears as often as its weight, spread out rather than in runs.
fn schedule(targets: &[Target]) -> Vec<u16> {
    let weights: Vec<i64> = targets
        .iter()
        .take(u16::MAX as usize)
        .map(|t| i64::from(t.weight.min(MAX_WEIGHT)))
        .collect();
    let total: i64 = weights.iter().sum();
    let mut current = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for (i, w) in weights.iter().enumerate() {
            current[i] += w;
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        out.push(best as u16);
    }
    out
}

/// Public model name → model, built once at start.
#[derive(Debug, Default)]
pub struct Catalog {
    models: HashMap<String, Arc<Model>>,
    /// Model name → its successor serving as it, for models with a `successor`.
    takeovers: HashMap<String, Arc<Model>>,
    /// What decides which targets are past their shutdown.
    clock: Clock,
}

impl Catalog {
    /// An empty catalog whose models read `clock` for lifecycle decisions.
    pub fn with_clock(clock: Clock) -> Catalog {
        Catalog {
            clock,
            ..Catalog::default()
        }
    }

    /// The catalog's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Add `model`, replacing any model of the same name.
    pub fn insert(&mut self, model: Model) {
        self.models.insert(model.name.clone(), Arc::new(model));
    }

    /// Let model `from`'s successor (already inserted) serve its requests once `from` is gone.
    pub fn add_takeover(&mut self, from: &str) {
        let Some(m) = self.models.get(from) else {
            return;
        };
        let Some(successor) = m
            .lifecycle
            .successor
            .as_ref()
            .and_then(|s| self.models.get(s))
        else {
            return;
        };
        let takeover = Model::taking_over(from, successor);
        self.takeovers.insert(from.to_string(), Arc::new(takeover));
    }

    /// The model named `name`, as configured (the model list's view).
    pub fn get(&self, name: &str) -> Option<&Arc<Model>> {
        self.models.get(name)
    }

    /// The model that serves a request naming `name` now: the model itself, or, once every one
    /// of its targets is past its shutdown, its successor (a model whose
    /// `lifecycle.taken_over_from` says so).
    pub fn serving(&self, name: &str) -> Option<&Arc<Model>> {
        let m = self.models.get(name)?;
        if m.lifecycle.successor.is_some() && m.gone() {
            if let Some(t) = self.takeovers.get(name) {
                return Some(t);
            }
        }
        Some(m)
    }

    /// Every model, sorted by name.
    pub fn models(&self) -> Vec<&Arc<Model>> {
        let mut models: Vec<&Arc<Model>> = self.models.values().collect();
        models.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        models
    }

    /// Model names serving `op`, sorted, for error messages.
    pub fn names_for(&self, op: Operation) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .models
            .values()
            .filter(|m| m.operation() == op)
            .map(|m| m.name.as_str())
            .collect();
        names.sort_unstable();
        names
    }
}

/// Formats a list of allowed values for a `details` message.
pub(crate) fn one_of<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;

    #[test]
    fn the_schedule_follows_the_weights_interleaved() {
        let p = support::provider_at("openai", "k", "http://127.0.0.1:1/v1");
        let targets = vec![
            Target::new(p.clone(), "a", 3),
            Target::new(p.clone(), "b", 1),
            Target::new(p, "standby", 0),
        ];
        assert_eq!(schedule(&targets), vec![0, 0, 1, 0]);
    }
}
