//! Spend and usage over a period, read back from the ledger's table: requests, errors, tokens,
//! characters, images and cost summed per caller, model, provider account or day (any
//! combination), one row per group and currency, with totals per currency. The SQL is built
//! from fixed pieces; what the operator typed (times, caller, model) goes as parameters.
//!
//! Times are read by PostgreSQL in UTC (`2026-11-01`, `2026-11-01T12:00:00Z`); the period is
//! `[from, to)`, by default from the start of the current month to now.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tokio_postgres::Client;

use super::db::clean;
use super::schema::TABLE;

/// What rows are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum By {
    /// The caller (`key:<name>` or `jwt:<subject>`).
    Caller,
    /// The public model.
    Model,
    /// The provider account.
    Provider,
    /// The UTC day the request finished.
    Day,
}

impl By {
    /// Its name on the command line and in JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            By::Caller => "caller",
            By::Model => "model",
            By::Provider => "provider",
            By::Day => "day",
        }
    }

    /// Read a name.
    pub(crate) fn parse(name: &str) -> Option<By> {
        [By::Caller, By::Model, By::Provider, By::Day]
            .into_iter()
            .find(|b| b.name() == name)
    }

    fn sql(self) -> &'static str {
        match self {
            By::Caller => "caller",
            By::Model => "model",
            By::Provider => "provider",
            By::Day => "to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        }
    }
}

/// The question.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    /// Start of the period (inclusive); `None`: the start of the current month (UTC).
    pub from: Option<String>,
    /// End of the period (exclusive); `None`: now.
    pub to: Option<String>,
    /// Only this caller's requests.
    pub caller: Option<String>,
    /// Only this model's requests.
    pub model: Option<String>,
    /// The grouping, in column order (never empty).
    pub by: Vec<By>,
}

/// One group's sums in one currency.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The group's values, in [`Query::by`]'s order (`None`: not known, as an unauthenticated
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
    /// The summed cost in billionths (nano-units) of `currency` (`None` when no request's cost is known).
    pub cost_nanos: Option<i64>,
}

/// The answer: the period as PostgreSQL read it, and the rows.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub from: String,
    pub to: String,
    pub by: Vec<By>,
    pub rows: Vec<Row>,
}

/// Ask the ledger in `schema`.
pub(crate) async fn run(client: &Client, schema: &str, q: &Query) -> Result<Report, String> {
    client
        .batch_execute("SET TIME ZONE 'UTC'")
        .await
        .map_err(|e| clean(&e))?;
    // The period's bounds as PostgreSQL reads them: a time it cannot read is refused here.
    let stamp = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'";
    let bounds = client
        .query_one(
            &format!(
                "SELECT to_char(coalesce($1::text::timestamptz, date_trunc('month', now())), \
                 {stamp}), to_char(coalesce($2::text::timestamptz, now()), {stamp})"
            ),
            &[&q.from, &q.to],
        )
        .await
        .map_err(|e| format!("reading the period: {}", clean(&e)))?;
    let (from, to): (String, String) = (bounds.get(0), bounds.get(1));
    let keys: Vec<&str> = q.by.iter().map(|b| b.sql()).collect();
    let keys = keys.join(", ");
    let sql = format!(
        "SELECT {keys}, currency, count(*)::int8, count(*) FILTER (WHERE status >= 400)::int8, \
         coalesce(sum(tokens), 0)::int8, coalesce(sum(characters), 0)::int8, \
         coalesce(sum(images), 0)::int8, sum(cost_nanos)::int8
         FROM {schema}.{TABLE}
         WHERE finished_at >= $1::text::timestamptz AND finished_at < $2::text::timestamptz
           AND ($3::text IS NULL OR caller = $3) AND ($4::text IS NULL OR model = $4)
         GROUP BY {keys}, currency
         ORDER BY {keys}, currency NULLS LAST"
    );
    let rows = client
        .query(&sql, &[&from, &to, &q.caller, &q.model])
        .await
        .map_err(|e| clean(&e))?;
    let n = q.by.len();
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
        from,
        to,
        by: q.by.clone(),
        rows,
    })
}

/// Billionths (nano-units, as prices and costs are kept) as a decimal amount with at least six
/// decimals and no trailing zeros beyond them (`12345678000` → `12.345678`, `61700` →
/// `0.0000617`).
pub(crate) fn amount(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let frac = format!("{:09}", n % 1_000_000_000);
    let keep = frac.trim_end_matches('0').len().max(6);
    format!("{sign}{}.{}", n / 1_000_000_000, &frac[..keep])
}

/// Totals per currency (`None`: requests whose cost is not known).
struct Total {
    requests: i64,
    errors: i64,
    tokens: i64,
    characters: i64,
    images: i64,
    cost_nanos: i64,
}

impl Report {
    /// Totals per currency, the requests of unknown cost last.
    fn totals(&self) -> Vec<(Option<&str>, Total)> {
        let mut totals: Vec<_> = self.by_currency().into_iter().collect();
        let unknown_first = totals.first().is_some_and(|t| t.0.is_none());
        totals.rotate_left(usize::from(unknown_first));
        totals
    }

    fn by_currency(&self) -> BTreeMap<Option<&str>, Total> {
        let mut out: BTreeMap<Option<&str>, Total> = BTreeMap::new();
        for r in &self.rows {
            let t = out.entry(r.currency.as_deref()).or_insert(Total {
                requests: 0,
                errors: 0,
                tokens: 0,
                characters: 0,
                images: 0,
                cost_nanos: 0,
            });
            t.requests += r.requests;
            t.errors += r.errors;
            t.tokens += r.tokens;
            t.characters += r.characters;
            t.images += r.images;
            t.cost_nanos += r.cost_nanos.unwrap_or(0);
        }
        out
    }

