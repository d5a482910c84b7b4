//! Jina AI rerank (`POST /v1/rerank`).
//!
//! Jina takes Cohere-style fields (`top_n`, `return_documents`) but echoes every document back unless
//! told not to (`return_documents` defaults to true), so the gateway asks for indexes and scores only
//! and re-attaches the caller's own strings. Jina bills in tokens and reports `usage.total_tokens`,
//! which becomes the public `total_tokens`; Jina documents no per-document query formula, so the
//! gateway counts the query once.
//!
//! Errors are FastAPI-shaped: `{"detail": "..."}` (or a validation list under `detail`), and the
//! current API adds a machine code next to it (`{"detail": "...", "code": "AUTHZ_INSUFFICIENT_BALANCE"}`).

use serde::Deserialize;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::fastapi;
use crate::providers::formats::rerank::{self, QueryCounting, UsageTotal, Wire};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// Cohere's format with `return_documents` (sent false: the documents would only double the
/// answer's size). A result's `document` (an object `{"text": …}` or, behind some proxies, a plain
/// string) is not read.
const WIRE: Wire = Wire {
    path: "/v1/rerank",
    off: &["return_documents"],
    // No source says how Jina counts the query in `usage.total_tokens` (ledger: unconfirmed).
    billing: QueryCounting::Once,
    ..Wire::COHERE
};

/// Jina's codes for an account that cannot pay for the call: the operator's problem, and retrying
/// the same request will not help.
const BILLING_CODES: &[&str] = &[
    "AUTHZ_INSUFFICIENT_BALANCE",
    "AUTHZ_RESOURCE_LIMIT_EXCEEDED",
];

/// The configured native model does not exist (400 "Model '<model>' not found"): the gateway's
/// configuration names a model Jina does not serve.
const MODEL_NOT_FOUND: &str = "INPUT_MODEL_NOT_FOUND";

// ---- wire types ------------------------------------------------------------------------------

/// FastAPI's body plus Jina's machine code.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(flatten)]
    fastapi: fastapi::ErrorBody,
    #[serde(default)]
    code: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    rerank::request(&WIRE, target, req)
}

// ---- translation back ------------------------------------------------------------------------

