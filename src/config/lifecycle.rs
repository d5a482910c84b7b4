//! The configured models' lifecycles, checked at load against the clock: each target's lifecycle
//! (the built-in `caps/lifecycle.yaml` entry with the model's and the target's `lifecycle:` over
//! it), each model's `successor`, and what is true now — a target within [`WARN_DAYS`] of its
//! shutdown is a warning, a target past it is refused (naming the replacement) unless the model
//! has a successor or the operator says the account still serves it (`still_available`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::caps::lifecycle::{self, Clock, Date, Lifecycle, Override};
use crate::catalog::{Catalog, Model, Target};

use super::file::{ModelFile, TargetFile};

/// How many days before a shutdown the configuration test and start-up warn.
pub(super) const WARN_DAYS: i64 = 30;

/// Target `i`, `t`, of model `m` (at a provider of `kind`): its lifecycle, or `None` when nothing is
/// known of its model. Problems are added to `errors` with their paths.
pub(super) fn of_target(
    m: &ModelFile,
    (i, t): (usize, &TargetFile),
    kind: &str,
    model_at: &str,
    errors: &mut Vec<String>,
) -> Option<Arc<Lifecycle>> {
    let table = match lifecycle::builtin() {
        Ok(t) => t,
        Err(problems) => {
            // Never reached in a tested build (a unit test loads the table).
            errors.extend(
                problems
                    .iter()
                    .map(|p| format!("built-in lifecycle table: {p}")),
            );
            return None;
        }
    };
    let none = Override::default();
    let (own, model) = (
        t.lifecycle.as_ref().unwrap_or(&none),
        m.lifecycle.as_ref().unwrap_or(&none),
    );
    // Problems are named where the key that caused them most likely is.
    let at = if t.lifecycle.is_some() {
        format!("{model_at}.targets[{i}].lifecycle")
    } else {
        format!("{model_at}.lifecycle")
    };
    match table.resolve(kind, &t.model, &own.over(model), &at) {
        Ok(l) => l.map(Arc::new),
        Err(problems) => {
            errors.extend(problems);
            None
        }
    }
}

/// Put the models in a catalog read by `clock`, with their successors and answer headers, after
/// checking every target's lifecycle against the clock's now: refusals go to `errors`, what an
/// operator should act on soon to `warnings`.
pub(super) fn finish(
    models: Vec<Model>,
    files: &BTreeMap<String, ModelFile>,
    clock: &Clock,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Catalog {
    let successors = successors(&models, files, errors, warnings);
    // Where `Link: rel="successor-version"` points: the successor, else a model of this catalog
    // serving the provider's recommended replacement.
    let mut links: HashMap<String, String> = HashMap::new();
    for m in &models {
        let link = match successors.get(&m.name) {
            Some(s) => Some(s.clone()),
            None => replacement_model(m, &models),
        };
        if let Some(l) = link {
            links.insert(m.name.clone(), format!("/api/v1/models/{l}"));
        }
    }
    let now = clock.now();
    for m in &models {
        for (i, t) in m.targets.iter().enumerate() {
            let Some(l) = &t.lifecycle else { continue };
            let successor = successors.get(&m.name).map(String::as_str);
            check_target(m, (i, t, l), successor, now, (&mut *errors, &mut *warnings));
        }
    }
    let mut catalog = Catalog::with_clock(clock.clone());
    let names: Vec<String> = models.iter().map(|m| m.name.clone()).collect();
    for mut m in models {
        let successor = successors.get(&m.name).cloned();
        let link = links.get(&m.name).cloned();
        m.set_lifecycle(clock.clone(), successor, link);
        catalog.insert(m);
    }
    for name in names.iter().filter(|n| successors.contains_key(*n)) {
        catalog.add_takeover(name);
    }
    catalog
}

/// Each model's successor, checked: model name → its successor's name.
fn successors(
    models: &[Model],
    files: &BTreeMap<String, ModelFile>,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> HashMap<String, String> {
    let by_name: HashMap<&str, &Model> = models.iter().map(|m| (m.name.as_str(), m)).collect();
    let mut successors: HashMap<String, String> = HashMap::new();
    for m in models {
        let Some(s) = files.get(&m.name).and_then(|f| f.successor.as_deref()) else {
            continue;
        };
        let at = format!("switchyard.models.{}.successor", m.name);
        let problem = match by_name.get(s) {
            None => Some(format!("no model named `{s}`")),
            Some(_) if s == m.name => Some("a model cannot succeed itself".into()),
            Some(other) if other.operation() != m.operation() => Some(format!(
                "`{s}` serves {}, `{}` serves {}",
                other.operation().as_str(),
                m.name,
                m.operation().as_str()
            )),
            Some(_) if files.get(s).is_some_and(|f| f.successor.is_some()) => Some(format!(
                "`{s}` names a successor itself; successors are not chained: name the last one"
            )),
            Some(_) => None,
        };
        match problem {
            Some(p) => errors.push(format!("{at}: {p}")),
            None => {
                lasting_warning(m, s, &at, warnings);
                successors.insert(m.name.clone(), s.to_string());
            }
        }
    }
    successors
}

/// A successor takes over once every target is gone: one that never goes (no date, or the
/// account keeps it) holds it off for good, which the operator should know.
fn lasting_warning(m: &Model, s: &str, at: &str, warnings: &mut Vec<String>) {
    let lasting: Vec<String> = m
        .targets
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            t.lifecycle
                .as_ref()
                .is_none_or(|l| l.still_available || l.shutdown.is_none())
        })
        .map(|(i, _)| format!("targets[{i}]"))
        .collect();
    if !lasting.is_empty() {
        warnings.push(format!(
            "{at}: `{s}` never takes over: {} of `{}` {} no shutdown date (or \
             `still_available`)",
            lasting.join(", "),
            m.name,
            if lasting.len() == 1 { "has" } else { "have" }
        ));
    }
}

