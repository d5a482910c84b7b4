//! Provider adapters and their dispatch.
//!
//! Each provider lives in its own file with the same section order (constants, wire types, translation
//! to native, translation back, error mapping, tests). Translation is a pure function of the validated
//! request and the target, so the attempt loop can rebuild the native request on every retry without
//! touching the caller's bytes. Dispatch is a closed enum ([`ProviderKind`]) with one `match` arm per
//! provider, so adding a provider makes the compiler list every place that must handle it.

pub mod cohere;
pub mod cohere_v1;
pub mod dashscope;
pub mod jina;
pub mod local;
pub mod mixedbread;
pub mod openai;
pub mod siliconflow;
pub mod tei;
#[cfg(test)]
pub(crate) mod test_support;
pub mod voyage;
pub mod zhipu;

use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::api::error::{GatewayError, UpstreamError};
use crate::api::images::{ImageRequest, ImageResult};
use crate::api::json::Str;
use crate::api::rerank::{RerankRequest, RerankResult};
use crate::api::speech::SpeechRequest;
use crate::catalog::{Operation, Target};
use crate::upstream::endpoint::Endpoint;

/// The providers Switchyard can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Cohere,
    CohereV1,
    Jina,
    Voyage,
    DashScope,
    SiliconFlow,
    Zhipu,
    Mixedbread,
    Tei,
    /// The built-in lexical reranker: no network, no key.
    Local,
}

impl ProviderKind {
    pub const ALL: &'static [(&'static str, ProviderKind)] = &[
        ("openai", ProviderKind::OpenAi),
        ("cohere", ProviderKind::Cohere),
        ("cohere-v1", ProviderKind::CohereV1),
        ("jina", ProviderKind::Jina),
        ("voyage", ProviderKind::Voyage),
        ("dashscope", ProviderKind::DashScope),
        ("siliconflow", ProviderKind::SiliconFlow),
        ("zhipu", ProviderKind::Zhipu),
        ("mixedbread", ProviderKind::Mixedbread),
        ("tei", ProviderKind::Tei),
        ("local", ProviderKind::Local),
    ];

    pub fn parse(name: &str) -> Option<ProviderKind> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
    }

    /// Operations this provider's adapter implements.
    pub fn serves(self, op: Operation) -> bool {
        match self {
            ProviderKind::OpenAi => matches!(op, Operation::Speech | Operation::Images),
            ProviderKind::Cohere
            | ProviderKind::CohereV1
            | ProviderKind::Jina
            | ProviderKind::Voyage
            | ProviderKind::DashScope
            | ProviderKind::SiliconFlow
            | ProviderKind::Zhipu
            | ProviderKind::Mixedbread
            | ProviderKind::Tei
            | ProviderKind::Local => op == Operation::Rerank,
        }
    }

    /// Whether the provider is unusable without a key (a self-hosted TEI server usually has none;
    /// the local reranker never does).
    pub fn requires_key(self) -> bool {
        !matches!(self, ProviderKind::Tei | ProviderKind::Local)
    }

    /// Whether the provider is reached over HTTP (and so needs a `base_url`).
    pub fn remote(self) -> bool {
        self != ProviderKind::Local
    }

    /// The header that carries the provider key, and how the value is formed. Every provider
    /// supported so far takes a bearer token.
    fn auth_header(self, key: &str) -> (HeaderName, String) {
        (http::header::AUTHORIZATION, format!("Bearer {key}"))
    }
}

/// A configured provider account: credentials and where to reach it.
pub struct Provider {
    pub name: String,
    pub kind: ProviderKind,
    /// Built once at start and marked sensitive; `None` when the key is empty.
    auth: Option<(HeaderName, HeaderValue)>,
    /// The key itself, kept only to redact it should a provider ever echo it back.
    key: String,
    /// `None` only for in-process providers.
    default_endpoint: Option<Endpoint>,
    region_endpoints: HashMap<String, Endpoint>,
    /// Largest non-streamed answer accepted from this provider.
    pub max_response_bytes: usize,
}

