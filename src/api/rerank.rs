//! `POST /api/v1/rerank`: the request, its validation, and the public result shape.

use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::api::common;
use crate::caps::{Caps, RerankCaps};
use crate::catalog::{Catalog, Model};
use crate::common::error::GatewayError;
use crate::common::json::{Fields, JsonStr, Str};
use crate::common::Operation;

mod json;

/// A validated rerank request; strings borrow from the request body.
#[derive(Debug)]
pub struct RerankRequest<'a> {
    /// The public model asked for (its name, capabilities and targets).
    #[doc(hidden)]
    pub model: Arc<Model>,
    /// The model's capabilities, which the request was validated against.
    #[doc(hidden)]
    pub caps: &'static RerankCaps,
    /// The query, decoded.
    pub query: Str<'a>,
    /// Each document as the caller's JSON literal plus its text: adapters serialize the literals
    /// into the native body and the answer echoes them, so documents are never re-escaped.
    pub documents: Vec<JsonStr<'a>>,
    /// Results wanted: 1..=documents.len(), default all (a larger `top_n` asks for all of them).
    pub top_n: usize,
    /// Whether the caller sent `top_n` (some providers are only told when asked).
    pub top_n_given: bool,
    /// Whether each result carries its `document` (default true).
    pub return_documents: bool,
    /// Retries the caller allows (already bounded by the configuration's `retries.max`).
    pub retries: u32,
    /// The family's `native_fields` the caller sent, as raw JSON, for the native body
    /// ([`json_with_extra`](crate::common::native::json_with_extra) appends them).
    pub passthrough: Vec<(Str<'a>, &'a RawValue)>,
}

/// The public rerank result. `document` borrows the caller's own string (written out as the literal
/// the caller sent). The public answer is written by [`RerankResult::write_json`]; `Serialize`
/// gives the same bytes.
#[derive(Debug, Serialize)]
pub struct RerankResult<'r> {
    /// The public model's name.
    pub model: &'r str,
    /// The ranked documents, best first, at most `top_n`.
    pub results: Vec<RerankItem<'r>>,
    /// Token counts (see [`RerankRequest::usage`]).
    pub usage: Usage,
    /// Provider facts beside usage (`tokenizer`, `total_tokens_source`, `query_tokens_counted`, ...).
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// One ranked document. `document` is always at hand (compatibility surfaces render it in their own
/// shape); it is written out only when `with_document` (the caller's `return_documents`).
#[derive(Debug)]
pub struct RerankItem<'r> {
    /// The document's position in the request.
    pub index: usize,
    /// The provider's score (finite).
    pub relevance_score: f64,
    /// The caller's document.
    pub document: &'r JsonStr<'r>,
    /// Whether `document` is written out (the caller's `return_documents`).
    pub with_document: bool,
}

impl Serialize for RerankItem<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2 + usize::from(self.with_document)))?;
        m.serialize_entry("index", &self.index)?;
        m.serialize_entry("relevance_score", &self.relevance_score)?;
        if self.with_document {
            m.serialize_entry("document", self.document)?;
        }
        m.end()
    }
}

/// A rerank answer's token usage (the gateway's own counts, or the provider's billed total).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Usage {
    /// The provider's billed figure when it gave one, else the sum of the two others.
    pub total_tokens: u64,
    /// The query's tokens, as the provider counts the query ([`QueryCounting`]).
    pub query_tokens: u64,
    /// The documents' tokens, each counted once.
    pub documents_tokens: u64,
}

