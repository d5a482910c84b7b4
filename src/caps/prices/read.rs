//! Reading one price entry as written — in `prices.yaml`, or as a model's or target's `price:`
//! in the configuration — into a [`Written`] entry, every key optional, every problem named by its
//! path; and making a [`Price`] of it, alone or over the entry it overrides.

use std::collections::BTreeMap;

use serde_yaml::{Mapping, Value};

use super::schema::{
    GroupRate, ImageRate, ImageRates, MegapixelRates, Price, Rate, TokenKind, TokenRates,
};
use crate::caps::lifecycle::Date;
use crate::money::{Amount, Currency};

/// The keys an entry may have (`model` only in a configuration).
pub(crate) const KEYS: [&str; 11] = [
    "currency",
    "characters",
    "tokens",
    "images",
    "megapixels",
    "search_units",
    "queries",
    "source",
    "checked",
    "note",
    "model",
];

/// An entry as written: each key replaces the same key of the entry it overrides.
#[derive(Debug, Default, Clone)]
pub(crate) struct Written {
    pub currency: Option<Currency>,
    pub characters: Option<Rate>,
    pub tokens: Option<TokenRates>,
    pub images: Option<ImageRates>,
    pub megapixels: Option<MegapixelRates>,
    pub search_units: Option<GroupRate>,
    pub queries: Option<GroupRate>,
    pub source: Option<String>,
    pub checked: Option<Date>,
    pub note: Option<String>,
    /// The built-in entry to start from (configuration only).
    pub model: Option<String>,
}

impl Written {
    /// Whether it gives any rate.
    pub(crate) fn has_rates(&self) -> bool {
        self.characters.is_some()
            || self.tokens.is_some()
            || self.images.is_some()
            || self.megapixels.is_some()
            || self.search_units.is_some()
            || self.queries.is_some()
    }

    /// The price it makes over `base` (its keys win): `Err` when the result has no currency or
    /// no rate.
    pub(crate) fn over(self, base: Option<&Price>) -> Result<Price, String> {
        let b = base;
        fn pick<T>(mine: Option<T>, theirs: Option<T>) -> Option<T> {
            mine.or(theirs)
        }
        let currency = self
            .currency
            .or(b.map(|b| b.currency))
            .ok_or("`currency` is required (an ISO 4217 code: USD, CNY, …)")?;
        let price = Price {
            currency,
            characters: pick(self.characters, b.and_then(|b| b.characters)),
            tokens: pick(self.tokens, b.and_then(|b| b.tokens.clone())),
            images: pick(self.images, b.and_then(|b| b.images.clone())),
            megapixels: pick(self.megapixels, b.and_then(|b| b.megapixels)),
            search_units: pick(self.search_units, b.and_then(|b| b.search_units)),
            queries: pick(self.queries, b.and_then(|b| b.queries)),
            source: pick(self.source, b.and_then(|b| b.source.clone())),
            checked: pick(self.checked, b.and_then(|b| b.checked)),
            note: pick(self.note, b.and_then(|b| b.note.clone())),
        };
        if price.units().is_empty() {
            return Err(
                "no rate: give one of characters, tokens, images, megapixels, search_units, \
                 queries"
                    .into(),
            );
        }
        Ok(price)
    }
}