impl fmt::Debug for Provider {
    // The key must never reach a log line, so Debug is written by hand.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("enabled", &self.enabled())
            .finish()
    }
}

impl Provider {
    pub fn new(
        name: String,
        kind: ProviderKind,
        api_key: &str,
        default_endpoint: Option<Endpoint>,
        region_endpoints: HashMap<String, Endpoint>,
        max_response_bytes: usize,
    ) -> Result<Provider, String> {
        let auth = if api_key.is_empty() {
            None
        } else {
            let (name, value) = kind.auth_header(api_key);
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| "api_key contains characters not allowed in a header".to_string())?;
            value.set_sensitive(true);
            Some((name, value))
        };
        Ok(Provider {
            name,
            kind,
            auth,
            key: api_key.to_string(),
            default_endpoint,
            region_endpoints,
            max_response_bytes,
        })
    }

    /// Usable: has its key, or needs none.
    pub fn enabled(&self) -> bool {
        self.auth.is_some() || !self.kind.requires_key()
    }

    pub fn auth_header(&self) -> Option<&(HeaderName, HeaderValue)> {
        self.auth.as_ref()
    }

    /// The endpoint for the entry point's region, or the default one.
    pub fn endpoint(&self, region: &str) -> Option<&Endpoint> {
        self.region_endpoints
            .get(region)
            .or(self.default_endpoint.as_ref())
    }

    /// Remove the provider key from text that came from the provider before it reaches a caller.
    pub fn redact(&self, text: &str) -> String {
        let mut s = if self.key.len() >= 4 && text.contains(&self.key) {
            text.replace(&self.key, "[redacted]")
        } else {
            text.to_string()
        };
        // Providers sometimes quote a partial key ("sk-abc***xyz"); drop anything key-shaped.
        // A word counts when it starts with `sk-` once quotes and brackets are stripped, so prose
        // such as "risk-free" survives.
        let key_shaped = |w: &str| {
            w.trim_start_matches(|c: char| !c.is_alphanumeric())
                .starts_with("sk-")
        };
        if s.split(' ').any(key_shaped) {
            s = s
                .split(' ')
                .map(|w| if key_shaped(w) { "[redacted]" } else { w })
                .collect::<Vec<_>>()
                .join(" ");
        }
        const MAX: usize = 500;
        if s.len() > MAX {
            let mut cut = MAX;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
            s.push('…');
        }
        s
    }
}

/// A request in the provider's own wire format, ready to send.
#[derive(Debug)]
pub struct NativeRequest {
    pub method: Method,
    /// Path relative to the provider's base URL, with any query string.
    pub path: String,
    pub content_type: &'static str,
    /// Provider-specific headers besides auth (e.g. `Accept`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

impl NativeRequest {
    pub fn post_json(path: impl Into<String>, body: Vec<u8>) -> NativeRequest {
        NativeRequest {
            method: Method::POST,
            path: path.into(),
            content_type: "application/json",
            headers: Vec::new(),
            body: Bytes::from(body),
        }
    }
}

/// A provider answer the gateway cannot read.
pub(crate) fn bad_answer(provider: &Provider, message: impl Into<String>) -> UpstreamError {
    UpstreamError::new(
        crate::api::error::UpstreamErrorKind::BadResponse,
        &provider.name,
        message,
    )
}

/// Parse a provider's JSON answer into its wire type; a mismatch is a bad response.
pub(crate) fn parse_answer<T: serde::de::DeserializeOwned>(
    provider: &Provider,
    body: &[u8],
) -> Result<T, UpstreamError> {
    serde_json::from_slice(body)
        .map_err(|e| bad_answer(provider, format!("answer is not the expected JSON: {e}")))
}

/// A billed token count as a provider reported it: only a finite, non-negative number is believed.
pub(crate) fn billed_tokens(reported: Option<f64>) -> Option<u64> {
    reported
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| t as u64)
}

/// What an adapter prepared for one attempt: a request to send, or (for in-process providers) the
/// native answer itself.
#[derive(Debug)]
pub enum Prepared {
    Http(NativeRequest),
    Local(Bytes),
}

