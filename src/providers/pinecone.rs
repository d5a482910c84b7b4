//! Pinecone's hosted rerank (Pinecone Inference): `POST https://api.pinecone.io/rerank`, the key
//! in `Api-Key`, the API version in `X-Pinecone-Api-Version` (required; this adapter speaks
//! `2026-07`).
//!
//! The body: `model` (`bge-reranker-v2-m3`, `cohere-rerank-3.5`, `pinecone-rerank-v0`), `query`
//! (a string), `documents` (objects; each caller's document goes as `{"text": …}`, the field
//! Pinecone ranks by default, so `rank_fields` is never sent), `top_n` only when the caller gave
//! one (Pinecone's default is every document), and `return_documents: false` (Pinecone's default
//! is `true`; the gateway re-attaches the caller's own strings). The model's `parameters` (such
//! as `{"truncate": "END"}`) pass through where the family lists them.
//!
//! The answer is `{"model", "data": [{"index", "score", "document"?}], "usage": {"rerank_units"}}`:
//! the scores are read by the shared reader; `rerank_units` (what Pinecone bills) goes to
//! `metadata.rerank_units`, and token usage is the gateway's own count. Errors are
//! `{"error": {"code", "message"}, "status"}` with gRPC-style codes.

use http::{HeaderName, HeaderValue};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::api::adapter::Adapters;
use crate::api::rerank::{QueryCounting, RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::json::JsonStr;
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::rerank::{self, Reported, Wire};
use crate::providers::registry::{keyed, Kind, RerankFns};
use crate::upstream::provider::{Auth, Provider};

// ---- constants -------------------------------------------------------------------------------

const RERANK_PATH: &str = "/rerank";

/// The API version this adapter's wire facts come from (docs/providers/pinecone.md).
const API_VERSION: &str = "2026-07";

/// The answer's shape, read by the shared reader: `data[].index` and `score`.
const ANSWER: Wire = Wire {
    path: RERANK_PATH,
    results: &["data"],
    score: "score",
    // Cross-encoders: each document is scored with the query (the gateway's own count).
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

// ---- wire types ------------------------------------------------------------------------------

struct Body<'a> {
    model: &'a str,
    req: &'a RerankRequest<'a>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("model", self.model)?;
        m.serialize_entry("query", self.req.query.as_str())?;
        m.serialize_entry("documents", &Documents(&self.req.documents))?;
        if self.req.top_n_given {
            m.serialize_entry("top_n", &self.req.top_n)?;
        }
        m.serialize_entry("return_documents", &false)?;
        // The family's native fields (`parameters`) travel verbatim after the known ones.
        for (key, value) in &self.req.passthrough {
            m.serialize_entry(key.as_str(), value)?;
        }
        m.end()
    }
}

/// The caller's document literals, each as `{"text": literal}` (copied as sent).
struct Documents<'a>(&'a [JsonStr<'a>]);

impl Serialize for Documents<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Text<'a>(&'a JsonStr<'a>);
        impl Serialize for Text<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("text", self.0)?;
                m.end()
            }
        }
        s.collect_seq(self.0.iter().map(Text))
    }
}

/// What the answer reports beside the scores: the rerank units Pinecone bills (not tokens).
#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    usage: Option<Units>,
}

#[derive(Deserialize)]
struct Units {
    #[serde(default)]
    rerank_units: Option<u64>,
}

impl Reported for Usage {
    fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64> {
        if let Some(units) = self.usage.and_then(|u| u.rerank_units) {
            metadata.insert("rerank_units".into(), units.into());
        }
        // Rerank units are requests, not tokens: the token total is the gateway's.
        None
    }
}

/// `{"error": {"code", "message"}, "status"}`.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<ErrorDetail>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rerank_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = Body {
        model: &target.native_model,
        req,
    };
    let docs: usize = req.documents.iter().map(|d| d.raw().get().len()).sum();
    let mut out = Vec::with_capacity(
        128 + target.native_model.len()
            + req.query.as_str().len()
            + docs
            + 12 * req.documents.len(),
    );
    body.serialize(&mut serde_json::Serializer::new(&mut out))
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    let mut native = NativeRequest::post_json(RERANK_PATH, out);
    native.headers.push((
        HeaderName::from_static("x-pinecone-api-version"),
        HeaderValue::from_static(API_VERSION),
    ));
    Ok(native)
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<Usage>(&ANSWER, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let detail = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .and_then(|b| b.error);
    let message = detail
        .as_ref()
        .and_then(|d| d.message.as_deref())
        .filter(|m| !m.trim().is_empty());
    let mut err = status_error(provider, status, message);
    let code = detail
        .as_ref()
        .and_then(|d| d.code.as_deref())
        .unwrap_or("");
    match code {
        // The model the configuration names is not one Pinecone hosts.
        "NOT_FOUND" => err.kind = UpstreamErrorKind::UnknownModel,
        // Rerank refuses one model with a 403: "Model pinecone-rerank-v0 has been deprecated,
        // please use a different reranking model …", "Project is not authorized to use model
        // bge-reranker-v2-m3". That is the model, not the key (a bad key is a 401
        // UNAUTHENTICATED): the account's other models keep serving.
        _ if status == 403 && message.is_some_and(names_a_refused_model) => {
            err.kind = UpstreamErrorKind::UnknownModel
        }
        "UNAUTHENTICATED" | "PERMISSION_DENIED" | "FORBIDDEN" => {
            err.kind = UpstreamErrorKind::AuthRejected
        }
        "QUOTA_EXCEEDED" | "RESOURCE_EXHAUSTED" => err.kind = UpstreamErrorKind::RateLimited,
        "INVALID_ARGUMENT" | "OUT_OF_RANGE" | "FAILED_PRECONDITION" if status < 500 => {
            err.kind = UpstreamErrorKind::InvalidRequest
        }
        _ if status == 404 => err.kind = UpstreamErrorKind::UnknownModel,
        _ => {}
    }
    err
}

