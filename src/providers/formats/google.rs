//! Google APIs' error body (Cloud Text-to-Speech, the Gemini API): `{"error": {"code", "message",
//! "status", "details"}}`, or (from some front ends) a list holding one such envelope, and the
//! classification every Google adapter shares. Each adapter then refines the kind from the
//! `status` name where its API gives one a meaning of its own.

use serde::Deserialize;

use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::upstream::provider::Provider;

/// Google's error body: one envelope, or a list holding one. The list is tried first because
/// serde would also read a list as the envelope's fields in order.
#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorBody {
    Many(Vec<ErrorEnvelope>),
    One(ErrorEnvelope),
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorDetail,
}

/// What a Google error says, as far as adapters read it.
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorDetail {
    /// The human-readable reason (not yet redacted).
    #[serde(default)]
    pub message: String,
    /// The canonical status name (`INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`…).
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    details: Vec<ErrorInfo>,
}

impl ErrorDetail {
    /// Whether Google refused the API key: it answers 400 `INVALID_ARGUMENT` and says why only in
    /// a `google.rpc.ErrorInfo` detail's `reason`.
    pub(crate) fn bad_key(&self) -> bool {
        self.details
            .iter()
            .any(|d| d.reason.as_deref() == Some("API_KEY_INVALID"))
    }
}

/// One entry of `details`; only `google.rpc.ErrorInfo` carries a `reason`.
#[derive(Debug, Deserialize)]
struct ErrorInfo {
    #[serde(default)]
    reason: Option<String>,
}

/// The error for a non-2xx Google answer, classified by its HTTP status and refined by its status
/// name: a refused key and `UNAUTHENTICATED`/`PERMISSION_DENIED` are the operator's credentials,
/// `INVALID_ARGUMENT`/`FAILED_PRECONDITION`/`OUT_OF_RANGE` the request, `RESOURCE_EXHAUSTED` a
/// rate limit. The message is Google's own, redacted (`HTTP <status>` when there is none). The
/// parsed detail is returned too, for the adapter's own refinements.
pub(crate) fn classify(
    provider: &Provider,
    status: u16,
    body: &[u8],
) -> (UpstreamError, Option<ErrorDetail>) {
    let detail = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody::One(e)) => Some(e.error),
        Ok(ErrorBody::Many(list)) => list.into_iter().next().map(|e| e.error),
        Err(_) => None,
    };
    let Some(detail) = detail else {
        return (
            UpstreamError::from_status(&provider.name, status, format!("HTTP {status}")),
            None,
        );
    };
    let message = Some(provider.redact(&detail.message))
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    match detail.status.as_str() {
        _ if detail.bad_key() => err.kind = UpstreamErrorKind::AuthRejected,
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => {
            err.kind = UpstreamErrorKind::InvalidRequest
        }
        "UNAUTHENTICATED" | "PERMISSION_DENIED" => err.kind = UpstreamErrorKind::AuthRejected,
        "RESOURCE_EXHAUSTED" => err.kind = UpstreamErrorKind::RateLimited,
        _ => {}
    }
    (err, Some(detail))
}
