//! The catalog (`models:`): each model's family from the built-in capability table, with the
//! model's overrides, its targets on the accounts built, their prices and lifecycles, its voice
//! map and cache policy.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_yaml::Value;

use super::file::{ModelFile, ProviderFile};
use super::{cache, lifecycle, prices, voice_map};
use crate::api::adapter::Registry;
use crate::caps::lifecycle::Clock;
use crate::caps::Table;
use crate::caps::{self, Caps};
use crate::catalog::{Catalog, Model, Target, MAX_WEIGHT};
use crate::common::Operation;
use crate::upstream::provider::Provider;

/// What a model's targets may name: the accounts built, and every account declared (one that
/// failed its own checks is already reported).
struct Accounts<'a> {
    declared: &'a BTreeMap<String, ProviderFile>,
    providers: &'a HashMap<String, Arc<Provider>>,
    adapters: &'a Registry,
}

/// The catalog of `models`, each checked against its family and the accounts; the warnings of
/// models to act on soon and the models with an unpriced target are collected besides.
pub(super) fn build_catalog(
    models: &BTreeMap<String, ModelFile>,
    declared: &BTreeMap<String, ProviderFile>,
    providers: &HashMap<String, Arc<Provider>>,
    adapters: &Registry,
    clock: &Clock,
    errors: &mut Vec<String>,
    (warnings, unpriced): (&mut Vec<String>, &mut Vec<String>),
) -> Catalog {
    let catalog = Catalog::with_clock(clock.clone());
    let mut built = Vec::with_capacity(models.len());
    let table = match caps::builtin() {
        Ok(t) => t,
        Err(problems) => {
            // Never reached in a tested build (a unit test loads the table).
            errors.extend(
                problems
                    .iter()
                    .map(|p| format!("built-in capability table: {p}")),
            );
            return catalog;
        }
    };
    let accounts = Accounts {
        declared,
        providers,
        adapters,
    };
    for (name, m) in models {
        if let Some(model) = model(name, m, table, &accounts, errors, (warnings, unpriced)) {
            built.push(model);
        }
    }
    lifecycle::finish(built, models, clock, errors, warnings)
}

/// One model, `name`: its family's capabilities with its overrides, its targets, voice map and
/// cache policy (`None` when its family is unknown or retired: reported).
fn model(
    name: &str,
    m: &ModelFile,
    table: &Table,
    accounts: &Accounts<'_>,
    errors: &mut Vec<String>,
    (warnings, unpriced): (&mut Vec<String>, &mut Vec<String>),
) -> Option<Model> {
    let at = format!("switchyard.models.{name}");
    let Some(family) = table.get(&m.family) else {
        errors.push(match table.retired(&m.family) {
            Some(why) => format!("{at}.family: family `{}` was retired: {why}", m.family),
            None => format!(
                "{at}.family: unknown family `{}`; families: {}",
                m.family,
                table.names().join(", ")
            ),
        });
        return None;
    };
    let overrides = overrides(m, family, &at, errors);
    let caps = table
        .with_overrides(&m.family, &overrides, &format!("{at}.capabilities"))
        .unwrap_or_else(|problems| {
            errors.extend(problems);
            // Only to check the targets below; the errors keep the gateway from starting.
            family
        });
    if m.targets.is_empty() {
        errors.push(format!("{at}.targets: at least one target is required"));
    }
    let targets = targets(name, m, caps.operation(), accounts, &at, errors, unpriced);
    default_voice_named(name, caps, &targets, &at, warnings);
    let voice_map = voice_map::check(&m.voice_map, caps, &at, errors);
    let cached = cache::policy(m.cache.as_ref(), &at, errors);
    Some(
        Model::new(name.to_string(), caps, targets)
            .with_voice_map(voice_map)
            .with_cache(cached),
    )
}

