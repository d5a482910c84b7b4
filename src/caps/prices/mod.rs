//! Prices as data: what each native model costs at a provider kind, in the unit that provider
//! bills (characters, tokens by kind, images by size and quality, megapixels, search units,
//! queries), in its currency, with the source and the date it was checked. The built-in table is
//! [`prices.yaml`](prices.yaml), compiled in and loaded at first use like `lifecycle.yaml` (a unit
//! test loads it, so a mistake fails the tests, not a start-up); a model's or a target's `price:`
//! in the configuration overrides it key by key, adds a price it lacks, or declares the model
//! unpriced ([`Table::resolve`]).
//!
//! A model with no price is never priced at 0: it has no [`Price`], and the configuration test
//! lists it. What a request cost, from a price and its usage, is the `cost` module's, above.
//!
//! - [`Amount`] (exact nano-units) and [`Currency`] are `crate::money`'s (budgets and errors
//!   use them too), re-exported here;
//! - `schema`: the runtime [`Price`] and its rates;
//! - `read`: one entry as written (the table's, or a configuration's).

mod read;
mod schema;

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_yaml::Value;

pub(crate) use crate::money::{Amount, Currency};
pub(crate) use schema::{megapixels, GroupRate, Price, Rate, TokenKind};

use read::Written;

/// The built-in price table, as written.
pub(crate) const PRICES_YAML: &str = include_str!("../prices.yaml");

/// The word a configuration's `price:` takes to declare a model unpriced.
pub(crate) const UNPRICED: &str = "unpriced";

/// The loaded table: (provider kind, native model) → price.
#[derive(Debug, Default)]
pub(crate) struct Table {
    entries: HashMap<(String, String), Price>,
}

/// A configuration's `price:` (on a model or a target), read.
#[derive(Debug, Clone)]
pub(crate) enum Override {
    /// `price: unpriced`: the operator says there is no price to know.
    Unpriced,
    /// Keys over the built-in entry (or the one `model:` names).
    Set(Box<Written>),
}

impl Override {
    /// Read a configuration's `price:` at path `at`; problems go to `errors`.
    pub(crate) fn read(value: &Value, at: &str, errors: &mut Vec<String>) -> Option<Override> {
        match value {
            Value::String(s) if s == UNPRICED => Some(Override::Unpriced),
            Value::String(s) => {
                errors.push(format!(
                    "{at}: `{s}` is not a price: write a mapping (currency and rates) or \
                     `{UNPRICED}`"
                ));
                None
            }
            _ => read::read(value, at, errors).map(|w| Override::Set(Box::new(w))),
        }
    }
}

/// What is known of a target's price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Priced {
    /// Its price.
    Known(Box<Price>),
    /// Neither the table nor the configuration has one.
    Unknown,
    /// The configuration says it is unpriced.
    Declared,
}

impl Table {
    /// The built-in entry of `native` at a provider of `kind`.
    pub(crate) fn get(&self, kind: &str, native: &str) -> Option<&Price> {
        self.entries.get(&(kind.to_string(), native.to_string()))
    }

    /// The price of target (`kind`, `native`) with the model's `price:` (`model`) and the
    /// target's own (`target`, whose keys win) over the built-in entry. Problems are named with
    /// paths under `at`.
    pub(crate) fn resolve(
        &self,
        kind: &str,
        native: &str,
        model: Option<&Override>,
        target: Option<&Override>,
        at: &str,
    ) -> Result<Priced, String> {
        let written = match (target, model) {
            (Some(Override::Unpriced), _) => return Ok(Priced::Declared),
            (None, Some(Override::Unpriced)) => return Ok(Priced::Declared),
            (Some(Override::Set(t)), Some(Override::Set(m))) => Some(layer(t, m)),
            (Some(Override::Set(w)), _) | (None, Some(Override::Set(w))) => Some((**w).clone()),
            (None, None) => None,
        };
        let Some(w) = written else {
            return Ok(self
                .get(kind, native)
                .cloned()
                .map_or(Priced::Unknown, |p| Priced::Known(Box::new(p))));
        };
        let key = w.model.clone().unwrap_or_else(|| native.to_string());
        let base = self.get(kind, &key);
        if base.is_none() && w.model.is_some() {
            return Err(format!(
                "{at}.model: no built-in price for {kind} model `{key}`; give the price itself \
                 (currency and rates)"
            ));
        }
        if base.is_none() && !w.has_rates() {
            return Err(format!(
                "{at}: no built-in price for {kind} model `{native}`: give its currency and \
                 rates, or `{UNPRICED}`"
            ));
        }
        w.over(base)
            .map(|p| Priced::Known(Box::new(p)))
            .map_err(|e| format!("{at}: {e}"))
    }
}

