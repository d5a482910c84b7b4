//! Jina's rerank answer (`{model, usage: {total_tokens}, results}`) and its error shape
//! (`{"detail": …}` with the HTTP status: LangChain's and LlamaIndex's Jina rerankers raise
//! `detail` when an answer has no `results`).

use serde::Serialize;

use super::request::Translated;
use super::shared::{document, full_message, Document};
use crate::api::rerank::RerankResult;
use crate::common::error::GatewayError;

#[derive(Serialize)]
pub struct Answer<'a> {
    model: String,
    usage: Usage,
    results: Vec<Item<'a>>,
}

#[derive(Serialize)]
struct Usage {
    total_tokens: u64,
}

#[derive(Serialize)]
struct Item<'a> {
    index: usize,
    relevance_score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<Document<'a>>,
}

pub fn answer<'a>(result: &RerankResult<'_>, t: &Translated<'a>) -> Answer<'a> {
    Answer {
        model: result.model.to_string(),
        usage: Usage {
            total_tokens: result.usage.total_tokens,
        },
        results: result
            .results
            .iter()
            .map(|r| Item {
                index: r.index,
                relevance_score: r.relevance_score,
                document: document(t, r.index),
            })
            .collect(),
    }
}

/// Jina's error body: `detail`, plus the gateway's `code` for programs.
#[derive(Serialize)]
pub struct Error {
    detail: String,
    code: &'static str,
}

pub fn error(err: &GatewayError) -> Error {
    Error {
        detail: full_message(err),
        code: err.code(),
    }
}
