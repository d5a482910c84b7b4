//! Grouped read-back of the ledger's table, for every reader of spend: `switchyard spend`
//! (`spend.rs`), a caller's own `GET /api/v1/usage` (by model and day, of that caller only) and an
//! operator's spend report (by caller, model, day or month). One question, [`Filter`] (which
//! requests: a period `[from, to)` in UTC, optionally one caller or one model) and a grouping drawn
//! from [`GroupBy`]; one answer, [`Report`]: requests, errors, tokens, characters, images and cost
//! summed per group and currency, with [`totals`] per currency.
//!
//! The SQL is made of fixed pieces only: a group is an enum whose variants each name their own
//! expression, the table's schema is a checked identifier (`config::ledger::is_identifier`), and
//! everything a caller or operator chose (the period, the caller, the model) goes as a parameter.
//! Costs are summed as the ledger stores them, whole nano-units (`cost_nanos`) per currency, so a
//! sum is exact; [`cost_text`] writes one as `crate::money` writes amounts.

use std::collections::BTreeMap;
use std::time::SystemTime;

use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use super::schema::TABLE;
use crate::money::Amount;

/// What requests are grouped by. A new grouping is a new variant with its own expression:
/// nothing a client sends ever becomes SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupBy {
    /// The caller (`key:<name>`, `key:<tenant>/<name>` or `jwt:<subject>`).
    Caller,
    /// The tenant of the caller's key (a database key's; `None` for other callers).
    Tenant,
    /// The public model.
    Model,
    /// The provider account.
    Provider,
    /// The UTC day the request finished (`2026-12-03`).
    Day,
    /// The UTC calendar month the request finished (`2026-12`).
    Month,
}

impl GroupBy {
    /// Every grouping, in the order their names are listed to users.
    pub(crate) const ALL: [GroupBy; 6] = [
        GroupBy::Caller,
        GroupBy::Tenant,
        GroupBy::Model,
        GroupBy::Provider,
        GroupBy::Day,
        GroupBy::Month,
    ];

    /// Its name on the command line and in JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupBy::Caller => "caller",
            GroupBy::Tenant => "tenant",
            GroupBy::Model => "model",
            GroupBy::Provider => "provider",
            GroupBy::Day => "day",
            GroupBy::Month => "month",
        }
    }

    /// Read a name.
    pub(crate) fn parse(name: &str) -> Option<GroupBy> {
        GroupBy::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Its expression over the table's columns.
    fn sql(self) -> &'static str {
        match self {
            GroupBy::Caller => "caller",
            GroupBy::Tenant => "tenant",
            GroupBy::Model => "model",
            GroupBy::Provider => "provider",
            GroupBy::Day => "to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
            GroupBy::Month => "to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM')",
        }
    }
}

/// Which requests a report sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    /// Only this caller's requests (the ledger's `caller`, a principal's id).
    pub caller: Option<String>,
    /// Only this model's requests.
    pub model: Option<String>,
    /// Only the requests of this tenant's keys (the ledger's `tenant`).
    pub tenant: Option<String>,
    /// The period's start (inclusive).
    pub from: SystemTime,
    /// The period's end (exclusive).
    pub to: SystemTime,
}

/// One group's sums in one currency.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The group's values, in the grouping's order (`None`: not known, as an unauthenticated
    /// caller or a request that named no model).
    pub keys: Vec<Option<String>>,
    /// The cost's currency; `None` for the group's requests whose cost is not known.
    pub currency: Option<String>,
    pub requests: i64,
    /// Requests answered with a status of 400 or more.
    pub errors: i64,
    pub tokens: i64,
    pub characters: i64,
    pub images: i64,
    /// The summed cost in billionths (nano-units) of `currency` (`None` when no request's cost is
    /// known).
    pub cost_nanos: Option<i64>,
}

/// The sums of every row in one currency ([`totals`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Total {
    /// `None`: the requests whose cost is not known.
    pub currency: Option<String>,
    pub requests: i64,
    pub errors: i64,
    pub tokens: i64,
    pub characters: i64,
    pub images: i64,
    /// In nano-units of `currency` (0 for the requests of unknown cost).
    pub cost_nanos: i64,
}

/// A report: its grouping and its rows, ordered by the groups' values, then currency (unknown
/// last).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Report {
    pub by: Vec<GroupBy>,
    pub rows: Vec<Row>,
}

