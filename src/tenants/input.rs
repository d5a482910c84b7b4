//! The management API's request bodies, checked into what the store takes. Every problem is
//! named by its field (`details`, the 400 `validation_error`'s), all of them at once.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Map, Value};

use crate::auth::limits::LimitSet;

/// Problems by field.
pub(crate) type Details = BTreeMap<String, String>;

/// `POST /admin/v1/tenants`.
#[derive(Debug)]
pub(crate) struct NewTenant {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) limits: Option<Value>,
    pub(crate) allowed_models: Option<Vec<String>>,
}

/// `PATCH /admin/v1/tenants/{name}`: each field given is set (`Some(None)`: cleared).
#[derive(Debug, Default)]
pub(crate) struct TenantPatch {
    pub(crate) description: Option<String>,
    pub(crate) limits: Option<Option<Value>>,
    pub(crate) allowed_models: Option<Option<Vec<String>>>,
}

/// `POST /admin/v1/keys`.
#[derive(Debug)]
pub(crate) struct NewKey {
    pub(crate) tenant: String,
    pub(crate) name: String,
    pub(crate) limits: Option<Value>,
    pub(crate) allowed_models: Option<Vec<String>>,
    pub(crate) expires_at: Option<SystemTime>,
}

/// `PATCH /admin/v1/keys/{id}`: each field given is set (`Some(None)`: cleared).
#[derive(Debug, Default)]
pub(crate) struct KeyPatch {
    pub(crate) limits: Option<Option<Value>>,
    pub(crate) allowed_models: Option<Option<Vec<String>>>,
    pub(crate) expires_at: Option<Option<SystemTime>>,
}

/// The longest overlap a rotation may ask for: 30 days.
const MAX_OVERLAP_SECONDS: u64 = 30 * 86_400;

/// Whether `name` is a tenant's or key's name: `[a-z0-9][a-z0-9_-]{0,62}`.
pub(crate) fn is_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// A body as a JSON object, its fields checked against `known` as they are read.
struct Body<'a> {
    fields: Map<String, Value>,
    details: Details,
    models: &'a [String],
}