/// Jina reports nothing billed beyond the token total, which has its public field.
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
    let (text, code) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => (e.fastapi.text(), e.code),
        Err(_) => (None, None),
    };
    let mut err = status_error(provider, status, text.as_deref());
    let code = code.as_deref().unwrap_or("");
    if BILLING_CODES.contains(&code) {
        // Out of balance (Jina has answered both 402 and 403 for it): a provider-side failure the
        // operator must fix; the 4xx status keeps it from being retried.
        err.kind = UpstreamErrorKind::Failure;
    } else if code == MODEL_NOT_FOUND {
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Jina kind: Bearer key, rerank only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    crate::providers::registry::bearer_rerank(key, error_response, rerank_request, rerank_response)
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;

    use serde_json::value::RawValue;

    use super::*;
    use crate::common::json::Str;
    use crate::providers::test_support as support;

    const KEY: &str = "jina_secret_0123456789";

    fn provider() -> Arc<Provider> {
        support::provider("jina", KEY)
    }

    fn request<'a>(
        docs: &[&'a str],
        top_n: Option<usize>,
        passthrough: Vec<(Str<'a>, &'a RawValue)>,
    ) -> RerankRequest<'a> {
        support::rerank_request(
            "jina-rerank",
            "jina-reranker-v2",
            "capital of France",
            docs,
            top_n,
            passthrough,
        )
    }

    fn body_of(req: &RerankRequest<'_>) -> String {
        let target = support::target(provider(), "jina-reranker-v2-base-multilingual");
        let native = rerank_request(&target, req).unwrap();
        assert_eq!(native.path, "/v1/rerank");
        assert_eq!(native.content_type, "application/json");
        String::from_utf8(native.body.to_vec()).unwrap()
    }

    #[test]
    fn request_with_top_n() {
        let req = request(&["Paris", "Berlin"], Some(1), Vec::new());
        assert_eq!(
            body_of(&req),
            r#"{"model":"jina-reranker-v2-base-multilingual","query":"capital of France","documents":["Paris","Berlin"],"top_n":1,"return_documents":false}"#
        );
    }

    #[test]
    fn request_without_top_n_leaves_jina_default() {
        let req = request(&["Paris", "Berlin"], None, Vec::new());
        assert_eq!(
            body_of(&req),
            r#"{"model":"jina-reranker-v2-base-multilingual","query":"capital of France","documents":["Paris","Berlin"],"return_documents":false}"#
        );
    }

    #[test]
    fn passthrough_is_appended_verbatim() {
        let raw = RawValue::from_string("{\"a\": 1}".into()).unwrap();
        let req = request(&["Paris"], None, vec![(Str(Cow::Borrowed("x")), &*raw)]);
        assert!(body_of(&req).ends_with(r#""return_documents":false,"x":{"a": 1}}"#));
    }

    #[test]
    fn response_with_object_or_string_documents() {
        let p = provider();
        let req = request(&["Paris", "Berlin", "Rome"], Some(2), Vec::new());
        let body = br#"{"model":"jina-reranker-v2-base-multilingual","usage":{"total_tokens":815,"prompt_tokens":815},
            "results":[{"index":1,"document":{"text":"Berlin"},"relevance_score":0.2},
                       {"index":0,"document":"Paris","relevance_score":0.9},
                       {"index":2,"relevance_score":0.1}]}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.document.as_str()))
            .collect();
        assert_eq!(got, vec![(0, "Paris"), (1, "Berlin")]);
        assert_eq!(out.usage.total_tokens, 815);
        assert_eq!(out.metadata["total_tokens_source"], "provider");
    }

    #[test]
    fn response_without_usage_counts_locally() {
        let p = provider();
        let req = request(&["Paris"], None, Vec::new());
        let body = br#"{"results":[{"index":0,"relevance_score":0.5}]}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
    }

    #[test]
    fn bad_answers_are_bad_responses() {
        let p = provider();
        let req = request(&["Paris"], None, Vec::new());
        for body in [
            &b"not json"[..],
            br#"{"results":"nope"}"#,
            br#"{"data":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"results":[{"index":0}]}"#,
            br#"{"results":[{"index":7,"relevance_score":0.5}]}"#,
        ] {
            let e = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{e}");
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let cases: &[(u16, &str, UpstreamErrorKind, bool)] = &[
            (
                400,
                r#"{"detail":"Number of documents exceeds the limit"}"#,
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                422,
                r#"{"detail":[{"loc":["body","top_n"],"msg":"ensure this value is greater than 0","type":"value_error"}]}"#,
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                401,
                r#"{"detail":"Failed to authenticate with the provided api key."}"#,
                UpstreamErrorKind::AuthRejected,
                false,
            ),
            (
                402,
                r#"{"detail":"Account balance not enough to run this query, please recharge."}"#,
                UpstreamErrorKind::Failure,
                false,
            ),
            (
                403,
                r#"{"detail":"Insufficient account balance.","code":"AUTHZ_INSUFFICIENT_BALANCE"}"#,
                UpstreamErrorKind::Failure,
                false,
            ),
            (
                403,
                r#"{"detail":"Forbidden"}"#,
                UpstreamErrorKind::AuthRejected,
                false,
            ),
            (
                400,
                r#"{"detail":"Model 'nope' not found","code":"INPUT_MODEL_NOT_FOUND"}"#,
                UpstreamErrorKind::UnknownModel,
                false,
            ),
            (
                429,
                r#"{"detail":"Rate limit exceeded","code":"RATE_REQUEST_LIMIT_EXCEEDED"}"#,
                UpstreamErrorKind::RateLimited,
                true,
            ),
            (500, "<html>oops</html>", UpstreamErrorKind::Failure, true),
        ];
        for (status, body, kind, retryable) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
            assert_eq!(e.retryable(), *retryable, "{status} {body}");
            assert_eq!(e.status, Some(*status));
        }

        let e = error_response(&p, 422, cases[1].1.as_bytes());
        assert_eq!(e.message, "body.top_n: ensure this value is greater than 0");
        assert_eq!(error_response(&p, 500, b"<html>").message, "HTTP 500");
        assert_eq!(
            error_response(&p, 503, br#"{"message":"overloaded"}"#).message,
            "overloaded"
        );
    }

    #[test]
    fn error_messages_are_redacted() {
        let p = provider();
        let body = format!(r#"{{"detail":"Invalid API key {KEY}"}}"#);
        let e = error_response(&p, 401, body.as_bytes());
        assert!(!e.message.contains(KEY), "{}", e.message);
    }
}
