//! `GET /admin/v1/spend`: what the ledger says was spent, by tenant, key, model and day or month,
//! one row per group and currency (costs are summed in the currency each was priced in; a budget
//! in another is counted by the configuration's `currency_rates`). Asked through the ledger's
//! report (`ledger::report`, the one query layer `switchyard spend` and `GET /api/v1/usage` use
//! too), within `ledger.read_timeout_ms`.
//!
//! Query: `by` ⊆ {tenant, key, model, day, month} (default `tenant,day`; `key` is the caller:
//! `key:<tenant>/<name>` for a database key), `from` and `to` (UTC dates, `to` inclusive; default
//! the 30 days ending today), `tenant` (one tenant's keys) and `key` (a key's id, or a principal).

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::admin::{AdminApp, Answer, Request};
use super::admin_error::ApiError;
use super::admin_handlers::query_value;
use crate::ledger::report::{cost_text, Filter, GroupBy};
use crate::tenants::input::Details;
use crate::tenants::time::{date, parse_date};

const DAY: Duration = Duration::from_secs(86_400);
/// The longest period one report covers.
const MAX_DAYS: u64 = 3_660;

/// The groupings the API names, and the report's for each.
const GROUPS: [(&str, GroupBy); 5] = [
    ("tenant", GroupBy::Tenant),
    ("key", GroupBy::Caller),
    ("model", GroupBy::Model),
    ("day", GroupBy::Day),
    ("month", GroupBy::Month),
];

/// The query checked: the grouping (API names, report groups), the period's first and last day.
struct Asked {
    names: Vec<&'static str>,
    by: Vec<GroupBy>,
    from: SystemTime,
    to: SystemTime,
}

fn asked(query: &str, details: &mut Details) -> Option<Asked> {
    let by_text = query_value(query, "by").unwrap_or_else(|| "tenant,day".into());
    let (mut names, mut by) = (Vec::new(), Vec::new());
    for name in by_text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match GROUPS.iter().find(|(n, _)| *n == name) {
            Some((n, g)) if !names.contains(n) => {
                names.push(*n);
                by.push(*g);
            }
            Some(_) => {}
            None => {
                details.insert(
                    "by".into(),
                    format!("`{name}` is not one of tenant, key, model, day, month"),
                );
            }
        }
    }
    let today = parse_date(&date(SystemTime::now()))?;
    let mut day = |field: &str, default: SystemTime| match query_value(query, field) {
        None => Some(default),
        Some(v) => parse_date(&v).or_else(|| {
            details.insert(field.into(), "must be a date, YYYY-MM-DD (UTC)".into());
            None
        }),
    };
    let to = day("to", today);
    let from = day("from", today - 29 * DAY);
    let (from, to) = (from?, to?);
    let days = to.duration_since(from).map(|d| d.as_secs() / 86_400);
    match days {
        Err(_) => {
            details.insert("from".into(), "must not be after `to`".into());
        }
        Ok(n) if n >= MAX_DAYS => {
            details.insert(
                "to".into(),
                format!("a report covers at most {MAX_DAYS} days"),
            );
        }
        Ok(_) => {}
    }
    details.is_empty().then_some(Asked {
        names,
        by,
        from,
        to,
    })
}

impl AdminApp {
    /// A `key` filter's principal: a key's id is looked up; anything else is taken as one.
    async fn principal(&self, key: &str) -> Result<String, ApiError> {
        let Ok(id) = uuid::Uuid::parse_str(key) else {
            return Ok(key.to_string());
        };
        let fail = |e| ApiError::from_store(e, "key");
        let c = self.db.conn().await.map_err(fail)?;
        Ok(self.db.tables.key(&c, id).await.map_err(fail)?.principal())
    }

    /// `GET /admin/v1/spend`.
    pub(super) async fn spend(&self, req: &Request<'_>) -> Answer {
        let mut details = Details::new();
        let Some(a) = asked(req.query, &mut details) else {
            return Err(ApiError::invalid(details));
        };
        let Some(ledger) = &self.state.ledger else {
            return Err(ApiError::new(
                503,
                "database_unavailable",
                "no ledger is configured",
            ));
        };
        let caller = match query_value(req.query, "key") {
            Some(k) => Some(self.principal(&k).await?),
            None => None,
        };
        let filter = Filter {
            caller,
            model: None,
            tenant: query_value(req.query, "tenant"),
            from: a.from,
            to: a.to + DAY,
        };
        let report = ledger
            .report(&filter, &a.by)
            .await
            .map_err(|e| ApiError::database(&e))?;
        let data: Vec<Value> = report
            .rows
            .iter()
            .map(|row| {
                let mut out = json!({
                    "tenant": null, "key": null, "model": null, "day": null, "month": null,
                    "requests": row.requests, "tokens": row.tokens, "characters": row.characters,
                    "images": row.images, "cost": row.cost_nanos.map(cost_text),
                    "currency": row.currency,
                });
                for (name, g) in a.names.iter().zip(&a.by) {
                    out[*name] = json!(report.key(row, *g));
                }
                out
            })
            .collect();
        let (from, to) = (date(a.from), date(a.to));
        Ok((
            200,
            json!({"from": from, "to": to, "by": a.names, "data": data}),
        ))
    }
}