impl Report {
    /// `row`'s value of the group `by` (`None`: not known, or not grouped by it).
    pub(crate) fn key<'a>(&self, row: &'a Row, by: GroupBy) -> Option<&'a str> {
        let i = self.by.iter().position(|b| *b == by)?;
        row.keys.get(i)?.as_deref()
    }
}

/// The statement for `filter` grouped by `by` ([`params`] gives its parameters, in its order).
pub(super) fn statement(schema: &str, by: &[GroupBy], filter: &Filter) -> String {
    let keys: Vec<&str> = by.iter().map(|b| b.sql()).collect();
    // The groups, then the currency: `currency` alone when there is no group.
    let group: String = keys.iter().map(|k| format!("{k}, ")).collect();
    let mut conditions = vec!["finished_at >= $1", "finished_at < $2"];
    let mut n = 2;
    let mut caller = String::new();
    if filter.caller.is_some() {
        n += 1;
        caller = format!("caller = ${n}");
    }
    let mut model = String::new();
    if filter.model.is_some() {
        n += 1;
        model = format!("model = ${n}");
    }
    let mut tenant = String::new();
    if filter.tenant.is_some() {
        n += 1;
        tenant = format!("tenant = ${n}");
    }
    conditions.extend(
        [caller.as_str(), model.as_str(), tenant.as_str()]
            .into_iter()
            .filter(|c| !c.is_empty()),
    );
    format!(
        "SELECT {group}currency, count(*)::int8, count(*) FILTER (WHERE status >= 400)::int8, \
         coalesce(sum(tokens), 0)::int8, coalesce(sum(characters), 0)::int8, \
         coalesce(sum(images), 0)::int8, sum(cost_nanos)::int8 \
         FROM {schema}.{TABLE} WHERE {} \
         GROUP BY {group}currency ORDER BY {group}currency NULLS LAST",
        conditions.join(" AND ")
    )
}

/// The parameters of [`statement`], in its order.
fn params(filter: &Filter) -> Vec<&(dyn ToSql + Sync)> {
    let mut p: Vec<&(dyn ToSql + Sync)> = vec![&filter.from, &filter.to];
    if let Some(c) = &filter.caller {
        p.push(c);
    }
    if let Some(m) = &filter.model {
        p.push(m);
    }
    if let Some(t) = &filter.tenant {
        p.push(t);
    }
    p
}

/// Ask the ledger in `schema` for the requests `filter` names, grouped by `by` (in that order;
/// empty: one row per currency).
pub(crate) async fn run(
    client: &Client,
    schema: &str,
    filter: &Filter,
    by: &[GroupBy],
) -> Result<Report, tokio_postgres::Error> {
    let rows = client
        .query(&statement(schema, by, filter), &params(filter))
        .await?;
    let n = by.len();
    let rows = rows
        .iter()
        .map(|r| Row {
            keys: (0..n).map(|i| r.get::<_, Option<String>>(i)).collect(),
            currency: r.get(n),
            requests: r.get(n + 1),
            errors: r.get(n + 2),
            tokens: r.get(n + 3),
            characters: r.get(n + 4),
            images: r.get(n + 5),
            cost_nanos: r.get(n + 6),
        })
        .collect();
    Ok(Report {
        by: by.to_vec(),
        rows,
    })
}

/// The sums of `rows` per currency, in the codes' order, the requests of unknown cost last.
pub(crate) fn totals(rows: &[Row]) -> Vec<Total> {
    let mut by_currency: BTreeMap<Option<&str>, Total> = BTreeMap::new();
    for r in rows {
        let t = by_currency
            .entry(r.currency.as_deref())
            .or_insert_with(|| Total {
                currency: r.currency.clone(),
                ..Total::default()
            });
        t.requests += r.requests;
        t.errors += r.errors;
        t.tokens += r.tokens;
        t.characters += r.characters;
        t.images += r.images;
        t.cost_nanos += r.cost_nanos.unwrap_or(0);
    }
    let mut out: Vec<Total> = by_currency.into_values().collect();
    // `None` sorts first in the map.
    let unknown_first = out.first().is_some_and(|t| t.currency.is_none());
    out.rotate_left(usize::from(unknown_first));
    out
}

/// A summed cost as `crate::money` writes an amount: the decimal, no trailing zeros
/// (`1800000` → `0.0018`). The ledger never stores a negative cost; one would read as 0.
pub(crate) fn cost_text(nanos: i64) -> String {
    Amount::from_nanos(u64::try_from(nanos).unwrap_or(0)).to_string()
}