impl<'a> Body<'a> {
    /// `body` as an object (empty: `{}` when `empty_ok`); the problem otherwise.
    fn read(
        body: &[u8],
        known: &[&str],
        models: &'a [String],
        empty_ok: bool,
    ) -> Result<Self, Details> {
        let mut details = Details::new();
        let fields = match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => m,
            _ if empty_ok && body.iter().all(u8::is_ascii_whitespace) => Map::new(),
            Ok(_) => {
                details.insert("body".into(), "must be a JSON object".into());
                return Err(details);
            }
            Err(e) => {
                details.insert("body".into(), format!("not JSON: {e}"));
                return Err(details);
            }
        };
        for k in fields.keys().filter(|k| !known.contains(&k.as_str())) {
            details.insert(
                k.clone(),
                format!("unknown field; fields here: {}", known.join(", ")),
            );
        }
        Ok(Body {
            fields,
            details,
            models,
        })
    }

    fn problem(&mut self, field: &str, text: impl Into<String>) {
        self.details.insert(field.to_string(), text.into());
    }

    /// A required name field.
    fn name(&mut self, field: &str) -> String {
        match self.fields.get(field) {
            Some(Value::String(s)) if is_name(s) => s.clone(),
            Some(Value::String(_)) => {
                self.problem(field, "must match [a-z0-9][a-z0-9_-]{0,62}");
                String::new()
            }
            Some(_) => {
                self.problem(field, "must be a string");
                String::new()
            }
            None => {
                self.problem(field, "is required");
                String::new()
            }
        }
    }

    /// An optional string (`Some` when given).
    fn text(&mut self, field: &str, max: usize) -> Option<String> {
        match self.fields.get(field)? {
            Value::String(s) if s.chars().count() <= max => Some(s.clone()),
            Value::String(_) => {
                self.problem(field, format!("at most {max} characters"));
                None
            }
            Value::Null => Some(String::new()),
            _ => {
                self.problem(field, "must be a string");
                None
            }
        }
    }

    /// `limits` when given: `Some(None)` for `null`, the stored shape otherwise.
    fn limits(&mut self) -> Option<Option<Value>> {
        match self.fields.get("limits")? {
            Value::Null => Some(None),
            v @ Value::Object(_) => match LimitSet::from_json(v, "limits") {
                Ok(set) if set.is_empty() => Some(None),
                Ok(set) => Some(Some(set.to_json())),
                Err(e) => {
                    self.problem("limits", e);
                    None
                }
            },
            _ => {
                self.problem("limits", "must be an object (or null: no limits)");
                None
            }
        }
    }

    /// `allowed_models` when given: `Some(None)` for `null` (every model).
    fn allowed_models(&mut self) -> Option<Option<Vec<String>>> {
        let field = "allowed_models";
        let list = match self.fields.get(field)? {
            Value::Null => return Some(None),
            Value::Array(items) => items.clone(),
            _ => {
                self.problem(
                    field,
                    "must be an array of model names (or null: every model)",
                );
                return None;
            }
        };
        let mut names = Vec::new();
        for item in list {
            match item {
                Value::String(m) if self.models.contains(&m) => names.push(m),
                Value::String(m) => {
                    let known = self.models.join(", ");
                    self.problem(field, format!("unknown model `{m}`; models: {known}"));
                    return None;
                }
                _ => {
                    self.problem(field, "must be an array of model names");
                    return None;
                }
            }
        }
        names.dedup();
        Some(Some(names))
    }

    /// `expires_at` when given: `Some(None)` for `null`; a time in the past is refused.
    fn expires_at(&mut self, now: SystemTime) -> Option<Option<SystemTime>> {
        match self.fields.get("expires_at")? {
            Value::Null => Some(None),
            Value::String(s) => match super::time::parse_rfc3339(s) {
                Some(t) if t > now => Some(Some(t)),
                Some(_) => {
                    self.problem("expires_at", "must be in the future");
                    None
                }
                None => {
                    self.problem(
                        "expires_at",
                        "must be an RFC 3339 time (2026-12-31T00:00:00Z)",
                    );
                    None
                }
            },
            _ => {
                self.problem("expires_at", "must be an RFC 3339 time string (or null)");
                None
            }
        }
    }

    fn done<T>(self, value: T) -> Result<T, Details> {
        if self.details.is_empty() {
            Ok(value)
        } else {
            Err(self.details)
        }
    }
}

/// `POST /admin/v1/tenants`'s body; `models`: the catalog's public models.
pub(crate) fn new_tenant(body: &[u8], models: &[String]) -> Result<NewTenant, Details> {
    let known = ["name", "description", "limits", "allowed_models"];
    let mut b = Body::read(body, &known, models, false)?;
    let name = b.name("name");
    let description = b.text("description", 1000).unwrap_or_default();
    let limits = b.limits().flatten();
    let allowed_models = b.allowed_models().flatten();
    b.done(NewTenant {
        name,
        description,
        limits,
        allowed_models,
    })
}

/// `PATCH /admin/v1/tenants/{name}`'s body.
pub(crate) fn tenant_patch(body: &[u8], models: &[String]) -> Result<TenantPatch, Details> {
    let known = ["description", "limits", "allowed_models"];
    let mut b = Body::read(body, &known, models, false)?;
    let patch = TenantPatch {
        description: b.text("description", 1000),
        limits: b.limits(),
        allowed_models: b.allowed_models(),
    };
    b.done(patch)
}

/// `POST /admin/v1/keys`'s body.
pub(crate) fn new_key(body: &[u8], models: &[String], now: SystemTime) -> Result<NewKey, Details> {
    let known = ["tenant", "name", "limits", "allowed_models", "expires_at"];
    let mut b = Body::read(body, &known, models, false)?;
    let tenant = b.name("tenant");
    let name = b.name("name");
    let limits = b.limits().flatten();
    let allowed_models = b.allowed_models().flatten();
    let expires_at = b.expires_at(now).flatten();
    b.done(NewKey {
        tenant,
        name,
        limits,
        allowed_models,
        expires_at,
    })
}

