//! Reading and changing the tenants' tables. Each change is one transaction holding the change,
//! its audit row (`admin_audit`: who, what, on what, from where, a detail without secrets) and
//! its `NOTIFY` on the schema's channel, so a change every instance hears of is always one that
//! was committed, and one committed is always heard of (by a listening instance) or read at the
//! next full refresh.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Transaction};
use uuid::Uuid;

use super::input::{Details, KeyPatch, NewKey, NewTenant, TenantPatch};
use super::model::{Key, Tenant, KEY_COLUMNS, TENANT_COLUMNS};
use super::secret::Secret;

/// Why a read or change did not happen.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// No such tenant or key (404).
    NotFound,
    /// The name is taken, or the change contradicts the row's state (409).
    Conflict(String),
    /// A field refers to something that is not there (400, by field).
    Invalid(Details),
    /// The database failed or is away (503); the text is the driver's, credentials blanked.
    Db(String),
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
            StoreError::Conflict("the name is taken".into())
        } else {
            StoreError::Db(crate::ledger::db::clean(&e))
        }
    }
}

/// Who changes something, and from where (for the audit row).
#[derive(Debug, Clone)]
pub(crate) struct Actor {
    /// The administrator's name (an admin key's, or a token's `sub`).
    pub(crate) admin: String,
    /// The client's IP address.
    pub(crate) from: Option<String>,
}

/// The tables of one schema.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    pub(crate) schema: String,
}

type Result<T> = std::result::Result<T, StoreError>;

impl Tables {
    /// Every tenant, by name.
    pub(crate) async fn tenants(&self, c: &Client) -> Result<Vec<Tenant>> {
        let sql = format!(
            "SELECT {TENANT_COLUMNS} FROM {}.tenants ORDER BY name",
            self.schema
        );
        let rows = c.query(&sql, &[]).await?;
        Ok(rows
            .iter()
            .map(Tenant::from_row)
            .collect::<std::result::Result<_, _>>()?)
    }

    /// One tenant.
    pub(crate) async fn tenant(&self, c: &Client, name: &str) -> Result<Tenant> {
        let sql = format!(
            "SELECT {TENANT_COLUMNS} FROM {}.tenants WHERE name = $1",
            self.schema
        );
        let row = c
            .query_opt(&sql, &[&name])
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok(Tenant::from_row(&row)?)
    }

    /// Every key (of `tenant`, when given), oldest first.
    pub(crate) async fn keys(&self, c: &Client, tenant: Option<&str>) -> Result<Vec<Key>> {
        let sql = format!(
            "SELECT {KEY_COLUMNS} FROM {s}.tenant_keys k JOIN {s}.tenants t ON t.name = k.tenant \
             WHERE ($1::text IS NULL OR k.tenant = $1) ORDER BY k.created_at, k.id",
            s = self.schema
        );
        let rows = c.query(&sql, &[&tenant]).await?;
        Ok(rows
            .iter()
            .map(Key::from_row)
            .collect::<std::result::Result<_, _>>()?)
    }

    /// One key.
    pub(crate) async fn key(&self, c: &Client, id: Uuid) -> Result<Key> {
        let sql = format!(
            "SELECT {KEY_COLUMNS} FROM {s}.tenant_keys k JOIN {s}.tenants t ON t.name = k.tenant \
             WHERE k.id = $1",
            s = self.schema
        );
        let row = c
            .query_opt(&sql, &[&id])
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok(Key::from_row(&row)?)
    }

    /// The audit trail, newest first: at most `limit` rows.
    pub(crate) async fn audit(&self, c: &Client, limit: i64) -> Result<Vec<Value>> {
        let sql = format!(
            "SELECT at, admin, action, target, from_ip, detail FROM {}.admin_audit \
             ORDER BY at DESC, id DESC LIMIT $1",
            self.schema
        );
        let rows = c.query(&sql, &[&limit]).await?;
        rows.iter()
            .map(|r| {
                Ok(json!({
                    "at": super::time::rfc3339(r.try_get(0)?),
                    "admin": r.try_get::<_, String>(1)?,
                    "action": r.try_get::<_, String>(2)?,
                    "target": r.try_get::<_, String>(3)?,
                    "from": r.try_get::<_, Option<String>>(4)?,
                    "detail": r.try_get::<_, Value>(5)?,
                }))
            })
            .collect()
    }

