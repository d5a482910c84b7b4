//! Hugging Face text-embeddings-inference (TEI), self-hosted: `POST /rerank`.
//!
//! A TEI server serves the one model it was started with, so the native model name is never sent.
//! TEI has no `top_n`: it scores every text and the gateway keeps the best `top_n`. The answer is a
//! bare JSON array `[{"index","score"}]`; usage travels only in response headers. `x-compute-tokens`
//! is the sum of the tokens of every (query, text) pair the server ran, i.e. what the server
//! computed, so it is the provider total, and the query counts once per text. The other size and
//! timing headers go to `metadata`: `x-compute-characters` counts the query once per text too;
//! `x-compute-time` and `x-total-time` are the whole request's, while the tokenization, queue and
//! inference times are means over the texts (TEI divides their sums by the batch size), hence the
//! `_mean` in their keys (TEI `router/src/http/server.rs`, `rerank`).
//! TEI needs no key unless started with `--api-key`; when one is configured the gateway sends it as
//! `Authorization: Bearer`, which is what TEI checks.

use serde::Deserialize;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::rerank::{self, billed, Nothing, QueryCounting, Wire};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// No model and no `top_n`; the documents are `texts`. `raw_scores: false` asks for normalized
/// scores rather than raw logits, comparable with other providers' `relevance_score`;
/// `return_text: false` because the gateway re-attaches the caller's own strings. The answer is
/// the bare list of `{index, score}` (`text` is never asked for). The family's native fields
/// (`truncate`, `truncation_direction`) travel verbatim.
const WIRE: Wire = Wire {
    path: "/rerank",
    model: false,
    documents: "texts",
    top_n: None,
    off: &["raw_scores", "return_text"],
    results: &[],
    score: "score",
    // TEI runs one (query, text) pair per text and sums their tokens in `x-compute-tokens`.
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

/// The header carrying the tokens the server computed (all query+text pairs).
const COMPUTE_TOKENS: &str = "x-compute-tokens";

/// Numeric usage headers TEI sets on a success, and the `metadata` key each becomes. The times are
/// whole milliseconds in TEI's source, hence `_ms`; the per-text means say `_mean`.
const METADATA_HEADERS: &[(&str, &str)] = &[
    ("x-compute-characters", "compute_characters"),
    ("x-compute-time", "compute_time_ms"),
    ("x-total-time", "total_time_ms"),
    ("x-tokenization-time", "tokenization_time_ms_mean"),
    ("x-queue-time", "queue_time_ms_mean"),
    ("x-inference-time", "inference_time_ms_mean"),
];

/// TEI's Backend error when the loaded model cannot rerank (`"Backend error: model is not a
/// re-ranker model"`): the configured server serves no reranker, which only the operator can fix.
const NOT_A_RERANKER: &str = "model is not a re-ranker model";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_type: Option<String>,
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
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let answer = rerank::read::<Nothing>(&WIRE, provider, req, body)?;
    // A missing or unreadable header is not worth failing a good answer over: usage then falls
    // back to the gateway's own count.
    let provider_total = billed(&[header_number(headers, COMPUTE_TOKENS).and_then(|n| n.as_f64())]);
    let mut metadata = serde_json::Map::new();
    for (header, key) in METADATA_HEADERS {
        if let Some(n) = header_number(headers, header) {
            metadata.insert((*key).into(), serde_json::Value::Number(n));
        }
    }
    answer.finish(&WIRE, provider, req, provider_total, metadata)
}

