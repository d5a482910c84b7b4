//! `GET /api/v1/usage?from=YYYY-MM-DD&to=YYYY-MM-DD`: a caller's own usage, read with its own
//! API key or token (authenticated like every endpoint): its requests, usage and spend by UTC day
//! and model from the usage ledger, with totals per currency; its money budget and what is left
//! of it; its limits and what is left of each, from the live counters.
//!
//! Nothing of another caller, ever: the ledger is asked for the rows whose `caller` is the
//! authenticated principal's id (a parameter of the statement, `ledger::report`), and the counters
//! read are the principal's own. The window is UTC days, `to` included (default: the first day of
//! the current month to today, by the system clock, which stamps the ledger's rows), at most
//! [`MAX_DAYS`].
//!
//! The endpoint is not an operation: it is not recorded in the ledger, and it neither counts
//! against the caller's limits nor takes a `concurrent` slot (`limits::peek` reads without
//! counting). A bad window is `400 validation_error` in any case; without a ledger (none
//! configured, or a build without the `ledger` feature) the endpoint is `501 not_configured`; a
//! ledger that cannot be read within `ledger.read_timeout_ms` is `503
//! ledger_unavailable`, and limits that cannot be read from Redis `503 store_unavailable`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::models::percent_decoded;
use super::outcome::{Call, Outcome};
use crate::auth::limits::{LimitSet, Meter};
use crate::auth::Principal;
use crate::caps::lifecycle::Date;
use crate::civil::rfc3339_seconds;
use crate::common::error::{GatewayError, ValidationErrors};
use crate::limits::peek::Peek;
use crate::money::Amount;

/// The longest window one answer covers, in days (a leap year).
const MAX_DAYS: i64 = 366;

/// What the endpoint answers without a ledger configured.
#[cfg_attr(not(feature = "ledger"), allow(dead_code))]
const NO_LEDGER: &str = "usage reports need the usage ledger, which this gateway does not have: \
                         set ledger.database_url in its configuration";

/// What a build without the `ledger` feature answers.
#[cfg_attr(feature = "ledger", allow(dead_code))]
const NO_LEDGER_BUILD: &str = "usage reports need the usage ledger, and this build of Switchyard \
                               has none (built without the `ledger` cargo feature, which \
                               ledger.database_url needs)";

/// Answer the caller's usage.
pub(crate) async fn serve(call: &mut Call<'_>) -> Outcome {
    match answer(call).await {
        Ok(body) => call.json(Outcome::new(), body, &[]).await,
        Err(e) => Outcome::failed(e),
    }
}

/// The answer's body: the window read from the query (checked whether or not there is a ledger
/// to ask), then the ledger's rows of the caller and its counters.
async fn answer(call: &Call<'_>) -> Result<Bytes, GatewayError> {
    let Some(principal) = call.principal else {
        return Err(GatewayError::Internal(
            "usage: no authenticated caller".into(),
        ));
    };
    let query = call.session.req_header().uri.query().unwrap_or_default();
    let period = Period::read(query, today())?;
    read(call, principal, period).await
}

#[cfg(not(feature = "ledger"))]
async fn read(
    _call: &Call<'_>,
    _principal: &Principal,
    _period: Period,
) -> Result<Bytes, GatewayError> {
    Err(GatewayError::NotConfigured(NO_LEDGER_BUILD))
}

