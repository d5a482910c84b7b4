//! Spend and usage over a period, read back from the ledger's table for `switchyard spend`:
//! requests, errors, tokens, characters, images and cost summed per caller, model, provider
//! account, day or month (any combination), one row per group and currency, with totals per
//! currency — asked through `report.rs`, which every reader of spend shares; this module reads
//! the operator's times and writes the answer as a table or JSON.
//!
//! Times are read by PostgreSQL in UTC (`2026-11-01`, `2026-11-01T12:00:00Z`); the period is
//! `[from, to)`, by default from the start of the current month to now.

use serde_json::{json, Value};
use tokio_postgres::Client;

use super::db::clean;
use super::report::{self, Filter};
pub(crate) use super::report::{GroupBy as By, Row};

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
                "WITH p AS (SELECT coalesce($1::text::timestamptz, date_trunc('month', now())) \
                 AS f, coalesce($2::text::timestamptz, now()) AS t) \
                 SELECT to_char(f, {stamp}), to_char(t, {stamp}), f, t FROM p"
            ),
            &[&q.from, &q.to],
        )
        .await
        .map_err(|e| format!("reading the period: {}", clean(&e)))?;
    let filter = Filter {
        caller: q.caller.clone(),
        model: q.model.clone(),
        tenant: None,
        from: bounds.get(2),
        to: bounds.get(3),
    };
    let asked = report::run(client, schema, &filter, &q.by)
        .await
        .map_err(|e| clean(&e))?;
    Ok(Report {
        from: bounds.get(0),
        to: bounds.get(1),
        by: asked.by,
        rows: asked.rows,
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

impl Report {
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
        for t in report::totals(&self.rows) {
            let currency = t.currency.as_deref();
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
        let totals: Vec<Value> = report::totals(&self.rows)
            .into_iter()
            .map(|t| {
                let currency = t.currency.as_deref();
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
