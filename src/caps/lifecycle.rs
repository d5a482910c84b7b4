//! Model lifecycles as data: when a provider deprecated a native model, when it shuts it down, its
//! recommended replacement and the source, from the built-in table
//! ([`lifecycle.yaml`](lifecycle.yaml), compiled in, loaded and checked at first use like
//! `families.yaml`) with a configuration's overrides merged on top ([`Override`]).
//!
//! Also the calendar arithmetic the dates need ([`Date`]: `YYYY-MM-DD`, Unix seconds, HTTP-date)
//! and the gateway's [`Clock`], which tests set by hand so that a shutdown date passes under their
//! control.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_yaml::Value;

/// The built-in lifecycle table, as written.
pub const LIFECYCLE_YAML: &str = include_str!("lifecycle.yaml");

/// Seconds in a day.
const DAY: i64 = 86_400;

/// A calendar day (UTC), as days since 1970-01-01.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(i64);

impl Date {
    /// `YYYY-MM-DD`, a real day of the proleptic Gregorian calendar.
    pub fn parse(s: &str) -> Option<Date> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let part = s.get(r)?;
            part.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| part.parse().ok())?
        };
        let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
            return None;
        }
        Some(Date(days_from_civil(y, m, d)))
    }

    /// The day holding Unix time `secs`.
    pub fn of_unix(secs: i64) -> Date {
        Date(secs.div_euclid(DAY))
    }

    /// Its first second (00:00 UTC), in Unix seconds.
    pub fn unix(self) -> i64 {
        self.0 * DAY
    }

    /// Days from `self` to `later` (negative when `later` is earlier).
    pub fn days_until(self, later: Date) -> i64 {
        later.0 - self.0
    }

    /// `Sun, 06 Nov 1994 00:00:00 GMT`: the IMF-fixdate of RFC 9110 §5.6.7, at 00:00 UTC.
    pub fn http_date(self) -> String {
        const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let (y, m, d) = civil_from_days(self.0);
        let weekday = DAYS[self.0.rem_euclid(7) as usize];
        let month = MONTHS[(m - 1) as usize];
        format!("{weekday}, {d:02} {month} {y:04} 00:00:00 GMT")
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (y, m, d) = civil_from_days(self.0);
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

pub(crate) use crate::civil::{civil_from_days, days_from_civil};

/// What time it is, for lifecycle decisions: the system's clock, or one a test sets.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The system's clock (the default).
    #[default]
    System,
    /// A hand-set time, in Unix seconds, shared by every clone.
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A clock standing at Unix time `secs` until [`Clock::set`].
    pub fn manual(secs: i64) -> Clock {
        Clock::Manual(Arc::new(AtomicI64::new(secs)))
    }

    /// Move a manual clock to `secs` (the system clock cannot be set: nothing happens).
    pub fn set(&self, secs: i64) {
        if let Clock::Manual(at) = self {
            at.store(secs, Ordering::Relaxed);
        }
    }

    /// Now, in Unix seconds.
    pub fn now(&self) -> i64 {
        match self {
            Clock::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            Clock::Manual(at) => at.load(Ordering::Relaxed),
        }
    }
}

/// One native model's lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifecycle {
    /// When the provider announced the deprecation (`None`: not known, only an override's
    /// shutdown was given).
    pub deprecated: Option<Date>,
    /// The first day the provider no longer serves it; `None` while the provider has announced no
    /// date (deprecated only: never gone, no `Sunset`).
    pub shutdown: Option<Date>,
    /// The provider's recommended replacements (its own model ids), best first.
    pub replacement: Vec<String>,
    /// A remark on the retirement; messages show it when no replacement is named.
    pub note: Option<String>,
    /// Where the facts were read (a URL for the built-in entries).
    pub source: Option<String>,
    /// When the facts were last checked against `source`.
    pub checked: Option<Date>,
    /// The operator says the account still serves it past `shutdown` (config only): never
    /// refused, never treated as gone.
    pub still_available: bool,
}

impl Lifecycle {
    /// Whether it is no longer served at Unix time `now` (and the operator has not said otherwise).
    pub fn gone(&self, now: i64) -> bool {
        !self.still_available && self.shutdown.is_some_and(|s| now >= s.unix())
    }

    /// The order of shutdowns, for "the target that lasts longest": no date announced lasts
    /// longer than any date.
    pub(crate) fn lasts(&self) -> (bool, Option<Date>) {
        (self.shutdown.is_none(), self.shutdown)
    }

