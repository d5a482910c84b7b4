//! SiliconFlow (硅基流动) rerank (`POST /v1/rerank`).
//!
//! Cohere-like request (`model`, `query`, `documents`, `top_n`, `return_documents`) plus native
//! chunking options (`max_chunks_per_doc`, `overlap_tokens`) and the Qwen3 rerankers' `instruction`,
//! all top-level. `top_n` has no documented default other than "all", so it is sent only when the
//! caller gave one. Token counts come under `tokens{input_tokens,output_tokens}` (the API reference);
//! some integrations read them under `meta.tokens`, so both places are accepted. SiliconFlow
//! documents no per-document query formula, so the gateway counts the query once.
//!
//! Errors are SiliconFlow's envelope, read in [`crate::providers::siliconflow`].

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::common::error::GatewayError;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamError;
use crate::common::native::NativeRequest;
use crate::providers::formats::rerank::{self, billed, Count, QueryCounting, Reported, Wire};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const WIRE: Wire = Wire {
    path: "/v1/rerank",
    off: &["return_documents"],
    // No source says how `tokens.input_tokens` counts the query (ledger: unconfirmed).
    billing: QueryCounting::Once,
    ..Wire::COHERE
};

// ---- wire types ------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
struct Answer {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    tokens: Option<Tokens>,
    #[serde(default)]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    tokens: Option<Tokens>,
}

#[derive(Deserialize)]
struct Tokens {
    #[serde(default)]
    input_tokens: Count,
    #[serde(default)]
    output_tokens: Count,
}

impl Reported for Answer {
    fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64> {
        rerank::request_id(metadata, self.id);
        let tokens = self.tokens.or_else(|| self.meta.and_then(|m| m.tokens));
        // Billed total: input tokens, plus output tokens should a model ever report any.
        tokens.and_then(|t| billed(&[t.input_tokens, t.output_tokens]))
    }
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    rerank::request(&WIRE, target, req)
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<Answer>(&WIRE, provider, req, body)
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::Catalog;
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-sf-secret-123456";

    fn provider() -> Arc<Provider> {
        support::provider("siliconflow", KEY)
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "BAAI/bge-reranker-v2-m3");
        support::catalog("bge", "siliconflow-rerank", target, 32_000, 1000)
    }

    fn native_json(body: &'static [u8]) -> serde_json::Value {
        let native = support::native_request(&catalog(), body, rerank_request);
        assert_eq!(native.path, WIRE.path);
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_request() {
        let b = native_json(br#"{"model":"bge","query":"q","documents":["a","b"]}"#);
        assert_eq!(
            b,
            serde_json::json!({
                "model": "BAAI/bge-reranker-v2-m3",
                "query": "q",
                "documents": ["a", "b"],
                "return_documents": false
            })
        );
        let b = native_json(
            br#"{"model":"bge","query":"q","documents":["a","b"],"top_n":2,"max_chunks_per_doc":8,"overlap_tokens":40}"#,
        );
        assert_eq!(
            b,
            serde_json::json!({
                "model": "BAAI/bge-reranker-v2-m3",
                "query": "q",
                "documents": ["a", "b"],
                "top_n": 2,
                "return_documents": false,
                "max_chunks_per_doc": 8,
                "overlap_tokens": 40
            })
        );
    }

    #[test]
    fn reads_tokens_in_either_place() {
        let catalog = catalog();
        let req = support::parse(
            &catalog,
            br#"{"model":"bge","query":"q","documents":["a","b"]}"#,
        );
        let p = provider();
        let h = http::HeaderMap::new();
        let body = br#"{"id":"sf-1","results":[{"document":{"text":"a"},"index":0,"relevance_score":0.2},{"index":1,"relevance_score":0.8}],"tokens":{"input_tokens":42,"output_tokens":0}}"#;
        let out = rerank_response(&p, &req, &h, body).unwrap();
        assert_eq!(out.results[0].index, 1);
        assert_eq!(out.usage.total_tokens, 42);
        assert_eq!(out.metadata["request_id"], "sf-1");

        let body = br#"{"results":[{"index":0,"relevance_score":0.2}],"meta":{"tokens":{"input_tokens":7,"output_tokens":1}}}"#;
        let out = rerank_response(&p, &req, &h, body).unwrap();
        assert_eq!(out.usage.total_tokens, 8);
        assert_eq!(out.metadata["total_tokens_source"], "provider");

        let body = br#"{"results":[{"index":0,"relevance_score":0.2}]}"#;
        let out = rerank_response(&p, &req, &h, body).unwrap();
        assert_eq!(out.metadata["total_tokens_source"], "gateway");

        let e = rerank_response(&p, &req, &h, br#"{"results":"nope"}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        let e = rerank_response(
            &p,
            &req,
            &h,
            br#"{"results":[{"index":5,"relevance_score":0.1}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }
}
