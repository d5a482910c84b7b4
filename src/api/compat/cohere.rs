//! Cohere's rerank answers (v1 and v2: `{id, results, meta}`) and its error shape
//! (`{"message": …}` with the HTTP status, from which Cohere's SDK picks its typed exception).

use serde::Serialize;

use super::request::Translated;
use super::shared::{full_message, items, Item};
use crate::api::rerank::RerankResult;
use crate::common::error::GatewayError;

#[derive(Serialize)]
pub(super) struct Answer<'a> {
    id: String,
    results: Vec<Item<'a>>,
    meta: Meta,
}

/// Cohere's `ApiMeta`: the API version, the provider's billed search units when it reported them
/// (Cohere's own), and the rerank's tokens (the gateway's `usage.total_tokens`) as input tokens.
#[derive(Serialize)]
struct Meta {
    api_version: ApiVersion,
    #[serde(skip_serializing_if = "Option::is_none")]
    billed_units: Option<BilledUnits>,
    tokens: Tokens,
}

#[derive(Serialize)]
struct ApiVersion {
    version: &'static str,
}

#[derive(Serialize)]
struct BilledUnits {
    search_units: serde_json::Value,
}

#[derive(Serialize)]
struct Tokens {
    input_tokens: u64,
    output_tokens: u64,
}

pub(super) fn answer<'a>(
    result: &RerankResult<'_>,
    t: &Translated<'a>,
    version: &'static str,
) -> Answer<'a> {
    Answer {
        id: uuid::Uuid::new_v4().to_string(),
        results: items(result, t),
        meta: Meta {
            api_version: ApiVersion { version },
            billed_units: result
                .metadata
                .get("search_units")
                .map(|units| BilledUnits {
                    search_units: units.clone(),
                }),
            tokens: Tokens {
                input_tokens: result.usage.total_tokens,
                output_tokens: 0,
            },
        },
    }
}

/// Cohere's error body: `message`, plus the gateway's `code` for programs and the answer's
/// `request_id` (its `X-Request-Id`; left out when empty).
#[derive(Serialize)]
pub(super) struct Error<'a> {
    message: String,
    code: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    request_id: &'a str,
}

pub(super) fn error<'a>(err: &GatewayError, request_id: &'a str) -> Error<'a> {
    Error {
        message: full_message(err),
        code: err.code(),
        request_id,
    }
}