/// `principal`'s rows of `period` and its counters, read side by side, as the answer's body.
#[cfg(feature = "ledger")]
async fn read(
    call: &Call<'_>,
    principal: &Principal,
    period: Period,
) -> Result<Bytes, GatewayError> {
    use crate::ledger::report::{Filter, GroupBy};
    let Some(ledger) = &call.state.ledger else {
        return Err(GatewayError::NotConfigured(NO_LEDGER));
    };
    let filter = Filter {
        caller: Some(principal.id.clone()),
        model: None,
        tenant: None,
        from: start_of(period.from),
        to: start_of(period.to) + Duration::from_secs(86_400),
    };
    let by = [GroupBy::Day, GroupBy::Model];
    let set = principal.limits.as_deref();
    let peek = async {
        match set {
            Some(set) => call.state.limits.peek(&principal.id, set).await.map(Some),
            None => Ok(None),
        }
    };
    let (report, peek) = tokio::join!(ledger.report(&filter, &by), peek);
    let report = report.map_err(GatewayError::LedgerUnavailable)?;
    let peek = peek.map_err(|e| GatewayError::Store(format!("limits: {e}")))?;
    let mut doc = Map::new();
    doc.insert("caller".into(), json!(principal.id));
    doc.insert("from".into(), json!(period.from.to_string()));
    doc.insert("to".into(), json!(period.to.to_string()));
    rows(&report, &mut doc);
    doc.insert("budgets".into(), budgets(set, peek.as_ref()));
    doc.insert("limits".into(), limits(peek.as_ref()));
    serde_json::to_vec(&Value::Object(doc))
        .map(Bytes::from)
        .map_err(|e| GatewayError::Internal(format!("usage: writing the answer: {e}")))
}

/// The report's rows (`data`, by day and model) and totals per currency, into `doc`.
#[cfg(feature = "ledger")]
fn rows(report: &crate::ledger::report::Report, doc: &mut Map<String, Value>) {
    use crate::ledger::report::{cost_text, totals, GroupBy};
    let data: Vec<Value> = report
        .rows
        .iter()
        .map(|r| {
            json!({
                "day": report.key(r, GroupBy::Day),
                "model": report.key(r, GroupBy::Model),
                "requests": r.requests,
                "errors": r.errors,
                "tokens": r.tokens,
                "characters": r.characters,
                "images": r.images,
                "cost": r.currency.as_ref().and(r.cost_nanos).map(cost_text),
                "currency": r.currency,
            })
        })
        .collect();
    let totals: Vec<Value> = totals(&report.rows)
        .into_iter()
        .map(|t| {
            json!({
                "currency": t.currency,
                "requests": t.requests,
                "errors": t.errors,
                "tokens": t.tokens,
                "characters": t.characters,
                "images": t.images,
                "cost": t.currency.as_ref().map(|_| cost_text(t.cost_nanos)),
            })
        })
        .collect();
    doc.insert("data".into(), Value::Array(data));
    doc.insert("totals".into(), Value::Array(totals));
}

/// The caller's money budget (at most one, in its currency): each window's amount, what is
/// spent of it and what is left; `null` for a window the budget does not set.
#[cfg_attr(not(feature = "ledger"), allow(dead_code))]
fn budgets(set: Option<&LimitSet>, peek: Option<&Peek>) -> Value {
    let Some(budget) = set.and_then(|s| s.budget.as_ref()) else {
        return json!([]);
    };
    let mut out = Map::new();
    out.insert("currency".into(), json!(budget.currency()));
    for (name, per, spent, left) in [
        ("budget_per_day", "per_day", "spent_today", "left_today"),
        (
            "budget_per_month",
            "per_month",
            "spent_this_month",
            "left_this_month",
        ),
    ] {
        let reading = peek.and_then(|p| p.windows.iter().find(|r| r.limit.name == name));
        let (quota, used) = match reading {
            Some(r) => (json!(Amount::from_nanos(r.limit.quota)), Some(r.used)),
            None => (Value::Null, None),
        };
        let remaining = reading.map(|r| Amount::from_nanos(r.limit.quota.saturating_sub(r.used)));
        out.insert(per.into(), quota);
        out.insert(spent.into(), json!(used.map(Amount::from_nanos)));
        out.insert(left.into(), json!(remaining));
    }
    Value::Array(vec![Value::Object(out)])
}

