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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    /// A config with a speech model priced in USD (built in: `tts-1`) and one in CNY
    /// (configured), an unpriced one, `auth` and `rates` as given.
    fn config(auth: &str, rates: &str) -> String {
        format!(
            r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  auth:
{auth}
  currency_rates: {rates}
  providers:
    openai: {{kind: openai, api_key: k, base_url: "https://api.openai.com/v1"}}
  models:
    tts: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}
    tts-cn:
      family: openai-tts
      targets: [{{provider: openai, model: tts-1, price: {{currency: CNY, characters: {{price: 100, per: 1000000}}}}}}]
    tts-free: {{family: openai-tts, targets: [{{provider: openai, model: tts-1, price: unpriced}}]}}
"#
        )
    }

    fn load(yaml: &str) -> Result<crate::config::Settings, Vec<String>> {
        crate::config::load_str(yaml, &|_| None)
    }

    fn errors(yaml: &str) -> Vec<String> {
        load(yaml).err().unwrap_or_default()
    }

    const KEY_USD: &str =
        "    api_keys: [{name: a, key: k, limits: {budget: {currency: USD, per_day: \"5\"}}}]";

    #[test]
    fn a_budget_needs_a_rate_from_every_priced_models_currency() {
        let errors = errors(&config(KEY_USD, "{}"));
        assert_eq!(
            errors,
            [
                "auth.api_keys[0].limits.budget.currency: the budget is in USD, but model `tts-cn` \
                 (targets[0], openai `tts-1`) is priced in CNY: state its rate, \
                 switchyard.currency_rates.CNY.USD"
            ]
        );
        // The other direction is not enough: rates are never inverted.
        assert!(load(&config(KEY_USD, "{USD: {CNY: \"7.1\"}}")).is_err());
        let s =
            load(&config(KEY_USD, "{CNY: {USD: \"0.14\"}}")).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(
            s.gateway
                .warnings()
                .iter()
                .any(|w| w.contains("`tts-free`") && w.contains("not counted against money")),
            "{:?}",
            s.gateway.warnings()
        );
    }

    #[test]
    fn jwt_plans_budgets_are_checked_too_and_no_budget_needs_no_rate() {
        let jwt = r#"    jwt:
      hs256_secret: "a-secret-of-at-least-thirty-two-bytes!"
      limits:
        claim: plan
        by_value: {pro: {budget: {currency: CNY, per_month: "100"}}}
        default: {budget: {currency: USD, per_day: "1"}}"#;
        let errors = errors(&config(jwt, "{}"));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with(
            "auth.jwt.limits.by_value.pro.budget.currency: the budget is in CNY, but model `tts`"
        ));
        assert!(errors[1].starts_with(
            "auth.jwt.limits.default.budget.currency: the budget is in USD, but model `tts-cn`"
        ));
        assert!(load(&config(jwt, "{CNY: {USD: \"0.14\"}, USD: {CNY: \"7.1\"}}")).is_ok());
        let s = load(&config("    api_keys: [{name: a, key: k}]", "{}"))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(!s.gateway.warnings().iter().any(|w| w.contains("money")));
    }
}
