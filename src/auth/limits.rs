//! What an authenticated caller may use: the limits an API-key entry carries
//! (`auth.api_keys[].limits`) or a JWT subject gets by one of its claims
//! (`auth.jwt.limits`), as written in the config and checked at start.
//!
//! Only the shape lives here, so that a [`super::Principal`] can carry its
//! limits (an `Arc`, found while authenticating) and the hot path never looks
//! anything up by name. The accounting (windows, counters, Redis) is the
//! top-level `limits` module's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Deserialize;

use crate::money::{Amount, Currency};

/// One caller's limits. Every field is optional; an unset one is no limit.
/// Windows are fixed: the current UTC minute, the current UTC day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSet {
    /// Requests started per minute (every operation; `GET`s of tasks and models excepted).
    #[serde(default)]
    pub requests_per_minute: Option<u64>,
    /// Requests (streams included) being served at once, held until the answer has been sent.
    #[serde(default)]
    pub concurrent: Option<u64>,
    /// Rerank tokens, as the answers' usage reports them.
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
    #[serde(default)]
    pub tokens_per_day: Option<u64>,
    /// Speech input characters.
    #[serde(default)]
    pub characters_per_minute: Option<u64>,
    #[serde(default)]
    pub characters_per_day: Option<u64>,
    /// Images generated.
    #[serde(default)]
    pub images_per_minute: Option<u64>,
    #[serde(default)]
    pub images_per_day: Option<u64>,
    /// Money: what the caller's requests may cost per UTC day and UTC calendar month, in one
    /// currency ([`Budget`]).
    #[serde(default)]
    pub budget: Option<Budget>,
}

/// `budget: {currency: USD, per_day: "5.00", per_month: "100"}`: what a caller's requests may
/// cost, in one currency. Amounts are decimals with at most nine places, read exactly (quoted,
/// or a whole number); a cost in another currency is converted by the configuration's
/// `currency_rates`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(deserialize_with = "currency")]
    pub(crate) currency: Currency,
    #[serde(default, deserialize_with = "amount")]
    pub(crate) per_day: Option<Amount>,
    #[serde(default, deserialize_with = "amount")]
    pub(crate) per_month: Option<Amount>,
}

impl Budget {
    /// The budget's currency.
    pub(crate) fn currency(&self) -> Currency {
        self.currency
    }
}

fn currency<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Currency, D::Error> {
    let code = String::deserialize(d)?;
    Currency::parse(&code).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "`{code}` is not a currency: write its ISO 4217 code (USD, CNY, EUR)"
        ))
    })
}

/// A decimal amount: a string (`"5.00"`) or a whole number (`100`). A fractional YAML number is
/// refused rather than read through a float, which would not keep it exact.
fn amount<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Amount>, D::Error> {
    struct Visit;
    impl serde::de::Visitor<'_> for Visit {
        type Value = Amount;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an amount such as \"5.00\" (quoted) or 100")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Amount, E> {
            Amount::parse(v).ok_or_else(|| {
                E::custom(format!(
                    "`{v}` is not an amount: digits with at most nine places after the point"
                ))
            })
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Amount, E> {
            self.visit_str(&v.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Amount, E> {
            self.visit_str(&v.to_string())
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Amount, E> {
            Err(E::custom(format!(
                "write {v} in quotes (\"{v}\"): amounts are read exactly, never as floats"
            )))
        }
    }
    d.deserialize_any(Visit).map(Some)
}

/// What a usage limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meter {
    Requests,
    Tokens,
    Characters,
    Images,
    /// Money, in nano-units of the budget's currency (every operation).
    Money,
}

/// A fixed window: the current UTC minute, UTC day or UTC calendar month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Minute,
    Day,
    Month,
}

/// One configured limit: its config name (also the refusal's and the RateLimit
/// policy's name), what it counts, its window and its quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub name: &'static str,
    pub meter: Meter,
    pub window: Window,
    pub quota: u64,
}