    /// The report as an aligned table, a totals line per currency under it.
    pub(crate) fn text(&self) -> String {
        let by: Vec<&str> = self.by.iter().map(|b| b.name()).collect();
        let mut out = format!(
            "spend from {} to {}, by {}\n\n",
            self.from,
            self.to,
            by.join(", ")
        );
        if self.rows.is_empty() {
            out.push_str("no requests in this period\n");
            return out;
        }
        let mut header: Vec<String> = by.iter().map(|s| s.to_string()).collect();
        header.extend(
            [
                "requests",
                "errors",
                "tokens",
                "characters",
                "images",
                "cost",
            ]
            .map(String::from),
        );
        let cost = |nanos: Option<i64>, currency: Option<&str>| match (nanos, currency) {
            (Some(m), Some(c)) => format!("{} {c}", amount(m)),
            _ => "unknown".to_string(),
        };
        let mut lines = vec![header];
        for r in &self.rows {
            let mut line: Vec<String> = r
                .keys
                .iter()
                .map(|k| k.clone().unwrap_or_else(|| "-".into()))
                .collect();
            line.extend(
                [r.requests, r.errors, r.tokens, r.characters, r.images].map(|n| n.to_string()),
            );
            line.push(cost(r.cost_nanos, r.currency.as_deref()));
            lines.push(line);
        }
        for (currency, t) in self.totals() {
            let mut line = vec!["total".to_string()];
            line.extend((1..by.len()).map(|_| String::new()));
            line.extend(
                [t.requests, t.errors, t.tokens, t.characters, t.images].map(|n| n.to_string()),
            );
            line.push(cost(currency.map(|_| t.cost_nanos), currency));
            lines.push(line);
        }
        let columns = lines[0].len();
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                lines
                    .iter()
                    .map(|l| l[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let keys = by.len();
        for line in &lines {
            let cells: Vec<String> = line
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    // Names to the left, numbers to the right; the cost as written.
                    if i < keys || i + 1 == columns {
                        format!("{cell:<w$}", w = widths[i])
                    } else {
                        format!("{cell:>w$}", w = widths[i])
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }

    /// The report as one JSON document: the period, the grouping, the rows (each group's keys by
    /// name) and the totals per currency. Costs are given both as decimal strings and as
    /// integer billionths (nano-units).
    pub(crate) fn json(&self) -> String {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let mut row = serde_json::Map::new();
                for (b, k) in self.by.iter().zip(&r.keys) {
                    row.insert(b.name().into(), json!(k));
                }
                row.insert("requests".into(), json!(r.requests));
                row.insert("errors".into(), json!(r.errors));
                row.insert("tokens".into(), json!(r.tokens));
                row.insert("characters".into(), json!(r.characters));
                row.insert("images".into(), json!(r.images));
                row.insert("currency".into(), json!(r.currency));
                row.insert("cost".into(), json!(r.cost_nanos.map(amount)));
                row.insert("cost_nanos".into(), json!(r.cost_nanos));
                Value::Object(row)
            })
            .collect();
        let totals: Vec<Value> = self
            .totals()
            .into_iter()
            .map(|(currency, t)| {
                let nanos = currency.map(|_| t.cost_nanos);
                json!({
                    "currency": currency,
                    "requests": t.requests,
                    "errors": t.errors,
                    "tokens": t.tokens,
                    "characters": t.characters,
                    "images": t.images,
                    "cost": nanos.map(amount),
                    "cost_nanos": nanos,
                })
            })
            .collect();
        let by: Vec<&str> = self.by.iter().map(|b| b.name()).collect();
        let doc = json!({
            "from": self.from,
            "to": self.to,
            "by": by,
            "rows": rows,
            "totals": totals,
        });
        format!("{doc:#}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_decimals_of_nano_units() {
        assert_eq!(amount(12_345_678_000), "12.345678");
        assert_eq!(amount(5_000), "0.000005");
        assert_eq!(amount(61_700), "0.0000617");
        assert_eq!(amount(-1_500_000_000), "-1.500000");
    }

    #[test]
    fn the_table_aligns_groups_and_totals_each_currency() {
        let row = |caller: &str, currency: Option<&str>, cost: Option<i64>| Row {
            keys: vec![Some(caller.into())],
            currency: currency.map(String::from),
            requests: 2,
            errors: 1,
            tokens: 10,
            characters: 0,
            images: 0,
            cost_nanos: cost,
        };
        let report = Report {
            from: "2026-11-01T00:00:00.000000Z".into(),
            to: "2026-12-01T00:00:00.000000Z".into(),
            by: vec![By::Caller],
            rows: vec![
                row("key:alice", Some("USD"), Some(1_500_000_000)),
                row("key:bob", Some("USD"), Some(250_000_000)),
                row("key:bob", None, None),
            ],
        };
        let text = report.text();
        assert!(
            text.contains("key:alice         2       1      10           0       0  1.500000 USD"),
            "{text}"
        );
        let totals: Vec<&str> = text.lines().filter(|l| l.starts_with("total")).collect();
        assert_eq!(
            totals,
            [
                "total             4       2      20           0       0  1.750000 USD",
                "total             2       1      10           0       0  unknown",
            ],
            "{text}"
        );
        let doc: Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(doc["rows"][0]["caller"], "key:alice");
        assert_eq!(doc["totals"][0]["cost"], "1.750000");
        assert_eq!(doc["totals"][1]["currency"], Value::Null);
    }
}
