//! Mixedbread rerank (`POST /v1/reranking`).
//!
//! Mixedbread's wire names differ from Cohere's almost everywhere: documents go in `input`, the limit
//! is `top_k` (default: every document), echoing documents is `return_input` (default false; sent
//! as false anyway, the gateway re-attaches the caller's own strings), results are under `data` and
//! the score is `score`. Usage is OpenAI-style (`usage.prompt_tokens`, `usage.total_tokens`); the
//! total becomes the public `total_tokens`. Mixedbread documents no per-document query formula,
//! so the gateway counts the query once.
//!
//! Mixedbread documents its status codes but not its error body, so the message is looked for in
//! the FastAPI `detail`, then `message`, then `error`.

use serde::Deserialize;
use serde_json::Value;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::fastapi;
use crate::providers::formats::rerank::{self, QueryCounting, UsageTotal, Wire};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// A result's `input` (the echoed document) is not read even if present.
const WIRE: Wire = Wire {
    path: "/v1/reranking",
    documents: "input",
    top_n: Some("top_k"),
    off: &["return_input"],
    results: &["data"],
    score: "score",
    // No source says how Mixedbread counts the query in `usage` (ledger: unconfirmed).
    billing: QueryCounting::Once,
    ..Wire::COHERE
};

// ---- wire types ------------------------------------------------------------------------------

/// FastAPI's body, or an OpenAI-style `error`.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(flatten)]
    fastapi: fastapi::ErrorBody,
    #[serde(default)]
    error: Option<Value>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    rerank::request(&WIRE, target, req)
}

// ---- translation back ------------------------------------------------------------------------

/// `prompt_tokens` is the same count as `total_tokens` for a reranker (no completion), so nothing
/// billed is left for `metadata`.
pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<UsageTotal>(&WIRE, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

/// 402 and 404 are classified as operator problems by `from_status` itself.
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let text = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .and_then(|e| {
            let error = e.error;
            e.fastapi
                .text()
                .or_else(|| error.as_ref().and_then(error_text))
        });
    status_error(provider, status, text.as_deref())
}

/// `error` as a plain string or an OpenAI-style `{"message": ...}` object.
fn error_text(error: &Value) -> Option<String> {
    let text = match error {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("message").and_then(Value::as_str).unwrap_or(""),
        _ => "",
    };
    (!text.trim().is_empty()).then(|| text.to_string())
}

// ---- registration ----------------------------------------------------------------------------