impl<'r> RerankRequest<'r> {
    /// Build the public result from provider scores `(index, score)`: sorted by score descending (ties
    /// by index), indexes checked against the request, each document re-attached from the request,
    /// `top_n` applied.
    pub fn result(
        &'r self,
        scores: impl IntoIterator<Item = (usize, f64)>,
    ) -> Result<Vec<RerankItem<'r>>, String> {
        let mut items = Vec::with_capacity(self.top_n);
        for (index, score) in scores {
            let doc = self.documents.get(index).ok_or_else(|| {
                format!("result index {index} is outside the request's documents")
            })?;
            if !score.is_finite() {
                return Err(format!("result {index} has a non-finite score"));
            }
            items.push(RerankItem {
                index,
                relevance_score: score,
                document: doc,
                with_document: self.return_documents,
            });
        }
        items.sort_by(|a, b| {
            b.relevance_score
                .total_cmp(&a.relevance_score)
                .then(a.index.cmp(&b.index))
        });
        items.dedup_by_key(|i| i.index);
        items.truncate(self.top_n);
        Ok(items)
    }

    /// The whole public result: [`Self::result`] plus usage and `metadata`, which always names the
    /// tokenizer, whether `total_tokens` is the provider's figure or the gateway's sum, and how the
    /// query was counted (see [`QueryCounting`]).
    pub fn build(
        &'r self,
        scores: impl IntoIterator<Item = (usize, f64)>,
        billed_total: Option<u64>,
        counting: QueryCounting,
        mut metadata: serde_json::Map<String, serde_json::Value>,
    ) -> Result<RerankResult<'r>, String> {
        let results = self.result(scores)?;
        metadata.insert("tokenizer".into(), crate::tokens::TOKENIZER.into());
        metadata.insert(
            "total_tokens_source".into(),
            if billed_total.is_some() {
                "provider"
            } else {
                "gateway"
            }
            .into(),
        );
        metadata.insert("query_tokens_counted".into(), counting.as_str().into());
        Ok(RerankResult {
            model: &self.model.name,
            results,
            usage: self.usage(billed_total, counting),
            metadata,
        })
    }

    /// Usage, each figure with one meaning whatever the provider:
    /// - `documents_tokens`: the documents' tokens, each document counted once;
    /// - `query_tokens`: the query's tokens as the provider bills them (`counting`): once per
    ///   document where it scores query+document pairs, else once;
    /// - `total_tokens`: the provider's billed token figure when its answer gives one, else
    ///   `query_tokens + documents_tokens` (what the provider's formula would bill).
    ///
    /// Both counts are the gateway's own (cl100k_base), an estimate of the provider's tokenizer.
    pub fn usage(&self, billed_total: Option<u64>, counting: QueryCounting) -> Usage {
        // Remembered counts: a document (or query) sent again is not counted again.
        let query_once = crate::tokens::count_cached(self.query.as_str()) as u64;
        let query_tokens = match counting {
            QueryCounting::PerDocument => query_once.saturating_mul(self.documents.len() as u64),
            QueryCounting::Once => query_once,
        };
        let documents_tokens: u64 = self
            .documents
            .iter()
            .map(|d| crate::tokens::count_cached(d.as_str()) as u64)
            .sum();
        Usage {
            total_tokens: billed_total.unwrap_or(query_tokens.saturating_add(documents_tokens)),
            query_tokens,
            documents_tokens,
        }
    }
}

/// How a provider counts the query when it bills a rerank request: each adapter declares one
/// (its `Wire` profile), with the source in its ledger under `docs/providers/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryCounting {
    /// The query is billed with every document (the model scores query+document pairs), so it
    /// counts `documents` times: Voyage's documented `query × documents + Σ documents`.
    PerDocument,
    /// The query is counted once (no per-pair formula is documented, or nothing is billed).
    Once,
}

impl QueryCounting {
    /// The value of `metadata.query_tokens_counted`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryCounting::PerDocument => "per_document",
            QueryCounting::Once => "once",
        }
    }
}

