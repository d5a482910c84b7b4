//! The `ledger:` section checked into [`LedgerSettings`]: where the usage ledger writes
//! (the `ledger` module) and how much it may hold while the database is slow or down.
//!
//! An absent section, or one whose `database_url` is empty (the default configuration's
//! `${SWITCHYARD_LEDGER_DATABASE_URL:-}` when the variable is unset), is no ledger. A build
//! without the `ledger` cargo feature refuses a database URL at load, naming the feature, rather
//! than silently keeping no record the operator bills from.

use std::time::Duration;

use super::file::LedgerFile;

/// Where the ledger's PostgreSQL table lives, and its writer's bounds.
#[derive(Clone, PartialEq, Eq)]
pub struct LedgerSettings {
    /// The connection string as configured (a URL or libpq `key=value` pairs). It may hold a
    /// password: never print it (its password is registered with the logger's filter).
    pub database_url: String,
    /// The schema holding `usage_records`.
    pub schema: String,
    /// Most records held in memory waiting for the database.
    pub queue_records: usize,
    /// Most records written by one statement.
    pub batch_records: usize,
    /// Longest a record waits before its batch is written.
    pub flush_interval: Duration,
    /// Longest one connection attempt or one batch's write may take.
    pub write_timeout: Duration,
    /// Longest one read on a request's behalf (`GET /api/v1/usage`) may take, connecting
    /// included.
    pub read_timeout: Duration,
}

impl std::fmt::Debug for LedgerSettings {
    // Everything but the connection string, which may carry a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerSettings")
            .field("schema", &self.schema)
            .field("queue_records", &self.queue_records)
            .field("batch_records", &self.batch_records)
            .field("flush_interval", &self.flush_interval)
            .field("write_timeout", &self.write_timeout)
            .field("read_timeout", &self.read_timeout)
            .finish_non_exhaustive()
    }
}

/// The most records one statement writes: each batch is one `INSERT … SELECT FROM unnest(…)`
/// whose arrays hold the batch, so the bound is about the statement's size, not PostgreSQL's
/// 65,535-parameter limit.
pub(crate) const MAX_BATCH_RECORDS: usize = 10_000;

/// What a build without the `ledger` feature says when a ledger database is configured.
pub const NO_LEDGER: &str = "this build of Switchyard has no usage ledger (built without the \
                             `ledger` cargo feature)";

const AT: &str = "switchyard.ledger";

/// The checked section (`None`: no ledger). Problems go to `errors`, each with its key path.
pub(crate) fn ledger_settings(
    f: Option<&LedgerFile>,
    errors: &mut Vec<String>,
) -> Option<LedgerSettings> {
    let f = f?;
    if f.database_url.trim().is_empty() {
        return None;
    }
    if !cfg!(feature = "ledger") {
        errors.push(format!(
            "{AT}.database_url: {NO_LEDGER}; remove the section or leave the URL empty, or build \
             with `--features ledger`"
        ));
        return None;
    }
    let before = errors.len();
    check_url(&f.database_url, errors);
    if !is_identifier(&f.schema) {
        errors.push(format!(
            "{AT}.schema: `{}` is not a plain PostgreSQL name (lowercase letters, digits and `_`, \
             not starting with a digit, at most 63 characters)",
            f.schema
        ));
    }
    for (key, zero) in [
        ("queue_records", f.queue_records == 0),
        ("batch_records", f.batch_records == 0),
        ("flush_interval_ms", f.flush_interval_ms == 0),
        ("write_timeout_ms", f.write_timeout_ms == 0),
        ("read_timeout_ms", f.read_timeout_ms == 0),
    ] {
        if zero {
            errors.push(format!("{AT}.{key}: must be greater than 0"));
        }
    }
    if f.batch_records > MAX_BATCH_RECORDS {
        errors.push(format!(
            "{AT}.batch_records: {} is more than {MAX_BATCH_RECORDS}",
            f.batch_records
        ));
    }
    if f.batch_records > f.queue_records {
        errors.push(format!(
            "{AT}.batch_records: {} is more than queue_records ({})",
            f.batch_records, f.queue_records
        ));
    }
    (errors.len() == before).then(|| LedgerSettings {
        database_url: f.database_url.clone(),
        schema: f.schema.clone(),
        queue_records: f.queue_records,
        batch_records: f.batch_records,
        flush_interval: Duration::from_millis(f.flush_interval_ms),
        write_timeout: Duration::from_millis(f.write_timeout_ms),
        read_timeout: Duration::from_millis(f.read_timeout_ms),
    })
}