/// Target `i`, `t`, of model `m`, whose lifecycle is `l`, against `now`: past its shutdown it is
/// refused (a warning when `successor` takes over); within [`WARN_DAYS`] of it, a warning.
fn check_target(
    m: &Model,
    (i, t, l): (usize, &Target, &Lifecycle),
    successor: Option<&str>,
    now: i64,
    (errors, warnings): (&mut Vec<String>, &mut Vec<String>),
) {
    if l.still_available {
        return;
    }
    let at = format!("switchyard.models.{}.targets[{i}]", m.name);
    let what = format!("{} model `{}`", t.provider.kind, t.native_model);
    let source = l
        .source
        .as_deref()
        .map(|s| format!(" (source: {s})"))
        .unwrap_or_default();
    // Deprecated with no shutdown announced: nothing to warn of or refuse yet.
    let Some(shutdown) = l.shutdown else { return };
    if l.gone(now) {
        match successor {
            Some(s) => warnings.push(format!(
                "{at}: {what} was shut down on {shutdown}{source}; model `{s}`, its \
                 successor, serves `{}`'s requests",
                m.name
            )),
            None => errors.push(format!(
                "{at}: {what} was shut down on {shutdown}; replacement: {}{source}. \
                 Point the model at a model the provider serves, name a `successor:` for \
                 it, or, if your account still serves it, set `lifecycle: \
                 {{still_available: true}}`",
                l.replacement_text()
            )),
        }
        return;
    }
    let days = Date::of_unix(now).days_until(shutdown);
    if days <= WARN_DAYS {
        let then = match successor {
            Some(s) => format!("model `{s}`, its successor, takes over on that day"),
            None if l.replacement.is_empty() => format!(
                "name a `successor:` for `{}` to take over on that day, or remove the \
                 target; past it, the configuration is refused",
                m.name
            ),
            None => format!(
                "move `{}` to the replacement, or name a `successor:` to take over on \
                 that day; past it, the configuration is refused",
                m.name
            ),
        };
        warnings.push(format!(
            "{at}: {what} shuts down on {shutdown} (in {days} day{}); replacement: \
             {}{source}; {then}",
            if days == 1 { "" } else { "s" },
            l.replacement_text()
        ));
    }
}

/// A public model of `models` serving one of `m`'s recommended replacements at a provider of the
/// same kind, the best-ranked replacement first.
fn replacement_model(m: &Model, models: &[Model]) -> Option<String> {
    let (kind, life) = m
        .targets
        .iter()
        .filter_map(|t| t.lifecycle.as_ref().map(|l| (&t.provider.kind, l)))
        .max_by_key(|(_, l)| l.lasts())?;
    if m.targets.iter().any(|t| t.lifecycle.is_none()) {
        return None;
    }
    life.replacement.iter().find_map(|r| {
        models
            .iter()
            .find(|o| {
                o.name != m.name
                    && o.operation() == m.operation()
                    && o.targets
                        .iter()
                        .any(|t| &t.provider.kind == kind && &t.native_model == r)
            })
            .map(|o| o.name.clone())
    })
}
