//! The `tenants:` and `admin:` sections checked into [`TenantsSettings`] and [`AdminSettings`]:
//! keys and tenants kept as data in the ledger's PostgreSQL (the `tenants` module), and the
//! management API's listener and credentials (`server::admin`).
//!
//! Both live beside the ledger: without `ledger.database_url` they are refused at load, saying
//! so; a build without the `ledger` cargo feature (no PostgreSQL client) refuses them too, naming
//! the feature. `admin:` without `tenants:` takes the tenants' defaults.

use std::net::SocketAddr;
use std::time::Duration;

use super::file::{AdminFile, TenantsFile};
use super::ledger::{is_identifier, LedgerSettings};
use super::listeners::Listener;
use crate::auth::{ApiKeySetting, Authenticator};

/// Where the tenants' tables are and how each instance keeps its snapshot of them.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct TenantsSettings {
    /// The ledger's connection string (it may hold a password: never print it).
    pub(crate) database_url: String,
    /// The schema holding the tables.
    pub(crate) schema: String,
    /// How often the full snapshot is read again.
    pub(crate) refresh: Duration,
    /// How long the last snapshot is served with the database lost.
    pub(crate) serve_stale: Duration,
    /// Longest one connection attempt or one statement may take.
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for TenantsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantsSettings")
            .field("schema", &self.schema)
            .field("refresh", &self.refresh)
            .field("serve_stale", &self.serve_stale)
            .finish_non_exhaustive()
    }
}

/// The management API's listener and who may use it.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "ledger"), allow(dead_code))]
pub(crate) struct AdminSettings {
    /// Where it listens.
    pub(crate) address: SocketAddr,
    /// Administrators' keys and JWTs (`Authenticator::for_admin`).
    pub(crate) auth: Authenticator,
    /// Failed logins allowed per client IP per minute.
    pub(crate) failed_logins_per_minute: u64,
}

/// What the management API says without a database.
pub(crate) const ADMIN_NEEDS_DATABASE: &str = "admin: the management API needs a database: set \
                                               ledger.database_url (tenants live beside the ledger)";

/// The checked `tenants:` section (also when only `admin:` is written). `None`: neither.
pub(crate) fn tenants_settings(
    tenants: Option<&TenantsFile>,
    admin: Option<&AdminFile>,
    ledger: Option<&LedgerSettings>,
    errors: &mut Vec<String>,
) -> Option<TenantsSettings> {
    if tenants.is_none() && admin.is_none() {
        return None;
    }
    if !cfg!(feature = "ledger") {
        errors.push(format!(
            "switchyard.tenants/admin: keys and tenants as data live in PostgreSQL, and {}; \
             remove the sections, or build with `--features ledger`",
            super::ledger::NO_LEDGER
        ));
        return None;
    }
    let Some(ledger) = ledger else {
        errors.push(if admin.is_some() {
            ADMIN_NEEDS_DATABASE.to_string()
        } else {
            "tenants: keys and tenants as data need a database: set ledger.database_url \
             (tenants live beside the ledger)"
                .to_string()
        });
        return None;
    };
    let default = TenantsFile::default();
    let f = tenants.unwrap_or(&default);
    let before = errors.len();
    let schema = f.schema.clone().unwrap_or_else(|| ledger.schema.clone());
    if !is_identifier(&schema) {
        errors.push(format!(
            "switchyard.tenants.schema: `{schema}` is not a plain PostgreSQL name (lowercase \
             letters, digits and `_`, not starting with a digit)"
        ));
    }
    if !(1..=86_400).contains(&f.refresh_seconds) {
        errors.push("switchyard.tenants.refresh_seconds: must be from 1 to 86400".into());
    }
    if f.serve_stale_seconds == 0 {
        errors.push("switchyard.tenants.serve_stale_seconds: must be greater than 0".into());
    }
    (errors.len() == before).then(|| TenantsSettings {
        database_url: ledger.database_url.clone(),
        schema,
        refresh: Duration::from_secs(f.refresh_seconds),
        serve_stale: Duration::from_secs(f.serve_stale_seconds),
        timeout: ledger.write_timeout,
    })
}

