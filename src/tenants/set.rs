//! The tenants' rows turned into the request path's snapshot (`auth::db_keys::DbKeys`): each
//! usable key under its secret's digest, and under its previous secret's until the rotation's
//! overlap ends; limits parsed once into the `Arc`s every request of the key shares.
//!
//! A key whose principal (`key:<tenant>/<name>`) is a YAML key's is left out: the YAML key
//! wins, and the clash is reported for the log.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::model::{Key, Tenant};
use crate::auth::db_keys::{DbKey, DbKeys, TenantScope};
use crate::auth::limits::LimitSet;

/// What a snapshot was made of, beside it: the principals left out for a YAML key of the same
/// name, and the rows whose stored limits could not be read (left out too).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Built {
    pub(crate) clashes: Vec<String>,
    pub(crate) unreadable: Vec<String>,
}

/// Stored limits into a shared set (`None`: none, or none readable, noted in `unreadable`).
fn limits(
    stored: Option<&serde_json::Value>,
    what: &str,
    unreadable: &mut Vec<String>,
) -> Option<Arc<LimitSet>> {
    let v = stored?;
    match LimitSet::from_json(v, "limits") {
        Ok(set) => crate::auth::limits::shared(&set),
        Err(e) => {
            unreadable.push(format!("{what}: {e}"));
            None
        }
    }
}

/// The snapshot of `keys` of `tenants` (both as `Tables::usable` reads them), leaving out the
/// principals in `yaml`.
pub(crate) fn build(tenants: &[Tenant], keys: &[Key], yaml: &HashSet<String>) -> (DbKeys, Built) {
    let mut built = Built::default();
    let scopes: HashMap<&str, Arc<TenantScope>> = tenants
        .iter()
        .map(|t| {
            let scope = TenantScope {
                name: t.name.clone(),
                id: format!("tenant:{}", t.name),
                limits: limits(
                    t.limits.as_ref(),
                    &format!("tenant {}", t.name),
                    &mut built.unreadable,
                ),
                allowed_models: t.allowed_models.clone().map(Arc::from),
            };
            (t.name.as_str(), Arc::new(scope))
        })
        .collect();
    let mut entries = Vec::new();
    for k in keys {
        let Some(tenant) = scopes.get(k.tenant.as_str()) else {
            continue;
        };
        let principal = k.principal();
        if yaml.contains(&principal) {
            built.clashes.push(principal);
            continue;
        }
        let unreadable_before = built.unreadable.len();
        let key_limits = limits(k.limits.as_ref(), &principal, &mut built.unreadable);
        if built.unreadable.len() != unreadable_before {
            // Limits that cannot be read are not "no limits": the key is left out.
            continue;
        }
        let entry = |valid_until| {
            Arc::new(DbKey {
                principal: principal.clone(),
                limits: key_limits.clone(),
                allowed_models: k.allowed_models.clone().map(Arc::from),
                tenant: tenant.clone(),
                valid_until,
            })
        };
        if let Ok(digest) = <[u8; 32]>::try_from(k.digest.as_slice()) {
            entries.push((digest, entry(k.expires_at)));
        }
        let previous = k
            .previous_digest
            .as_deref()
            .and_then(|d| <[u8; 32]>::try_from(d).ok());
        if let (Some(digest), Some(until)) = (previous, k.previous_expires_at) {
            let until = k.expires_at.map_or(until, |e| e.min(until));
            entries.push((digest, entry(Some(until))));
        }
    }
    (DbKeys::new(entries), built)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn tenant(name: &str, limits: Option<serde_json::Value>) -> Tenant {
        let now = SystemTime::now();
        Tenant {
            name: name.into(),
            description: String::new(),
            limits,
            allowed_models: None,
            created_at: now,
            updated_at: now,
            disabled_at: None,
        }
    }

    fn key(tenant: &str, name: &str, digest: u8, previous: Option<(u8, SystemTime)>) -> Key {
        Key {
            id: uuid::Uuid::new_v4(),
            tenant: tenant.into(),
            name: name.into(),
            prefix: "sy_abcdef".into(),
            limits: None,
            allowed_models: Some(vec!["tts-1".into()]),
            created_at: SystemTime::now(),
            expires_at: None,
            rotated_at: None,
            previous_expires_at: previous.map(|p| p.1),
            revoked_at: None,
            tenant_disabled: false,
            digest: vec![digest; 32],
            previous_digest: previous.map(|p| vec![p.0; 32]),
        }
    }

    #[test]
    fn keys_are_found_by_both_digests_and_clashes_are_left_out() {
        let now = SystemTime::now();
        let soon = now + Duration::from_secs(60);
        let tenants = [tenant(
            "a",
            Some(serde_json::json!({"requests_per_minute": 5})),
        )];
        let keys = [
            key("a", "ci", 1, Some((2, soon))),
            key("a", "yaml", 3, None),
            key("gone", "x", 4, None),
        ];
        let yaml = HashSet::from(["key:a/yaml".to_string()]);
        let (set, built) = build(&tenants, &keys, &yaml);
        assert_eq!(built.clashes, ["key:a/yaml"]);
        assert_eq!(set.len(), 2);
        let k = set.find(&[1; 32], now).unwrap();
        assert_eq!(k.principal, "key:a/ci");
        assert_eq!(k.tenant.id, "tenant:a");
        assert_eq!(
            k.tenant.limits.as_ref().unwrap().requests_per_minute,
            Some(5)
        );
        assert!(set.find(&[2; 32], now).is_some());
        assert!(set.find(&[2; 32], soon + Duration::from_secs(1)).is_none());
        assert!(set.find(&[3; 32], now).is_none());
    }
}