/// The Mixedbread kind: Bearer key, rerank only.
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
    use crate::common::error::UpstreamErrorKind;
    use crate::common::json::Str;
    use crate::providers::test_support as support;

    const KEY: &str = "mxb_secret_0123456789";

    fn provider() -> Arc<Provider> {
        support::provider("mixedbread", KEY)
    }

    fn request<'a>(
        docs: &[&'a str],
        top_n: Option<usize>,
        passthrough: Vec<(Str<'a>, &'a RawValue)>,
    ) -> RerankRequest<'a> {
        support::rerank_request(
            "mixedbread-rerank",
            "mxbai-rerank-large-v2",
            "capital of France",
            docs,
            top_n,
            passthrough,
        )
    }

    fn body_of(req: &RerankRequest<'_>) -> String {
        let target = support::target(provider(), "mixedbread-ai/mxbai-rerank-large-v2");
        let native = rerank_request(&target, req).unwrap();
        assert_eq!(native.path, "/v1/reranking");
        assert_eq!(native.content_type, "application/json");
        String::from_utf8(native.body.to_vec()).unwrap()
    }

    #[test]
    fn request_uses_input_and_top_k() {
        let req = request(&["Paris", "Berlin"], Some(1), Vec::new());
        assert_eq!(
            body_of(&req),
            r#"{"model":"mixedbread-ai/mxbai-rerank-large-v2","query":"capital of France","input":["Paris","Berlin"],"top_k":1,"return_input":false}"#
        );
    }

    #[test]
    fn request_without_top_n_leaves_mixedbread_default() {
        let req = request(&["Paris", "Berlin"], None, Vec::new());
        assert_eq!(
            body_of(&req),
            r#"{"model":"mixedbread-ai/mxbai-rerank-large-v2","query":"capital of France","input":["Paris","Berlin"],"return_input":false}"#
        );
    }

    #[test]
    fn passthrough_is_appended_verbatim() {
        let raw = RawValue::from_string("true".into()).unwrap();
        let req = request(&["Paris"], None, vec![(Str(Cow::Borrowed("x")), &*raw)]);
        assert!(body_of(&req).ends_with(r#""return_input":false,"x":true}"#));
    }

    #[test]
    fn response_reads_data_score_and_usage() {
        let p = provider();
        let req = request(&["Paris", "Berlin", "Rome"], Some(2), Vec::new());
        let body = br#"{"object":"list","model":"mixedbread-ai/mxbai-rerank-large-v2","top_k":2,"return_input":false,
            "data":[{"index":1,"score":0.2,"object":"rank_result"},{"index":0,"score":0.9,"input":"Paris","object":"rank_result"}],
            "usage":{"prompt_tokens":120,"total_tokens":120,"completion_tokens":0}}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.document.as_str()))
            .collect();
        assert_eq!(got, vec![(0, "Paris"), (1, "Berlin")]);
        assert_eq!(out.usage.total_tokens, 120);
        assert_eq!(out.metadata["total_tokens_source"], "provider");
    }

    #[test]
    fn bad_answers_are_bad_responses() {
        let p = provider();
        let req = request(&["Paris"], None, Vec::new());
        for body in [
            &b"not json"[..],
            br#"{"data":"nope"}"#,
            // Voyage/Cohere score name: Mixedbread's is `score`.
            br#"{"data":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"results":[{"index":0,"score":0.5}]}"#,
            br#"{"data":[{"index":3,"score":0.5}]}"#,
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
                422,
                r#"{"detail":[{"loc":["body","input"],"msg":"List should have at least 1 item","type":"too_short"}]}"#,
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                400,
                r#"{"message":"Malformed request"}"#,
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                401,
                r#"{"detail":"Invalid API key"}"#,
                UpstreamErrorKind::AuthRejected,
                false,
            ),
            (
                402,
                r#"{"detail":"Insufficient balance"}"#,
                UpstreamErrorKind::Failure,
                false,
            ),
            (
                404,
                r#"{"detail":"Not Found"}"#,
                UpstreamErrorKind::Failure,
                false,
            ),
            (
                429,
                r#"{"error":{"message":"Rate limit exceeded"}}"#,
                UpstreamErrorKind::RateLimited,
                true,
            ),
            (
                500,
                "Internal Server Error",
                UpstreamErrorKind::Failure,
                true,
            ),
            (504, "", UpstreamErrorKind::Timeout, true),
        ];
        for (status, body, kind, retryable) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
            assert_eq!(e.retryable(), *retryable, "{status} {body}");
        }
        assert_eq!(
            error_response(&p, 422, cases[0].1.as_bytes()).message,
            "body.input: List should have at least 1 item"
        );
        assert_eq!(
            error_response(&p, 429, cases[5].1.as_bytes()).message,
            "Rate limit exceeded"
        );
        assert_eq!(
            error_response(&p, 400, cases[1].1.as_bytes()).message,
            "Malformed request"
        );
        assert_eq!(error_response(&p, 500, b"oops").message, "HTTP 500");
    }

    #[test]
    fn error_messages_are_redacted() {
        let p = provider();
        let body = format!(r#"{{"error":"bad key {KEY}"}}"#);
        let e = error_response(&p, 401, body.as_bytes());
        assert!(!e.message.contains(KEY), "{}", e.message);
    }
}