/// The checked `admin:` section (`None`: no management API).
pub(crate) fn admin_settings(
    f: Option<&AdminFile>,
    listeners: &[Listener],
    metrics: Option<SocketAddr>,
    errors: &mut Vec<String>,
) -> Option<AdminSettings> {
    let f = f?;
    let before = errors.len();
    let address = match f.address.parse::<SocketAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            errors.push(format!(
                "switchyard.admin.address: `{}` is not an IP:port address",
                f.address
            ));
            None
        }
    };
    if let Some(a) = address {
        if let Some(l) = listeners.iter().find(|l| l.address == a) {
            errors.push(format!(
                "switchyard.admin.address: {a} is entry point {}'s address; the management API \
                 never shares a public listener",
                l.name
            ));
        }
        if metrics == Some(a) {
            errors.push(format!(
                "switchyard.admin.address: {a} is the metrics listener's address"
            ));
        }
    }
    if f.keys.is_empty() && f.jwt.is_none() {
        errors.push(
            "switchyard.admin: no administrator can log in: give `keys` or `jwt`".to_string(),
        );
    }
    if f.failed_logins_per_minute == 0 {
        errors.push("switchyard.admin.failed_logins_per_minute: must be greater than 0".into());
    }
    let keys: Vec<ApiKeySetting> = f
        .keys
        .iter()
        .map(|k| ApiKeySetting {
            name: k.name.clone(),
            key: k.key.clone(),
            sha256: k.sha256.clone(),
            limits: None,
        })
        .collect();
    let auth = match Authenticator::for_admin(&keys, f.jwt.as_ref()) {
        Ok(a) => Some(a),
        Err(problems) => {
            errors.extend(problems.into_iter().map(|p| format!("switchyard.{p}")));
            None
        }
    };
    if errors.len() != before {
        return None;
    }
    Some(AdminSettings {
        address: address?,
        auth: auth?,
        failed_logins_per_minute: f.failed_logins_per_minute,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    fn load(extra: &str) -> Result<crate::config::Settings, Vec<String>> {
        let yaml = format!(
            "switchyard:\n  listeners: [{{name: a, address: \"127.0.0.1:1\"}}]\n  providers:\n    \
             openai: {{kind: openai, api_key: k, base_url: \"https://api.openai.com/v1\"}}\n  \
             models:\n    tts: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}\n{extra}"
        );
        crate::config::load_str(&yaml, &|_| None)
    }

    const LEDGER: &str = "  ledger: {database_url: \"postgresql://u@127.0.0.1/db\"}\n";

    #[cfg(feature = "ledger")]
    #[test]
    fn the_management_api_without_a_database_says_so_plainly() {
        let errors = load("  admin: {address: \"127.0.0.1:8090\", keys: [{name: ops, key: k}]}\n")
            .err()
            .unwrap();
        assert!(
            errors.iter().any(|e| e == super::ADMIN_NEEDS_DATABASE),
            "{errors:?}"
        );
        let errors = load("  tenants: {}\n").err().unwrap();
        assert!(
            errors.iter().any(|e| e.contains("set ledger.database_url")),
            "{errors:?}"
        );
    }

    /// A build without the `ledger` feature has no PostgreSQL client: the sections are refused by
    /// name, with the feature to build with.
    #[cfg(not(feature = "ledger"))]
    #[test]
    fn a_build_without_the_ledger_refuses_tenants_and_admin() {
        let errors = load(&format!(
            "{LEDGER}  admin: {{address: \"127.0.0.1:8090\", keys: [{{name: ops, key: k}}]}}\n"
        ))
        .err()
        .unwrap();
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("switchyard.tenants/admin:")
                    && e.contains("--features ledger")),
            "{errors:?}"
        );
    }

    #[cfg(feature = "ledger")]
    #[test]
    fn tenants_and_admin_are_checked() {
        let s = load(&format!(
            "{LEDGER}  admin: {{address: \"127.0.0.1:8090\", keys: [{{name: ops, key: k}}]}}\n"
        ))
        .unwrap();
        let t = s.gateway.tenants.as_ref().unwrap();
        assert_eq!(t.schema, "public");
        assert_eq!(t.refresh.as_secs(), 30);
        assert_eq!(t.serve_stale.as_secs(), 3600);
        assert_eq!(
            s.gateway.admin.as_ref().unwrap().failed_logins_per_minute,
            10
        );
        let errors = load(&format!(
            "{LEDGER}  tenants: {{refresh_seconds: 0, serve_stale_seconds: 0, schema: \"Bad\"}}\n  \
             admin: {{address: \"127.0.0.1:1\", keys: [{{name: ops}}], failed_logins_per_minute: 0}}\n"
        ))
        .err()
        .unwrap();
        for want in [
            "switchyard.tenants.refresh_seconds",
            "switchyard.tenants.serve_stale_seconds",
            "switchyard.tenants.schema",
            "switchyard.admin.address: 127.0.0.1:1 is entry point a's address",
            "switchyard.admin.failed_logins_per_minute",
            "switchyard.admin.keys[0]: set exactly one of `key` or `sha256`",
        ] {
            assert!(
                errors.iter().any(|e| e.starts_with(want)),
                "{want}: {errors:?}"
            );
        }
    }
}
