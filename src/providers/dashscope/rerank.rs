//! Alibaba Cloud Model Studio (DashScope / 百炼) text rerank, native endpoint
//! (`POST /api/v1/services/rerank/text-rerank/text-rerank`).
//!
//! The native protocol nests the request: `input{query,documents}` and `parameters{top_n,
//! return_documents,instruct}`; results come back under `output.results` with the billed total in
//! `usage.total_tokens`. Model Studio counts a request's tokens as `query tokens × documents +
//! document tokens`, so the public `query_tokens` counts the query once per document. Documents are never asked back (the gateway re-attaches the caller's own
//! strings). The API's own default is "all documents" when `top_n` is absent (the 3 seen in the
//! LlamaIndex/LangChain wrappers is theirs, not the API's), so `top_n` is sent only when the caller
//! gave one.
//!
//! Errors use DashScope's one envelope (see [`crate::providers::dashscope`]), normally with a
//! 4xx/5xx status but sometimes with HTTP 200, so a 200 body carrying a `code` is classified like
//! the error it is.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::common::error::GatewayError;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamError;
use crate::common::native::NativeRequest;
use crate::providers::formats::rerank::{
    self, billed, Count, Nested, QueryCounting, Reported, Wire,
};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// DashScope's native options (`instruct`) live inside `parameters`, with `top_n`, not at the top
/// level.
const WIRE: Wire = Wire {
    path: "/api/v1/services/rerank/text-rerank/text-rerank",
    nested: Some(Nested {
        input: "input",
        options: "parameters",
    }),
    off: &["return_documents"],
    results: &["output", "results"],
    // "Max input tokens per request: Query Tokens × Number of documents + Total document tokens"
    // (Model Studio, Text rerank API).
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

// ---- wire types ------------------------------------------------------------------------------

/// What a success answer reports beside the results, and the `code` of an error envelope that
/// came with HTTP 200.
#[derive(Deserialize, Default)]
struct Answer {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    code: Option<Value>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    total_tokens: Count,
}

impl Reported for Answer {
    fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64> {
        rerank::request_id(metadata, self.request_id);
        self.usage.and_then(|u| billed(&[u.total_tokens]))
    }

    /// An error envelope may come with HTTP 200.
    fn error(&self, provider: &Provider, body: &[u8]) -> Option<UpstreamError> {
        crate::providers::dashscope::error_in_answer(provider, self.code.as_ref(), body)
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

    const KEY: &str = "sk-dash-secret-123456";

    fn provider() -> Arc<Provider> {
        support::provider("dashscope", KEY)
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "gte-rerank-v2");
        support::catalog("gte", "dashscope-rerank", target, 4000, 500)
    }

    fn native_json(body: &'static [u8]) -> serde_json::Value {
        let native = support::native_request(&catalog(), body, rerank_request);
        assert_eq!(native.path, WIRE.path);
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_nested_request_without_top_n() {
        let b = native_json(br#"{"model":"gte","query":"q","documents":["a","b"]}"#);
        assert_eq!(
            b,
            serde_json::json!({
                "model": "gte-rerank-v2",
                "input": {"query": "q", "documents": ["a", "b"]},
                "parameters": {"return_documents": false}
            })
        );
    }

    #[test]
    fn top_n_and_instruct_go_inside_parameters() {
        let b = native_json(
            br#"{"model":"gte","query":"q","documents":["a","b"],"top_n":1,"instruct":"Retrieve semantically similar text."}"#,
        );
        assert_eq!(
            b,
            serde_json::json!({
                "model": "gte-rerank-v2",
                "input": {"query": "q", "documents": ["a", "b"]},
                "parameters": {
                    "return_documents": false,
                    "top_n": 1,
                    "instruct": "Retrieve semantically similar text."
                }
            })
        );
    }

    #[test]
    fn reads_output_results_and_usage() {
        let catalog = catalog();
        let req = support::parse(
            &catalog,
            br#"{"model":"gte","query":"q","documents":["a","b"]}"#,
        );
        let p = provider();
        let body = br#"{"output":{"results":[{"index":1,"relevance_score":0.9,"document":{"text":"b"}},{"index":0,"relevance_score":0.1}]},"usage":{"total_tokens":79},"request_id":"r-1"}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        assert_eq!(out.results[0].index, 1);
        assert_eq!(out.results[0].document.as_str(), "b");
        assert_eq!(out.usage.total_tokens, 79);
        assert_eq!(out.metadata["request_id"], "r-1");

        let e =
            rerank_response(&p, &req, &http::HeaderMap::new(), br#"{"results":[]}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn error_in_a_200_is_classified_like_its_status() {
        let catalog = catalog();
        let req = support::parse(
            &catalog,
            br#"{"model":"gte","query":"q","documents":["a"]}"#,
        );
        let p = provider();
        let cases: [(&[u8], UpstreamErrorKind); 4] = [
            (
                br#"{"code":"InvalidParameter","message":"Range of top_n should be [1, 500]","request_id":"x"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                br#"{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded"}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                br#"{"code":"DataInspectionFailed","message":"Input data may contain inappropriate content."}"#,
                UpstreamErrorKind::ContentPolicy,
            ),
            (
                br#"{"code":"SomethingNew","message":"?"}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (body, kind) in cases {
            let e = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap_err();
            assert_eq!(e.kind, kind, "{}", String::from_utf8_lossy(body));
        }
        // An empty code is not an error marker.
        let ok = br#"{"code":"","output":{"results":[{"index":0,"relevance_score":0.5}]}}"#;
        assert!(rerank_response(&p, &req, &http::HeaderMap::new(), ok).is_ok());
    }
}
