//! Voyage AI rerank (`POST /v1/rerank`).
//!
//! Voyage names the limit `top_k` (default: every document) and lists results under `data`, not
//! `results`. Documents come back only when asked (`return_documents`, default false); the gateway
//! says false explicitly and re-attaches the caller's own strings. Voyage bills
//! `query_tokens × documents + Σ document tokens` and reports it as `usage.total_tokens`, which
//! becomes the public `total_tokens`; the public `query_tokens` follows the same formula.
//! `truncation` passes through natively.
//!
//! Keys issued by MongoDB Atlas (`al-…`) are served at `https://ai.mongodb.com/v1`, not
//! `api.voyageai.com` (voyageai-python `util.get_default_base_url`): such an account's `base_url`
//! is `https://ai.mongodb.com` (the adapter adds `/v1/rerank`).
//!
//! Errors are FastAPI-shaped (`{"detail": "..."}`), the envelope Voyage's own client reads.

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

/// Cohere's format with the limit named `top_k` and the results under `data`. `return_documents`
/// is already Voyage's default; it is sent so the answer stays small whatever the default becomes.
/// A result's `document` is not read even if present.
const WIRE: Wire = Wire {
    path: "/v1/rerank",
    top_n: Some("top_k"),
    off: &["return_documents"],
    results: &["data"],
    // "the number of query tokens × the number of documents + sum of the number of tokens in all
    // documents" (Voyage's reranker API reference).
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    rerank::request(&WIRE, target, req)
}

// ---- translation back ------------------------------------------------------------------------

/// Voyage reports nothing billed beyond the token total, which has its public field.
pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<UsageTotal>(&WIRE, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

/// 402 and 404 are classified as operator problems by `from_status` itself. An unknown model is a
/// 400 whose detail reads "Model `<name>` is not supported. Supported models are [...]".
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let text = fastapi::ErrorBody::parse(body).and_then(fastapi::ErrorBody::text);
    let mut err = status_error(provider, status, text.as_deref());
    if status == 400 && text.as_deref().is_some_and(unknown_model) {
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

/// Voyage's "no such model" detail.
fn unknown_model(detail: &str) -> bool {
    detail.starts_with("Model ") && detail.contains(" is not supported")
}

// ---- registration ----------------------------------------------------------------------------

/// The Voyage kind: Bearer key, rerank only.
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

    const KEY: &str = "pa-voyage-secret-0123456789";

    fn provider() -> Arc<Provider> {
        support::provider("voyage", KEY)
    }

    fn request<'a>(
        docs: &[&'a str],
        top_n: Option<usize>,
        passthrough: Vec<(Str<'a>, &'a RawValue)>,
    ) -> RerankRequest<'a> {
        support::rerank_request(
            "voyage-rerank",
            "voyage-rerank-2.5",
            "capital of France",
            docs,
            top_n,
            passthrough,
        )
    }

    fn body_of(req: &RerankRequest<'_>) -> String {
        let target = support::target(provider(), "rerank-2.5");
        let native = rerank_request(&target, req).unwrap();
        assert_eq!(native.path, "/v1/rerank");
        assert_eq!(native.content_type, "application/json");
        String::from_utf8(native.body.to_vec()).unwrap()
    }

    #[test]
    fn request_maps_top_n_to_top_k() {
        let req = request(&["Paris", "Berlin"], Some(1), Vec::new());
        assert_eq!(
            body_of(&req),
            r#"{"model":"rerank-2.5","query":"capital of France","documents":["Paris","Berlin"],"top_k":1,"return_documents":false}"#
        );
    }

    #[test]
    fn request_without_top_n_leaves_voyage_default() {
        let req = request(&["Paris", "Berlin"], None, Vec::new());
        assert_eq!(
            body_of(&req),
            r#"{"model":"rerank-2.5","query":"capital of France","documents":["Paris","Berlin"],"return_documents":false}"#
        );
    }

    #[test]
    fn truncation_passes_through() {
        let raw = RawValue::from_string("false".into()).unwrap();
        let req = request(
            &["Paris"],
            Some(1),
            vec![(Str(Cow::Borrowed("truncation")), &*raw)],
        );
        assert_eq!(
            body_of(&req),
            r#"{"model":"rerank-2.5","query":"capital of France","documents":["Paris"],"top_k":1,"return_documents":false,"truncation":false}"#
        );
    }

    #[test]
    fn response_reads_data_and_usage() {
        let p = provider();
        let req = request(&["Paris", "Berlin", "Rome"], Some(2), Vec::new());
        let body = br#"{"object":"list","data":[{"relevance_score":0.2,"index":1},{"relevance_score":0.9,"index":0,"document":"Paris"},{"relevance_score":0.1,"index":2}],
            "model":"rerank-2.5","usage":{"total_tokens":26}}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.document.as_str()))
            .collect();
        assert_eq!(got, vec![(0, "Paris"), (1, "Berlin")]);
        assert_eq!(out.usage.total_tokens, 26);
        assert_eq!(out.metadata["total_tokens_source"], "provider");
    }

    #[test]
    fn bad_answers_are_bad_responses() {
        let p = provider();
        let req = request(&["Paris"], None, Vec::new());
        for body in [
            &b"not json"[..],
            br#"{"data":"nope"}"#,
            // Cohere/Jina shape: Voyage's results are under `data`.
            br#"{"results":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"data":[{"index":0,"score":0.5}]}"#,
            br#"{"data":[{"index":3,"relevance_score":0.5}]}"#,
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
                r#"{"detail":"The total number of tokens exceeds the limit."}"#,
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                422,
                r#"{"detail":[{"loc":["body","top_k"],"msg":"Input should be greater than or equal to 1","type":"greater_than_equal"}]}"#,
                UpstreamErrorKind::InvalidRequest,
                false,
            ),
            (
                401,
                r#"{"detail":"Provided API key is invalid."}"#,
                UpstreamErrorKind::AuthRejected,
                false,
            ),
            (
                403,
                r#"{"detail":"Forbidden"}"#,
                UpstreamErrorKind::AuthRejected,
                false,
            ),
            (
                402,
                r#"{"detail":"Payment required"}"#,
                UpstreamErrorKind::Failure,
                false,
            ),
            (
                429,
                r#"{"detail":"You have exceeded the rate limit."}"#,
                UpstreamErrorKind::RateLimited,
                true,
            ),
            (
                500,
                r#"{"detail":"Internal server error"}"#,
                UpstreamErrorKind::Failure,
                true,
            ),
            (503, "", UpstreamErrorKind::Failure, true),
            (
                400,
                r#"{"detail":"Model rerank-9 is not supported. Supported models are ['rerank-2.5', 'rerank-2.5-lite']."}"#,
                UpstreamErrorKind::UnknownModel,
                false,
            ),
        ];
        for (status, body, kind, retryable) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
            assert_eq!(e.retryable(), *retryable, "{status} {body}");
        }
        assert_eq!(
            error_response(&p, 422, cases[1].1.as_bytes()).message,
            "body.top_k: Input should be greater than or equal to 1"
        );
        assert_eq!(error_response(&p, 503, b"").message, "HTTP 503");
    }

    #[test]
    fn error_messages_are_redacted() {
        let p = provider();
        let body = format!(r#"{{"detail":"API key {KEY} is invalid"}}"#);
        let e = error_response(&p, 401, body.as_bytes());
        assert!(!e.message.contains(KEY), "{}", e.message);
    }
}