    /// The change's audit row and its `NOTIFY`, then the commit.
    async fn finish(
        &self,
        tx: Transaction<'_>,
        actor: &Actor,
        (action, target): (&str, &str),
        detail: Value,
    ) -> Result<()> {
        let sql = format!(
            "INSERT INTO {}.admin_audit (at, admin, action, target, from_ip, detail) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            self.schema
        );
        let at = SystemTime::now();
        tx.execute(
            &sql,
            &[&at, &actor.admin, &action, &target, &actor.from, &detail],
        )
        .await?;
        let channel = super::channel(&self.schema);
        tx.execute("SELECT pg_notify($1, $2)", &[&channel, &action])
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Create a tenant (409 when the name is taken).
    pub(crate) async fn create_tenant(
        &self,
        c: &mut Client,
        actor: &Actor,
        t: NewTenant,
    ) -> Result<Tenant> {
        let tx = c.transaction().await?;
        let now = SystemTime::now();
        let sql = format!(
            "INSERT INTO {}.tenants (name, description, limits, allowed_models, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (name) DO NOTHING",
            self.schema
        );
        let added = tx
            .execute(
                &sql,
                &[&t.name, &t.description, &t.limits, &t.allowed_models, &now],
            )
            .await?;
        if added == 0 {
            return Err(StoreError::Conflict(format!("tenant `{}` exists", t.name)));
        }
        let detail = json!({"description": t.description, "limits": t.limits, "allowed_models": t.allowed_models});
        self.finish(tx, actor, ("tenant.create", &t.name), detail)
            .await?;
        self.tenant(c, &t.name).await
    }

    /// Change a tenant's description, limits or allowed models.
    pub(crate) async fn update_tenant(
        &self,
        c: &mut Client,
        actor: &Actor,
        name: &str,
        p: TenantPatch,
    ) -> Result<Tenant> {
        let tx = c.transaction().await?;
        let sql = format!(
            "UPDATE {}.tenants SET \
             description = CASE WHEN $2 THEN $3 ELSE description END, \
             limits = CASE WHEN $4 THEN $5 ELSE limits END, \
             allowed_models = CASE WHEN $6 THEN $7 ELSE allowed_models END, \
             updated_at = $8 WHERE name = $1",
            self.schema
        );
        let (limits, models) = (
            p.limits.clone().flatten(),
            p.allowed_models.clone().flatten(),
        );
        let changed = tx
            .execute(
                &sql,
                &[
                    &name,
                    &p.description.is_some(),
                    &p.description.clone().unwrap_or_default(),
                    &p.limits.is_some(),
                    &limits,
                    &p.allowed_models.is_some(),
                    &models,
                    &SystemTime::now(),
                ],
            )
            .await?;
        if changed == 0 {
            return Err(StoreError::NotFound);
        }
        let mut detail = serde_json::Map::new();
        if let Some(d) = &p.description {
            detail.insert("description".into(), json!(d));
        }
        if p.limits.is_some() {
            detail.insert("limits".into(), json!(limits));
        }
        if p.allowed_models.is_some() {
            detail.insert("allowed_models".into(), json!(models));
        }
        self.finish(tx, actor, ("tenant.update", name), Value::Object(detail))
            .await?;
        self.tenant(c, name).await
    }

    /// Disable a tenant (its keys stop working; its rows stay, the ledger names it).
    pub(crate) async fn disable_tenant(
        &self,
        c: &mut Client,
        actor: &Actor,
        name: &str,
    ) -> Result<Tenant> {
        let tx = c.transaction().await?;
        let sql = format!(
            "UPDATE {}.tenants SET disabled_at = COALESCE(disabled_at, $2), updated_at = $2 \
             WHERE name = $1",
            self.schema
        );
        if tx.execute(&sql, &[&name, &SystemTime::now()]).await? == 0 {
            return Err(StoreError::NotFound);
        }
        self.finish(tx, actor, ("tenant.disable", name), json!({}))
            .await?;
        self.tenant(c, name).await
    }

    /// Create a key of an existing, enabled tenant with `secret` (409 when the tenant has a key
    /// of that name).
    pub(crate) async fn create_key(
        &self,
        c: &mut Client,
        actor: &Actor,
        k: NewKey,
        secret: &Secret,
    ) -> Result<Key> {
        let tx = c.transaction().await?;
        let sql = format!(
            "SELECT disabled_at IS NOT NULL FROM {}.tenants WHERE name = $1",
            self.schema
        );
        let disabled: Option<bool> = tx.query_opt(&sql, &[&k.tenant]).await?.map(|r| r.get(0));
        let refuse = |text: &str| {
            StoreError::Invalid(Details::from([("tenant".to_string(), text.to_string())]))
        };
        match disabled {
            None => return Err(refuse("no such tenant")),
            Some(true) => return Err(refuse("the tenant is disabled")),
            Some(false) => {}
        }
        let id = Uuid::new_v4();
        let sql = format!(
            "INSERT INTO {}.tenant_keys (id, tenant, name, digest, prefix, limits, \
             allowed_models, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            self.schema
        );
        let digest = secret.digest.to_vec();
        let now = SystemTime::now();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
            &id,
            &k.tenant,
            &k.name,
            &digest,
            &secret.prefix,
            &k.limits,
            &k.allowed_models,
            &now,
            &k.expires_at,
        ];
        tx.execute(&sql, &params)
            .await
            .map_err(|e| match StoreError::from(e) {
                StoreError::Conflict(_) => StoreError::Conflict(format!(
                    "tenant `{}` has a key named `{}`",
                    k.tenant, k.name
                )),
                other => other,
            })?;
        let detail = json!({
            "tenant": k.tenant, "name": k.name, "prefix": secret.prefix, "limits": k.limits,
            "allowed_models": k.allowed_models, "expires_at": k.expires_at.map(super::time::rfc3339),
        });
        self.finish(tx, actor, ("key.create", &id.to_string()), detail)
            .await?;
        self.key(c, id).await
    }