impl LimitSet {
    /// Every windowed limit that is set (concurrency is not windowed). A budget's quotas are in
    /// nano-units of its currency.
    fn windowed(&self) -> [(&'static str, Meter, Window, Option<u64>); 9] {
        let budget =
            |f: fn(&Budget) -> Option<Amount>| self.budget.as_ref().and_then(f).map(Amount::nanos);
        use Meter::*;
        use Window::*;
        [
            (
                "requests_per_minute",
                Requests,
                Minute,
                self.requests_per_minute,
            ),
            ("tokens_per_minute", Tokens, Minute, self.tokens_per_minute),
            ("tokens_per_day", Tokens, Day, self.tokens_per_day),
            (
                "characters_per_minute",
                Characters,
                Minute,
                self.characters_per_minute,
            ),
            (
                "characters_per_day",
                Characters,
                Day,
                self.characters_per_day,
            ),
            ("images_per_minute", Images, Minute, self.images_per_minute),
            ("images_per_day", Images, Day, self.images_per_day),
            ("budget_per_day", Money, Day, budget(|b| b.per_day)),
            ("budget_per_month", Money, Month, budget(|b| b.per_month)),
        ]
    }

    /// The set limits that count `meter`.
    pub fn limits_of(&self, meter: Meter) -> impl Iterator<Item = Limit> + '_ {
        self.windowed()
            .into_iter()
            .filter(move |(_, m, _, _)| *m == meter)
            .filter_map(|(name, meter, window, quota)| {
                quota.map(|quota| Limit {
                    name,
                    meter,
                    window,
                    quota,
                })
            })
    }

    /// Whether any limit counts `meter`.
    pub fn counts(&self, meter: Meter) -> bool {
        self.limits_of(meter).next().is_some()
    }

    /// Whether no limit is set at all.
    pub fn is_empty(&self) -> bool {
        self.concurrent.is_none()
            && self.budget.is_none()
            && self.windowed().iter().all(|(.., q)| q.is_none())
    }

    /// The budget's currency, when a budget is set.
    pub(crate) fn budget_currency(&self) -> Option<Currency> {
        self.budget.as_ref().map(Budget::currency)
    }

    /// The limits as the management API writes them (`docs/guide/tenants.md`): every field, unset
    /// ones `null`; a budget's amounts as decimal strings.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let budget = self.budget.as_ref().map(|b| {
            serde_json::json!({
                "currency": b.currency.as_str(),
                "per_day": b.per_day.map(|a| a.to_string()),
                "per_month": b.per_month.map(|a| a.to_string()),
            })
        });
        serde_json::json!({
            "requests_per_minute": self.requests_per_minute,
            "concurrent": self.concurrent,
            "tokens_per_minute": self.tokens_per_minute,
            "tokens_per_day": self.tokens_per_day,
            "characters_per_minute": self.characters_per_minute,
            "characters_per_day": self.characters_per_day,
            "images_per_minute": self.images_per_minute,
            "images_per_day": self.images_per_day,
            "budget": budget,
        })
    }

    /// Limits from the management API's JSON (or what [`LimitSet::to_json`] wrote): `null`
    /// fields are no limit. The problem, in words, when it is not a limits object or its limits
    /// are not usable ([`LimitSet::check`], under `path`).
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn from_json(v: &serde_json::Value, path: &str) -> Result<LimitSet, String> {
        fn without_nulls(v: &serde_json::Value) -> serde_json::Value {
            match v {
                serde_json::Value::Object(m) => serde_json::Value::Object(
                    m.iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, v)| (k.clone(), without_nulls(v)))
                        .collect(),
                ),
                other => other.clone(),
            }
        }
        let set: LimitSet = serde_json::from_value(without_nulls(v)).map_err(|e| e.to_string())?;
        let mut errors = Vec::new();
        set.check(path, &mut errors);
        match errors.is_empty() {
            true => Ok(set),
            false => Err(errors.join("; ")),
        }
    }

    /// Every problem with these limits, each named with `path`.
    pub fn check(&self, path: &str, errors: &mut Vec<String>) {
        let concurrent = ("concurrent", self.concurrent);
        for (name, value) in self
            .windowed()
            .into_iter()
            .map(|(name, _, _, q)| (name, q))
            .chain([concurrent])
        {
            if value == Some(0) {
                // 0 would refuse every request; disabling a key is removing it.
                let name = name.replacen("budget_", "budget.", 1);
                errors.push(format!("{path}.{name}: must be greater than 0"));
            }
        }
        if let Some(b) = &self.budget {
            if b.per_day.is_none() && b.per_month.is_none() {
                errors.push(format!(
                    "{path}.budget: set per_day, per_month or both (or remove budget)"
                ));
            }
        }
    }
}

/// `auth.jwt.limits`: a subject's limits, chosen by the value of one of its
/// token's claims, e.g. `{claim: plan, by_value: {free: {...}, pro: {...}}, default: {...}}`.
/// A token whose claim is missing, not a string, number or boolean, or has a
/// value not listed gets `default` (no limits when there is none). Each
/// subject (`sub`) has its own budget.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtLimitsSetting {
    pub claim: String,
    #[serde(default)]
    pub by_value: BTreeMap<String, LimitSet>,
    #[serde(default)]
    pub default: Option<LimitSet>,
}

