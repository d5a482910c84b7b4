//! Alibaba Cloud Model Studio (DashScope / 百炼) text rerank, native endpoint
//! (`POST /api/v1/services/rerank/text-rerank/text-rerank`).
//!
//! The native protocol nests the request: `input{query,documents}` and `parameters{top_n,
//! return_documents,instruct}`; results come back under `output.results` with the billed total in
//! `usage.total_tokens`. Documents are never asked back (the gateway re-attaches the caller's own
//! strings). The API's own default is "all documents" when `top_n` is absent (the 3 seen in the
//! LlamaIndex/LangChain wrappers is theirs, not the API's), so `top_n` is sent only when the caller
//! gave one.
//!
//! Errors use DashScope's one envelope (see [`crate::providers::dashscope`]), normally with a
//! 4xx/5xx status but sometimes with HTTP 200, so a 200 body carrying a `code` is classified like
//! the error it is.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::api::error::{GatewayError, UpstreamError};
use crate::api::json::JsonStr;
use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::providers::{nested_with_extra, NativeRequest, Provider};

// ---- constants -------------------------------------------------------------------------------

const RERANK_PATH: &str = "/api/v1/services/rerank/text-rerank/text-rerank";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct RerankBody<'a> {
    model: &'a str,
    input: Input<'a>,
    /// `Parameters` plus the caller's pass-through fields, already serialized: DashScope's native
    /// options (`instruct`) live inside `parameters`, not at the top level.
    parameters: Box<RawValue>,
}

#[derive(Serialize)]
struct Input<'a> {
    query: &'a str,
    /// The caller's literals, copied as sent.
    documents: &'a [JsonStr<'a>],
}

#[derive(Serialize)]
struct Parameters {
    return_documents: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_n: Option<usize>,
}

/// A success answer, or (with HTTP 200) an error envelope: both are read through this one shape.
#[derive(Deserialize)]
struct RerankResponse {
    #[serde(default)]
    output: Option<Output>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Output {
    results: Vec<ResultItem>,
}

#[derive(Deserialize)]
struct ResultItem {
    index: usize,
    relevance_score: f64,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    total_tokens: Option<u64>,
}

// ---- translation to native -------------------------------------------------------------------

pub fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let parameters = Parameters {
        return_documents: false,
        top_n: req.top_n_given.then_some(req.top_n),
    };
    let parameters = nested_with_extra(&parameters, &req.passthrough)?;
    let body = RerankBody {
        model: &target.native_model,
        input: Input {
            query: req.query.as_str(),
            documents: &req.documents,
        },
        parameters,
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    Ok(NativeRequest::post_json(RERANK_PATH, body))
}

// ---- translation back ------------------------------------------------------------------------

pub fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let bad = |m: String| crate::providers::bad_answer(provider, m);
    let parsed: RerankResponse = crate::providers::parse_answer(provider, body)?;
    // DashScope may report an error with HTTP 200: classify it as if it had come with the status
    // DashScope documents for its code.
    if let Some(err) = super::error_in_answer(provider, parsed.code.as_ref(), body) {
        return Err(err);
    }
    let output = parsed
        .output
        .ok_or_else(|| bad("rerank answer has no output.results".into()))?;
    let mut metadata = serde_json::Map::new();
    if let Some(id) = parsed.request_id.filter(|s| !s.is_empty()) {
        metadata.insert("request_id".into(), id.into());
    }
    req.build(
        output.results.iter().map(|r| (r.index, r.relevance_score)),
        parsed.usage.and_then(|u| u.total_tokens),
        metadata,
    )
    .map_err(bad)
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::error::UpstreamErrorKind;
    use crate::catalog::Catalog;
    use crate::providers::{test_support as support, ProviderKind};

    const KEY: &str = "sk-dash-secret-123456";

    fn provider() -> Arc<Provider> {
        support::provider("dashscope", ProviderKind::DashScope, KEY)
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "gte-rerank-v2");
        support::catalog("gte", "dashscope-rerank", target, 4000, 500)
    }

    fn native_json(body: &'static [u8]) -> serde_json::Value {
        let native = support::native_request(&catalog(), body, rerank_request);
        assert_eq!(native.path, RERANK_PATH);
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