    /// Change a key's limits, allowed models or expiry.
    pub(crate) async fn update_key(
        &self,
        c: &mut Client,
        actor: &Actor,
        id: Uuid,
        p: KeyPatch,
    ) -> Result<Key> {
        let tx = c.transaction().await?;
        let sql = format!(
            "UPDATE {}.tenant_keys SET \
             limits = CASE WHEN $2 THEN $3 ELSE limits END, \
             allowed_models = CASE WHEN $4 THEN $5 ELSE allowed_models END, \
             expires_at = CASE WHEN $6 THEN $7 ELSE expires_at END WHERE id = $1",
            self.schema
        );
        let limits = p.limits.clone().flatten();
        let models = p.allowed_models.clone().flatten();
        let expires = p.expires_at.flatten();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
            &id,
            &p.limits.is_some(),
            &limits,
            &p.allowed_models.is_some(),
            &models,
            &p.expires_at.is_some(),
            &expires,
        ];
        if tx.execute(&sql, &params).await? == 0 {
            return Err(StoreError::NotFound);
        }
        let mut detail = serde_json::Map::new();
        if p.limits.is_some() {
            detail.insert("limits".into(), json!(limits));
        }
        if p.allowed_models.is_some() {
            detail.insert("allowed_models".into(), json!(models));
        }
        if p.expires_at.is_some() {
            detail.insert(
                "expires_at".into(),
                json!(expires.map(super::time::rfc3339)),
            );
        }
        self.finish(
            tx,
            actor,
            ("key.update", &id.to_string()),
            Value::Object(detail),
        )
        .await?;
        self.key(c, id).await
    }

    /// Give a key `secret`; its current secret keeps working for `overlap` (409 for a revoked
    /// key).
    pub(crate) async fn rotate_key(
        &self,
        c: &mut Client,
        actor: &Actor,
        id: Uuid,
        overlap: Duration,
        secret: &Secret,
    ) -> Result<Key> {
        let tx = c.transaction().await?;
        let now = SystemTime::now();
        let until = now + overlap;
        let sql = format!(
            "UPDATE {}.tenant_keys SET previous_digest = CASE WHEN $4::bool THEN digest END, \
             previous_expires_at = CASE WHEN $4::bool THEN $3::timestamptz END, digest = $2, prefix = $5, \
             rotated_at = $6 WHERE id = $1 AND revoked_at IS NULL",
            self.schema
        );
        let digest = secret.digest.to_vec();
        let keep = !overlap.is_zero();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
            [&id, &digest, &until, &keep, &secret.prefix, &now];
        if tx.execute(&sql, &params).await? == 0 {
            drop(tx);
            self.key(c, id).await?;
            return Err(StoreError::Conflict("the key is revoked".into()));
        }
        let detail = json!({"overlap_seconds": overlap.as_secs(), "prefix": secret.prefix});
        self.finish(tx, actor, ("key.rotate", &id.to_string()), detail)
            .await?;
        self.key(c, id).await
    }

    /// Revoke a key: both its secrets stop working (a revoked key stays revoked).
    pub(crate) async fn revoke_key(&self, c: &mut Client, actor: &Actor, id: Uuid) -> Result<Key> {
        let tx = c.transaction().await?;
        let sql = format!(
            "UPDATE {}.tenant_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
            self.schema
        );
        if tx.execute(&sql, &[&id, &SystemTime::now()]).await? == 0 {
            return Err(StoreError::NotFound);
        }
        self.finish(tx, actor, ("key.revoke", &id.to_string()), json!({}))
            .await?;
        self.key(c, id).await
    }

    /// Everything the request path's snapshot is made of: enabled tenants, and their keys that
    /// are not revoked.
    pub(crate) async fn usable(&self, c: &Client) -> Result<(Vec<Tenant>, Vec<Key>)> {
        let sql = format!(
            "SELECT {TENANT_COLUMNS} FROM {}.tenants WHERE disabled_at IS NULL",
            self.schema
        );
        let tenants = c.query(&sql, &[]).await?;
        let sql = format!(
            "SELECT {KEY_COLUMNS} FROM {s}.tenant_keys k JOIN {s}.tenants t ON t.name = k.tenant \
             WHERE k.revoked_at IS NULL AND t.disabled_at IS NULL",
            s = self.schema
        );
        let keys = c.query(&sql, &[]).await?;
        Ok((
            tenants
                .iter()
                .map(Tenant::from_row)
                .collect::<std::result::Result<_, _>>()?,
            keys.iter()
                .map(Key::from_row)
                .collect::<std::result::Result<_, _>>()?,
        ))
    }
}