/// [`JwtLimitsSetting`], checked, with every set shared behind an `Arc`.
#[derive(Debug, Clone)]
pub(crate) struct JwtLimits {
    pub claim: String,
    /// `None` for a value listed with no limit set: such subjects are unlimited.
    by_value: HashMap<String, Option<Arc<LimitSet>>>,
    default: Option<Arc<LimitSet>>,
}

impl JwtLimits {
    /// Checked at start; problems are pushed with their path.
    pub(crate) fn from_setting(s: &JwtLimitsSetting, errors: &mut Vec<String>) -> JwtLimits {
        let path = "auth.jwt.limits";
        if s.claim.trim().is_empty() {
            errors.push(format!("{path}.claim: must name a claim"));
        }
        if s.by_value.is_empty() && s.default.is_none() {
            errors.push(format!(
                "{path}: set by_value or default (or remove limits)"
            ));
        }
        let mut by_value = HashMap::with_capacity(s.by_value.len());
        for (value, set) in &s.by_value {
            set.check(&format!("{path}.by_value.{value}"), errors);
            by_value.insert(value.clone(), shared(set));
        }
        if let Some(set) = &s.default {
            set.check(&format!("{path}.default"), errors);
        }
        JwtLimits {
            claim: s.claim.clone(),
            by_value,
            default: s.default.as_ref().and_then(shared),
        }
    }

    /// The limits for a token whose claim has `value` (`None`: missing or unusable).
    pub(crate) fn for_value(&self, value: Option<&serde_json::Value>) -> Option<Arc<LimitSet>> {
        use serde_json::Value;
        let found = match value {
            Some(Value::String(s)) => self.by_value.get(s.as_str()),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => self.by_value.get(&v.to_string()),
            _ => None,
        };
        match found {
            Some(set) => set.clone(),
            None => self.default.clone(),
        }
    }
}

/// `auth.limits_on_store_error`: what a request of a caller with limits gets
/// when the shared store cannot count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStoreError {
    /// Allowed (and the store error counted): an outage of Redis does not
    /// become an outage of the gateway.
    #[default]
    Open,
    /// Refused `503 store_unavailable`: no request goes uncounted.
    Closed,
}

/// `auth.limits_mode`: where a limited request's admission is decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitsMode {
    /// In Redis, one round trip on the request's path: every instance sees every admission.
    #[default]
    Exact,
    /// From this instance's own counts, reconciled with Redis in the background every
    /// `auth.limits_sync_ms` (no Redis call on the request's path), within the stated bound.
    /// Without Redis it changes nothing.
    Approximate,
}

/// The approximate mode's settings, checked (`auth.limits_sync_ms`,
/// `auth.limits_local_share_percent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Approximate {
    /// How often each instance reconciles its counts with Redis.
    pub sync: std::time::Duration,
    /// What one instance may admit of a limit between two reconciliations, in percent of its
    /// quota (at least 1 of it).
    pub share_percent: u64,
}