/// A header holding a plain non-negative integer (as TEI writes them), else `None`.
fn header_number(headers: &http::HeaderMap, name: &str) -> Option<serde_json::Number> {
    let text = headers.get(name)?.to_str().ok()?.trim();
    text.parse::<u64>().ok().map(serde_json::Number::from)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let mut err = status_error(provider, status, parsed.as_ref().map(|e| e.error.as_str()));
    let parsed_error = parsed.as_ref().map(|e| e.error.as_str());
    // TEI derives the status from `error_type`, so the type is the more precise signal. It is
    // matched case-insensitively: the enum serializes capitalized, its API docs show lower case.
    let error_type = parsed
        .as_ref()
        .and_then(|e| e.error_type.as_deref())
        .map(str::to_ascii_lowercase);
    match error_type.as_deref() {
        // Validation (422 since TEI's February 2026 fix, 413 before: too many texts, input too
        // long without `truncate`), Tokenizer (422), Empty (400: no texts): all about what the
        // caller sent.
        Some("validation" | "tokenizer" | "empty") => err.kind = UpstreamErrorKind::InvalidRequest,
        Some("backend") if parsed_error.is_some_and(|e| e.ends_with(NOT_A_RERANKER)) => {
            err.kind = UpstreamErrorKind::UnknownModel
        }
        // 429: the server's concurrency limit is full; worth retrying later.
        Some("overloaded") => err.kind = UpstreamErrorKind::RateLimited,
        // Backend (424: inference failed, or the loaded model is not a reranker) and Unhealthy
        // (503): the server's problem, not the caller's.
        Some("backend" | "unhealthy") => err.kind = UpstreamErrorKind::Failure,
        // 424 is TEI's Backend status even when the body is unreadable.
        _ if status == 424 => err.kind = UpstreamErrorKind::Failure,
        _ => {}
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The TEI kind: rerank only. A self-hosted server usually has no key; one that was started with
/// `--api-key` takes it as a Bearer token.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let mut kind = crate::providers::registry::bearer_rerank(
        key,
        error_response,
        rerank_request,
        rerank_response,
    )?;
    if key.is_empty() {
        kind.auth = crate::upstream::provider::Auth::None;
    }
    Ok(kind)
}

