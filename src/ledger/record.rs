//! One ledger record: what one finished request was, who asked, what it used and cost. It
//! holds nothing secret: the caller is named as the access line names it (an API key's
//! configured name, a token's subject), never by a credential.

use std::time::SystemTime;

/// What an answer used, as the provider billed it or the gateway counted it (zero when it does
/// not apply to the operation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Tokens (rerank; token-billed speech and image models).
    pub tokens: u64,
    /// Speech input characters.
    pub characters: u64,
    /// Images delivered.
    pub images: u64,
    /// A finer breakdown when there is one (tokens by kind, rerank search units, …), stored as
    /// JSON beside the totals; `None`: none.
    pub detail: Option<serde_json::Value>,
}

/// One finished request.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// When the request finished.
    pub time: SystemTime,
    /// The request's id, when the gateway gave it one.
    pub request_id: Option<String>,
    /// Who asked: an API key's configured name or a token's subject (the access line's
    /// `caller`); `None` for an unauthenticated request.
    pub caller: Option<String>,
    /// The tenant of the caller's key, for a database key (`docs/guide/tenants.md`); `None`
    /// otherwise.
    pub tenant: Option<String>,
    /// The entry point (listener) it came in on.
    pub entry_point: String,
    /// The request path as the access line writes it (a hosted file's id left out).
    pub path: String,
    /// `speech`, `images` or `rerank`, when the request reached an operation.
    pub operation: Option<String>,
    /// The public model asked for.
    pub model: Option<String>,
    /// The provider account that answered (the last one tried).
    pub provider: Option<String>,
    /// The provider's own name of the model.
    pub native_model: Option<String>,
    /// What the answer used.
    pub usage: Usage,
    /// The cost in billionths of `currency` (nano-units, as prices are kept: 1 USD =
    /// 1,000,000,000); `None`: not known.
    pub cost_nanos: Option<i64>,
    /// ISO 4217 code of the cost (`USD`, `CNY`).
    pub currency: Option<String>,
    /// Where the cost came from (`provider` usage, the gateway's own `counted` usage, `unpriced`).
    pub cost_basis: Option<String>,
    /// The HTTP status answered.
    pub status: u16,
    /// Attempts sent to providers (retries and failovers included).
    pub attempts: u32,
    /// The trace the request belonged to, when tracing is on.
    pub trace_id: Option<String>,
    /// What the response cache did (`hit`, `collapsed`, `miss`, `bypass`); `None`: the model is
    /// not cached. A `hit` or `collapsed` request cost nothing upstream.
    pub cache: Option<String>,
}

impl Record {
    /// A record of a request finished now with `status`, everything else empty: the fields are
    /// public, set the ones known.
    pub fn new(entry_point: &str, path: &str, status: u16) -> Record {
        Record {
            time: SystemTime::now(),
            request_id: None,
            caller: None,
            tenant: None,
            entry_point: entry_point.to_string(),
            path: path.to_string(),
            operation: None,
            model: None,
            provider: None,
            native_model: None,
            usage: Usage::default(),
            cost_nanos: None,
            currency: None,
            cost_basis: None,
            status,
            attempts: 0,
            trace_id: None,
            cache: None,
        }
    }
}
