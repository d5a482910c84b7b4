//! Zhipu AI / BigModel (智谱) rerank (`POST /api/paas/v4/rerank`).
//!
//! Cohere-like request (`model`, `query`, `documents`, `top_n`, `return_documents`). `top_n`
//! defaults to 0, meaning "all", so it is sent only when the caller gave one. Results carry
//! `document` as a plain string when asked for; the gateway never asks. The billed total is
//! `usage.total_tokens` (falling back to `usage.prompt_tokens`, which Zhipu reports equal to it).
//! Zhipu documents no per-document query formula, so the gateway counts the query once. The
//! documented `return_raw_scores`, `request_id` and `user_id` are the family's native fields.
//!
//! Errors are Zhipu's envelope, read in [`crate::providers::zhipu`]; it may arrive with HTTP 200
//! and is then classified by its code.

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
    path: "/api/paas/v4/rerank",
    off: &["return_documents"],
    // No source says how `usage` counts the query (ledger: unconfirmed).
    billing: QueryCounting::Once,
    ..Wire::COHERE
};

// ---- wire types ------------------------------------------------------------------------------

/// What a success answer reports beside the results, and the `error` of an error envelope that
/// came with HTTP 200.
#[derive(Deserialize, Default)]
struct Answer {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    total_tokens: Count,
    #[serde(default)]
    prompt_tokens: Count,
}

impl Reported for Answer {
    fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64> {
        rerank::request_id(metadata, self.request_id.or(self.id));
        self.usage
            .and_then(|u| billed(&[u.total_tokens]).or_else(|| billed(&[u.prompt_tokens])))
    }

    /// An error envelope may come with HTTP 200.
    fn error(&self, provider: &Provider, body: &[u8]) -> Option<UpstreamError> {
        crate::providers::zhipu::error_in_answer(provider, self.error.as_ref(), body)
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

    const KEY: &str = "zhipu-secret-abcdef.123456";

    fn provider() -> Arc<Provider> {
        support::provider("zhipu", KEY)
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "rerank");
        support::catalog("zr", "zhipu-rerank", target, 4096, 128)
    }

    fn native_json(body: &'static [u8]) -> serde_json::Value {
        let native = support::native_request(&catalog(), body, rerank_request);
        assert_eq!(native.path, WIRE.path);
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_request() {
        let b = native_json(br#"{"model":"zr","query":"q","documents":["a","b"]}"#);
        assert_eq!(
            b,
            serde_json::json!({
                "model": "rerank",
                "query": "q",
                "documents": ["a", "b"],
                "return_documents": false
            })
        );
        let b = native_json(br#"{"model":"zr","query":"q","documents":["a","b"],"top_n":1}"#);
        assert_eq!(
            b,
            serde_json::json!({
                "model": "rerank",
                "query": "q",
                "documents": ["a", "b"],
                "top_n": 1,
                "return_documents": false
            })
        );
    }

    #[test]
    fn reads_results_with_string_documents() {
        let catalog = catalog();
        let req = support::parse(
            &catalog,
            br#"{"model":"zr","query":"q","documents":["a","b"]}"#,
        );
        let p = provider();
        let h = http::HeaderMap::new();
        let body = br#"{"created":1732083164,"id":"2024112014","request_id":"r-9","results":[{"document":"b","index":1,"relevance_score":0.99866986},{"index":0,"relevance_score":0.1}],"usage":{"prompt_tokens":72,"total_tokens":72}}"#;
        let out = rerank_response(&p, &req, &h, body).unwrap();
        assert_eq!(out.results[0].index, 1);
        assert_eq!(out.results[0].document.as_str(), "b");
        assert_eq!(out.usage.total_tokens, 72);
        assert_eq!(out.metadata["request_id"], "r-9");

        let e = rerank_response(&p, &req, &h, br#"{"data":[]}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        let e = rerank_response(&p, &req, &h, b"not json").unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn error_in_a_200_is_classified_by_its_code() {
        let catalog = catalog();
        let req = support::parse(&catalog, br#"{"model":"zr","query":"q","documents":["a"]}"#);
        let p = provider();
        let h = http::HeaderMap::new();
        let cases: [(&[u8], UpstreamErrorKind); 4] = [
            (
                br#"{"error":{"code":"1214","message":"Invalid top_n parameter"}}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                br#"{"error":{"code":"1301","message":"unsafe content"}}"#,
                UpstreamErrorKind::ContentPolicy,
            ),
            (
                br#"{"error":{"code":1302,"message":"High concurrency"}}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                br#"{"error":{"code":"9999","message":"?"}}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (body, kind) in cases {
            let e = rerank_response(&p, &req, &h, body).unwrap_err();
            assert_eq!(e.kind, kind, "{}", String::from_utf8_lossy(body));
        }
        // `error: null` is not an error marker.
        let ok = br#"{"error":null,"results":[{"index":0,"relevance_score":0.5}]}"#;
        assert!(rerank_response(&p, &req, &h, ok).is_ok());
    }
}
