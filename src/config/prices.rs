//! The configured targets' prices: the built-in `caps/prices.yaml` entry of each target's provider
//! kind and native model, with the model's and the target's `price:` over it (or `unpriced`); and
//! the list of configured models left without a price, which `switchyard -t` prints, so a missing
//! price is stated rather than counted as 0.

use std::sync::Arc;

use crate::caps::prices::{self, Override, Price, Priced};

use super::file::TargetFile;

/// A model's own `price:`, read once for all its targets (problems to `errors`, under `at`).
pub(super) fn of_model(
    price: Option<&serde_yaml::Value>,
    model_at: &str,
    errors: &mut Vec<String>,
) -> Option<Override> {
    Override::read(price?, &format!("{model_at}.price"), errors)
}

/// Target `i`, `t` (at a provider of `kind`) of model `name`: its price, or `None` — then a line
/// saying so goes to `unpriced`. Problems are added to `errors` with their paths.
pub(super) fn of_target(
    name: &str,
    model: Option<&Override>,
    (i, t): (usize, &TargetFile),
    kind: &str,
    model_at: &str,
    errors: &mut Vec<String>,
    unpriced: &mut Vec<String>,
) -> Option<Arc<Price>> {
    let table = match prices::builtin() {
        Ok(t) => t,
        Err(problems) => {
            // Never reached in a tested build (a unit test loads the table).
            errors.extend(
                problems
                    .iter()
                    .map(|p| format!("built-in price table: {p}")),
            );
            return None;
        }
    };
    let target_at = format!("{model_at}.targets[{i}].price");
    let own = t
        .price
        .as_ref()
        .and_then(|v| Override::read(v, &target_at, errors));
    if t.price.is_some() && own.is_none() {
        // Unreadable: reported; not also reported as unpriced.
        return None;
    }
    // Problems are named where the key that caused them most likely is.
    let at = if own.is_some() {
        target_at
    } else {
        format!("{model_at}.price")
    };
    match table.resolve(kind, &t.model, model, own.as_ref(), &at) {
        Ok(Priced::Known(p)) => Some(Arc::new(*p)),
        Ok(Priced::Unknown) => {
            unpriced.push(format!(
                "model `{name}`: {kind} `{}` has no price (none built in or configured)",
                t.model
            ));
            None
        }
        Ok(Priced::Declared) => {
            unpriced.push(format!(
                "model `{name}`: {kind} `{}` is declared unpriced",
                t.model
            ));
            None
        }
        Err(problem) => {
            errors.push(problem);
            None
        }
    }
}