/// `top`'s keys over `under`'s (a target's `price:` over its model's).
fn layer(top: &Written, under: &Written) -> Written {
    let t = top.clone();
    let u = under.clone();
    Written {
        currency: t.currency.or(u.currency),
        characters: t.characters.or(u.characters),
        tokens: t.tokens.or(u.tokens),
        images: t.images.or(u.images),
        megapixels: t.megapixels.or(u.megapixels),
        search_units: t.search_units.or(u.search_units),
        queries: t.queries.or(u.queries),
        source: t.source.or(u.source),
        checked: t.checked.or(u.checked),
        note: t.note.or(u.note),
        model: t.model.or(u.model),
    }
}

/// The built-in table, loaded on first use. `Err` lists its problems, which the unit tests make
/// sure never reach a user.
pub(crate) fn builtin() -> Result<&'static Table, &'static [String]> {
    static TABLE: OnceLock<Result<Table, Vec<String>>> = OnceLock::new();
    match TABLE.get_or_init(|| load(PRICES_YAML)) {
        Ok(t) => Ok(t),
        Err(e) => Err(e),
    }
}

/// Load and check a price table (provider kind → native model → entry). Every entry needs its
/// currency, at least one rate, its `source` URL and the date it was `checked`; every problem is
/// listed with its path (`openai.tts-1.characters.per`).
pub(crate) fn load(text: &str) -> Result<Table, Vec<String>> {
    let doc: Value =
        serde_yaml::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
    let Value::Mapping(kinds) = doc else {
        return Err(vec![
            "the table must be a mapping of provider kind → native model → price".into(),
        ]);
    };
    let mut errors = Vec::new();
    let mut entries = HashMap::new();
    for (kind, models) in kinds {
        let Some(kind) = kind.as_str().map(str::to_string) else {
            errors.push(format!("{kind:?}: a provider kind must be a string"));
            continue;
        };
        let Value::Mapping(models) = models else {
            errors.push(format!("{kind}: must be a mapping of native model → price"));
            continue;
        };
        for (model, entry) in models {
            let Some(model) = model.as_str().map(str::to_string) else {
                errors.push(format!("{kind}.{model:?}: a model id must be a string"));
                continue;
            };
            let at = format!("{kind}.{model}");
            let before = errors.len();
            let Some(w) = read::read(&entry, &at, &mut errors) else {
                continue;
            };
            if w.model.is_some() {
                errors.push(format!(
                    "{at}.model: only a configuration's `price:` names one"
                ));
            }
            for (key, missing) in [
                ("source", w.source.is_none()),
                ("checked", w.checked.is_none()),
            ] {
                if missing {
                    errors.push(format!(
                        "{at}.{key}: required (where the price was read, and when)"
                    ));
                }
            }
            if errors.len() > before {
                continue;
            }
            match w.over(None) {
                Ok(price) => {
                    entries.insert((kind.clone(), model), price);
                }
                Err(e) => errors.push(format!("{at}: {e}")),
            }
        }
    }
    if errors.is_empty() {
        Ok(Table { entries })
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests;
