//! A tenant and a key as stored, and as the management API writes them (the contract's Tenant
//! and Key objects, `docs/guide/tenants.md`). A key's digests are kept for the snapshot and never
//! written out.

use std::time::SystemTime;

use serde_json::{json, Value};
use tokio_postgres::Row;
use uuid::Uuid;

use super::time::rfc3339;

/// One tenant row.
#[derive(Debug, Clone)]
pub(crate) struct Tenant {
    pub(crate) name: String,
    pub(crate) description: String,
    /// The limits as stored (`LimitSet::to_json`'s shape); `None`: none.
    pub(crate) limits: Option<Value>,
    /// `None`: every model.
    pub(crate) allowed_models: Option<Vec<String>>,
    pub(crate) created_at: SystemTime,
    pub(crate) updated_at: SystemTime,
    pub(crate) disabled_at: Option<SystemTime>,
}

/// The columns [`Tenant::from_row`] reads, in its order.
pub(crate) const TENANT_COLUMNS: &str =
    "name, description, limits, allowed_models, created_at, updated_at, disabled_at";

impl Tenant {
    /// From a row of [`TENANT_COLUMNS`].
    pub(crate) fn from_row(r: &Row) -> Result<Tenant, tokio_postgres::Error> {
        Ok(Tenant {
            name: r.try_get(0)?,
            description: r.try_get(1)?,
            limits: r.try_get(2)?,
            allowed_models: r.try_get(3)?,
            created_at: r.try_get(4)?,
            updated_at: r.try_get(5)?,
            disabled_at: r.try_get(6)?,
        })
    }

    /// The management API's Tenant object.
    pub(crate) fn json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "limits": self.limits,
            "allowed_models": self.allowed_models,
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
            "disabled_at": self.disabled_at.map(rfc3339),
        })
    }
}

/// One key row, with whether its tenant is disabled.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    pub(crate) id: Uuid,
    pub(crate) tenant: String,
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) limits: Option<Value>,
    pub(crate) allowed_models: Option<Vec<String>>,
    pub(crate) created_at: SystemTime,
    pub(crate) expires_at: Option<SystemTime>,
    pub(crate) rotated_at: Option<SystemTime>,
    pub(crate) previous_expires_at: Option<SystemTime>,
    pub(crate) revoked_at: Option<SystemTime>,
    /// The tenant's `disabled_at` is set: the key works no more.
    pub(crate) tenant_disabled: bool,
    /// The secret's SHA-256 (never written out).
    pub(crate) digest: Vec<u8>,
    /// The previous secret's, after a rotation (never written out).
    pub(crate) previous_digest: Option<Vec<u8>>,
}

/// The columns [`Key::from_row`] reads, in its order, from `tenant_keys k JOIN tenants t`.
pub(crate) const KEY_COLUMNS: &str = "k.id, k.tenant, k.name, k.prefix, k.limits, \
     k.allowed_models, k.created_at, k.expires_at, k.rotated_at, k.previous_expires_at, \
     k.revoked_at, t.disabled_at IS NOT NULL, k.digest, k.previous_digest";

impl Key {
    /// From a row of [`KEY_COLUMNS`].
    pub(crate) fn from_row(r: &Row) -> Result<Key, tokio_postgres::Error> {
        Ok(Key {
            id: r.try_get(0)?,
            tenant: r.try_get(1)?,
            name: r.try_get(2)?,
            prefix: r.try_get(3)?,
            limits: r.try_get(4)?,
            allowed_models: r.try_get(5)?,
            created_at: r.try_get(6)?,
            expires_at: r.try_get(7)?,
            rotated_at: r.try_get(8)?,
            previous_expires_at: r.try_get(9)?,
            revoked_at: r.try_get(10)?,
            tenant_disabled: r.try_get(11)?,
            digest: r.try_get(12)?,
            previous_digest: r.try_get(13)?,
        })
    }

    /// `key:<tenant>/<name>`.
    pub(crate) fn principal(&self) -> String {
        format!("key:{}/{}", self.tenant, self.name)
    }

    /// `revoked`, `disabled` (its tenant is), `expired`, or `active`, at `now`.
    pub(crate) fn status(&self, now: SystemTime) -> &'static str {
        if self.revoked_at.is_some() {
            "revoked"
        } else if self.tenant_disabled {
            "disabled"
        } else if self.expires_at.is_some_and(|t| t <= now) {
            "expired"
        } else {
            "active"
        }
    }

    /// The management API's Key object (never a secret nor a digest).
    pub(crate) fn json(&self, now: SystemTime) -> Value {
        json!({
            "id": self.id.to_string(),
            "tenant": self.tenant,
            "name": self.name,
            "principal": self.principal(),
            "prefix": self.prefix,
            "limits": self.limits,
            "allowed_models": self.allowed_models,
            "created_at": rfc3339(self.created_at),
            "expires_at": self.expires_at.map(rfc3339),
            "rotated_at": self.rotated_at.map(rfc3339),
            "previous_expires_at": self.previous_expires_at.map(rfc3339),
            "revoked_at": self.revoked_at.map(rfc3339),
            "status": self.status(now),
        })
    }
}