/// `PATCH /admin/v1/keys/{id}`'s body.
pub(crate) fn key_patch(
    body: &[u8],
    models: &[String],
    now: SystemTime,
) -> Result<KeyPatch, Details> {
    let known = ["limits", "allowed_models", "expires_at"];
    let mut b = Body::read(body, &known, models, false)?;
    let patch = KeyPatch {
        limits: b.limits(),
        allowed_models: b.allowed_models(),
        expires_at: b.expires_at(now),
    };
    b.done(patch)
}

/// `POST /admin/v1/keys/{id}/rotate`'s body (may be empty): the overlap in seconds, default 3600.
pub(crate) fn rotate_overlap(body: &[u8]) -> Result<u64, Details> {
    let mut b = Body::read(body, &["overlap_seconds"], &[], true)?;
    let overlap = match b.fields.get("overlap_seconds") {
        None | Some(Value::Null) => 3600,
        Some(v) => match v.as_u64() {
            Some(n) if n <= MAX_OVERLAP_SECONDS => n,
            _ => {
                b.problem(
                    "overlap_seconds",
                    format!("must be a whole number of seconds from 0 to {MAX_OVERLAP_SECONDS}"),
                );
                0
            }
        },
    };
    b.done(overlap)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn models() -> Vec<String> {
        vec!["tts-1".into(), "rerank-v3.5".into()]
    }

    #[test]
    fn names_follow_the_contract() {
        assert!(is_name("team-a"));
        assert!(is_name("0_x"));
        for bad in ["", "-a", "Team", "a b", &"a".repeat(64)] {
            assert!(!is_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_tenant_body_is_checked_field_by_field() {
        let t = new_tenant(
            br#"{"name":"team-a","limits":{"requests_per_minute":5,"budget":{"currency":"USD","per_day":"5.00"}},"allowed_models":["tts-1"]}"#,
            &models(),
        )
        .unwrap();
        assert_eq!(t.name, "team-a");
        assert_eq!(t.limits.as_ref().unwrap()["budget"]["per_day"], "5");
        assert_eq!(t.allowed_models, Some(vec!["tts-1".to_string()]));
        let e = new_tenant(
            br#"{"name":"Team A","limits":{"requests_per_minute":0},"allowed_models":["nope"],"color":1}"#,
            &models(),
        )
        .unwrap_err();
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e["limits"].contains("requests_per_minute"), "{e:?}");
        assert!(e["allowed_models"].contains("nope"));
        assert!(e["color"].contains("unknown field"));
        assert!(new_tenant(b"[1]", &models())
            .unwrap_err()
            .contains_key("body"));
    }

    #[test]
    fn a_key_patch_sets_and_clears() {
        let now = SystemTime::now();
        let p = key_patch(br#"{"limits":null,"expires_at":null}"#, &models(), now).unwrap();
        assert_eq!(p.limits, Some(None));
        assert_eq!(p.expires_at, Some(None));
        assert!(p.allowed_models.is_none());
        let e = key_patch(br#"{"expires_at":"2001-01-01T00:00:00Z"}"#, &models(), now).unwrap_err();
        assert_eq!(e["expires_at"], "must be in the future");
    }

    #[test]
    fn a_rotation_takes_an_overlap_or_its_default() {
        assert_eq!(rotate_overlap(b"").unwrap(), 3600);
        assert_eq!(rotate_overlap(br#"{"overlap_seconds":0}"#).unwrap(), 0);
        assert!(rotate_overlap(br#"{"overlap_seconds":-1}"#).is_err());
        assert!(rotate_overlap(br#"{"overlap":1}"#).is_err());
    }
}
