//! The tenants' tables, made by versioned migrations: `tenants_migrations` records each version
//! applied, and each version runs once, in a transaction of its own that also records it, under
//! a transaction-scoped advisory lock so that instances starting together do not race. A
//! version once released is never edited: a change to the tables is a new version.
//!
//! - `tenants`: one row per tenant (its limits as JSON, its allowed models, `disabled_at` once
//!   deleted: kept, since the ledger keeps naming it);
//! - `tenant_keys`: one row per key (its secret's SHA-256 only, and the previous secret's after a
//!   rotation, until `previous_expires_at`);
//! - `admin_audit`: every state-changing action of the management API (who, what, on what, from
//!   where, when, and a detail without secrets).
//!
//! The ledger's own `usage_records` gets its `tenant` column from the ledger's schema.

use tokio_postgres::Client;

/// The table recording the versions applied.
const MIGRATIONS: &str = "tenants_migrations";

/// The migrations, in order: `(version, SQL)` with `{s}` for the schema.
const VERSIONS: &[(i32, &str)] = &[(
    1,
    "CREATE TABLE {s}.tenants (
    name           text        PRIMARY KEY,
    description    text        NOT NULL DEFAULT '',
    limits         jsonb,
    allowed_models text[],
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    disabled_at    timestamptz
);
CREATE TABLE {s}.tenant_keys (
    id                  uuid        PRIMARY KEY,
    tenant              text        NOT NULL REFERENCES {s}.tenants (name),
    name                text        NOT NULL,
    digest              bytea       NOT NULL UNIQUE,
    prefix              text        NOT NULL,
    limits              jsonb,
    allowed_models      text[],
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz,
    rotated_at          timestamptz,
    previous_digest     bytea,
    previous_expires_at timestamptz,
    revoked_at          timestamptz,
    UNIQUE (tenant, name)
);
CREATE TABLE {s}.admin_audit (
    id      bigserial   PRIMARY KEY,
    at      timestamptz NOT NULL,
    admin   text        NOT NULL,
    action  text        NOT NULL,
    target  text        NOT NULL,
    from_ip text,
    detail  jsonb       NOT NULL
);
CREATE INDEX admin_audit_at ON {s}.admin_audit (at DESC, id DESC);",
)];

/// Bring `schema`'s tables to the newest version (creating the schema when absent). Returns the
/// versions applied now (empty: already current).
pub(crate) async fn migrate(client: &mut Client, schema: &str) -> Result<Vec<i32>, String> {
    let clean = |e: tokio_postgres::Error| crate::ledger::db::clean(&e);
    // The ledger's writer may be creating the same schema at this moment: a unique violation
    // there means it exists now, and the second try finds it.
    let mut tries = 0;
    while let Err(e) = prepare(client, schema).await {
        tries += 1;
        if tries > 2 || e.code() != Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
            return Err(clean(e));
        }
    }
    let mut applied = Vec::new();
    for (version, sql) in VERSIONS {
        let tx = client.transaction().await.map_err(clean)?;
        lock(&tx, schema).await.map_err(clean)?;
        let done = tx
            .query_opt(
                &format!("SELECT 1 FROM {schema}.{MIGRATIONS} WHERE version = $1"),
                &[version],
            )
            .await
            .map_err(clean)?
            .is_some();
        if done {
            continue;
        }
        tx.batch_execute(&sql.replace("{s}", schema))
            .await
            .map_err(clean)?;
        tx.execute(
            &format!("INSERT INTO {schema}.{MIGRATIONS} (version) VALUES ($1)"),
            &[version],
        )
        .await
        .map_err(clean)?;
        tx.commit().await.map_err(clean)?;
        applied.push(*version);
    }
    Ok(applied)
}

/// One migrator at a time per schema (this instance's other connections and other instances);
/// the lock ends with the transaction.
async fn lock(
    tx: &tokio_postgres::Transaction<'_>,
    schema: &str,
) -> Result<(), tokio_postgres::Error> {
    let key = format!("{schema}.{MIGRATIONS}");
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&key])
        .await
        .map(|_| ())
}

/// The schema (when absent) and the migrations table, under the lock.
async fn prepare(client: &mut Client, schema: &str) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    lock(&tx, schema).await?;
    // Looked up first: `CREATE SCHEMA IF NOT EXISTS` wants the CREATE privilege on the database
    // even when the schema is there.
    let exists = tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .await?
        .is_some();
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {schema}.{MIGRATIONS} (
            version    integer     PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )"
    ))
    .await?;
    tx.commit().await
}