/// Serialize `known` (a struct serializing as a JSON object) followed by the caller's pass-through
/// fields, copied verbatim as raw JSON.
pub fn json_with_extra<T: Serialize>(
    known: &T,
    extra: &[(Str<'_>, &RawValue)],
) -> Result<Vec<u8>, GatewayError> {
    let mut out = serde_json::to_vec(known)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    if extra.is_empty() {
        return Ok(out);
    }
    // `known` always serializes as an object: drop its closing brace and append the extra pairs.
    if out.pop() != Some(b'}') {
        return Err(GatewayError::Internal(
            "native request is not an object".into(),
        ));
    }
    let mut first = out.len() == 1;
    for (k, v) in extra {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut out, k.as_str())
            .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
    }
    out.push(b'}');
    Ok(out)
}

/// The human text of a FastAPI `detail` (`{"detail": ...}` error bodies, as Jina, Voyage and
/// Mixedbread send): a string, a validation list (`[{"loc": [...], "msg": ...}]`) or an object
/// carrying `message`. `None` when that leaves no text.
fn detail_text(detail: &Value) -> Option<String> {
    let text = match detail {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => {
                    let msg = o
                        .get("msg")
                        .or_else(|| o.get("message"))
                        .and_then(Value::as_str)?;
                    let loc = o
                        .get("loc")
                        .and_then(Value::as_array)
                        .map(|parts| {
                            parts
                                .iter()
                                .map(|p| match p {
                                    Value::String(s) => s.clone(),
                                    other => other.to_string(),
                                })
                                .collect::<Vec<_>>()
                                .join(".")
                        })
                        .unwrap_or_default();
                    Some(if loc.is_empty() {
                        msg.to_string()
                    } else {
                        format!("{loc}: {msg}")
                    })
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("; "),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    };
    (!text.trim().is_empty()).then_some(text)
}

/// Build the native speech request for `target`.
pub fn speech_request(target: &Target, req: &SpeechRequest<'_>) -> Result<Prepared, GatewayError> {
    match target.provider.kind {
        ProviderKind::OpenAi => openai::speech_request(target, req).map(Prepared::Http),
        _ => Err(not_served(target, Operation::Speech)),
    }
}

/// Build the native image request for `target`.
pub fn image_request(target: &Target, req: &ImageRequest<'_>) -> Result<Prepared, GatewayError> {
    match target.provider.kind {
        ProviderKind::OpenAi => openai::image_request(target, req).map(Prepared::Http),
        _ => Err(not_served(target, Operation::Images)),
    }
}

/// Translate a successful native image answer.
pub fn image_response(
    target: &Target,
    req: &ImageRequest<'_>,
    body: &[u8],
) -> Result<ImageResult, UpstreamError> {
    match target.provider.kind {
        ProviderKind::OpenAi => openai::image_response(&target.provider, req, body),
        _ => Err(wrong_answer(target, Operation::Images)),
    }
}

/// Build the native rerank request for `target` (or, for the local reranker, its answer).
pub fn rerank_request(target: &Target, req: &RerankRequest<'_>) -> Result<Prepared, GatewayError> {
    let http = |r: Result<NativeRequest, GatewayError>| r.map(Prepared::Http);
    match target.provider.kind {
        ProviderKind::Cohere => http(cohere::rerank_request(target, req)),
        ProviderKind::CohereV1 => http(cohere_v1::rerank_request(target, req)),
        ProviderKind::Jina => http(jina::rerank_request(target, req)),
        ProviderKind::Voyage => http(voyage::rerank_request(target, req)),
        ProviderKind::DashScope => http(dashscope::rerank_request(target, req)),
        ProviderKind::SiliconFlow => http(siliconflow::rerank_request(target, req)),
        ProviderKind::Zhipu => http(zhipu::rerank_request(target, req)),
        ProviderKind::Mixedbread => http(mixedbread::rerank_request(target, req)),
        ProviderKind::Tei => http(tei::rerank_request(target, req)),
        ProviderKind::Local => local::rerank(req).map(Prepared::Local),
        ProviderKind::OpenAi => Err(not_served(target, Operation::Rerank)),
    }
}

/// Translate a successful native rerank answer (`headers` matter to TEI, which reports usage there).
pub fn rerank_response<'r>(
    target: &Target,
    req: &'r RerankRequest<'r>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let p = &target.provider;
    match p.kind {
        ProviderKind::Cohere => cohere::rerank_response(p, req, headers, body),
        ProviderKind::CohereV1 => cohere_v1::rerank_response(p, req, headers, body),
        ProviderKind::Jina => jina::rerank_response(p, req, headers, body),
        ProviderKind::Voyage => voyage::rerank_response(p, req, headers, body),
        ProviderKind::DashScope => dashscope::rerank_response(p, req, headers, body),
        ProviderKind::SiliconFlow => siliconflow::rerank_response(p, req, headers, body),
        ProviderKind::Zhipu => zhipu::rerank_response(p, req, headers, body),
        ProviderKind::Mixedbread => mixedbread::rerank_response(p, req, headers, body),
        ProviderKind::Tei => tei::rerank_response(p, req, headers, body),
        ProviderKind::Local => local::rerank_response(p, req, body),
        ProviderKind::OpenAi => Err(wrong_answer(target, Operation::Rerank)),
    }
}

/// Classify a non-2xx native answer.
pub fn error_response(
    provider: &Provider,
    status: u16,
    headers: &http::HeaderMap,
    body: &[u8],
) -> UpstreamError {
    let mut err = match provider.kind {
        ProviderKind::OpenAi => openai::error_response(provider, status, body),
        ProviderKind::Cohere => cohere::error_response(provider, status, body),
        ProviderKind::CohereV1 => cohere_v1::error_response(provider, status, body),
        ProviderKind::Jina => jina::error_response(provider, status, body),
        ProviderKind::Voyage => voyage::error_response(provider, status, body),
        ProviderKind::DashScope => dashscope::error_response(provider, status, body),
        ProviderKind::SiliconFlow => siliconflow::error_response(provider, status, body),
        ProviderKind::Zhipu => zhipu::error_response(provider, status, body),
        ProviderKind::Mixedbread => mixedbread::error_response(provider, status, body),
        ProviderKind::Tei => tei::error_response(provider, status, body),
        // The local reranker is never called over HTTP.
        ProviderKind::Local => UpstreamError::from_status(&provider.name, status, "local provider"),
    };
    err.retry_after = crate::upstream::retry::parse_retry_after(headers);
    err
}

fn not_served(target: &Target, op: Operation) -> GatewayError {
    GatewayError::Internal(format!(
        "provider {} does not serve {}",
        target.provider.name,
        op.as_str()
    ))
}

fn wrong_answer(target: &Target, op: Operation) -> UpstreamError {
    UpstreamError::new(
        crate::api::error::UpstreamErrorKind::BadResponse,
        &target.provider.name,
        format!("provider does not serve {}", op.as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_removes_keys_but_not_prose() {
        let p = test_support::provider("p", ProviderKind::OpenAi, "sk-live-abcdef123");
        assert_eq!(
            p.redact("Incorrect API key provided: 'sk-live-abcdef123' is risk-free"),
            "Incorrect API key provided: '[redacted]' is risk-free"
        );
        assert_eq!(
            p.redact("key \"sk-proj-xx***yy\" revoked"),
            "key [redacted] revoked"
        );
        assert_eq!(p.redact(&"x".repeat(600)).chars().count(), 501);
    }

    #[test]
    fn extra_fields_are_appended_verbatim() {
        #[derive(Serialize)]
        struct K {
            a: u8,
        }
        let raw = RawValue::from_string("{\"x\": [1, 2]}".into()).unwrap();
        let out = json_with_extra(&K { a: 1 }, &[(Str("s\"q".into()), &raw)]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":1,"s\"q":{"x": [1, 2]}}"#
        );
    }
}
