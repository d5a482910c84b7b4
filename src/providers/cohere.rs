//! Cohere rerank v2 (`POST /v2/rerank`).
//!
//! Cohere v2 returns only `index` and `relevance_score`: the gateway re-attaches each document from
//! the request and counts query/document tokens itself. Cohere bills in search units, which go to
//! `metadata`.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::rerank::{self, Reported, Wire};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// The format's own spelling: `documents`, `top_n` (only when the caller gave one), `results[]`
/// of `{index, relevance_score}`.
const WIRE: Wire = Wire::COHERE;

// ---- wire types ------------------------------------------------------------------------------

/// Cohere's `meta`: the search units billed and the token count. v1 reads the units only, so its
/// `T` skips `tokens` unread.
#[derive(Deserialize, Default)]
pub(super) struct Meta<T = Tokens> {
    #[serde(default)]
    meta: Option<MetaBody<T>>,
}

#[derive(Deserialize)]
struct MetaBody<T> {
    #[serde(default)]
    billed_units: Option<BilledUnits>,
    #[serde(default)]
    tokens: Option<T>,
}

#[derive(Deserialize)]
struct BilledUnits {
    #[serde(default)]
    search_units: Option<f64>,
}

#[derive(Deserialize, Default)]
pub(super) struct Tokens {
    #[serde(default)]
    input_tokens: Option<f64>,
}

impl<T> Meta<T> {
    /// The search units billed go to `metadata`: they have no public field.
    pub(super) fn search_units(&self, metadata: &mut Map<String, Value>) {
        let units = self.meta.as_ref().and_then(|m| m.billed_units.as_ref());
        if let Some(units) = units.and_then(|b| b.search_units) {
            metadata.insert("search_units".into(), serde_json::json!(units));
        }
    }
}

impl Reported for Meta<Tokens> {
    fn total(self, metadata: &mut Map<String, Value>) -> Option<u64> {
        self.search_units(metadata);
        self.meta
            .and_then(|m| m.tokens)
            .and_then(|t| t.input_tokens)
            .map(|t| t as u64)
    }
}

/// v1's `meta`: `tokens` is not read.
pub(super) type UnitsOnly = Meta<IgnoredAny>;

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
    rerank::request(&WIRE, target, req)
}

// ---- translation back ------------------------------------------------------------------------

pub fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<Meta>(&WIRE, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

/// Cohere's `{"message": …}` errors, for v1 and v2 alike.
pub fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let message = serde_json::from_slice::<ErrorBody>(body).ok();
    let mut err = status_error(
        provider,
        status,
        message.as_ref().map(|e| e.message.as_str()),
    );
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
