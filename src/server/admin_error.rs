//! The management API's error answers, in the public API's shape: `{"code","message"}`, with
//! `details` (field → text) on a 400 `validation_error`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::tenants::store::StoreError;

/// An error answer.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: u16,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) details: Option<BTreeMap<String, String>>,
}

impl ApiError {
    pub(crate) fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    /// `404 not_found`.
    pub(crate) fn not_found(what: &str) -> ApiError {
        ApiError::new(404, "not_found", format!("no such {what}"))
    }

    /// `400 validation_error` with its details.
    pub(crate) fn invalid(details: BTreeMap<String, String>) -> ApiError {
        ApiError {
            details: Some(details),
            ..ApiError::new(400, "validation_error", "request validation failed")
        }
    }

    /// `503 database_unavailable`; the cause is logged, not shown.
    pub(crate) fn database(cause: &str) -> ApiError {
        log::warn!("management API: the database failed: {cause}");
        ApiError::new(
            503,
            "database_unavailable",
            "the tenants' database cannot be reached; retry later",
        )
    }

    /// The answer's body.
    pub(crate) fn body(&self) -> Value {
        let mut body = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.details {
            body["details"] = json!(d);
        }
        body
    }

    /// A store's refusal, `what` naming the thing looked for (`tenant`, `key`).
    pub(crate) fn from_store(e: StoreError, what: &str) -> ApiError {
        match e {
            StoreError::NotFound => ApiError::not_found(what),
            StoreError::Conflict(text) => ApiError::new(409, "conflict", text),
            StoreError::Invalid(details) => ApiError::invalid(details),
            StoreError::Db(cause) => ApiError::database(&cause),
        }
    }
}