/// A set as a principal carries it; `None` when nothing is set, so that a
/// caller with an empty `limits: {}` costs what one without does.
pub(crate) fn shared(set: &LimitSet) -> Option<Arc<LimitSet>> {
    (!set.is_empty()).then(|| Arc::new(set.clone()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn zero_limits_and_unknown_keys_are_errors() {
        let set: LimitSet =
            serde_json::from_value(json!({"requests_per_minute": 0, "concurrent": 0})).unwrap();
        let mut errors = Vec::new();
        set.check("auth.api_keys[0].limits", &mut errors);
        assert_eq!(
            errors,
            vec![
                "auth.api_keys[0].limits.requests_per_minute: must be greater than 0",
                "auth.api_keys[0].limits.concurrent: must be greater than 0",
            ]
        );
        assert!(serde_json::from_value::<LimitSet>(json!({"rpm": 5})).is_err());
    }

    #[test]
    fn limits_of_a_meter() {
        let set = LimitSet {
            characters_per_minute: Some(10),
            characters_per_day: Some(100),
            requests_per_minute: Some(1),
            ..LimitSet::default()
        };
        let names: Vec<_> = set.limits_of(Meter::Characters).map(|l| l.name).collect();
        assert_eq!(names, ["characters_per_minute", "characters_per_day"]);
        assert!(!set.counts(Meter::Tokens));
        assert!(shared(&LimitSet::default()).is_none());
    }

    #[test]
    fn a_budget_is_read_exactly_in_its_currency() {
        let set: LimitSet =
            serde_yaml::from_str("budget: {currency: USD, per_day: \"5.00\", per_month: 100}")
                .unwrap();
        let b = set.budget.as_ref().unwrap();
        assert_eq!(set.budget_currency(), Currency::parse("USD"));
        assert_eq!(b.per_day, Amount::parse("5"));
        assert_eq!(b.per_month, Amount::parse("100"));
        let limits: Vec<_> = set
            .limits_of(Meter::Money)
            .map(|l| (l.name, l.window, l.quota))
            .collect();
        assert_eq!(
            limits,
            [
                ("budget_per_day", Window::Day, 5_000_000_000),
                ("budget_per_month", Window::Month, 100_000_000_000),
            ]
        );
        assert!(!set.is_empty());
        let mut errors = Vec::new();
        set.check("auth.api_keys[0].limits", &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        // Nine places at most: a nano-unit is the smallest amount.
        let tiny: LimitSet =
            serde_yaml::from_str("budget: {currency: CNY, per_day: \"0.000000001\"}").unwrap();
        assert_eq!(tiny.limits_of(Meter::Money).next().unwrap().quota, 1);
    }

    #[test]
    fn bad_budgets_are_refused() {
        let read = |yaml: &str| serde_yaml::from_str::<LimitSet>(yaml).map_err(|e| e.to_string());
        for (yaml, says) in [
            (
                "budget: {currency: usd, per_day: \"1\"}",
                "`usd` is not a currency",
            ),
            (
                "budget: {currency: USD, per_day: 1.5}",
                "write 1.5 in quotes",
            ),
            (
                "budget: {currency: USD, per_day: \"1.5 \"}",
                "is not an amount",
            ),
            (
                "budget: {currency: USD, per_day: \"0.0000000001\"}",
                "is not an amount",
            ),
            (
                "budget: {currency: USD, per_week: \"1\"}",
                "unknown field `per_week`",
            ),
            ("budget: {per_day: \"1\"}", "missing field `currency`"),
        ] {
            let e = read(yaml).unwrap_err();
            assert!(e.contains(says), "{yaml}: {e}");
        }
        let mut errors = Vec::new();
        read("budget: {currency: USD}")
            .unwrap()
            .check("auth.jwt.limits.default", &mut errors);
        read("budget: {currency: USD, per_day: \"0\", per_month: \"10\"}")
            .unwrap()
            .check("auth.api_keys[1].limits", &mut errors);
        assert_eq!(
            errors,
            [
                "auth.jwt.limits.default.budget: set per_day, per_month or both (or remove budget)",
                "auth.api_keys[1].limits.budget.per_day: must be greater than 0",
            ]
        );
    }

    #[test]
    fn jwt_limits_pick_by_claim_with_default() {
        let s: JwtLimitsSetting = serde_json::from_value(json!({
            "claim": "plan",
            "by_value": {"free": {"requests_per_minute": 2}, "3": {"concurrent": 1}},
            "default": {"requests_per_minute": 1}
        }))
        .unwrap();
        let mut errors = Vec::new();
        let l = JwtLimits::from_setting(&s, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let rpm = |v: Option<serde_json::Value>| {
            l.for_value(v.as_ref()).and_then(|s| s.requests_per_minute)
        };
        assert_eq!(rpm(Some(json!("free"))), Some(2));
        assert_eq!(rpm(Some(json!("gold"))), Some(1));
        assert_eq!(rpm(None), Some(1));
        assert_eq!(rpm(Some(json!(["free"]))), Some(1));
        assert_eq!(
            l.for_value(Some(&json!(3))).and_then(|s| s.concurrent),
            Some(1)
        );
    }

    #[test]
    fn jwt_limits_problems_have_paths() {
        let s: JwtLimitsSetting = serde_json::from_value(json!({
            "claim": " ",
            "by_value": {"free": {"images_per_day": 0}}
        }))
        .unwrap();
        let mut errors = Vec::new();
        JwtLimits::from_setting(&s, &mut errors);
        assert_eq!(
            errors,
            vec![
                "auth.jwt.limits.claim: must name a claim",
                "auth.jwt.limits.by_value.free.images_per_day: must be greater than 0",
            ]
        );
        assert!(
            serde_json::from_value::<JwtLimitsSetting>(json!({"claim": "p", "values": {}}))
                .is_err()
        );
    }
}
