//! The management API's handlers: tenants, keys, the audit trail, the models. Each reads or
//! changes the tables through `tenants::store` (whose changes carry their audit rows) and
//! answers the contract's objects (`openapi/admin_openapi.json`). A secret is in an answer only
//! where a key is made or rotated, and never in a log line or an audit row.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use uuid::Uuid;

use super::admin::{AdminApp, Answer, Request};
use super::admin_error::ApiError;
use crate::tenants::{input, secret, store::Actor};

/// A query's value for `name` (percent-decoded).
pub(crate) fn query_value(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| super::metrics::decode(v))
    })
}

fn actor(req: &Request<'_>) -> Actor {
    Actor {
        admin: req.admin.name.clone(),
        from: req.from.map(|ip| ip.to_string()),
    }
}

fn key_id(req: &Request<'_>) -> Result<Uuid, ApiError> {
    req.params
        .first()
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or_else(|| ApiError::not_found("key"))
}

fn param<'a>(req: &'a Request<'_>) -> &'a str {
    req.params.first().copied().unwrap_or_default()
}

impl AdminApp {
    /// The catalog's public model names (what `allowed_models` may name).
    fn model_names(&self) -> Vec<String> {
        let settings = self.state.settings();
        settings
            .catalog
            .models()
            .iter()
            .map(|m| m.name.clone())
            .collect()
    }

    /// The route `template` (with `method`) for `req`.
    pub(super) async fn handle(&self, method: &str, template: &str, req: &Request<'_>) -> Answer {
        match (method, template.trim_start_matches("/admin/v1/")) {
            ("GET", "whoami") => Ok((200, json!({"admin": req.admin.name, "via": req.admin.via}))),
            ("GET", "models") => Ok((200, json!({"data": self.models()}))),
            ("GET", "audit") => self.audit(req).await,
            ("GET", "spend") => self.spend(req).await,
            (_, t) if t.starts_with("tenants") => self.tenants(method, req).await,
            (_, t) if t.starts_with("keys/{id}/") => self.key_action(t, req).await,
            (_, t) if t.starts_with("keys") => self.keys(method, req).await,
            _ => Err(ApiError::new(404, "not_found", "no such endpoint")),
        }
    }

    async fn tenants(&self, method: &str, req: &Request<'_>) -> Answer {
        let db = &self.db;
        let t = &db.tables;
        let fail = |e| ApiError::from_store(e, "tenant");
        let models = self.model_names();
        let mut c = db.conn().await.map_err(fail)?;
        let (status, tenant) = match (method, req.params.is_empty()) {
            ("GET", true) => {
                let all = t.tenants(&c).await.map_err(fail)?;
                return Ok((
                    200,
                    json!({"data": all.iter().map(|t| t.json()).collect::<Vec<_>>()}),
                ));
            }
            ("POST", true) => {
                let new = input::new_tenant(&req.body, &models).map_err(ApiError::invalid)?;
                (201, t.create_tenant(&mut c, &actor(req), new).await)
            }
            ("GET", false) => (200, t.tenant(&c, param(req)).await),
            ("PATCH", false) => {
                let patch = input::tenant_patch(&req.body, &models).map_err(ApiError::invalid)?;
                (
                    200,
                    t.update_tenant(&mut c, &actor(req), param(req), patch)
                        .await,
                )
            }
            _ => (200, t.disable_tenant(&mut c, &actor(req), param(req)).await),
        };
        Ok((status, tenant.map_err(fail)?.json()))
    }

