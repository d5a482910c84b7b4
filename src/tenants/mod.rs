//! Keys and tenants as data (issue 47), in the ledger's PostgreSQL (`ledger.database_url`,
//! feature `ledger`): tenants (teams) with their own limits, money budgets and allowed models;
//! API keys belonging to a tenant, each with its own limits, allowed models and expiry, stored as
//! SHA-256 digests only (the secret is shown once, at creation or rotation); rotation with an
//! overlap; revocation; and the administrators' audit trail.
//!
//! The request path never meets the database: every instance holds a snapshot of the usable
//! keys in memory (`auth::db_keys`), which `sync.rs` refreshes as soon as a change is notified
//! (PostgreSQL `LISTEN/NOTIFY`; every change sends its `NOTIFY` in its own transaction) and in
//! full every `tenants.refresh_seconds` as the safety net. An instance that loses the database
//! keeps serving the snapshot it has for `tenants.serve_stale_seconds`, then refuses database
//! keys; the gauges `switchyard_tenants_sync_age_seconds` and `switchyard_tenants_stale` say so.
//!
//! - `schema.rs`: the tables, created by versioned migrations, each applied once;
//! - `store.rs`: reading and changing them (each change with its audit row and its `NOTIFY`, in
//!   one transaction);
//! - `model.rs`: a tenant and a key as stored, and as the management API writes them;
//! - `input.rs`: the management API's bodies, checked;
//! - `secret.rs`: a key's secret, its digest and prefix;
//! - `set.rs`: the rows turned into the request path's snapshot;
//! - `sync.rs`: the background service that keeps the snapshot;
//! - `db.rs`: the management API's connection;
//! - `time.rs`: RFC 3339 timestamps;
//! - `cli.rs`: `switchyard keys …`, a thin command line over the management API.

pub(crate) mod cli;
pub(crate) mod db;
pub(crate) mod input;
pub(crate) mod model;
pub(crate) mod schema;
pub(crate) mod secret;
pub(crate) mod set;
pub(crate) mod store;
pub(crate) mod sync;
pub(crate) mod time;

/// The channel every change is notified on: one per schema, so two gateways on one database
/// with different schemas do not wake each other; named by a digest of the schema, since a
/// channel's name is at most 63 bytes and a schema's may be as long.
pub(crate) fn channel(schema: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(schema.as_bytes());
    format!("switchyard_tenants_{}", hex::encode(&digest[..8]))
}
