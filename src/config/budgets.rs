//! Money budgets against prices, checked at load: every budget (`limits.budget` of an API key
//! or a JWT plan) must be able to count the cost of every priced model, so each target priced
//! in another currency needs a `currency_rates` entry into the budget's. A missing rate is a load
//! error naming the budget, the model and the currencies: a budget that could not convert a cost
//! would let that model's requests through uncounted, which is the silent failure budgets exist
//! to prevent. A model with no price cannot be counted either; that is a warning (the model
//! may be free, or its price unknown), printed by `-t` with the unpriced list.

use std::collections::BTreeSet;

use crate::auth::limits::LimitSet;
use crate::auth::AuthSettings;
use crate::catalog::Catalog;
use crate::money::{Currency, Rates};

/// Every budget of `auth` with its path.
fn budgets(auth: &AuthSettings) -> Vec<(String, Currency)> {
    let mut found = Vec::new();
    let mut push = |path: String, set: &LimitSet| {
        if let Some(c) = set.budget_currency() {
            found.push((format!("{path}.budget.currency"), c));
        }
    };
    for (i, k) in auth.api_keys.iter().enumerate() {
        if let Some(set) = &k.limits {
            push(format!("auth.api_keys[{i}].limits"), set);
        }
    }
    if let Some(l) = auth.jwt.as_ref().and_then(|j| j.limits.as_ref()) {
        for (value, set) in &l.by_value {
            push(format!("auth.jwt.limits.by_value.{value}"), set);
        }
        if let Some(set) = &l.default {
            push("auth.jwt.limits.default".into(), set);
        }
    }
    found
}

/// Check every budget against every priced target; errors and warnings are pushed.
pub(super) fn check(
    auth: &AuthSettings,
    catalog: &Catalog,
    rates: &Rates,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let budgets = budgets(auth);
    if budgets.is_empty() {
        return;
    }
    let mut unpriced = BTreeSet::new();
    for model in catalog.models() {
        for (i, t) in model.targets.iter().enumerate() {
            let Some(price) = &t.price else {
                unpriced.insert(model.name.as_str());
                continue;
            };
            for (path, budget) in &budgets {
                if !rates.converts(price.currency, *budget) {
                    errors.push(format!(
                        "{path}: the budget is in {budget}, but model `{}` (targets[{i}], {} \
                         `{}`) is priced in {}: state its rate, \
                         switchyard.currency_rates.{}.{budget}",
                        model.name, t.provider.name, t.native_model, price.currency, price.currency,
                    ));
                }
            }
        }
    }
    for name in unpriced {
        warnings.push(format!(
            "model `{name}` has a target with no price: its requests are not counted against \
             money budgets"
        ));
    }
}
