//! The gateway's error model and the one place that turns an error into an HTTP answer.
//!
//! Every failure a request can meet ends as a [`GatewayError`]; [`GatewayError::status`] and
//! [`GatewayError::code`] are the exhaustive mapping to the public Error object
//! (`{"code","message"}`, plus `details` for validation errors and the answer's `request_id`). Provider errors arrive here already
//! translated into [`UpstreamError`], so nothing a provider said is echoed raw.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;

use crate::auth::AuthError;

/// Per-field validation problems, keyed by the field's dotted path.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ValidationErrors {
    details: BTreeMap<String, String>,
}

impl ValidationErrors {
    /// Record a problem with `field`; the first message for a field wins (it is the most specific).
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.details
            .entry(field.into())
            .or_insert_with(|| message.into());
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.details.is_empty()
    }

    /// Whether `field` has a problem recorded.
    pub fn has(&self, field: &str) -> bool {
        self.details.contains_key(field)
    }

    /// Each field's problem, by field.
    pub fn details(&self) -> &BTreeMap<String, String> {
        &self.details
    }

    /// `Ok(())` when nothing was recorded, else the 400 error carrying every problem.
    pub fn into_result(self) -> Result<(), GatewayError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(GatewayError::Validation(self))
        }
    }
}

/// What went wrong talking to a provider, already classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// Could not open a connection (refused, DNS failure, TLS handshake failure, the provider's
    /// certificate refused).
    Connect,
    /// Connecting, writing or waiting for the answer took longer than the provider's timeout.
    Timeout,
    /// The provider limited our rate or quota (HTTP 429 or a native "busy" code).
    RateLimited,
    /// The provider rejected the caller's parameters (its 400/404/422 for the request itself).
    InvalidRequest,
    /// The provider refused the content (moderation / safety system).
    ContentPolicy,
    /// The provider rejected the gateway's own credentials: an operator problem, never the caller's 401.
    AuthRejected,
    /// The provider does not serve the native model the gateway's configuration names (retired,
    /// misspelt, or not enabled for the account). An operator problem: the health table retires
    /// the target (held out for `routing.ejection.retired_cooldown_ms`, the account's other
    /// targets untouched) and the engine moves the request to the model's next target or its
    /// successor, or answers `model_unavailable` naming the public and the native model.
    UnknownModel,
    /// The provider does not know the voice it was sent (retired, misspelt, or not open to the
    /// account). The caller's fault when the caller named the voice (a 400, like
    /// [`InvalidRequest`](Self::InvalidRequest)); the operator's when the gateway filled in the
    /// model's default voice, which the speech path turns into `model_unavailable`
    /// ([`GatewayError::default_voice_refused`]).
    UnknownVoice,
    /// The provider failed (5xx, a native server error code).
    Failure,
    /// The provider answered something we could not understand (bad JSON, missing fields, too large).
    BadResponse,
    /// A 2xx answer that is not the kind of body asked for: an HTML page or a JSON document where
    /// audio was asked, a type that is not the stream's. Such an answer usually comes from
    /// something in front of the API (a proxy's or load balancer's page, a maintenance notice),
    /// not from the API itself, so unlike [`BadResponse`](Self::BadResponse) it is retried; the
    /// caller sees the same `upstream_bad_response` when retries run out.
    WrongAnswer,
}

/// A classified provider error. `message` is safe to show the caller: adapters put only the provider's
/// human-readable reason in it (secrets redacted), never the raw body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamError {
    /// What it means: retried or not, and the caller's answer.
    pub kind: UpstreamErrorKind,
    /// The provider account's name.
    pub provider: String,
    /// The HTTP status the provider answered, when there was one.
    pub status: Option<u16>,
    /// The provider's reason, safe to show the caller (redacted).
    pub message: String,
    /// Provider's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
    /// The TLS handshake failed on the provider's certificate (`kind` is `Connect`). The same
    /// certificate would be refused again, so this account is not retried; another target may be.
    pub certificate_refused: bool,
}

impl UpstreamError {
    /// An error of `kind` from the account `provider`, with no status.
    pub fn new(kind: UpstreamErrorKind, provider: &str, message: impl Into<String>) -> Self {
        UpstreamError {
            kind,
            provider: provider.to_string(),
            status: None,
            message: message.into(),
            retry_after: None,
            certificate_refused: false,
        }
    }