    async fn keys(&self, method: &str, req: &Request<'_>) -> Answer {
        let db = &self.db;
        let t = &db.tables;
        let fail = |e| ApiError::from_store(e, "key");
        let now = SystemTime::now();
        let models = self.model_names();
        if method == "POST" && req.params.is_empty() {
            let new = input::new_key(&req.body, &models, now).map_err(ApiError::invalid)?;
            let made = secret::generate();
            let mut c = db.conn().await.map_err(fail)?;
            let key = t
                .create_key(&mut c, &actor(req), new, &made)
                .await
                .map_err(fail)?;
            let mut body = key.json(now);
            body["secret"] = json!(made.text);
            return Ok((201, body));
        }
        if method == "GET" && req.params.is_empty() {
            let tenant = query_value(req.query, "tenant");
            let c = db.conn().await.map_err(fail)?;
            let all = t.keys(&c, tenant.as_deref()).await.map_err(fail)?;
            return Ok((
                200,
                json!({"data": all.iter().map(|k| k.json(now)).collect::<Vec<_>>()}),
            ));
        }
        let id = key_id(req)?;
        let mut c = db.conn().await.map_err(fail)?;
        let key = match method {
            "GET" => t.key(&c, id).await,
            "PATCH" => {
                let patch = input::key_patch(&req.body, &models, now).map_err(ApiError::invalid)?;
                t.update_key(&mut c, &actor(req), id, patch).await
            }
            _ => t.revoke_key(&mut c, &actor(req), id).await,
        };
        Ok((200, key.map_err(fail)?.json(now)))
    }

    /// `POST /admin/v1/keys/{id}/rotate` and `/revoke`.
    async fn key_action(&self, template: &str, req: &Request<'_>) -> Answer {
        let db = &self.db;
        let fail = |e| ApiError::from_store(e, "key");
        let id = key_id(req)?;
        let now = SystemTime::now();
        if template.ends_with("/revoke") {
            let mut c = db.conn().await.map_err(fail)?;
            let key = db
                .tables
                .revoke_key(&mut c, &actor(req), id)
                .await
                .map_err(fail)?;
            return Ok((200, key.json(now)));
        }
        let overlap = input::rotate_overlap(&req.body).map_err(ApiError::invalid)?;
        let made = secret::generate();
        let mut c = db.conn().await.map_err(fail)?;
        let key = db
            .tables
            .rotate_key(&mut c, &actor(req), id, Duration::from_secs(overlap), &made)
            .await
            .map_err(fail)?;
        let mut body = key.json(now);
        body["secret"] = json!(made.text);
        Ok((200, body))
    }

    /// `GET /admin/v1/audit?limit=N` (1 to 1000, default 100), newest first.
    async fn audit(&self, req: &Request<'_>) -> Answer {
        let limit = match query_value(req.query, "limit") {
            None => 100,
            Some(v) => match v.parse::<i64>() {
                Ok(n) if (1..=1000).contains(&n) => n,
                _ => {
                    let details = [(
                        "limit".to_string(),
                        "must be a whole number from 1 to 1000".to_string(),
                    )];
                    return Err(ApiError::invalid(details.into()));
                }
            },
        };
        let fail = |e| ApiError::from_store(e, "audit row");
        let c = self.db.conn().await.map_err(fail)?;
        let rows = self.db.tables.audit(&c, limit).await.map_err(fail)?;
        Ok((200, json!({"data": rows})))
    }

    /// The catalog's models with their targets' health and lifecycle.
    fn models(&self) -> Vec<Value> {
        let settings = self.state.settings();
        let health = &self.state.upstream.health;
        let now = health.now_ms();
        let models = settings.catalog.models();
        models
            .iter()
            .map(|m| {
                let targets: Vec<Value> = m
                    .targets
                    .iter()
                    .map(|t| {
                        let cell = t.health(health);
                        let l = t.lifecycle.as_deref();
                        let lifecycle = json!({
                            "deprecated_at": l.and_then(|l| l.deprecated).map(|d| d.to_string()),
                            "shutdown_at": l.and_then(|l| l.shutdown).map(|d| d.to_string()),
                            "replacement": l.and_then(|l| l.replacement.first()),
                        });
                        json!({
                            "provider": t.provider.name,
                            "native_model": t.native_model,
                            "healthy": !cell.retired() && cell.ejected_until() <= now,
                            "lifecycle": lifecycle,
                        })
                    })
                    .collect();
                json!({"id": m.name, "operation": m.operation().as_str(), "targets": targets})
            })
            .collect()
    }
}
