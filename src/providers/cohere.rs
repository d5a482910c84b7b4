//! Cohere rerank v2 (`POST /v2/rerank`).
//!
//! Cohere v2 returns only `index` and `relevance_score`: the gateway re-attaches each document from
//! the request and counts query/document tokens itself. Cohere bills in search units, which go to
//! `metadata`.

use serde::{Deserialize, Serialize};

use crate::common::native::json_with_extra;

use crate::common::native::NativeRequest;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::json::JsonStr;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const RERANK_PATH: &str = "/v2/rerank";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct RerankBody<'a> {
    model: &'a str,
    query: &'a str,
    /// The caller's literals, copied as sent.
    documents: &'a [JsonStr<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    top_n: Option<usize>,
}

#[derive(Deserialize)]
struct RerankResponse {
    results: Vec<ResultItem>,
    #[serde(default)]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct ResultItem {
    index: usize,
    relevance_score: f64,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    billed_units: Option<BilledUnits>,
    #[serde(default)]
    tokens: Option<Tokens>,
}

#[derive(Deserialize)]
struct BilledUnits {
    #[serde(default)]
    search_units: Option<f64>,
}

#[derive(Deserialize)]
struct Tokens {
    #[serde(default)]
    input_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
}

// ---- translation to native -------------------------------------------------------------------

pub fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = RerankBody {
        model: &target.native_model,
        query: req.query.as_str(),
        documents: &req.documents,
        top_n: req.top_n_given.then_some(req.top_n),
    };
    Ok(NativeRequest::post_json(
        RERANK_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

// ---- translation back ------------------------------------------------------------------------

pub fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let bad = |m: String| crate::upstream::provider::bad_answer(provider, m);
    let parsed: RerankResponse = crate::providers::parse_answer(provider, body)?;
    let meta = parsed.meta.as_ref();
    let provider_total = meta
        .and_then(|m| m.tokens.as_ref())
        .and_then(|t| t.input_tokens)
        .map(|t| t as u64);
    let mut metadata = serde_json::Map::new();
    if let Some(units) = meta
        .and_then(|m| m.billed_units.as_ref())
        .and_then(|b| b.search_units)
    {
        metadata.insert("search_units".into(), serde_json::json!(units));
    }
    req.build(
        parsed.results.iter().map(|r| (r.index, r.relevance_score)),
        provider_total,
        metadata,
    )
    .map_err(bad)
}

// ---- error mapping ---------------------------------------------------------------------------

pub fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let message = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .filter(|e| !e.message.is_empty())
        .map(|e| provider.redact(&e.message))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    // Cohere's "invalid token": the gateway's key, not the caller's request.
    if status == 498 {
        err.kind = UpstreamErrorKind::AuthRejected;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Cohere v2 kind: Bearer key, rerank only.
pub fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    crate::providers::registry::bearer_rerank(key, error_response, rerank_request, rerank_response)
}
