//! What providers' error mappings share: the message an error carries (the provider's own,
//! redacted, or `HTTP <status>`) with the kind its status implies, and business codes sent as
//! numbers or numeric strings.

use serde_json::Value;

use crate::common::error::UpstreamError;
use crate::upstream::provider::Provider;

/// Status assumed for an error envelope that came with HTTP 200 and a code the adapter does not
/// know: a provider-side failure.
pub(crate) const UNKNOWN_CODE_STATUS: u16 = 500;

/// An error classified by its HTTP status, carrying the provider's `message` (redacted: providers
/// sometimes quote the key back) or, when there is none or it is empty, `HTTP <status>`. Adapters
/// then refine the kind from their native codes.
pub(crate) fn status_error(
    provider: &Provider,
    status: u16,
    message: Option<&str>,
) -> UpstreamError {
    let message = match message.filter(|m| !m.is_empty()) {
        Some(m) => provider.redact(m),
        None => format!("HTTP {status}"),
    };
    UpstreamError::from_status(&provider.name, status, message)
}

/// A business code sent as a number or a numeric string (SiliconFlow and Zhipu send one or the
/// other), as a number; `None` for anything else.
pub(crate) fn numeric_code(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
