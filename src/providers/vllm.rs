//! vLLM, self-hosted: `POST /v1/rerank` (its Jina- and Cohere-compatible rerank API).
//!
//! The body is Cohere's: `model` (the served model name, which vLLM checks), `query`,
//! `documents` and `top_n` (vLLM's default, 0, is every document; sent only when the caller gave
//! one). vLLM has no "return documents" flag, so nothing is sent for it; its results always echo
//! `document: {text}`, which the gateway skips. The answer is
//! `{id, model, usage: {prompt_tokens, total_tokens}, results: [{index, document, relevance_score}]}`;
//! vLLM scores one (query, document) prompt per document and sums their prompt tokens, so the
//! query counts once per document and `total_tokens` is the provider total.
//!
//! Errors are vLLM's `ErrorResponse`: `{"error": {"message", "type", "param", "code"}}` in current
//! releases, the same members at the top level (`{"object": "error", "message", ...}`) in older
//! ones. A model name the server does not serve is `404` `NotFoundError` "The model `…` does not
//! exist." — the "no such model" signal. A server started with `--api-key` checks
//! `Authorization: Bearer`, which the gateway sends when a key is configured.

use serde::Deserialize;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::rerank::{self, QueryCounting, UsageTotal, Wire};
use crate::upstream::provider::{Auth, Provider};

// ---- constants -------------------------------------------------------------------------------

/// Cohere's names at vLLM's versioned path; no flags (vLLM has no "return documents").
const WIRE: Wire = Wire {
    path: "/v1/rerank",
    // vLLM sums the prompt tokens of every (query, document) pair it scored.
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

// ---- wire types ------------------------------------------------------------------------------

/// `ErrorResponse`, nested under `error` (current) or flat (older releases).
#[derive(Deserialize, Default)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    error: Option<ErrorInfo>,
    #[serde(flatten)]
    flat: ErrorInfo,
}

#[derive(Deserialize, Default)]
pub(crate) struct ErrorInfo {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

impl ErrorBody {
    /// The error's message and type, from wherever the release put them.
    pub(crate) fn parts(self) -> (Option<String>, Option<String>) {
        let info = match self.error {
            Some(nested) if nested.message.is_some() => nested,
            _ => self.flat,
        };
        (info.message, info.kind)
    }
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
    rerank::response::<UsageTotal>(&WIRE, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let (message, kind) = serde_json::from_slice::<ErrorBody>(body)
        .map(ErrorBody::parts)
        .unwrap_or_default();
    let mut err = status_error(provider, status, message.as_deref());
    // `NotFoundError` is the served-model check; a 404 without it is a wrong path or base URL,
    // which `from_status` already leaves to the operator.
    if status == 404 && kind.as_deref() == Some("NotFoundError") {
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The vLLM kind: rerank only; a key (sent as Bearer) only when the server was started with one.
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

    const KEY: &str = "vllm-secret-0123456789";

    fn provider() -> Arc<Provider> {
        support::provider("vllm", KEY)
    }

    fn request<'a>(docs: &[&'a str], top_n: Option<usize>) -> RerankRequest<'a> {
        support::rerank_request(
            "vllm-rerank",
            "qwen3-reranker",
            "q",
            docs,
            top_n,
            Vec::new(),
        )
    }

    #[test]
    fn body_is_cohere_shaped_without_flags() {
        let target = support::target(provider(), "Qwen/Qwen3-Reranker-0.6B");
        let native = rerank_request(&target, &request(&["a", "b"], Some(1))).unwrap();
        assert_eq!(native.path, "/v1/rerank");
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            r#"{"model":"Qwen/Qwen3-Reranker-0.6B","query":"q","documents":["a","b"],"top_n":1}"#
        );
        let native = rerank_request(&target, &request(&["a"], None)).unwrap();
        assert!(!std::str::from_utf8(&native.body).unwrap().contains("top_n"));
    }

    #[test]
    fn reads_results_skipping_echoed_documents() {
        let p = provider();
        let req = request(&["a", "b"], None);
        let body = br#"{"id":"rerank-1","model":"Qwen/Qwen3-Reranker-0.6B","usage":{"prompt_tokens":40,"total_tokens":40},
            "results":[{"index":1,"document":{"text":"b","multi_modal":null},"relevance_score":0.9},
                       {"index":0,"document":{"text":"a"},"relevance_score":0.1}]}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        let got: Vec<_> = out.results.iter().map(|r| r.index).collect();
        assert_eq!(got, vec![1, 0]);
        assert_eq!(out.usage.total_tokens, 40);
        assert_eq!(out.metadata["query_tokens_counted"], "per_document");
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let cases: &[(u16, &str, UpstreamErrorKind, &str)] = &[
            (
                404,
                r#"{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}}"#,
                UpstreamErrorKind::UnknownModel,
                "The model `x` does not exist.",
            ),
            (
                404,
                r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
                UpstreamErrorKind::UnknownModel,
                "The model `x` does not exist.",
            ),
            (
                404,
                r#"{"detail":"Not Found"}"#,
                UpstreamErrorKind::Failure,
                "HTTP 404",
            ),
            (
                400,
                r#"{"error":{"message":"top_n must be positive","type":"BadRequestError","param":null,"code":400}}"#,
                UpstreamErrorKind::InvalidRequest,
                "top_n must be positive",
            ),
            (
                401,
                r#"{"error":"Unauthorized"}"#,
                UpstreamErrorKind::AuthRejected,
                "HTTP 401",
            ),
            (500, "", UpstreamErrorKind::Failure, "HTTP 500"),
        ];
        for (status, body, kind, message) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
            assert_eq!(e.message, *message, "{status} {body}");
        }
    }
}