    /// The provider's TLS certificate was refused, for `reason` (expired, unknown issuer…).
    pub fn certificate_refused(provider: &str, reason: impl Into<String>) -> Self {
        let mut e = UpstreamError::new(UpstreamErrorKind::Connect, provider, reason);
        e.certificate_refused = true;
        e
    }

    /// The same error, with the HTTP status the provider answered.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Whether sending the same native request again may succeed (docs/architecture.md, "Retries": connect errors,
    /// timeouts, 429 and 5xx; never other 4xx, nor to a provider whose certificate was refused).
    pub fn retryable(&self) -> bool {
        if self.certificate_refused {
            return false;
        }
        match self.kind {
            UpstreamErrorKind::Connect
            | UpstreamErrorKind::Timeout
            | UpstreamErrorKind::RateLimited
            | UpstreamErrorKind::WrongAnswer => true,
            // A failure the provider reported with a 4xx (quota exhausted, model unknown) repeats.
            UpstreamErrorKind::Failure => self.status.is_none_or(|s| s >= 500),
            UpstreamErrorKind::InvalidRequest
            | UpstreamErrorKind::ContentPolicy
            | UpstreamErrorKind::AuthRejected
            | UpstreamErrorKind::UnknownModel
            | UpstreamErrorKind::UnknownVoice
            | UpstreamErrorKind::BadResponse => false,
        }
    }

    /// Classify an HTTP error status the usual way; adapters refine it from the native body.
    pub fn from_status(provider: &str, status: u16, message: impl Into<String>) -> Self {
        let kind = match status {
            // Payment required (the gateway's account) and not found (a wrong base URL or native
            // model in the gateway's config) are operator problems, not the caller's request; the
            // kept 4xx status keeps them from being retried. A 403 with no more said is the key's
            // (every model of the account would be refused alike); an adapter whose provider
            // refuses one model with a 403 says so in its own map (`UnknownModel`).
            402 | 404 => UpstreamErrorKind::Failure,
            401 | 403 => UpstreamErrorKind::AuthRejected,
            408 | 504 => UpstreamErrorKind::Timeout,
            429 => UpstreamErrorKind::RateLimited,
            400..=499 => UpstreamErrorKind::InvalidRequest,
            _ => UpstreamErrorKind::Failure,
        };
        UpstreamError::new(kind, provider, message).with_status(status)
    }
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(
                f,
                "{} ({:?}, HTTP {s}): {}",
                self.provider, self.kind, self.message
            ),
            None => write!(f, "{} ({:?}): {}", self.provider, self.kind, self.message),
        }
    }
}

/// A caller's own limit (`auth.api_keys[].limits`, `auth.jwt.limits`) refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRefusal {
    /// The limit's name in the config: `requests_per_minute`, `concurrent`, `tokens_per_day`...
    pub limit: &'static str,
    /// The limit's value: how many the window allows (or how many at once, for `concurrent`).
    pub quota: u64,
    /// The window's length in seconds; `None` for `concurrent`.
    pub window: Option<u64>,
    /// What is left of the quota in this window (or of the concurrent slots).
    pub remaining: u64,
    /// Seconds until the window ends (`concurrent`: a guess, 1).
    pub retry_after: u64,
    /// The request's own known cost, when that is what does not fit (speech characters,
    /// images asked for); 0 when the budget is simply spent.
    pub cost: u64,
    /// A money budget's currency: `quota`, `remaining` and `cost` are then nano-units of it
    /// (billionths), which the message writes as decimals.
    pub(crate) currency: Option<crate::money::Currency>,
}