/// `top_n`: an integer of at least 1. One above the number of documents asks for all of them (as
/// Cohere and Jina answer it), so clients that send a fixed default keep working with fewer documents.
fn top_n(f: &mut Fields<'_>) -> Option<u64> {
    let raw = f.take_raw("top_n")?;
    match serde_json::from_str::<u64>(raw.get()) {
        Ok(n) if n >= 1 => Some(n),
        Ok(_) => {
            f.error("top_n", "must be at least 1");
            None
        }
        Err(_) if serde_json::from_str::<i64>(raw.get()).is_ok() => {
            f.error("top_n", "must be at least 1");
            None
        }
        Err(_) => {
            f.error("top_n", "must be an integer of at least 1");
            None
        }
    }
}

/// `documents`: at least one, at most the model's number, none empty, each within the model's
/// document limit when it has one.
fn check_documents(
    f: &mut Fields<'_>,
    docs: &[JsonStr<'_>],
    model: Option<&Model>,
    caps: Option<&RerankCaps>,
) {
    if docs.is_empty() {
        f.error("documents", "must contain at least one document");
    }
    if let (Some(m), Some(c)) = (model, caps) {
        if docs.len() > c.max_documents {
            f.error(
                "documents",
                format!(
                    "has {} documents; model {} accepts at most {}",
                    docs.len(),
                    m.name,
                    c.max_documents
                ),
            );
        }
    }
    let document_limit = model.zip(caps.and_then(|c| c.document_limit));
    for (i, d) in docs.iter().enumerate() {
        if d.as_str().trim().is_empty() {
            f.error(&format!("documents[{i}]"), "must not be empty");
        } else if let Some((m, limit)) = document_limit {
            if let Some(length) = common::over_limit(d.as_str(), limit) {
                f.error(
                    &format!("documents[{i}]"),
                    format!(
                        "is {length} {}; model {} accepts documents of at most {}",
                        limit.unit.as_str(),
                        m.name,
                        limit.max
                    ),
                );
            }
        }
    }
}

/// Parse and validate a rerank request body.
pub fn parse<'a>(
    body: &'a [u8],
    catalog: &Catalog,
    max_retries: u32,
) -> Result<RerankRequest<'a>, GatewayError> {
    // The documents are read as the body is parsed: one pass over most of its bytes.
    let mut f = Fields::parse_with(body, "documents")?;
    let model = common::model(&mut f, catalog, Operation::Rerank);
    let caps = match model.as_ref().map(|m| m.caps) {
        Some(Caps::Rerank(c)) => Some(c),
        _ => None,
    };
    let query = f.required_string("query");
    let documents = f.string_array("documents");
    let top_n = top_n(&mut f);
    let return_documents = f.boolean("return_documents");
    let retries = common::retries(&mut f, max_retries);

    if documents.is_none() && !f.errors.has("documents") {
        f.error("documents", "is required");
    }
    if let Some(docs) = &documents {
        check_documents(&mut f, docs, model.as_deref(), caps);
    }
    if let (Some(q), Some(m), Some(c)) = (&query, &model, caps) {
        if let Some(length) = common::over_limit(q.as_str(), c.query_limit) {
            f.error(
                "query",
                format!(
                    "is {length} {}; model {} accepts at most {}",
                    c.query_limit.unit.as_str(),
                    m.name,
                    c.query_limit.max
                ),
            );
        }
    }

    let (rest, mut errors) = f.into_rest();
    let native = caps.map(|c| c.native_fields).unwrap_or(&[]);
    let passthrough = common::undeclared(rest, native, model.as_deref(), &mut errors);
    errors.into_result()?;

    let (Some(model), Some(caps), Some(query), Some(documents)) = (model, caps, query, documents)
    else {
        return Err(GatewayError::Internal(
            "rerank validation incomplete".into(),
        ));
    };
    Ok(RerankRequest {
        model,
        caps,
        query,
        top_n: top_n
            .map(|n| {
                usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(documents.len())
            })
            .unwrap_or(documents.len()),
        top_n_given: top_n.is_some(),
        return_documents: return_documents.unwrap_or(true),
        documents,
        retries,
        passthrough,
    })
}