    /// The replacement, for messages: the ids joined, or the note when there is none.
    pub fn replacement_text(&self) -> String {
        if self.replacement.is_empty() {
            match &self.note {
                Some(n) => format!("no replacement named ({n})"),
                None => "no replacement named".into(),
            }
        } else {
            self.replacement.join(" or ")
        }
    }

    /// `source` as a link, when it is an http(s) URL.
    pub fn source_url(&self) -> Option<&str> {
        self.source
            .as_deref()
            .filter(|s| s.starts_with("https://") || s.starts_with("http://"))
    }
}

/// A configuration's `lifecycle:` (on a model, or one of its targets): every key optional. (Unknown
/// keys are reported by the config loader, with their path.)
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Override {
    /// The built-in entry to start from, when the target's `model` is not the provider's model id
    /// (an Azure deployment).
    #[serde(default)]
    pub model: Option<String>,
    /// Deprecation date, `YYYY-MM-DD`, over the built-in one.
    #[serde(default)]
    pub deprecated: Option<String>,
    /// Shutdown date (the first day it is no longer served), `YYYY-MM-DD`; required when there is
    /// no built-in entry.
    #[serde(default)]
    pub shutdown: Option<String>,
    /// The replacement model ids, best first (instead of the built-in list).
    #[serde(default)]
    pub replacement: Option<Vec<String>>,
    /// A remark on the retirement (instead of the built-in one).
    #[serde(default)]
    pub note: Option<String>,
    /// Where the facts come from, e.g. the provider's deprecations page.
    #[serde(default)]
    pub source: Option<String>,
    /// `true`: the account still serves it past `shutdown`, so it is never refused as gone.
    #[serde(default)]
    pub still_available: Option<bool>,
}

impl Override {
    /// `self`'s keys, with `under`'s where `self` has none (a target's over its model's).
    pub fn over(&self, under: &Override) -> Override {
        Override {
            model: self.model.clone().or_else(|| under.model.clone()),
            deprecated: self.deprecated.clone().or_else(|| under.deprecated.clone()),
            shutdown: self.shutdown.clone().or_else(|| under.shutdown.clone()),
            replacement: self
                .replacement
                .clone()
                .or_else(|| under.replacement.clone()),
            note: self.note.clone().or_else(|| under.note.clone()),
            source: self.source.clone().or_else(|| under.source.clone()),
            still_available: self.still_available.or(under.still_available),
        }
    }
}

/// The loaded table: (provider kind, native model) → lifecycle.
#[derive(Debug, Default)]
pub struct Table {
    entries: HashMap<(String, String), Lifecycle>,
}

impl Table {
    /// The entry of `native` at a provider of `kind`.
    pub fn get(&self, kind: &str, native: &str) -> Option<&Lifecycle> {
        self.entries.get(&(kind.to_string(), native.to_string()))
    }

