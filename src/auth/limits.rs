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
}

/// What a usage limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meter {
    Requests,
    Tokens,
    Characters,
    Images,
}

/// A fixed window: the current UTC minute or UTC day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Minute,
    Day,
}

impl Window {
    /// The window's length in seconds.
    pub const fn seconds(self) -> u64 {
        match self {
            Window::Minute => 60,
            Window::Day => 86_400,
        }
    }
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
    /// Every windowed limit that is set (concurrency is not windowed).
    fn windowed(&self) -> [(&'static str, Meter, Window, Option<u64>); 7] {
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
        self.concurrent.is_none() && self.windowed().iter().all(|(.., q)| q.is_none())
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
                errors.push(format!("{path}.{name}: must be greater than 0"));
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