impl LimitRefusal {
    fn message(&self) -> String {
        if let Some(currency) = self.currency {
            let money = |n: u64| format!("{} {currency}", crate::money::Amount::from_nanos(n));
            let (quota, left) = (money(self.quota), money(self.remaining));
            return match self.cost {
                0 => format!(
                    "budget reached: {} is {quota} for this caller, and it is spent; retry in {} s",
                    self.limit, self.retry_after
                ),
                cost => format!(
                    "budget reached: this request is known to cost {} of {} ({quota}), and {left} \
                     is left; retry in {} s",
                    money(cost),
                    self.limit,
                    self.retry_after
                ),
            };
        }
        match (self.window, self.cost) {
            (None, _) => format!(
                "rate limit reached: concurrent is {} requests at once for this caller; retry \
                 when one has finished",
                self.quota
            ),
            (Some(_), 0) => format!(
                "rate limit reached: {} is {} for this caller; retry in {} s",
                self.limit, self.quota, self.retry_after
            ),
            (Some(_), cost) => format!(
                "rate limit reached: this request needs {cost} of {} ({}), and {} is left; \
                 retry in {} s",
                self.limit, self.quota, self.remaining, self.retry_after
            ),
        }
    }

    /// `Retry-After`, and the `RateLimit-Policy` and `RateLimit` fields of
    /// draft-ietf-httpapi-ratelimit-headers-10 (§3, §4; structured-field lists whose items are
    /// the policy's name as a string with `q` quota, `w` window, `qu` quota unit, and `r`
    /// remaining, `t` seconds to the reset). <https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt>
    fn headers(&self) -> Vec<(&'static str, String)> {
        let policy = match (self.window, self.currency) {
            // A budget's quota is in nano-units of its currency, which its quota unit names.
            (Some(w), Some(c)) => {
                format!("\"{}\";q={};w={w};qu=\"nano-{c}\"", self.limit, self.quota)
            }
            (Some(w), None) => format!("\"{}\";q={};w={w}", self.limit, self.quota),
            (None, _) => format!(
                "\"{}\";q={};qu=\"concurrent-requests\"",
                self.limit, self.quota
            ),
        };
        vec![
            ("retry-after", self.retry_after.max(1).to_string()),
            ("ratelimit-policy", policy),
            (
                "ratelimit",
                format!(
                    "\"{}\";r={};t={}",
                    self.limit, self.remaining, self.retry_after
                ),
            ),
        ]
    }
}