/// A name used unquoted in SQL (`CREATE SCHEMA name`), so it must be one PostgreSQL reads back
/// unchanged: no quoting needed, no case folding.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 63
}

/// The connection string parses as tokio-postgres reads it, names a host, and asks for no TLS
/// (the ledger connects in plain text: loopback or a private network). Its password is
/// registered with the logger's filter, so no error text can print it.
#[cfg(feature = "ledger")]
fn check_url(url: &str, errors: &mut Vec<String>) {
    use tokio_postgres::config::SslMode;
    keep_password_out_of_logs(url);
    let config = match url.parse::<tokio_postgres::Config>() {
        Ok(c) => c,
        Err(e) => {
            errors.push(format!(
                "{AT}.database_url: not a PostgreSQL connection string ({e})"
            ));
            return;
        }
    };
    if config.get_hosts().is_empty() {
        errors.push(format!(
            "{AT}.database_url: names no host (`postgresql://user@host:5432/db`)"
        ));
    }
    if config.get_ssl_mode() == SslMode::Require {
        errors.push(format!(
            "{AT}.database_url: sslmode=require asks for TLS, which the ledger does not speak; \
             reach the database over loopback or a private network (sslmode=disable or prefer)"
        ));
    }
}

#[cfg(not(feature = "ledger"))]
fn check_url(_url: &str, _errors: &mut Vec<String>) {}

/// Register the password a connection string holds (URL or `password=` pair, as written and as
/// the driver reads it) with the logger's filter, before anything can print the string or a part
/// of it.
#[cfg(feature = "ledger")]
pub(crate) fn keep_password_out_of_logs(url: &str) {
    if let Some(password) = url_password(url) {
        crate::logging::redact_also(&password);
    }
    if let Some(password) = url.parse::<tokio_postgres::Config>().ok().and_then(|c| {
        c.get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    }) {
        crate::logging::redact_also(&password);
    }
}

/// The password of a `postgresql://user:password@host` URL, percent-decoding left alone (the
/// logger blanks the text as written too).
#[cfg(feature = "ledger")]
fn url_password(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let userinfo = rest.split_once('@')?.0;
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then(|| password.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(yaml: &str) -> LedgerFile {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn an_empty_url_is_no_ledger() {
        let mut errors = Vec::new();
        assert!(ledger_settings(Some(&file("database_url: ''")), &mut errors).is_none());
        assert!(ledger_settings(None, &mut errors).is_none());
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[cfg(feature = "ledger")]
    #[test]
    fn a_full_section_is_read_with_defaults() {
        let mut errors = Vec::new();
        let s = ledger_settings(
            Some(&file(
                "database_url: postgresql://u:pw-LEDGER-CFG@127.0.0.1:5432/billing\nschema: sy_usage",
            )),
            &mut errors,
        )
        .unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.schema, "sy_usage");
        assert_eq!(s.queue_records, 100_000);
        assert_eq!(s.batch_records, 500);
        assert_eq!(s.flush_interval, Duration::from_secs(1));
        assert!(!format!("{s:?}").contains("pw-LEDGER-CFG"));
        assert!(!crate::logging::redact("x pw-LEDGER-CFG y").contains("pw-LEDGER-CFG"));
    }

    #[cfg(feature = "ledger")]
    #[test]
    fn bad_values_are_reported_by_key() {
        let mut errors = Vec::new();
        let s = ledger_settings(
            Some(&file(
                "database_url: 'postgresql://127.0.0.1/db?sslmode=require'\nschema: Bad-Name\n\
                 queue_records: 10\nbatch_records: 20\nflush_interval_ms: 0",
            )),
            &mut errors,
        );
        assert!(s.is_none());
        let all = errors.join("\n");
        for needle in [
            "switchyard.ledger.database_url: sslmode=require",
            "switchyard.ledger.schema: `Bad-Name`",
            "switchyard.ledger.batch_records: 20 is more than queue_records (10)",
            "switchyard.ledger.flush_interval_ms: must be greater than 0",
        ] {
            assert!(all.contains(needle), "`{needle}` not in:\n{all}");
        }
    }

    #[cfg(not(feature = "ledger"))]
    #[test]
    fn without_the_feature_a_database_is_refused() {
        let mut errors = Vec::new();
        let s = ledger_settings(
            Some(&file("database_url: postgresql://127.0.0.1/db")),
            &mut errors,
        );
        assert!(s.is_none());
        assert!(errors[0].contains("`ledger` cargo feature"), "{errors:?}");
    }
}
