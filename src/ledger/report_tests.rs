//! `report.rs`'s grouping: the statement made of fixed pieces, the totals per currency, and the
//! groups themselves against a real PostgreSQL (`SWITCHYARD_TEST_POSTGRES_URL`, default
//! `postgresql://postgres:postgres@127.0.0.1:5432/postgres`; `scripts/test` starts one), in a
//! schema of the test's own, dropped at its end.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

use super::db::connect;
use super::record::{Record, Usage};
use super::report::{self, cost_text, totals, Filter, GroupBy, Report, Row};
use super::schema;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// 2026-11-30T23:59:00Z, a minute before December.
const NOV_30_LATE: u64 = 1_796_083_140;
/// 2026-12-01T00:00:00Z and 2026-12-03T00:00:00Z.
const DEC_1: u64 = 1_796_083_200;
const DEC_3: u64 = DEC_1 + 2 * 86_400;

fn filter(caller: Option<&str>) -> Filter {
    Filter {
        caller: caller.map(String::from),
        model: None,
        tenant: None,
        from: at(0),
        to: at(DEC_1 + 365 * 86_400),
    }
}

#[test]
fn groupings_are_named_and_read_back() {
    for b in GroupBy::ALL {
        assert_eq!(GroupBy::parse(b.name()), Some(b));
    }
    assert_eq!(GroupBy::parse("week"), None);
    assert_eq!(GroupBy::parse("caller; DROP TABLE x"), None);
}

#[test]
fn the_statement_is_fixed_pieces_and_numbered_parameters() {
    let mut f = filter(Some("key:a"));
    let sql = report::statement("ledger", &[GroupBy::Day, GroupBy::Model], &f);
    assert!(
        sql.starts_with(
            "SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), model, currency,"
        ),
        "{sql}"
    );
    assert!(sql.contains("FROM ledger.usage_records WHERE finished_at >= $1 AND finished_at < $2 AND caller = $3 GROUP BY"), "{sql}");
    assert!(sql.ends_with("ORDER BY to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), model, currency NULLS LAST"), "{sql}");
    // The caller is a parameter, never text of the statement.
    assert!(!sql.contains("key:a"));
    // A model too, numbered after the caller; without a caller, the model is $3.
    f.model = Some("tts-1".into());
    let sql = report::statement("ledger", &[GroupBy::Month], &f);
    assert!(sql.contains("AND caller = $3 AND model = $4 GROUP BY to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM'), currency"), "{sql}");
    f.caller = None;
    let sql = report::statement("ledger", &[], &f);
    assert!(
        sql.contains(
            "finished_at < $2 AND model = $3 GROUP BY currency ORDER BY currency NULLS LAST"
        ),
        "{sql}"
    );
}

fn row(keys: &[&str], currency: Option<&str>, requests: i64, cost: Option<i64>) -> Row {
    Row {
        keys: keys.iter().map(|k| Some(k.to_string())).collect(),
        currency: currency.map(String::from),
        requests,
        errors: 1,
        tokens: 10,
        characters: 100,
        images: 0,
        cost_nanos: cost,
    }
}