/// Every way a request can fail. An adapter returns the few that concern it (`Validation`,
/// `Internal`, ...); the gateway's own (authentication, limits) are not for adapters and not
/// listed here. New ways to fail may be added: match with a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// No route for the path (404).
    #[error("no such endpoint")]
    NotFound,
    /// A hosted file that does not exist or has expired (404).
    #[error("no such file, or its link has expired")]
    FileNotFound,
    /// A task that does not exist or has expired (404).
    #[error("no such task, or it has expired")]
    TaskNotFound,
    /// `GET /api/v1/models/{id}` of a name the catalog does not hold.
    #[error("no such model; GET /api/v1/models lists them")]
    ModelNotFound,
    /// A method the route does not take (405).
    #[error("method not allowed; use {allowed}")]
    MethodNotAllowed {
        /// The methods it takes, for `Allow`.
        allowed: &'static str,
    },
    /// The caller's credentials were missing or refused (401).
    #[error("{0}")]
    #[doc(hidden)]
    Unauthorized(#[from] AuthError),
    /// The caller's key (or its tenant) may not use the model it asked for (403): a database
    /// key's `allowed_models`.
    #[error("this key may not use model `{model}`; ask the operator to allow it")]
    ModelNotAllowed {
        /// The public model asked for.
        model: String,
    },
    /// The body is over the operation's limit (413).
    #[error("request body too large: the limit for this endpoint is {limit} bytes")]
    PayloadTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The text is over the model's input limit (400).
    #[error("input is too long for model {model}: {length} {unit}, the limit is {limit}")]
    InputTooLong {
        /// The public model.
        model: String,
        /// In `unit`s (the model's input limit's: characters, bytes or tokens).
        length: usize,
        /// `characters`, `bytes` or `tokens`.
        unit: &'static str,
        /// The model's limit, in `unit`s.
        limit: usize,
    },
    /// Fields the request cannot have as they are (400 `validation_error`, per field).
    #[error("request validation failed")]
    Validation(ValidationErrors),
    /// The client sent its request body too slowly (`clients:` deadlines).
    #[error("the request body did not arrive in time: {0}")]
    RequestTimeout(String),
    /// The request head could not be read as HTTP/1.x (400 `invalid_request`): Pingora's parser
    /// refused it (a header holding a byte HTTP does not allow, a malformed line), so nothing of
    /// it — method, path, the caller's `X-Request-Id` — is known (`gateway/client_conn.rs`).
    #[error(
        "the request head is not valid HTTP: a header holds a byte HTTP does not allow (a \
         control character such as 0x01, ESC or DEL, or NUL), or the head is otherwise malformed or too large"
    )]
    MalformedHead,
    /// The caller's own limit refused the request.
    #[error("rate limit reached: {}", .0.limit)]
    #[doc(hidden)]
    RateLimited(LimitRefusal),
    /// This entry point is at its connection or in-flight request cap.
    #[error("the gateway is at capacity ({0}); retry shortly")]
    Overloaded(&'static str),
    /// No target of the model can serve it (503).
    #[error("model {model} is not available: {reason}")]
    ModelUnavailable {
        /// The public model.
        model: String,
        /// Why, for the caller.
        reason: String,
    },
    /// A provider's error, classified ([`UpstreamError`]).
    #[error("{0}")]
    Upstream(UpstreamError),
    /// The gateway's own state (hosted files, tasks) could not be read or written.
    #[error("{0}")]
    Store(String),
    /// An endpoint that needs what this gateway's configuration (or build) does not have (501):
    /// the message names the setting.
    #[error("{0}")]
    NotConfigured(&'static str),
    /// The usage ledger's database could not be read in time (503); why is the operator's (logged
    /// where the answer is written), never shown.
    #[error("{0}")]
    LedgerUnavailable(String),
    /// A defect of the gateway (500), never the caller's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl GatewayError {
    /// A provider's "no such voice" for a voice the gateway filled in (the model's default, the
    /// caller named none): the operator's configuration names a voice the provider no longer
    /// offers (or not to this account), so it is a 503 naming the model and the voice, never the
    /// caller's 400. Every other error is returned as it is.
    pub fn default_voice_refused(self, model: &str, voice: &str) -> GatewayError {
        match self {
            GatewayError::Upstream(u) if u.kind == UpstreamErrorKind::UnknownVoice => {
                GatewayError::ModelUnavailable {
                    model: model.to_string(),
                    reason: format!(
                        "provider {} does not offer its configured default voice {voice} (it \
                         answered: {}); the gateway's configuration must name a voice the \
                         provider offers, or the request a `voice`",
                        u.provider, u.message
                    ),
                }
            }
            other => other,
        }
    }

    /// Shortcut for a validation error about one field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut v = ValidationErrors::default();
        v.add(field, message);
        GatewayError::Validation(v)
    }

    /// The HTTP status the caller sees. Exhaustive on purpose: a new error kind must choose one.
    pub fn status(&self) -> u16 {
        match self {
            GatewayError::NotFound
            | GatewayError::FileNotFound
            | GatewayError::TaskNotFound
            | GatewayError::ModelNotFound => 404,
            GatewayError::MethodNotAllowed { .. } => 405,
            GatewayError::Unauthorized(_) => 401,
            GatewayError::ModelNotAllowed { .. } => 403,
            GatewayError::PayloadTooLarge { .. } | GatewayError::InputTooLong { .. } => 413,
            GatewayError::Validation(_) | GatewayError::MalformedHead => 400,
            GatewayError::RequestTimeout(_) => 408,
            GatewayError::RateLimited(_) => 429,
            GatewayError::ModelUnavailable { .. }
            | GatewayError::Store(_)
            | GatewayError::LedgerUnavailable(_)
            | GatewayError::Overloaded(_) => 503,
            GatewayError::NotConfigured(_) => 501,
            GatewayError::Internal(_) => 500,
            GatewayError::Upstream(u) => match u.kind {
                UpstreamErrorKind::InvalidRequest
                | UpstreamErrorKind::ContentPolicy
                | UpstreamErrorKind::UnknownVoice => 400,
                UpstreamErrorKind::RateLimited => 429,
                UpstreamErrorKind::Timeout => 504,
                UpstreamErrorKind::UnknownModel => 503,
                UpstreamErrorKind::Connect
                | UpstreamErrorKind::AuthRejected
                | UpstreamErrorKind::Failure
                | UpstreamErrorKind::BadResponse
                | UpstreamErrorKind::WrongAnswer => 502,
            },
        }
    }

    /// The machine-readable `code` of the Error object.
    pub fn code(&self) -> &'static str {
        match self {
            GatewayError::NotFound
            | GatewayError::FileNotFound
            | GatewayError::TaskNotFound
            | GatewayError::ModelNotFound => "not_found",
            GatewayError::MethodNotAllowed { .. } => "method_not_allowed",
            GatewayError::Unauthorized(_) => "unauthorized",
            GatewayError::ModelNotAllowed { .. } => "model_not_allowed",
            GatewayError::PayloadTooLarge { .. } => "payload_too_large",
            GatewayError::InputTooLong { .. } => "input_too_long",
            GatewayError::Validation(_) => "validation_error",
            GatewayError::MalformedHead => "invalid_request",
            GatewayError::RequestTimeout(_) => "request_timeout",
            GatewayError::Overloaded(_) => "overloaded",
            GatewayError::RateLimited(_) => "rate_limited",
            GatewayError::ModelUnavailable { .. } => "model_unavailable",
            GatewayError::Store(_) => "store_unavailable",
            GatewayError::NotConfigured(_) => "not_configured",
            GatewayError::LedgerUnavailable(_) => "ledger_unavailable",
            GatewayError::Internal(_) => "internal_error",
            GatewayError::Upstream(u) => match u.kind {
                UpstreamErrorKind::InvalidRequest | UpstreamErrorKind::UnknownVoice => {
                    "invalid_request"
                }
                UpstreamErrorKind::ContentPolicy => "content_policy_violation",
                UpstreamErrorKind::RateLimited => "rate_limited",
                UpstreamErrorKind::Timeout => "upstream_timeout",
                UpstreamErrorKind::Connect => "upstream_unreachable",
                UpstreamErrorKind::AuthRejected => "upstream_auth_failed",
                UpstreamErrorKind::UnknownModel => "model_unavailable",
                UpstreamErrorKind::Failure => "upstream_error",
                UpstreamErrorKind::BadResponse | UpstreamErrorKind::WrongAnswer => {
                    "upstream_bad_response"
                }
            },
        }
    }

    /// The human-readable `message`.
    pub fn message(&self) -> String {
        match self {
            GatewayError::Upstream(u) => match u.kind {
                UpstreamErrorKind::InvalidRequest
                | UpstreamErrorKind::ContentPolicy
                | UpstreamErrorKind::UnknownVoice => {
                    format!(
                        "provider {} rejected the request: {}",
                        u.provider, u.message
                    )
                }
                UpstreamErrorKind::RateLimited => {
                    format!(
                        "provider {} is rate limiting requests; retry later",
                        u.provider
                    )
                }
                UpstreamErrorKind::Timeout => format!("provider {} timed out", u.provider),
                UpstreamErrorKind::Connect if u.certificate_refused => format!(
                    "provider {}'s TLS certificate was refused: {}",
                    u.provider, u.message
                ),
                UpstreamErrorKind::Connect => format!("provider {} is unreachable", u.provider),
                UpstreamErrorKind::AuthRejected => format!(
                    "provider {} rejected the gateway's credentials; contact the operator",
                    u.provider
                ),
                UpstreamErrorKind::UnknownModel => format!(
                    "provider {} does not serve the model the gateway's configuration names: {}",
                    u.provider, u.message
                ),
                UpstreamErrorKind::Failure => match u.status {
                    Some(s) => format!("provider {} failed (HTTP {s})", u.provider),
                    None => format!("provider {} failed: {}", u.provider, u.message),
                },
                UpstreamErrorKind::BadResponse => format!(
                    "provider {} sent an answer the gateway could not read: {}",
                    u.provider, u.message
                ),
                UpstreamErrorKind::WrongAnswer => format!(
                    "provider {} answered with something other than what was asked: {}",
                    u.provider, u.message
                ),
            },
            // The backend and its error (addresses, OS errors) are the operator's business: logged
            // where the answer is written, not shown.
            GatewayError::Store(_) => {
                "the gateway's shared store (hosted images, tasks, limits) is unavailable; retry \
                 later"
                    .to_string()
            }
            GatewayError::LedgerUnavailable(_) => {
                "the usage ledger's database is unavailable; retry later".to_string()
            }
            GatewayError::RateLimited(r) => r.message(),
            other => other.to_string(),
        }
    }

    /// The JSON body of the answer, without a request id (an answer to a request carries its id as `request_id` too).
    pub fn body(&self) -> Bytes {
        self.body_for("")
    }

    /// The JSON body of the answer to the request `request_id` (its `X-Request-Id`), which the
    /// body carries as `request_id` so that a caller who kept only the body can still quote it;
    /// an empty id (an answer written outside a request) leaves the field out.
    pub(crate) fn body_for(&self, request_id: &str) -> Bytes {
        #[derive(Serialize)]
        struct Body<'a> {
            code: &'a str,
            message: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            details: Option<&'a BTreeMap<String, String>>,
            #[serde(skip_serializing_if = "str::is_empty")]
            request_id: &'a str,
        }
        let details = match self {
            GatewayError::Validation(v) => Some(v.details()),
            _ => None,
        };
        let body = Body {
            code: self.code(),
            message: self.message(),
            details,
            request_id,
        };
        // Serializing plain strings cannot fail; fall back to a fixed body rather than panic.
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .unwrap_or_else(|_| {
                Bytes::from_static(b"{\"code\":\"internal_error\",\"message\":\"error\"}")
            })
    }

    /// Extra response headers (405 needs `Allow`; 429/503 may carry `Retry-After`).
    pub fn extra_headers(&self) -> Vec<(&'static str, String)> {
        match self {
            GatewayError::MethodNotAllowed { allowed } => vec![("allow", (*allowed).to_string())],
            // Capacity frees as requests finish, usually within a second.
            GatewayError::Overloaded(_) => vec![("retry-after", "1".to_string())],
            GatewayError::RateLimited(r) => r.headers(),
            GatewayError::Upstream(u) if u.kind == UpstreamErrorKind::RateLimited => u
                .retry_after
                .map(|d| vec![("retry-after", d.as_secs().max(1).to_string())])
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_body_lists_every_field() {
        let mut v = ValidationErrors::default();
        v.add("speed", "must be one of 0.25, 0.5, 1, 2, 4");
        v.add("model", "unknown model");
        let e = GatewayError::Validation(v);
        assert_eq!(e.status(), 400);
        let json: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
        assert_eq!(json["code"], "validation_error");
        assert_eq!(
            json["details"]["speed"],
            "must be one of 0.25, 0.5, 1, 2, 4"
        );
        assert_eq!(json["details"]["model"], "unknown model");
    }

    #[test]
    fn provider_credential_rejection_is_never_401() {
        let e = GatewayError::Upstream(UpstreamError::from_status("openai", 401, "bad key"));
        assert_eq!(e.status(), 502);
        assert_eq!(e.code(), "upstream_auth_failed");
        assert!(!e.message().contains("bad key"));
    }

    #[test]
    fn a_refused_certificate_is_unreachable_says_why_and_is_not_retried() {
        let u = UpstreamError::certificate_refused("acme", "it has expired");
        assert!(!u.retryable());
        let e = GatewayError::Upstream(u);
        assert_eq!((e.status(), e.code()), (502, "upstream_unreachable"));
        assert_eq!(
            e.message(),
            "provider acme's TLS certificate was refused: it has expired"
        );
        let other = GatewayError::Upstream(UpstreamError::new(
            UpstreamErrorKind::Connect,
            "acme",
            "TLSHandshakeFailure",
        ));
        assert_eq!(other.message(), "provider acme is unreachable");
    }

    #[test]
    fn the_ledger_errors_name_the_setting_and_keep_the_why() {
        let e = GatewayError::NotConfigured("set ledger.database_url");
        assert_eq!((e.status(), e.code()), (501, "not_configured"));
        assert_eq!(e.message(), "set ledger.database_url");
        let e = GatewayError::LedgerUnavailable("connection refused at 10.0.0.5:5432".into());
        assert_eq!((e.status(), e.code()), (503, "ledger_unavailable"));
        // The address is the operator's, logged where the answer is written.
        assert!(!e.message().contains("10.0.0.5"), "{}", e.message());
    }

    #[test]
    fn statuses_tell_the_truth() {
        let cases = [
            (429, 429, "rate_limited"),
            (402, 502, "upstream_error"),
            (404, 502, "upstream_error"),
            (400, 400, "invalid_request"),
            (500, 502, "upstream_error"),
            (503, 502, "upstream_error"),
            (504, 504, "upstream_timeout"),
        ];
        for (native, public, code) in cases {
            let e = GatewayError::Upstream(UpstreamError::from_status("p", native, "m"));
            assert_eq!((e.status(), e.code()), (public, code), "native {native}");
        }
    }

    #[test]
    fn a_limit_refusal_names_the_limit_and_carries_ratelimit_fields() {
        let e = GatewayError::RateLimited(LimitRefusal {
            limit: "requests_per_minute",
            quota: 60,
            window: Some(60),
            remaining: 0,
            retry_after: 12,
            cost: 0,
            currency: None,
        });
        assert_eq!((e.status(), e.code()), (429, "rate_limited"));
        assert_eq!(
            e.message(),
            "rate limit reached: requests_per_minute is 60 for this caller; retry in 12 s"
        );
        assert_eq!(
            e.extra_headers(),
            vec![
                ("retry-after", "12".to_string()),
                (
                    "ratelimit-policy",
                    "\"requests_per_minute\";q=60;w=60".to_string()
                ),
                ("ratelimit", "\"requests_per_minute\";r=0;t=12".to_string()),
            ]
        );
    }

    #[test]
    fn a_budget_refusal_writes_money_as_decimals_of_its_currency() {
        let usd = crate::money::Currency::parse("USD");
        let refusal = |cost| {
            GatewayError::RateLimited(LimitRefusal {
                limit: "budget_per_day",
                quota: 5_000_000_000,
                window: Some(86_400),
                remaining: 120_000_000,
                retry_after: 3_600,
                cost,
                currency: usd,
            })
        };
        let e = refusal(150_000_000);
        assert_eq!((e.status(), e.code()), (429, "rate_limited"));
        assert_eq!(
            e.message(),
            "budget reached: this request is known to cost 0.15 USD of budget_per_day (5 USD), \
             and 0.12 USD is left; retry in 3600 s"
        );
        assert_eq!(
            refusal(0).message(),
            "budget reached: budget_per_day is 5 USD for this caller, and it is spent; retry in \
             3600 s"
        );
        assert_eq!(
            e.extra_headers(),
            vec![
                ("retry-after", "3600".to_string()),
                (
                    "ratelimit-policy",
                    "\"budget_per_day\";q=5000000000;w=86400;qu=\"nano-USD\"".to_string()
                ),
                (
                    "ratelimit",
                    "\"budget_per_day\";r=120000000;t=3600".to_string()
                ),
            ]
        );
    }

    #[test]
    fn an_unknown_voice_is_the_callers_unless_the_gateway_chose_it() {
        let refused = || {
            GatewayError::Upstream(UpstreamError::new(
                UpstreamErrorKind::UnknownVoice,
                "elevenlabs",
                "A voice with the voice_id v1 was not found.",
            ))
        };
        let e = refused();
        assert_eq!((e.status(), e.code()), (400, "invalid_request"));
        let e = refused().default_voice_refused("eleven", "v1");
        assert_eq!((e.status(), e.code()), (503, "model_unavailable"));
        let message = e.message();
        assert!(
            message.contains("eleven") && message.contains("default voice v1"),
            "{message}"
        );
        assert!(message.contains("was not found"), "{message}");
        // Any other error passes through unchanged.
        let other = GatewayError::Upstream(UpstreamError::from_status("p", 400, "bad"))
            .default_voice_refused("eleven", "v1");
        assert_eq!((other.status(), other.code()), (400, "invalid_request"));
    }

    #[test]
    fn a_wrong_answer_is_retried_and_a_bad_one_is_not() {
        let wrong = UpstreamError::new(UpstreamErrorKind::WrongAnswer, "p", "an HTML page");
        let bad = UpstreamError::new(UpstreamErrorKind::BadResponse, "p", "missing field");
        assert!(wrong.retryable());
        assert!(!bad.retryable());
        for e in [wrong, bad] {
            let e = GatewayError::Upstream(e);
            assert_eq!((e.status(), e.code()), (502, "upstream_bad_response"));
        }
    }
}