/// Whether a Pinecone 403's message refuses the model rather than the key: the model is
/// deprecated, or the project may not use it.
fn names_a_refused_model(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.starts_with("model ") && m.contains("has been deprecated")
        || m.contains("not authorized to use model")
}

// ---- registration ----------------------------------------------------------------------------

/// The Pinecone kind: `Api-Key` header, rerank only.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    let auth = keyed(key, |k| Auth::header("api-key", k))?;
    Ok(Kind {
        auth,
        errors: error_response,
        remote: true,
        result_hosts: &[],
        adapters: Adapters {
            rerank: Some(Box::new(RerankFns {
                request: rerank_request,
                response: rerank_response,
            })),
            ..Adapters::default()
        },
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "pcsk_secret_0123456789";

    fn provider() -> Arc<Provider> {
        support::provider("pinecone", KEY)
    }

    fn request<'a>(docs: &[&'a str], top_n: Option<usize>) -> RerankRequest<'a> {
        support::rerank_request("pinecone-rerank", "bge", "q \"x\"", docs, top_n, Vec::new())
    }

    #[test]
    fn body_wraps_documents_and_sends_the_version() {
        let target = support::target(provider(), "bge-reranker-v2-m3");
        let native = rerank_request(&target, &request(&["a", "b\"c"], Some(1))).unwrap();
        assert_eq!(native.path, "/rerank");
        assert_eq!(native.headers.len(), 1);
        assert_eq!(native.headers[0].0.as_str(), "x-pinecone-api-version");
        assert_eq!(native.headers[0].1, "2026-07");
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            concat!(
                r#"{"model":"bge-reranker-v2-m3","query":"q \"x\"","#,
                r#""documents":[{"text":"a"},{"text":"b\"c"}],"top_n":1,"return_documents":false}"#
            )
        );
        let native = rerank_request(&target, &request(&["a"], None)).unwrap();
        let body = std::str::from_utf8(&native.body).unwrap();
        assert!(!body.contains("top_n"), "{body}");
    }

    #[test]
    fn reads_data_scores_and_rerank_units() {
        let p = provider();
        let req = request(&["a", "b", "c"], Some(2));
        let body = br#"{"model":"bge-reranker-v2-m3","data":[{"index":2,"score":0.9,"document":{"text":"c"}},{"index":0,"score":0.25},{"index":1,"score":0.01}],"usage":{"rerank_units":1}}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.relevance_score))
            .collect();
        assert_eq!(got, vec![(2, 0.9), (0, 0.25)]);
        assert_eq!(out.metadata["rerank_units"], 1);
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
        assert_eq!(out.metadata["query_tokens_counted"], "per_document");
    }

    #[test]
    fn bad_answers_are_bad_responses() {
        let p = provider();
        let req = request(&["a"], None);
        for body in [
            &b"{}"[..],
            br#"{"results":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"data":[{"index":3,"score":0.5}]}"#,
            br#"{"data":[{"index":0,"relevance_score":0.5}]}"#,
        ] {
            let e = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{e}");
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let err = |code: &str, message: &str, status: u16| {
            format!(r#"{{"error":{{"code":"{code}","message":"{message}"}},"status":{status}}}"#)
        };
        let cases: &[(u16, String, UpstreamErrorKind)] = &[
            (
                400,
                err("INVALID_ARGUMENT", "Bad request.", 400),
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                401,
                err("UNAUTHENTICATED", &format!("Invalid API key {KEY}"), 401),
                UpstreamErrorKind::AuthRejected,
            ),
            (
                404,
                err("NOT_FOUND", "Model example-model not found.", 404),
                UpstreamErrorKind::UnknownModel,
            ),
            (
                429,
                err("QUOTA_EXCEEDED", "Request quota exceeded.", 429),
                UpstreamErrorKind::RateLimited,
            ),
            (
                403,
                err("FORBIDDEN", "Forbidden.", 403),
                UpstreamErrorKind::AuthRejected,
            ),
            // One model refused (the Pinecone SDK's 2026-07 fixtures): not the key.
            (
                403,
                err(
                    "FORBIDDEN",
                    "Model pinecone-rerank-v0 has been deprecated, please use a different \
                     reranking model from (https://docs.pinecone.io/models)",
                    403,
                ),
                UpstreamErrorKind::UnknownModel,
            ),
            (
                403,
                err(
                    "PERMISSION_DENIED",
                    "Project is not authorized to use model bge-reranker-v2-m3",
                    403,
                ),
                UpstreamErrorKind::UnknownModel,
            ),
            (
                500,
                err("UNKNOWN", "Internal server error", 500),
                UpstreamErrorKind::Failure,
            ),
        ];
        for (status, body, kind) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
            assert!(!e.message.contains(KEY), "{}", e.message);
        }
        assert_eq!(
            error_response(&p, 404, cases[2].1.as_bytes()).message,
            "Model example-model not found."
        );
        assert!(error_response(&p, 503, b"").retryable());
    }

    #[test]
    fn needs_a_key() {
        assert!(matches!(kind("").unwrap().auth, Auth::Missing));
        assert!(matches!(kind(KEY).unwrap().auth, Auth::Headers(_)));
    }
}