    /// Every entry, for tests and listings.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The lifecycle of a target (`kind`, `native`) with the configuration's `over` merged on top.
    /// `Ok(None)`: nothing is known of it. Problems are named with paths under `at`.
    pub fn resolve(
        &self,
        kind: &str,
        native: &str,
        over: &Override,
        at: &str,
    ) -> Result<Option<Lifecycle>, Vec<String>> {
        let mut errors = Vec::new();
        let key = over.model.as_deref().unwrap_or(native);
        let base = self.get(kind, key).cloned();
        if base.is_none() && over.model.is_some() {
            errors.push(format!(
                "{at}.model: no built-in lifecycle for {kind} model `{key}`; give its dates \
                 (shutdown, deprecated) instead"
            ));
        }
        let date = |key: &str, v: &Option<String>, errors: &mut Vec<String>| {
            v.as_deref().and_then(|s| {
                let d = Date::parse(s.trim());
                if d.is_none() {
                    errors.push(format!("{at}.{key}: `{s}` is not a date (YYYY-MM-DD)"));
                }
                d
            })
        };
        let deprecated = date("deprecated", &over.deprecated, &mut errors);
        let shutdown = date("shutdown", &over.shutdown, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        let Some(mut life) = base_or_dated(base, shutdown, over, (kind, native), at)? else {
            return Ok(None);
        };
        apply(over, &mut life, deprecated, shutdown);
        if let (Some(d), Some(s)) = (life.deprecated, life.shutdown) {
            if d > s {
                return Err(vec![format!(
                    "{at}: deprecated ({d}) is after shutdown ({s})"
                )]);
            }
        }
        Ok(Some(life))
    }
}

/// The lifecycle a target's configuration starts from: the built-in entry, else one from the
/// configuration's `shutdown` alone; `Ok(None)` when neither exists and the configuration says
/// nothing else of it (anything else without a `shutdown` is refused).
fn base_or_dated(
    base: Option<Lifecycle>,
    shutdown: Option<Date>,
    over: &Override,
    (kind, native): (&str, &str),
    at: &str,
) -> Result<Option<Lifecycle>, Vec<String>> {
    match (base, shutdown) {
        (Some(b), _) => Ok(Some(b)),
        (None, Some(shutdown)) => Ok(Some(Lifecycle {
            deprecated: None,
            shutdown: Some(shutdown),
            replacement: Vec::new(),
            note: None,
            source: None,
            checked: None,
            still_available: false,
        })),
        (None, None) => {
            let given = over.deprecated.is_some()
                || over.replacement.is_some()
                || over.note.is_some()
                || over.source.is_some()
                || over.still_available.is_some();
            if given {
                return Err(vec![format!(
                    "{at}: no built-in lifecycle for {kind} model `{native}`: give its \
                     `shutdown` date"
                )]);
            }
            Ok(None)
        }
    }
}

/// The configuration's keys (`over`, its dates read already) over `life`: each one given wins.
fn apply(over: &Override, life: &mut Lifecycle, deprecated: Option<Date>, shutdown: Option<Date>) {
    if let Some(d) = deprecated {
        life.deprecated = Some(d);
    }
    if let Some(s) = shutdown {
        life.shutdown = Some(s);
    }
    if let Some(r) = &over.replacement {
        life.replacement = r.clone();
    }
    if let Some(n) = &over.note {
        life.note = Some(n.clone());
    }
    if let Some(s) = &over.source {
        life.source = Some(s.clone());
    }
    if let Some(a) = over.still_available {
        life.still_available = a;
    }
}

/// The built-in table, loaded on first use. `Err` lists its problems, which the unit tests make
/// sure never reach a user.
pub fn builtin() -> Result<&'static Table, &'static [String]> {
    static TABLE: OnceLock<Result<Table, Vec<String>>> = OnceLock::new();
    match TABLE.get_or_init(|| load(LIFECYCLE_YAML)) {
        Ok(t) => Ok(t),
        Err(e) => Err(e),
    }
}

/// One entry as written: every key required but `note`, and `shutdown` while the provider has
/// announced no date (then `note` says so).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    deprecated: String,
    #[serde(default)]
    shutdown: Option<String>,
    replacement: Vec<String>,
    #[serde(default)]
    note: Option<String>,
    source: String,
    checked: String,
}

/// One entry of the table (`at`: its path), checked: `None` when a date cannot be read
/// (reported); other problems are reported and the entry kept.
fn entry(at: &str, model: &str, w: Written, errors: &mut Vec<String>) -> Option<Lifecycle> {
    let date = |key: &str, s: &str, errors: &mut Vec<String>| {
        let d = Date::parse(s);
        if d.is_none() {
            errors.push(format!("{at}.{key}: `{s}` is not a date (YYYY-MM-DD)"));
        }
        d
    };
    let deprecated = date("deprecated", &w.deprecated, &mut *errors);
    let shutdown = w
        .shutdown
        .as_deref()
        .map(|s| date("shutdown", s, &mut *errors));
    let checked = date("checked", &w.checked, &mut *errors);
    let (Some(deprecated), Some(checked)) = (deprecated, checked) else {
        return None;
    };
    let shutdown = match shutdown {
        Some(None) => return None,
        Some(Some(s)) => Some(s),
        None => None,
    };
    if let Some(shutdown) = shutdown.filter(|s| deprecated > *s) {
        errors.push(format!(
            "{at}.deprecated: {deprecated} is after the shutdown ({shutdown})"
        ));
    }
    if shutdown.is_none() && w.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        errors.push(format!(
            "{at}.note: required without a `shutdown` (say that none was announced)"
        ));
    }
    if !(w.source.starts_with("https://") || w.source.starts_with("http://")) {
        errors.push(format!(
            "{at}.source: must be the URL the facts were read at"
        ));
    }
    if w.replacement.is_empty() && w.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        errors.push(format!(
            "{at}.note: required when `replacement` is empty (say why there is none)"
        ));
    }
    if w.replacement
        .iter()
        .any(|r| r.trim().is_empty() || *r == model)
    {
        errors.push(format!(
            "{at}.replacement: model ids, none empty and none the model itself"
        ));
    }
    Some(Lifecycle {
        deprecated: Some(deprecated),
        shutdown,
        replacement: w.replacement,
        note: w.note.map(|n| n.trim().to_string()),
        source: Some(w.source),
        checked: Some(checked),
        still_available: false,
    })
}