/// Read `value` (a mapping of the keys above) at path `at`. `None` when it is not a mapping; a
/// key that cannot be read is reported and left out, so every problem is listed at once.
pub(crate) fn read(value: &Value, at: &str, errors: &mut Vec<String>) -> Option<Written> {
    let Value::Mapping(map) = value else {
        errors.push(format!(
            "{at}: must be a mapping of currency and rates (or `unpriced`)"
        ));
        return None;
    };
    let mut w = Written::default();
    for (key, v) in map {
        let Some(key) = key.as_str() else {
            errors.push(format!("{at}: {key:?} is not a key"));
            continue;
        };
        let here = format!("{at}.{key}");
        match key {
            "currency" => {
                w.currency = text(v, &here, errors).and_then(|c| {
                    let cur = Currency::parse(&c);
                    if cur.is_none() {
                        errors.push(format!(
                            "{here}: `{c}` is not an ISO 4217 code (three capitals: USD, CNY)"
                        ));
                    }
                    cur
                })
            }
            "characters" => w.characters = rate(v, &here, errors),
            "tokens" => w.tokens = tokens(v, &here, errors),
            "images" => w.images = images(v, &here, errors),
            "megapixels" => w.megapixels = megapixels(v, &here, errors),
            "search_units" => w.search_units = group(v, &here, errors),
            "queries" => w.queries = group(v, &here, errors),
            "source" => {
                w.source = text(v, &here, errors).filter(|s| {
                    let url = s.starts_with("https://") || s.starts_with("http://");
                    if !url {
                        errors.push(format!("{here}: must be the URL the price was read at"));
                    }
                    url
                })
            }
            "checked" => {
                w.checked = text(v, &here, errors).and_then(|s| {
                    let d = Date::parse(&s);
                    if d.is_none() {
                        errors.push(format!("{here}: `{s}` is not a date (YYYY-MM-DD)"));
                    }
                    d
                })
            }
            "note" => w.note = text(v, &here, errors),
            "model" => w.model = text(v, &here, errors),
            other => errors.push(format!(
                "{at}.{other}: unknown key (one of {})",
                KEYS.join(", ")
            )),
        }
    }
    Some(w)
}

/// A non-empty string.
fn text(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<String> {
    match v.as_str().map(str::trim) {
        Some(s) if !s.is_empty() => Some(s.to_string()),
        _ => {
            errors.push(format!("{at}: must be a non-empty string"));
            None
        }
    }
}

/// An amount: a YAML number or a decimal string, non-negative, at most nine decimal places.
pub(crate) fn amount(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<Amount> {
    let written = match v {
        Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
        // Rust's float formatting is the shortest decimal that reads back as the same float, never
        // an exponent: `0.000015` stays `0.000015`.
        Value::Number(n) => n.as_f64().map(|f| format!("{f}")).unwrap_or_default(),
        Value::String(s) => s.trim().to_string(),
        _ => String::new(),
    };
    let a = Amount::parse(&written);
    if a.is_none() {
        errors.push(format!(
            "{at}: `{}` is not an amount (a non-negative decimal, at most 9 places)",
            if written.is_empty() { "?" } else { &written }
        ));
    }
    a
}

/// A positive whole number.
fn count(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<u64> {
    match v.as_u64() {
        Some(n) if n > 0 => Some(n),
        _ => {
            errors.push(format!("{at}: must be a whole number above 0"));
            None
        }
    }
}

/// A mapping's keys, each checked against `allowed`.
fn mapping<'v>(
    v: &'v Value,
    at: &str,
    allowed: &[&str],
    errors: &mut Vec<String>,
) -> Option<&'v Mapping> {
    let Value::Mapping(m) = v else {
        errors.push(format!("{at}: must be a mapping of {}", allowed.join(", ")));
        return None;
    };
    for k in m.keys() {
        if !k.as_str().is_some_and(|k| allowed.contains(&k)) {
            errors.push(format!(
                "{at}.{}: unknown key (one of {})",
                k.as_str().unwrap_or("?"),
                allowed.join(", ")
            ));
        }
    }
    Some(m)
}

/// A required key of `m`.
fn required<'v>(
    m: &'v Mapping,
    key: &str,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<&'v Value> {
    let v = m.get(key);
    if v.is_none() {
        errors.push(format!("{at}.{key}: missing"));
    }
    v
}

