//! The ledger's table, and the one statement that writes a batch into it.
//!
//! `usage_records` is created when absent (with its schema), with indexes for the questions a
//! bill asks: by time, by caller over time, by model over time. The user guide's page
//! `docs/guide/ledger.md` shows the same SQL. A batch is one `INSERT … SELECT FROM unnest(…)`: one array per
//! column, so the statement is the same whatever the batch's size and is prepared once per
//! connection. Each record carries an id chosen when the writer first took it, and `ON CONFLICT
//! (id) DO NOTHING` makes a retried batch (one whose commit the writer did not see) add nothing
//! twice.

use std::time::SystemTime;

use tokio_postgres::{Client, Statement};
use uuid::Uuid;

use super::record::Record;

/// The table's name inside the configured schema.
pub(crate) const TABLE: &str = "usage_records";

/// The statements that create the table and its indexes in `schema` when absent (the schema
/// itself is created first, when it does not exist).
pub(crate) fn create_sql(schema: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {schema}.{TABLE} (
    id           uuid        PRIMARY KEY,
    finished_at  timestamptz NOT NULL,
    request_id   text,
    caller       text,
    entry_point  text        NOT NULL,
    path         text        NOT NULL,
    operation    text,
    model        text,
    provider     text,
    native_model text,
    tokens       bigint      NOT NULL DEFAULT 0,
    characters   bigint      NOT NULL DEFAULT 0,
    images       bigint      NOT NULL DEFAULT 0,
    usage_detail jsonb,
    cost_nanos  bigint,
    currency     text,
    cost_basis   text,
    status       smallint    NOT NULL,
    attempts     integer     NOT NULL,
    trace_id     text
);
CREATE INDEX IF NOT EXISTS {TABLE}_finished_at ON {schema}.{TABLE} (finished_at);
CREATE INDEX IF NOT EXISTS {TABLE}_caller ON {schema}.{TABLE} (caller, finished_at);
CREATE INDEX IF NOT EXISTS {TABLE}_model ON {schema}.{TABLE} (model, finished_at);
ALTER TABLE {schema}.{TABLE} ADD COLUMN IF NOT EXISTS cache text;
ALTER TABLE {schema}.{TABLE} ADD COLUMN IF NOT EXISTS tenant text;
"
    )
}

/// The insert of one batch: column arrays in the order of [`Columns`].
fn insert_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.{TABLE} (id, finished_at, request_id, caller, entry_point, path, \
         operation, model, provider, native_model, tokens, characters, images, usage_detail, \
         cost_nanos, currency, cost_basis, status, attempts, trace_id, cache, tenant)
         SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], \
         $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::int8[], $12::int8[], \
         $13::int8[], $14::jsonb[], $15::int8[], $16::text[], $17::text[], $18::int2[], \
         $19::int4[], $20::text[], $21::text[], $22::text[])
         ON CONFLICT (id) DO NOTHING"
    )
}

/// Create `schema` (when it does not exist) and the table and indexes in it.
pub(crate) async fn ensure(client: &Client, schema: &str) -> Result<(), tokio_postgres::Error> {
    // Looked up first: `CREATE SCHEMA IF NOT EXISTS` wants the CREATE privilege on the database
    // even when the schema is there, which a billing role writing into `public` may lack.
    let exists = client
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .await?
        .is_some();
    if !exists {
        client
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await?;
    }
    client.batch_execute(&create_sql(schema)).await
}

/// A batch as one array per column.
struct Columns {
    id: Vec<Uuid>,
    finished_at: Vec<SystemTime>,
    request_id: Vec<Option<String>>,
    caller: Vec<Option<String>>,
    entry_point: Vec<String>,
    path: Vec<String>,
    operation: Vec<Option<String>>,
    model: Vec<Option<String>>,
    provider: Vec<Option<String>>,
    native_model: Vec<Option<String>>,
    tokens: Vec<i64>,
    characters: Vec<i64>,
    images: Vec<i64>,
    usage_detail: Vec<Option<serde_json::Value>>,
    cost_nanos: Vec<Option<i64>>,
    currency: Vec<Option<String>>,
    cost_basis: Vec<Option<String>>,
    status: Vec<i16>,
    attempts: Vec<i32>,
    trace_id: Vec<Option<String>>,
    cache: Vec<Option<String>>,
    tenant: Vec<Option<String>>,
}

