//! The public models: the [`Catalog`] maps each public model name from the config to what it can do
//! (its family's capabilities with the model's overrides, see `crate::caps`) and its ordered
//! targets (provider + native model name).

use std::collections::HashMap;
use std::sync::Arc;

use crate::caps::Caps;
use crate::common::Operation;
use crate::upstream::provider::Provider;

/// One place a model can be served from.
#[derive(Debug)]
pub struct Target {
    pub provider: Arc<Provider>,
    pub native_model: String,
}

/// A public model name, resolved.
#[derive(Debug)]
pub struct Model {
    pub name: String,
    /// The family's capabilities with this model's overrides from the config.
    pub caps: Caps,
    /// Tried in order; retries move to the next one (wrapping).
    pub targets: Vec<Target>,
}

impl Model {
    /// The operation this model serves.
    pub fn operation(&self) -> Operation {
        self.caps.operation()
    }

    /// Targets whose provider has credentials; a disabled provider's targets are skipped.
    pub fn enabled_targets(&self) -> impl Iterator<Item = &Target> {
        self.targets.iter().filter(|t| t.provider.enabled())
    }
}

/// Public model name → model, built once at start.
#[derive(Debug, Default)]
pub struct Catalog {
    models: HashMap<String, Arc<Model>>,
}

impl Catalog {
    pub fn insert(&mut self, model: Model) {
        self.models.insert(model.name.clone(), Arc::new(model));
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Model>> {
        self.models.get(name)
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
pub fn one_of<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