/// The caller's other limits by name: quota, used and remaining in the current window, and when
/// it ends; `concurrent` with the slots held now.
#[cfg_attr(not(feature = "ledger"), allow(dead_code))]
fn limits(peek: Option<&Peek>) -> Value {
    let mut out = Map::new();
    let Some(peek) = peek else {
        return Value::Object(out);
    };
    for r in peek
        .windows
        .iter()
        .filter(|r| r.limit.meter != Meter::Money)
    {
        out.insert(
            r.limit.name.into(),
            json!({
                "limit": r.limit.quota,
                "used": r.used,
                "remaining": r.limit.quota.saturating_sub(r.used),
                "resets_at": rfc3339_seconds(r.resets_at),
            }),
        );
    }
    if let Some((quota, held)) = peek.concurrent {
        out.insert(
            "concurrent".into(),
            json!({"limit": quota, "used": held, "remaining": quota.saturating_sub(held)}),
        );
    }
    Value::Object(out)
}

/// Today, UTC, by the system clock (the ledger's rows carry its time).
fn today() -> Date {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Date::of_unix(i64::try_from(secs).unwrap_or(0))
}

/// A day's first second.
#[cfg_attr(not(feature = "ledger"), allow(dead_code))]
fn start_of(day: Date) -> SystemTime {
    let secs = day.unix();
    match u64::try_from(secs) {
        Ok(after) => UNIX_EPOCH + Duration::from_secs(after),
        Err(_) => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()),
    }
}

/// The window asked for: UTC days, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "ledger"), allow(dead_code))]
struct Period {
    from: Date,
    to: Date,
}

impl Period {
    /// `from` and `to` from the query (each `YYYY-MM-DD`, at most once; nothing else): `to`
    /// defaults to `today`, `from` to the first day of `to`'s month. `400 validation_error` with
    /// a detail per parameter otherwise.
    fn read(query: &str, today: Date) -> Result<Period, GatewayError> {
        let mut v = ValidationErrors::default();
        let (mut from, mut to): (Option<Option<Date>>, Option<Option<Date>>) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match key {
                "from" => &mut from,
                "to" => &mut to,
                _ => {
                    let name: String = key.chars().take(64).collect();
                    v.add(
                        name,
                        "unknown parameter: this endpoint takes `from` and `to` (UTC days, \
                         YYYY-MM-DD)",
                    );
                    continue;
                }
            };
            if slot.is_some() {
                v.add(key, "given more than once");
                continue;
            }
            let day = percent_decoded(raw).as_deref().and_then(Date::parse);
            if day.is_none() {
                v.add(
                    key,
                    "not a day: write a UTC date as YYYY-MM-DD (2026-12-03)",
                );
            }
            *slot = Some(day);
        }
        v.into_result()?;
        let to_given = to.is_some();
        let to = to.flatten().unwrap_or(today);
        let from = from.flatten().unwrap_or_else(|| first_of_month(to));
        Period::check(from, to, to_given)
    }

    /// `from` is not after `to`, and the window is at most [`MAX_DAYS`]; the detail goes to `to`
    /// when the caller gave it, else to `from`.
    fn check(from: Date, to: Date, to_given: bool) -> Result<Period, GatewayError> {
        let field = if to_given { "to" } else { "from" };
        let days = from.days_until(to) + 1;
        if days < 1 {
            return Err(GatewayError::field(
                field,
                format!("the window ends ({to}) before it starts ({from})"),
            ));
        }
        if days > MAX_DAYS {
            return Err(GatewayError::field(
                field,
                format!(
                    "the window from {from} to {to} is {days} days; one answer covers at most \
                     {MAX_DAYS}"
                ),
            ));
        }
        Ok(Period { from, to })
    }
}