/// Text as PostgreSQL's `text` takes it: it refuses NUL, and one record it refuses would fail its
/// whole batch on every retry, holding up every record behind it. A NUL (only a client's bytes in
/// a path could bring one) becomes U+FFFD.
fn text(s: &str) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{FFFD}")
    } else {
        s.to_string()
    }
}

fn opt_text(s: &Option<String>) -> Option<String> {
    s.as_deref().map(text)
}

/// JSON as `jsonb` takes it: no `\u0000` in its strings or keys either.
fn json(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(text(s)),
        Value::Array(items) => Value::Array(items.iter().map(json).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (text(k), json(v))).collect()),
        other => other.clone(),
    }
}

/// A count as PostgreSQL's `bigint` holds it (no usage comes near 2^63).
fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Columns {
    fn of(batch: &[(Uuid, Record)]) -> Columns {
        let n = batch.len();
        let mut c = Columns {
            id: Vec::with_capacity(n),
            finished_at: Vec::with_capacity(n),
            request_id: Vec::with_capacity(n),
            caller: Vec::with_capacity(n),
            entry_point: Vec::with_capacity(n),
            path: Vec::with_capacity(n),
            operation: Vec::with_capacity(n),
            model: Vec::with_capacity(n),
            provider: Vec::with_capacity(n),
            native_model: Vec::with_capacity(n),
            tokens: Vec::with_capacity(n),
            characters: Vec::with_capacity(n),
            images: Vec::with_capacity(n),
            usage_detail: Vec::with_capacity(n),
            cost_nanos: Vec::with_capacity(n),
            currency: Vec::with_capacity(n),
            cost_basis: Vec::with_capacity(n),
            status: Vec::with_capacity(n),
            attempts: Vec::with_capacity(n),
            trace_id: Vec::with_capacity(n),
            cache: Vec::with_capacity(n),
            tenant: Vec::with_capacity(n),
        };
        for (id, r) in batch {
            c.id.push(*id);
            c.finished_at.push(r.time);
            c.request_id.push(opt_text(&r.request_id));
            c.caller.push(opt_text(&r.caller));
            c.entry_point.push(text(&r.entry_point));
            c.path.push(text(&r.path));
            c.operation.push(opt_text(&r.operation));
            c.model.push(opt_text(&r.model));
            c.provider.push(opt_text(&r.provider));
            c.native_model.push(opt_text(&r.native_model));
            c.tokens.push(big(r.usage.tokens));
            c.characters.push(big(r.usage.characters));
            c.images.push(big(r.usage.images));
            c.usage_detail.push(r.usage.detail.as_ref().map(json));
            c.cost_nanos.push(r.cost_nanos);
            c.currency.push(opt_text(&r.currency));
            c.cost_basis.push(opt_text(&r.cost_basis));
            c.status.push(i16::try_from(r.status).unwrap_or(i16::MAX));
            c.attempts
                .push(i32::try_from(r.attempts).unwrap_or(i32::MAX));
            c.trace_id.push(opt_text(&r.trace_id));
            c.cache.push(opt_text(&r.cache));
            c.tenant.push(opt_text(&r.tenant));
        }
        c
    }
}

/// The batch insert, prepared on `client` (once per connection).
pub(crate) async fn prepare_insert(
    client: &Client,
    schema: &str,
) -> Result<Statement, tokio_postgres::Error> {
    client.prepare(&insert_sql(schema)).await
}

/// Write `batch` in one statement (one transaction) with the insert [`prepare_insert`] made.
/// Returns the rows added (fewer than the batch's length only when a retry finds some already
/// there).
pub(crate) async fn insert(
    client: &Client,
    statement: &Statement,
    batch: &[(Uuid, Record)],
) -> Result<u64, tokio_postgres::Error> {
    let c = Columns::of(batch);
    client
        .execute(
            statement,
            &[
                &c.id,
                &c.finished_at,
                &c.request_id,
                &c.caller,
                &c.entry_point,
                &c.path,
                &c.operation,
                &c.model,
                &c.provider,
                &c.native_model,
                &c.tokens,
                &c.characters,
                &c.images,
                &c.usage_detail,
                &c.cost_nanos,
                &c.currency,
                &c.cost_basis,
                &c.status,
                &c.attempts,
                &c.trace_id,
                &c.cache,
                &c.tenant,
            ],
        )
        .await
}