/// Model `name`'s targets: each on an account that serves its operation `op`, with a weight in
/// bounds, its lifecycle and its price (a target without one is noted in `unpriced`).
fn targets(
    name: &str,
    m: &ModelFile,
    op: Operation,
    accounts: &Accounts<'_>,
    at: &str,
    errors: &mut Vec<String>,
    unpriced: &mut Vec<String>,
) -> Vec<Target> {
    let model_price = prices::of_model(m.price.as_ref(), at, errors);
    let mut targets = Vec::new();
    for (i, t) in m.targets.iter().enumerate() {
        match accounts.providers.get(&t.provider) {
            Some(p) if accounts.adapters.get(p).is_some_and(|a| a.serves(op)) => {
                if t.weight > MAX_WEIGHT {
                    errors.push(format!(
                        "{at}.targets[{i}].weight: {} is more than {MAX_WEIGHT}",
                        t.weight
                    ));
                }
                let mut target = Target::new(p.clone(), t.model.clone(), t.weight);
                target.lifecycle = lifecycle::of_target(m, (i, t), &p.kind, at, errors);
                target.price = prices::of_target(
                    name,
                    model_price.as_ref(),
                    (i, t),
                    &p.kind,
                    at,
                    errors,
                    unpriced,
                );
                targets.push(target);
            }
            Some(_) => errors.push(format!(
                "{at}.targets[{i}].provider: {} does not serve {}",
                t.provider,
                op.as_str()
            )),
            // A provider that failed its own validation is already reported.
            None if accounts.declared.contains_key(&t.provider) => {}
            None => errors.push(format!(
                "{at}.targets[{i}].provider: no provider named `{}`",
                t.provider
            )),
        }
    }
    targets
}

/// A speech model whose family has no default voice (ElevenLabs': no voice serves every account
/// after 2026-12-31) should name one: without it, a request that names no `voice` is the
/// caller's 400 asking for one. Said loudly at load, once per model, but not refused: the
/// model's requests that name a voice (every OpenAI SDK call does) serve as before, and one
/// missing setting does not stop the whole gateway.
fn default_voice_named(
    name: &str,
    caps: Caps,
    targets: &[Target],
    at: &str,
    warnings: &mut Vec<String>,
) {
    let Caps::Speech(c) = caps else { return };
    if c.default_voice.is_some() || !targets.iter().any(|t| t.provider.enabled()) {
        return;
    }
    warnings.push(format!(
        "{at}.default_voice: not set, and family `{}` has none (no voice serves every account \
         of its provider): requests that name no `voice` are refused with a 400; set \
         `default_voice:` to a voice of this account (`GET /api/v1/audio/voices?model={name}` \
         lists them)",
        c.family
    ));
}

/// A model's `capabilities`, with the older per-model keys (`default_voice`, `max_input_chars`,
/// `max_documents`, still valid) folded in as the capability keys they stand for. A key given both
/// ways is an error rather than one silently winning. Where an older key does not apply to the
/// family's operation it is ignored, as it always was, with a warning.
fn overrides(m: &ModelFile, family: Caps, at: &str, errors: &mut Vec<String>) -> Value {
    let mut map = match &m.capabilities {
        None | Some(Value::Null) => serde_yaml::Mapping::new(),
        Some(Value::Mapping(map)) => map.clone(),
        // Not a mapping: `caps` reports it with its path.
        Some(other) => return other.clone(),
    };
    let mut put = |legacy: &str, key: &str, value: Value| {
        if map.contains_key(key) {
            errors.push(format!(
                "{at}.{legacy}: also given as capabilities.{key}; keep one"
            ));
        } else {
            map.insert(key.into(), value);
        }
    };
    let chars = |n: usize| {
        let mut limit = serde_yaml::Mapping::new();
        limit.insert("max".into(), Value::Number((n as u64).into()));
        limit.insert("unit".into(), "characters".into());
        Value::Mapping(limit)
    };
    let mut ignored = Vec::new();
    match family {
        Caps::Speech(_) => {
            // Empty, as `${VAR:-}` leaves it when the variable is unset, is not given.
            if let Some(v) = m.default_voice.as_deref().filter(|v| !v.trim().is_empty()) {
                put("default_voice", "default_voice", v.into());
            }
            if let Some(n) = m.max_input_chars {
                put("max_input_chars", "input_limit", chars(n));
            }
            if m.max_documents.is_some() {
                ignored.push("max_documents");
            }
        }
        Caps::Rerank(_) => {
            if let Some(n) = m.max_input_chars {
                put("max_input_chars", "query_limit", chars(n));
            }
            if let Some(n) = m.max_documents {
                put(
                    "max_documents",
                    "max_documents",
                    Value::Number((n as u64).into()),
                );
            }
            if m.default_voice.is_some() {
                ignored.push("default_voice");
            }
        }
        Caps::Images(_) => {
            for (key, set) in [
                ("default_voice", m.default_voice.is_some()),
                ("max_input_chars", m.max_input_chars.is_some()),
                ("max_documents", m.max_documents.is_some()),
            ] {
                if set {
                    ignored.push(key);
                }
            }
        }
    }
    for key in ignored {
        log::warn!(
            "{at}.{key}: ignored for a {} model (see docs/guide/capabilities.md)",
            family.operation().as_str()
        );
    }
    Value::Mapping(map)
}
