//! Cohere rerank v1 (`POST /v1/rerank`).
//!
//! The v1 endpoint takes the same core fields as v2 plus `return_documents` and
//! `max_chunks_per_doc`. The gateway always sends `return_documents: false`: it re-attaches each
//! document from the caller's own request, so asking Cohere to echo the text back would only make
//! the answer larger. Cohere bills rerank in search units (`meta.billed_units.search_units`), which
//! go to `metadata`; it reports no token total, so usage is the gateway's own count.

use serde::{Deserialize, Serialize};

use crate::common::native::json_with_extra;

use crate::common::native::NativeRequest;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::json::JsonStr;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const RERANK_PATH: &str = "/v1/rerank";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct RerankBody<'a> {
    model: &'a str,
    query: &'a str,
    /// The caller's literals, copied as sent.
    documents: &'a [JsonStr<'a>],
    /// Only when the caller asked: Cohere's default is every document, which is also ours.
    #[serde(skip_serializing_if = "Option::is_none")]
    top_n: Option<usize>,
    return_documents: bool,
}

#[derive(Deserialize)]
struct RerankResponse {
    results: Vec<ResultItem>,
    #[serde(default)]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct ResultItem {
    index: usize,
    relevance_score: f64,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    billed_units: Option<BilledUnits>,
}

#[derive(Deserialize)]
struct BilledUnits {
    #[serde(default)]
    search_units: Option<f64>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
}

// ---- translation to native -------------------------------------------------------------------

pub fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = RerankBody {
        model: &target.native_model,
        query: req.query.as_str(),
        documents: &req.documents,
        top_n: req.top_n_given.then_some(req.top_n),
        return_documents: false,
    };
    // The family's native fields (`max_chunks_per_doc`) travel verbatim after the known ones.
    Ok(NativeRequest::post_json(
        RERANK_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

// ---- translation back ------------------------------------------------------------------------

pub fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let bad = |m: String| crate::upstream::provider::bad_answer(provider, m);
    let parsed: RerankResponse = crate::providers::parse_answer(provider, body)?;
    let mut metadata = serde_json::Map::new();
    if let Some(units) = parsed
        .meta
        .as_ref()
        .and_then(|m| m.billed_units.as_ref())
        .and_then(|b| b.search_units)
    {
        metadata.insert("search_units".into(), serde_json::json!(units));
    }
    // v1 reports no token count: `None` makes usage the gateway's own sum.
    req.build(
        parsed.results.iter().map(|r| (r.index, r.relevance_score)),
        None,
        metadata,
    )
    .map_err(bad)
}

// ---- error mapping ---------------------------------------------------------------------------

pub fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let message = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .filter(|e| !e.message.is_empty())
        .map(|e| provider.redact(&e.message))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    // Cohere's "invalid token": the gateway's key, not the caller's request.
    if status == 498 {
        err.kind = UpstreamErrorKind::AuthRejected;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Cohere v1 kind: Bearer key, rerank only.
pub fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    crate::providers::registry::bearer_rerank(key, error_response, rerank_request, rerank_response)
}

// ---- tests -------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-cohere-secret-42";

    fn provider() -> Arc<Provider> {
        support::provider_at("cohere-v1", KEY, "http://127.0.0.1:1")
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "rerank-english-v3.0-native");
        support::catalog(
            "rerank-english-v3.0",
            "cohere-v1-rerank",
            target,
            32_000,
            1000,
        )
    }

    /// The native body for a public request body, as sent (bytes, so field order is checked too).
    fn native_body(body: &str) -> String {
        let native = support::native_request(&catalog(), body.as_bytes(), rerank_request);
        assert_eq!(native.method, http::Method::POST);
        assert_eq!(native.path, "/v1/rerank");
        assert_eq!(native.content_type, "application/json");
        String::from_utf8(native.body.to_vec()).unwrap()
    }

    #[test]
    fn builds_the_native_request() {
        let got = native_body(
            r#"{"model":"rerank-english-v3.0","query":"q","documents":["a","b","c"],"top_n":2,"max_chunks_per_doc":5}"#,
        );
        assert_eq!(
            got,
            r#"{"model":"rerank-english-v3.0-native","query":"q","documents":["a","b","c"],"top_n":2,"return_documents":false,"max_chunks_per_doc":5}"#
        );
    }

    #[test]
    fn omits_top_n_the_caller_did_not_send() {
        let got =
            native_body(r#"{"model":"rerank-english-v3.0","query":"q","documents":["a","b"]}"#);
        assert_eq!(
            got,
            r#"{"model":"rerank-english-v3.0-native","query":"q","documents":["a","b"],"return_documents":false}"#
        );
    }

    #[test]
    fn translates_the_answer() {
        let cat = catalog();
        let body =
            br#"{"model":"rerank-english-v3.0","query":"q","documents":["a","b","c"],"top_n":2}"#;
        let req = support::parse(&cat, body);
        let native = br#"{"id":"x","results":[{"index":1,"relevance_score":0.2},{"index":2,"relevance_score":0.9},{"index":0,"relevance_score":0.1}],"meta":{"api_version":{"version":"1"},"billed_units":{"search_units":1}}}"#;
        let out = rerank_response(&provider(), &req, &http::HeaderMap::new(), native).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.relevance_score, r.document.as_str()))
            .collect();
        assert_eq!(got, vec![(2, 0.9, "c"), (1, 0.2, "b")]);
        assert_eq!(out.metadata["search_units"], 1.0);
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
    }

    #[test]
    fn unreadable_answers_are_bad_responses() {
        let cat = catalog();
        let body = br#"{"model":"rerank-english-v3.0","query":"q","documents":["a","b"]}"#;
        let req = support::parse(&cat, body);
        let p = provider();
        let h = http::HeaderMap::new();
        for native in [
            &b"not json"[..],
            br#"{"results":"nope"}"#,
            br#"{"results":[{"index":0}]}"#,
            br#"{"results":[{"index":7,"relevance_score":0.5}]}"#,
        ] {
            let e = rerank_response(&p, &req, &h, native).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            400,
            br#"{"message":"invalid request: list of documents must not be empty"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(
            e.message,
            "invalid request: list of documents must not be empty"
        );

        let e = error_response(
            &p,
            498,
            format!(r#"{{"message":"invalid api token {KEY}"}}"#).as_bytes(),
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY));

        assert_eq!(
            error_response(&p, 401, br#"{"message":"no api key supplied"}"#).kind,
            UpstreamErrorKind::AuthRejected
        );
        assert_eq!(
            error_response(&p, 429, br#"{"message":"too many requests"}"#).kind,
            UpstreamErrorKind::RateLimited
        );
        let e = error_response(&p, 404, br#"{"message":"model not found"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = error_response(&p, 500, b"<html>oops</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        assert_eq!(e.message, "HTTP 500");
    }
}