// ---- tests -------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;

    fn provider(key: &str) -> Arc<Provider> {
        support::provider_at("tei", key, "http://127.0.0.1:1")
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(""), "bge-reranker-base");
        support::catalog("tei-reranker", "tei-rerank", target, 32_000, 32)
    }

    /// The native body for a public request body, as sent (bytes, so field order is checked too).
    fn native_body(body: &str) -> String {
        let native = support::native_request(&catalog(), body.as_bytes(), rerank_request);
        assert_eq!(native.method, http::Method::POST);
        assert_eq!(native.path, "/rerank");
        assert_eq!(native.content_type, "application/json");
        String::from_utf8(native.body.to_vec()).unwrap()
    }

    #[test]
    fn builds_the_native_request_without_model_or_top_n() {
        let got = native_body(
            r#"{"model":"tei-reranker","query":"q","documents":["a","b","c"],"top_n":2}"#,
        );
        assert_eq!(
            got,
            r#"{"query":"q","texts":["a","b","c"],"raw_scores":false,"return_text":false}"#
        );
    }

    #[test]
    fn passes_truncation_fields_through() {
        let got = native_body(
            r#"{"model":"tei-reranker","query":"q","documents":["a"],"truncate":true,"truncation_direction":"Left"}"#,
        );
        assert_eq!(
            got,
            r#"{"query":"q","texts":["a"],"raw_scores":false,"return_text":false,"truncate":true,"truncation_direction":"Left"}"#
        );
    }

    #[test]
    fn translates_the_answer_and_reads_usage_headers() {
        let cat = catalog();
        let body = br#"{"model":"tei-reranker","query":"q","documents":["a","b","c"],"top_n":2}"#;
        let req = support::parse(&cat, body);
        let mut h = http::HeaderMap::new();
        h.insert("x-compute-tokens", "57".parse().unwrap());
        h.insert("x-compute-characters", "12".parse().unwrap());
        h.insert("x-inference-time", "3".parse().unwrap());
        h.insert("x-compute-type", "gpu+optimized".parse().unwrap());
        let native =
            br#"[{"index":2,"score":0.9},{"index":0,"score":0.4},{"index":1,"score":0.1}]"#;
        let out = rerank_response(&provider(""), &req, &h, native).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.relevance_score, r.document.as_str()))
            .collect();
        assert_eq!(got, vec![(2, 0.9, "c"), (0, 0.4, "a")]);
        assert_eq!(out.usage.total_tokens, 57);
        assert_eq!(out.metadata["total_tokens_source"], "provider");
        assert_eq!(out.metadata["compute_characters"], 12);
        assert_eq!(out.metadata["inference_time_ms_mean"], 3);
        assert!(out.metadata.get("queue_time_ms_mean").is_none());
        assert_eq!(out.metadata["query_tokens_counted"], "per_document");
        assert_eq!(out.usage.query_tokens, 3 * crate::tokens::count("q") as u64);
        assert!(out.metadata.get("compute_type").is_none());
    }

    #[test]
    fn without_usage_headers_the_gateway_counts() {
        let cat = catalog();
        let body = br#"{"model":"tei-reranker","query":"q","documents":["a","b"]}"#;
        let req = support::parse(&cat, body);
        let mut h = http::HeaderMap::new();
        h.insert("x-compute-tokens", "lots".parse().unwrap());
        let native = br#"[{"index":0,"score":0.5,"text":"a"},{"index":1,"score":0.4}]"#;
        let out = rerank_response(&provider(""), &req, &h, native).unwrap();
        assert_eq!(out.results.len(), 2);
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
    }

    #[test]
    fn unreadable_answers_are_bad_responses() {
        let cat = catalog();
        let body = br#"{"model":"tei-reranker","query":"q","documents":["a","b"]}"#;
        let req = support::parse(&cat, body);
        let p = provider("");
        let h = http::HeaderMap::new();
        for native in [
            &b"not json"[..],
            br#"{"results":[{"index":0,"relevance_score":0.5}]}"#,
            br#"[{"index":0}]"#,
            br#"[{"index":5,"score":0.5}]"#,
        ] {
            let e = rerank_response(&p, &req, &h, native).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider("sk-tei-secret-99");
        let cases: [(u16, &[u8], UpstreamErrorKind); 13] = [
            // TEI since February 2026 (Validation → 422); older servers answer 413.
            (
                422,
                br#"{"error":"batch size 40 > maximum allowed batch size 32","error_type":"Validation"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                413,
                br#"{"error":"batch size 40 > maximum allowed batch size 32","error_type":"Validation"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            // The server was started with an embedding or classifier model.
            (
                424,
                br#"{"error":"Backend error: model is not a re-ranker model","error_type":"backend"}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                422,
                br#"{"error":"Tokenization error","error_type":"Tokenizer"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                400,
                br#"{"error":"`texts` cannot be empty","error_type":"Empty"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                429,
                br#"{"error":"Model is overloaded","error_type":"overloaded"}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                424,
                br#"{"error":"Inference failed","error_type":"Backend"}"#,
                UpstreamErrorKind::Failure,
            ),
            (
                503,
                br#"{"error":"unhealthy","error_type":"Unhealthy"}"#,
                UpstreamErrorKind::Failure,
            ),
            // TEI's auth layer answers a bare 401.
            (401, b"", UpstreamErrorKind::AuthRejected),
            (424, b"", UpstreamErrorKind::Failure),
            (404, b"", UpstreamErrorKind::Failure),
            (413, b"length limit exceeded", UpstreamErrorKind::InvalidRequest),
            (500, b"<html>oops</html>", UpstreamErrorKind::Failure),
        ];
        for (status, body, kind) in cases {
            let e = error_response(&p, status, body);
            assert_eq!(e.kind, kind, "HTTP {status}");
            assert_eq!(e.status, Some(status));
        }

        let e = error_response(
            &p,
            422,
            br#"{"error":"bad token sk-tei-secret-99","error_type":"Tokenizer"}"#,
        );
        assert!(!e.message.contains("sk-tei-secret"));
        assert_eq!(error_response(&p, 401, b"").message, "HTTP 401");
        assert!(error_response(&p, 429, br#"{"error":"x","error_type":"Overloaded"}"#).retryable());
        assert!(!error_response(&p, 424, br#"{"error":"x","error_type":"Backend"}"#).retryable());
    }
}
