//! Infinity (michaelfeil/infinity), self-hosted: `POST /rerank` (Cohere-like).
//!
//! The body: `model` (a server with one model serves it whatever the name; one with several picks
//! by name), `query`, `documents`, `top_n` (only when the caller gave one; Infinity's default is
//! every document), and `return_documents: false` and `raw_scores: false` (sigmoid scores in
//! 0..1, comparable with other providers' `relevance_score`). The answer is
//! `{object: "rerank", results: [{relevance_score, index, document}], model, usage, id, created}`.
//!
//! Infinity's `usage.total_tokens` is the summed length of query+document over the documents, and
//! that length is in **characters** unless the server was started with `--lengths-via-tokenize`
//! (Infinity `transformer/utils.py`, `length_tokenizer`). The gateway cannot tell which, so it
//! does not take the figure as a token total: it counts tokens itself and passes Infinity's figure
//! on as `metadata.infinity_usage_total`.
//!
//! Errors are OpenAI-style `{"error": {"message", "type", "param", "code"}}`. A model the server
//! does not serve is `400` "Invalid model: Engine for model name `…` not found", and a model that
//! cannot rerank `400` "ModelNotDeployedError: …": both "no such model". `429` "model … is
//! currently overloaded". A server started with `--api-key` refuses another key with FastAPI's
//! `401 {"detail": "Unauthorized"}`.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::fastapi;
use crate::providers::formats::rerank::{self, Count, QueryCounting, Reported, Wire};
use crate::upstream::provider::{Auth, Provider};

// ---- constants -------------------------------------------------------------------------------

const WIRE: Wire = Wire {
    path: "/rerank",
    off: &["return_documents", "raw_scores"],
    // One (query, document) pair per document; its usage figure sums their lengths.
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

/// The messages of Infinity's "no such model" answers (both `400`).
const UNKNOWN_MODEL: [&str; 2] = ["Invalid model:", "ModelNotDeployedError:"];

// ---- wire types ------------------------------------------------------------------------------

/// What Infinity reports beside the scores: a length total of uncertain unit.
#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    usage: Option<Total>,
}

#[derive(Deserialize)]
struct Total {
    #[serde(default)]
    total_tokens: Count,
}

impl Reported for Usage {
    fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64> {
        let total = self
            .usage
            .and_then(|u| crate::providers::billed_tokens(u.total_tokens));
        if let Some(total) = total {
            metadata.insert("infinity_usage_total".into(), total.into());
        }
        None
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<ErrorInfo>,
    #[serde(flatten)]
    fastapi: fastapi::ErrorBody,
}

#[derive(Deserialize)]
struct ErrorInfo {
    #[serde(default)]
    message: Option<String>,
}

// ---- translation -----------------------------------------------------------------------------

pub(crate) fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    rerank::request(&WIRE, target, req)
}

pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<Usage>(&WIRE, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let text = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .and_then(|e| {
            let fastapi = e.fastapi;
            e.error
                .and_then(|i| i.message)
                .filter(|m| !m.trim().is_empty())
                .or_else(|| fastapi.text())
        });
    let mut err = status_error(provider, status, text.as_deref());
    if status == 400
        && text
            .as_deref()
            .is_some_and(|t| UNKNOWN_MODEL.iter().any(|p| t.starts_with(p)))
    {
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Infinity kind: rerank only; a key (sent as Bearer) only when the server was started with
/// `--api-key`.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let mut kind = crate::providers::registry::bearer_rerank(
        key,
        error_response,
        rerank_request,
        rerank_response,
    )?;
    if key.is_empty() {
        kind.auth = Auth::None;
    }
    Ok(kind)
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    fn provider() -> Arc<Provider> {
        support::provider("infinity", "inf-secret-0123456789")
    }

    fn request<'a>(docs: &[&'a str], top_n: Option<usize>) -> RerankRequest<'a> {
        support::rerank_request("infinity-rerank", "bge", "q", docs, top_n, Vec::new())
    }

    #[test]
    fn body_asks_for_sigmoid_scores_and_no_documents() {
        let target = support::target(provider(), "BAAI/bge-reranker-v2-m3");
        let native = rerank_request(&target, &request(&["a", "b"], Some(1))).unwrap();
        assert_eq!(native.path, "/rerank");
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            r#"{"model":"BAAI/bge-reranker-v2-m3","query":"q","documents":["a","b"],"top_n":1,"return_documents":false,"raw_scores":false}"#
        );
    }

    #[test]
    fn usage_is_not_taken_as_tokens() {
        let p = provider();
        let req = request(&["a", "b"], None);
        let body = br#"{"object":"rerank","results":[{"relevance_score":0.9,"index":1,"document":null},{"relevance_score":0.2,"index":0}],
            "model":"BAAI/bge-reranker-v2-m3","usage":{"prompt_tokens":4,"total_tokens":4},"id":"infinity-1","created":1}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        let got: Vec<_> = out.results.iter().map(|r| r.index).collect();
        assert_eq!(got, vec![1, 0]);
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
        assert_eq!(out.metadata["infinity_usage_total"], 4);
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let cases: &[(u16, &str, UpstreamErrorKind)] = &[
            (
                400,
                r#"{"error":{"message":"Invalid model: 'Engine for model name `x` not found. Available model names are [\"bge\"]'","type":null,"param":null,"code":400}}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                400,
                r#"{"error":{"message":"ModelNotDeployedError: model=`e5` does not support `rerank`. Reason: x","type":null,"param":null,"code":400}}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                429,
                r#"{"error":{"message":"model bge is currently overloaded","type":null,"param":null,"code":429}}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                422,
                r#"{"detail":[{"loc":["body","documents"],"msg":"List should have at least 1 item","type":"too_short"}]}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                401,
                r#"{"detail":"Unauthorized"}"#,
                UpstreamErrorKind::AuthRejected,
            ),
            (
                500,
                r#"{"error":{"message":"InternalServerError: boom","type":null,"param":null,"code":500}}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (status, body, kind) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
        }
        assert_eq!(
            error_response(&p, 429, cases[2].1.as_bytes()).message,
            "model bge is currently overloaded"
        );
        assert_eq!(
            error_response(&p, 422, cases[3].1.as_bytes()).message,
            "body.documents: List should have at least 1 item"
        );
    }
}