/// Load and check a lifecycle table; every problem is listed with its path (`openai.tts-1.shutdown`).
pub fn load(text: &str) -> Result<Table, Vec<String>> {
    let doc: Value =
        serde_yaml::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
    let Value::Mapping(kinds) = doc else {
        return Err(vec![
            "the table must be a mapping of provider kind → native model → entry".into(),
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
            errors.push(format!("{kind}: must be a mapping of native model → entry"));
            continue;
        };
        for (model, written) in models {
            let Some(model) = model.as_str().map(str::to_string) else {
                errors.push(format!("{kind}.{model:?}: a model id must be a string"));
                continue;
            };
            let at = format!("{kind}.{model}");
            let w: Written = match serde_yaml::from_value(written) {
                Ok(w) => w,
                Err(e) => {
                    errors.push(format!("{at}: {e}"));
                    continue;
                }
            };
            if let Some(life) = entry(&at, &model, w, &mut errors) {
                entries.insert((kind.clone(), model), life);
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
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_loads_with_every_sourced_entry() {
        let t = builtin().unwrap_or_else(|e| panic!("{e:#?}"));
        let image1 = t.get("openai", "gpt-image-1").expect("gpt-image-1");
        assert_eq!(image1.shutdown, Date::parse("2026-10-23"));
        assert_eq!(
            image1.replacement,
            ["gpt-image-2.5-sunburst", "gpt-image-2.5-flare"]
        );
        for m in ["gpt-image-1.5", "gpt-image-1-mini", "chatgpt-image-latest"] {
            let e = t.get("openai", m).expect(m);
            assert_eq!(e.shutdown.unwrap().to_string(), "2026-12-01", "{m}");
            assert_eq!(e.replacement[0], "gpt-image-2.6-sunburst", "{m}");
        }
        for m in ["tts-1", "tts-1-hd", "gpt-4o-mini-tts"] {
            let e = t.get("openai", m).expect(m);
            assert_eq!(e.shutdown.unwrap().to_string(), "2027-01-06", "{m}");
            // Served only on the Realtime API, which the gateway speaks behind the speech API.
            assert_eq!(e.replacement, ["gpt-realtime-2.1-mini"], "{m}");
            assert!(e.note.as_deref().unwrap().contains("Realtime"), "{m}");
        }
        assert_eq!(
            t.get("azure-openai", "gpt-image-1.5")
                .unwrap()
                .shutdown
                .unwrap()
                .to_string(),
            "2026-12-16"
        );
        assert_eq!(
            t.get("dashscope", "gte-rerank")
                .unwrap()
                .shutdown
                .unwrap()
                .to_string(),
            "2026-05-30"
        );
        // Ark's tenth batch (2026-11-24) and Gemini's deprecation without a date (2026-10-06).
        for m in [
            "doubao-seedream-4-0-250828",
            "doubao-seedream-4-5-251128",
            "doubao-seedream-5-0-260128",
            "doubao-seedream-5-0-lite-260128",
        ] {
            let e = t.get("ark", m).expect(m);
            assert_eq!(e.shutdown, Date::parse("2026-11-24"), "{m}");
            assert_eq!(e.deprecated, Date::parse("2026-09-22"), "{m}");
            assert_eq!(e.replacement, ["doubao-seedream-5-0-pro-260628"], "{m}");
        }
        let flash = t.get("gemini", "gemini-3.1-flash-image").unwrap();
        assert_eq!(flash.shutdown, None);
        assert_eq!(flash.deprecated, Date::parse("2026-10-06"));
        assert!(!flash.gone(i64::MAX), "no shutdown announced: never gone");
        assert_eq!(flash.replacement, ["gemini-nano-banana-2.1"]);
        let snapshot = t.get("openai", "gpt-image-1.5-2025-12-16").unwrap();
        assert_eq!(snapshot.shutdown, Date::parse("2026-12-01"));
        assert!(t.get("elevenlabs", "eleven_multilingual_v2").is_none());
        // Every entry has its source and the date it was checked.
        for e in t.entries.values() {
            assert!(e.source_url().is_some() && e.checked.is_some(), "{e:?}");
        }
    }

    #[test]
    fn a_bad_entry_is_named_by_path() {
        let errors = load(
            "openai:\n  m:\n    deprecated: 2026-13-01\n    shutdown: 2026-01-01\n    replacement: []\n    source: somewhere\n    checked: 2026-11-27\n  n:\n    deprecated: 2026-02-01\n    shutdown: 2026-01-01\n    replacement: []\n    source: https://x\n    checked: 2026-11-27\n    colour: red\n  o:\n    deprecated: 2026-02-01\n    shutdown: 2026-01-01\n    replacement: []\n    source: https://x\n    checked: 2026-11-27\n  p:\n    deprecated: 2026-02-01\n    replacement: [q]\n    source: https://x\n    checked: 2026-11-27\n",
        )
        .unwrap_err()
        .join("\n");
        for needle in [
            "openai.m.deprecated: `2026-13-01` is not a date",
            "openai.n: unknown field `colour`",
            "openai.o.deprecated: 2026-02-01 is after the shutdown (2026-01-01)",
            "openai.o.note: required when `replacement` is empty",
            "openai.p.note: required without a `shutdown`",
        ] {
            assert!(errors.contains(needle), "missing `{needle}` in:\n{errors}");
        }
    }

    #[test]
    fn dates_convert_both_ways() {
        let d = Date::parse("2026-12-01").unwrap();
        assert_eq!(d.unix(), 1_796_083_200);
        assert_eq!(d.to_string(), "2026-12-01");
        assert_eq!(d.http_date(), "Tue, 01 Dec 2026 00:00:00 GMT");
        assert_eq!(Date::of_unix(d.unix() + 86_399), d);
        assert_eq!(
            Date::parse("1994-11-06").unwrap().http_date(),
            "Sun, 06 Nov 1994 00:00:00 GMT"
        );
        assert_eq!(Date::parse("2024-02-29").unwrap().to_string(), "2024-02-29");
        for bad in [
            "2026-02-29",
            "2026-1-01",
            "26-01-01",
            "2026-00-10",
            "2026-01-32",
            "x",
        ] {
            assert!(Date::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn an_override_merges_onto_the_entry_and_may_stand_alone() {
        let t = builtin().unwrap();
        let over = Override {
            shutdown: Some("2027-03-01".into()),
            still_available: Some(true),
            ..Override::default()
        };
        let l = t
            .resolve("openai", "gpt-image-1", &over, "at")
            .unwrap()
            .unwrap();
        assert_eq!(l.shutdown.unwrap().to_string(), "2027-03-01");
        assert!(l.still_available && !l.gone(i64::MAX));
        assert_eq!(l.replacement[0], "gpt-image-2.5-sunburst", "kept");
        // A deployment named otherwise takes the entry it names.
        let azure = Override {
            model: Some("gpt-image-1.5".into()),
            ..Override::default()
        };
        let l = t
            .resolve("azure-openai", "my-images", &azure, "at")
            .unwrap()
            .unwrap();
        assert_eq!(l.shutdown.unwrap().to_string(), "2026-12-16");
        let s = l.shutdown.unwrap().unix();
        assert!(l.gone(s) && !l.gone(s - 1));
        // Nothing known and nothing given: no lifecycle.
        assert_eq!(
            t.resolve("openai", "gpt-image-2", &Override::default(), "at"),
            Ok(None)
        );
        let errors = t
            .resolve(
                "openai",
                "gpt-image-2",
                &Override {
                    still_available: Some(true),
                    ..Override::default()
                },
                "at",
            )
            .unwrap_err();
        assert!(errors[0].contains("give its `shutdown` date"), "{errors:?}");
    }

    #[test]
    fn a_manual_clock_is_shared_by_its_clones() {
        let c = Clock::manual(10);
        let d = c.clone();
        c.set(20);
        assert_eq!(d.now(), 20);
        assert!(Clock::System.now() > 1_700_000_000);
    }
}
