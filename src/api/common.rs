//! Validation shared by the three operations: `model` lookup, `retries`, input lengths in a
//! capability's unit, and undeclared fields.

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::caps::{Limit, Unit};
use crate::catalog::{Catalog, Model};
use crate::common::json::{Fields, Str};
use crate::common::Operation;

/// Resolve `model` for `op`, recording a problem when it is missing or unknown. A model past its
/// shutdown resolves to its successor, when it names one (`Catalog::serving`): the request is
/// then validated against, and served by, the successor.
pub(crate) fn model(
    fields: &mut Fields<'_>,
    catalog: &Catalog,
    op: Operation,
) -> Option<Arc<Model>> {
    let name = fields.required_string("model")?;
    match catalog.serving(name.as_str()) {
        Some(m) if m.operation() == op => Some(m.clone()),
        Some(_) => {
            fields.error(
                "model",
                format!(
                    "model `{}` does not serve this endpoint; models here: {}",
                    name.as_str(),
                    catalog.names_for(op).join(", ")
                ),
            );
            None
        }
        None => {
            fields.error(
                "model",
                format!(
                    "unknown model `{}`; available: {}",
                    name.as_str(),
                    catalog.names_for(op).join(", ")
                ),
            );
            None
        }
    }
}

/// The length of `text` in `unit`: Unicode scalar values, UTF-8 bytes, tokens of the gateway's
/// tokenizer, or characters with Han ideographs counted twice.
pub(crate) fn length(text: &str, unit: Unit) -> usize {
    match unit {
        Unit::Characters => text.chars().count(),
        Unit::Bytes => text.len(),
        Unit::Tokens => crate::tokens::count(text),
        Unit::HanWeightedCharacters => text
            .chars()
            .map(|c| if crate::caps::schema::is_han(c) { 2 } else { 1 })
            .sum(),
    }
}

/// `text`'s length when it is over `limit` (`None`: it fits).
pub(crate) fn over_limit(text: &str, limit: Limit) -> Option<usize> {
    // No unit counts more than one per byte, so text no longer in bytes than the limit fits
    // without being counted (the common case, and counting tokens is not free).
    if text.len() <= limit.max {
        return None;
    }
    let len = length(text, limit.unit);
    (len > limit.max).then_some(len)
}

/// `retries`: default 0, at most the configured cap.
pub(crate) fn retries(fields: &mut Fields<'_>, max: u32) -> u32 {
    match fields.unsigned("retries") {
        Some(n) if n <= u64::from(max) => n as u32,
        Some(_) => {
            fields.error("retries", format!("must be an integer from 0 to {max}"));
            0
        }
        None => 0,
    }
}

/// Split the fields nobody took into those the model accepts natively (passed through verbatim) and
/// the rest, which are errors: nothing a client sends is silently dropped.
pub(crate) fn undeclared<'a>(
    rest: Vec<(Str<'a>, &'a RawValue)>,
    native: &[&str],
    model: Option<&Model>,
    errors: &mut crate::common::error::ValidationErrors,
) -> Vec<(Str<'a>, &'a RawValue)> {
    let mut pass = Vec::new();
    for (key, value) in rest {
        if native.contains(&key.as_str()) {
            if value.get() != "null" {
                pass.push((key, value));
            }
        } else {
            let msg = match model {
                Some(m) if native.is_empty() => {
                    format!(
                        "unknown field; model {} accepts no fields beyond the API's",
                        m.name
                    )
                }
                Some(m) => format!(
                    "unknown field; besides the API's fields model {} accepts: {}",
                    m.name,
                    native.join(", ")
                ),
                None => "unknown field".to_string(),
            };
            errors.add(key.as_str().to_string(), msg);
        }
    }
    pass
}