#[test]
fn totals_are_per_currency_with_the_unknown_cost_last() {
    let rows = [
        row(&["a"], None, 1, None),
        row(&["a"], Some("USD"), 2, Some(1_500_000_000)),
        row(&["b"], Some("CNY"), 3, Some(700)),
        row(&["b"], Some("USD"), 4, Some(300_000_000)),
    ];
    let t = totals(&rows);
    let summary: Vec<(Option<&str>, i64, i64, i64)> = t
        .iter()
        .map(|t| {
            (
                t.currency.as_deref(),
                t.requests,
                t.characters,
                t.cost_nanos,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (Some("CNY"), 3, 100, 700),
            (Some("USD"), 6, 200, 1_800_000_000),
            (None, 1, 100, 0)
        ]
    );
    assert_eq!(t[1].errors, 2);
    assert!(totals(&[]).is_empty());
}

#[test]
fn costs_are_written_as_money_writes_amounts() {
    assert_eq!(cost_text(1_800_000), "0.0018");
    assert_eq!(cost_text(5_000_000_000), "5");
    assert_eq!(cost_text(61_700), "0.0000617");
    assert_eq!(cost_text(0), "0");
    assert_eq!(cost_text(-5), "0");
}

#[test]
fn a_rows_key_is_found_by_its_group() {
    let report = Report {
        by: vec![GroupBy::Day, GroupBy::Model],
        rows: vec![Row {
            keys: vec![Some("2026-12-03".into()), None],
            ..row(&[], None, 1, None)
        }],
    };
    let r = &report.rows[0];
    assert_eq!(report.key(r, GroupBy::Day), Some("2026-12-03"));
    assert_eq!(report.key(r, GroupBy::Model), None);
    assert_eq!(report.key(r, GroupBy::Caller), None);
}

fn record(
    secs: u64,
    caller: &str,
    model: &str,
    characters: u64,
    cost: Option<(i64, &str)>,
) -> Record {
    let mut r = Record::new("public", "/api/v1/audio/speech", 200);
    r.time = at(secs);
    r.caller = Some(caller.into());
    r.model = Some(model.into());
    r.usage = Usage {
        characters,
        ..Usage::default()
    };
    r.cost_nanos = cost.map(|c| c.0);
    r.currency = cost.map(|c| c.1.to_string());
    r
}

/// The groups PostgreSQL makes: UTC days and months (a request a minute before midnight UTC is
/// the day before), one caller's rows only when a caller is named, currencies apart.
#[tokio::test]
async fn rows_are_grouped_by_utc_day_month_caller_and_currency() {
    let url = std::env::var("SWITCHYARD_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgresql://postgres:postgres@127.0.0.1:5432/postgres".into());
    let client = connect(&url, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("no PostgreSQL at {url} ({e}): scripts/test starts one"));
    let name = format!("switchyard_test_{}", Uuid::new_v4().simple());
    schema::ensure(&client, &name).await.unwrap();
    let insert = schema::prepare_insert(&client, &name).await.unwrap();
    let batch: Vec<(Uuid, Record)> = [
        record(NOV_30_LATE, "key:a", "tts-1", 100, Some((1_500_000, "USD"))),
        record(DEC_1, "key:a", "tts-1", 200, Some((3_000_000, "USD"))),
        record(DEC_1 + 60, "key:a", "tts-1", 10, Some((700, "CNY"))),
        record(DEC_3, "key:a", "dall-e-3", 0, None),
        record(DEC_1, "key:b", "tts-1", 5000, Some((75_000_000, "USD"))),
    ]
    .into_iter()
    .map(|r| (Uuid::new_v4(), r))
    .collect();
    schema::insert(&client, &insert, &batch).await.unwrap();

    let asked = |by: &'static [GroupBy], f: Filter| {
        let (client, name) = (&client, &name);
        async move { report::run(client, name, &f, by).await.unwrap() }
    };
    let by_day = asked(&[GroupBy::Day, GroupBy::Model], filter(Some("key:a"))).await;
    type Got = (Vec<Option<String>>, Option<String>, i64, i64, Option<i64>);
    let got: Vec<Got> = by_day
        .rows
        .iter()
        .map(|r| {
            (
                r.keys.clone(),
                r.currency.clone(),
                r.requests,
                r.characters,
                r.cost_nanos,
            )
        })
        .collect();
    let k = |d: &str, m: &str| vec![Some(d.to_string()), Some(m.to_string())];
    assert_eq!(
        got,
        [
            (
                k("2026-11-30", "tts-1"),
                Some("USD".into()),
                1,
                100,
                Some(1_500_000)
            ),
            (
                k("2026-12-01", "tts-1"),
                Some("CNY".into()),
                1,
                10,
                Some(700)
            ),
            (
                k("2026-12-01", "tts-1"),
                Some("USD".into()),
                1,
                200,
                Some(3_000_000)
            ),
            (k("2026-12-03", "dall-e-3"), None, 1, 0, None),
        ]
    );

    // By month and caller, everyone: November's minute is November's.
    let by_month = asked(&[GroupBy::Month, GroupBy::Caller], filter(None)).await;
    type Usd<'a> = (Option<&'a str>, Option<&'a str>, i64, Option<i64>);
    let usd: Vec<Usd> = by_month
        .rows
        .iter()
        .filter(|r| r.currency.as_deref() == Some("USD"))
        .map(|r| {
            (
                by_month.key(r, GroupBy::Month),
                by_month.key(r, GroupBy::Caller),
                r.requests,
                r.cost_nanos,
            )
        })
        .collect();
    assert_eq!(
        usd,
        [
            (Some("2026-11"), Some("key:a"), 1, Some(1_500_000)),
            (Some("2026-12"), Some("key:a"), 1, Some(3_000_000)),
            (Some("2026-12"), Some("key:b"), 1, Some(75_000_000)),
        ]
    );

    // The period is [from, to): December only, from its first second; to its 3rd, exclusive.
    let mut december = filter(Some("key:a"));
    december.from = at(DEC_1);
    december.to = at(DEC_3);
    let t = totals(&asked(&[], december).await.rows);
    let summary: Vec<(Option<&str>, i64, i64)> = t
        .iter()
        .map(|t| (t.currency.as_deref(), t.requests, t.cost_nanos))
        .collect();
    assert_eq!(
        summary,
        [(Some("CNY"), 1, 700), (Some("USD"), 1, 3_000_000)]
    );

    client
        .batch_execute(&format!("DROP SCHEMA {name} CASCADE"))
        .await
        .unwrap();
}
