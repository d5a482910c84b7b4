//! Cohere rerank v1 (`POST /v1/rerank`).
//!
//! The v1 endpoint takes the same core fields as v2 plus `return_documents` and
//! `max_chunks_per_doc`. The gateway always sends `return_documents: false`: it re-attaches each
//! document from the caller's own request, so asking Cohere to echo the text back would only make
//! the answer larger. The answer's `meta` is read as v2's ([`crate::providers::cohere`]): search
//! units to `metadata`, usage the gateway's count with the query scored with each document.
//!
//! v1 refuses a request whose documents × `max_chunks_per_doc` (default 10) reach 10,000 ("number
//! of total max chunks (number of documents * max chunks per doc) must be less than 10000"), so
//! the family allows up to 9,999 documents and the adapter checks the product, naming the fields.

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::native::NativeRequest;
use crate::providers::cohere::Meta;
use crate::providers::formats::rerank::{self, QueryCounting, Wire};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// Cohere's format with `return_documents`; the family's native fields (`max_chunks_per_doc`)
/// travel verbatim after the known ones.
const WIRE: Wire = Wire {
    path: "/v1/rerank",
    off: &["return_documents"],
    // As v2: the query is scored with each document; billed in search units.
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

/// `max_chunks_per_doc` when the caller sends none (Cohere's changelog, "New Maximum Number of
/// Input Documents for Rerank").
const DEFAULT_MAX_CHUNKS: u64 = 10;

/// documents × `max_chunks_per_doc` must stay below this.
const MAX_TOTAL_CHUNKS: u64 = 10_000;

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    check_chunks(req)?;
    rerank::request(&WIRE, target, req)
}

/// v1's real document limit: documents × `max_chunks_per_doc` < 10,000. A `max_chunks_per_doc`
/// that is not a positive integer is left for Cohere to refuse in its own words.
fn check_chunks(req: &RerankRequest<'_>) -> Result<(), GatewayError> {
    let chunks = match req
        .passthrough
        .iter()
        .find(|(k, _)| k.as_str() == "max_chunks_per_doc")
    {
        Some((_, v)) => match serde_json::from_str::<u64>(v.get()) {
            Ok(n) if n > 0 => n,
            _ => return Ok(()),
        },
        None => DEFAULT_MAX_CHUNKS,
    };
    let docs = req.documents.len() as u64;
    if docs.saturating_mul(chunks) >= MAX_TOTAL_CHUNKS {
        return Err(GatewayError::field(
            "documents",
            format!(
                "has {docs} documents with max_chunks_per_doc {chunks}; Cohere v1 needs documents \
                 × max_chunks_per_doc below {MAX_TOTAL_CHUNKS} (lower max_chunks_per_doc, or send \
                 fewer documents)"
            ),
        ));
    }
    Ok(())
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<Meta>(&WIRE, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

/// The same envelope and codes as v2 (`{"message": …}`, 498 for a bad key, 499 retried, 404
/// "model '…' not found" naming the model).
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    crate::providers::cohere::error_response(provider, status, body)
}

// ---- registration ----------------------------------------------------------------------------

/// The Cohere v1 kind: Bearer key, rerank only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    crate::providers::registry::bearer_rerank(key, error_response, rerank_request, rerank_response)
}

// ---- tests -------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::Catalog;
    use crate::common::error::UpstreamErrorKind;
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
        assert_eq!(out.metadata["query_tokens_counted"], "per_document");
        let q = crate::tokens::count("q") as u64;
        assert_eq!(out.usage.query_tokens, 3 * q);
    }

    #[test]
    fn documents_times_chunks_must_stay_below_ten_thousand() {
        let target = support::target(provider(), "rerank-english-v3.0-native");
        let cat = support::catalog("m", "cohere-v1-rerank", target, 32_000, 9_999);
        let body = |n: usize, chunks: Option<&str>| {
            let docs: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
            let mut b = serde_json::json!({"model": "m", "query": "q", "documents": docs});
            if let Some(c) = chunks {
                b["max_chunks_per_doc"] = serde_json::from_str(c).unwrap();
            }
            b.to_string()
        };
        let try_build = |text: String| {
            let req = crate::api::rerank::parse(text.as_bytes(), &cat, 3).unwrap();
            rerank_request(&support::target(provider(), "x"), &req).map(|_| ())
        };
        // Cohere's default of 10 chunks: 999 documents pass, 1,000 do not.
        assert!(try_build(body(999, None)).is_ok());
        let e = try_build(body(1000, None)).unwrap_err();
        assert_eq!(e.status(), 400);
        let msg = format!("{:?}", e);
        assert!(msg.contains("max_chunks_per_doc 10"), "{msg}");
        // A caller who lowers max_chunks_per_doc may send more.
        assert!(try_build(body(4999, Some("2"))).is_ok());
        assert!(try_build(body(5000, Some("2"))).is_err());
        assert!(try_build(body(9999, Some("1"))).is_ok());
        // Not a positive integer: Cohere's to refuse.
        assert!(try_build(body(1000, Some("\"ten\""))).is_ok());
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
        let e = error_response(
            &p,
            404,
            br#"{"message":"model 'rerank-english-v2.0' not found, make sure the correct model ID was used and that you have access to the model."}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);

        let e = error_response(&p, 500, b"<html>oops</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        assert_eq!(e.message, "HTTP 500");
    }
}