/// `{price, per}`.
fn rate(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<Rate> {
    let m = mapping(v, at, &["price", "per"], errors)?;
    let price =
        required(m, "price", at, errors).and_then(|p| amount(p, &format!("{at}.price"), errors));
    let per = required(m, "per", at, errors).and_then(|p| count(p, &format!("{at}.per"), errors));
    Some(Rate {
        price: price?,
        per: per?,
    })
}

/// `{per, <kind>: price, …}`.
fn tokens(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<TokenRates> {
    let mut allowed = vec!["per"];
    allowed.extend(TokenKind::ALL.iter().map(|(n, _)| *n));
    let m = mapping(v, at, &allowed, errors)?;
    let per = required(m, "per", at, errors).and_then(|p| count(p, &format!("{at}.per"), errors));
    let mut rates = BTreeMap::new();
    for (name, kind) in TokenKind::ALL {
        if let Some(p) = m.get(name) {
            if let Some(a) = amount(p, &format!("{at}.{name}"), errors) {
                rates.insert(kind, a);
            }
        }
    }
    if rates.is_empty() {
        errors.push(format!(
            "{at}: give the price of at least one kind of token ({})",
            TokenKind::ALL.map(|(n, _)| n).join(", ")
        ));
        return None;
    }
    Some(TokenRates { per: per?, rates })
}

/// `{per_image}`, `{by_size: {WxH: price}}`, `{by_quality: {q: price}}` or
/// `{by_quality_size: {q: {WxH: price}}}`.
fn images(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<ImageRates> {
    const FORMS: [&str; 4] = ["per_image", "by_size", "by_quality", "by_quality_size"];
    let m = mapping(v, at, &FORMS, errors)?;
    if m.len() != 1 {
        errors.push(format!("{at}: give exactly one of {}", FORMS.join(", ")));
        return None;
    }
    let (form, body) = m.iter().next()?;
    let form = form.as_str()?;
    let here = format!("{at}.{form}");
    if form == "per_image" {
        return amount(body, &here, errors).map(ImageRates::PerImage);
    }
    let Value::Mapping(outer) = body else {
        errors.push(format!("{here}: must be a mapping"));
        return None;
    };
    let mut rows = Vec::new();
    let size_ok = |s: &str| crate::caps::parse_size(s).is_some();
    for (k, inner) in outer {
        let Some(k) = k.as_str() else {
            errors.push(format!("{here}: {k:?} is not a key"));
            continue;
        };
        let at_k = format!("{here}.{k}");
        match form {
            "by_size" | "by_quality" => {
                if form == "by_size" && !size_ok(k) {
                    errors.push(format!("{at_k}: `{k}` is not a size (WxH)"));
                    continue;
                }
                if let Some(price) = amount(inner, &at_k, errors) {
                    let (size, quality) = if form == "by_size" {
                        (Some(k.to_string()), None)
                    } else {
                        (None, Some(k.to_string()))
                    };
                    rows.push(ImageRate {
                        quality,
                        size,
                        price,
                    });
                }
            }
            _ => {
                let Value::Mapping(sizes) = inner else {
                    errors.push(format!("{at_k}: must be a mapping of size (WxH) → price"));
                    continue;
                };
                for (s, p) in sizes {
                    let s = s.as_str().unwrap_or_default();
                    let at_s = format!("{at_k}.{s}");
                    if !size_ok(s) {
                        errors.push(format!("{at_s}: `{s}` is not a size (WxH)"));
                        continue;
                    }
                    if let Some(price) = amount(p, &at_s, errors) {
                        rows.push(ImageRate {
                            quality: Some(k.to_string()),
                            size: Some(s.to_string()),
                            price,
                        });
                    }
                }
            }
        }
    }
    if rows.is_empty() {
        errors.push(format!("{here}: no price"));
        return None;
    }
    Some(ImageRates::Table(rows))
}

/// `{first, additional, input?}`.
fn megapixels(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<MegapixelRates> {
    let m = mapping(v, at, &["first", "additional", "input"], errors)?;
    let first =
        required(m, "first", at, errors).and_then(|p| amount(p, &format!("{at}.first"), errors));
    let additional = required(m, "additional", at, errors)
        .and_then(|p| amount(p, &format!("{at}.additional"), errors));
    let input = m
        .get("input")
        .and_then(|p| amount(p, &format!("{at}.input"), errors));
    Some(MegapixelRates {
        first: first?,
        additional: additional?,
        input,
    })
}

/// `{price, per, documents, chunk_tokens?}`.
fn group(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<GroupRate> {
    let m = mapping(
        v,
        at,
        &["price", "per", "documents", "chunk_tokens"],
        errors,
    )?;
    let price =
        required(m, "price", at, errors).and_then(|p| amount(p, &format!("{at}.price"), errors));
    let per = required(m, "per", at, errors).and_then(|p| count(p, &format!("{at}.per"), errors));
    let documents = required(m, "documents", at, errors)
        .and_then(|p| count(p, &format!("{at}.documents"), errors));
    let chunk_tokens = m
        .get("chunk_tokens")
        .and_then(|p| count(p, &format!("{at}.chunk_tokens"), errors));
    Some(GroupRate {
        price: price?,
        per: per?,
        documents: documents?,
        chunk_tokens,
    })
}