/// The first day of `day`'s month.
fn first_of_month(day: Date) -> Date {
    let text = day.to_string();
    text.get(..7)
        .and_then(|month| Date::parse(&format!("{month}-01")))
        .unwrap_or(day)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn day(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

    fn details(e: GatewayError) -> Vec<(String, String)> {
        match e {
            GatewayError::Validation(v) => v.details().clone().into_iter().collect(),
            other => panic!("not a validation error: {other:?}"),
        }
    }

    #[test]
    fn the_window_defaults_to_this_month_and_reads_utc_days() {
        let today = day("2026-12-04");
        let p = |q: &str| {
            let p = Period::read(q, today).unwrap();
            (p.from.to_string(), p.to.to_string())
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(p(""), pair("2026-12-01", "2026-12-04"));
        assert_eq!(p("from=2026-11-20"), pair("2026-11-20", "2026-12-04"));
        assert_eq!(p("to=2026-02-10"), pair("2026-02-01", "2026-02-10"));
        assert_eq!(
            p("from=2026-01-01&to=2026-12-31"),
            pair("2026-01-01", "2026-12-31")
        );
        // A leap year's 366 days fit; one more does not.
        assert_eq!(
            p("from=2028-01-01&to=2028-12-31"),
            pair("2028-01-01", "2028-12-31")
        );
        assert_eq!(
            p("to=2026-12-04&from=2026-12-04"),
            pair("2026-12-04", "2026-12-04")
        );
    }

    #[test]
    fn bad_windows_are_named_per_parameter() {
        let today = day("2026-12-04");
        let bad = |q: &str| details(Period::read(q, today).unwrap_err());
        let one = |field: &str, needle: &str, got: Vec<(String, String)>| {
            assert_eq!(got.len(), 1, "{got:?}");
            assert_eq!(got[0].0, field, "{got:?}");
            assert!(got[0].1.contains(needle), "{got:?}");
        };
        one("from", "YYYY-MM-DD", bad("from=2026-13-01"));
        one("to", "YYYY-MM-DD", bad("to=yesterday"));
        one("to", "YYYY-MM-DD", bad("to="));
        one(
            "from",
            "more than once",
            bad("from=2026-12-01&from=2026-12-02"),
        );
        one(
            "to",
            "before it starts",
            bad("from=2026-12-03&to=2026-12-02"),
        );
        // `to` defaulted: the detail is about `from`, which the caller gave.
        one("from", "before it starts", bad("from=2026-12-05"));
        one("to", "367 days", bad("from=2026-01-01&to=2027-01-02"));
        one("from", "at most 366", bad("from=2025-01-01"));
        one("limit", "unknown parameter", bad("limit=5"));
        // Every problem at once.
        let all = bad("from=x&to=y&z=1");
        let fields: Vec<&str> = all.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["from", "to", "z"]);
    }

    #[test]
    fn months_start_on_their_first_and_times_are_rfc3339() {
        assert_eq!(first_of_month(day("2028-02-29")), day("2028-02-01"));
        assert_eq!(first_of_month(day("2026-12-01")), day("2026-12-01"));
        assert_eq!(
            rfc3339_seconds(1_796_083_200 + 3_723),
            "2026-12-01T01:02:03Z"
        );
        assert_eq!(
            start_of(day("1970-01-02")),
            UNIX_EPOCH + Duration::from_secs(86_400)
        );
        assert_eq!(
            start_of(day("1969-12-31")),
            UNIX_EPOCH - Duration::from_secs(86_400)
        );
    }

    #[test]
    fn budgets_and_limits_say_what_is_left() {
        use crate::limits::peek::Reading;
        let set: LimitSet = serde_yaml::from_str(
            "{requests_per_minute: 60, concurrent: 2, budget: {currency: USD, per_day: \"5\"}}",
        )
        .unwrap();
        let mut windows = Vec::new();
        for (meter, used) in [(Meter::Requests, 3), (Meter::Money, 1_200_000_000)] {
            windows.extend(set.limits_of(meter).map(|limit| Reading {
                limit,
                used,
                resets_at: 1_796_083_260,
            }));
        }
        let peek = Peek {
            windows,
            concurrent: Some((2, 1)),
        };
        assert_eq!(
            budgets(Some(&set), Some(&peek)),
            json!([{"currency": "USD", "per_day": "5", "spent_today": "1.2", "left_today": "3.8",
                    "per_month": null, "spent_this_month": null, "left_this_month": null}])
        );
        assert_eq!(
            limits(Some(&peek)),
            json!({"requests_per_minute": {"limit": 60, "used": 3, "remaining": 57,
                                           "resets_at": "2026-12-01T00:01:00Z"},
                   "concurrent": {"limit": 2, "used": 1, "remaining": 1}})
        );
        assert_eq!(budgets(None, None), json!([]));
        assert_eq!(limits(None), json!({}));
    }
}
