//! Jina's rerank answer (`{model, usage: {total_tokens}, results}`) and its error shape
//! (`{"detail": …}` with the HTTP status: LangChain's and LlamaIndex's Jina rerankers raise
//! `detail` when an answer has no `results`).

use serde::Serialize;

use super::request::Translated;
use super::shared::{full_message, items, Item};
use crate::api::rerank::RerankResult;
use crate::common::error::GatewayError;

#[derive(Serialize)]
pub(super) struct Answer<'a> {
    model: String,
    usage: Usage,
    results: Vec<Item<'a>>,
}

#[derive(Serialize)]
struct Usage {
    total_tokens: u64,
}

pub(super) fn answer<'a>(result: &RerankResult<'_>, t: &Translated<'a>) -> Answer<'a> {
    Answer {
        model: result.model.to_string(),
        usage: Usage {
            total_tokens: result.usage.total_tokens,
        },
        results: items(result, t),
    }
}

/// Jina's error body: `detail`, plus the gateway's `code` for programs and the answer's
/// `request_id` (its `X-Request-Id`; left out when empty).
#[derive(Serialize)]
pub(super) struct Error<'a> {
    detail: String,
    code: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    request_id: &'a str,
}

pub(super) fn error<'a>(err: &GatewayError, request_id: &'a str) -> Error<'a> {
    Error {
        detail: full_message(err),
        code: err.code(),
        request_id,
    }
}
