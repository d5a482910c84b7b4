//! NVIDIA NIM reranking (NeMo Retriever): hosted on NVIDIA's API catalog
//! (`POST https://ai.api.nvidia.com/v1/retrieval/<model>/reranking`) or a self-hosted NIM
//! container (`POST /v1/ranking`).
//!
//! Both take the same body: `model`, `query: {text}`, `passages: [{text}]` and an optional
//! `truncate` (`NONE`, the default, refuses an over-long pair; `END` cuts it), which the family
//! passes through. There is no `top_n` (the gateway keeps the best `top_n` itself) and no flag to
//! echo passages. The answer is `rankings: [{index, logit}]`, best first; the logit is the public
//! `relevance_score` as NIM gives it (unbounded, higher is more relevant), so scores are
//! comparable only between NIM models. Current NIMs add `usage: {prompt_tokens, total_tokens}`;
//! older ones report nothing and the gateway counts. NIM scores each (query, passage) pair, so the
//! query counts once per passage.
//!
//! Errors: the hosted API answers RFC 7807 problem details (`{"status","title","detail"}`); a
//! model the account may not use is `404` "Function '…': Not found for account '…'", this
//! adapter's "no such model". A self-hosted NIM answers `400` for an input it refuses (too long
//! with `truncate: NONE`) and FastAPI's `422` for a malformed body.

use serde::Deserialize;
use serde_json::Value;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::fastapi;
use crate::providers::formats::rerank::{self, QueryCounting, UsageTotal, Wire};
use crate::providers::registry::{keyed, Kind, RerankFns};
use crate::upstream::provider::{Auth, Provider};

// ---- constants -------------------------------------------------------------------------------

/// The self-hosted path; the hosted one is built per model ([`hosted_path`]).
const WIRE: Wire = Wire {
    path: "/v1/ranking",
    documents: "passages",
    text_objects: true,
    top_n: None,
    off: &[],
    results: &["rankings"],
    score: "logit",
    // A cross-encoder: every passage is scored together with the query.
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

// ---- settings --------------------------------------------------------------------------------

/// `kind: nvidia-nim` settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// NVIDIA's hosted API catalog (`ai.api.nvidia.com`, a key required) rather than a
    /// self-hosted container (`/v1/ranking`, a key only if the operator put one in front).
    #[serde(default)]
    pub hosted: bool,
}

// ---- wire types ------------------------------------------------------------------------------

/// Problem details (hosted), FastAPI's `detail` or an OpenAI-style `message`/`error`
/// (self-hosted): whichever is there.
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    detail: Option<Value>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

impl ErrorBody {
    fn text(self) -> Option<String> {
        let detail = self.detail.as_ref().and_then(fastapi::detail_text);
        detail
            .or(self.message.filter(|m| !m.trim().is_empty()))
            .or_else(|| self.error.as_ref().and_then(text_of))
            .or(self.title.filter(|t| !t.trim().is_empty()))
    }
}

/// `error` as a string or an object carrying `message`.
fn text_of(v: &Value) -> Option<String> {
    let text = match v {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("message").and_then(Value::as_str).unwrap_or(""),
        _ => "",
    };
    (!text.trim().is_empty()).then(|| text.to_string())
}

// ---- translation to native -------------------------------------------------------------------

/// A self-hosted NIM: `POST /v1/ranking`.
pub(crate) fn self_hosted_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    rerank::request(&WIRE, target, req)
}

/// The hosted API: the same body at the model's own path.
pub(crate) fn hosted_request(
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let mut native = rerank::request(&WIRE, target, req)?;
    native.path = hosted_path(&target.native_model);
    Ok(native)
}

/// `/v1/retrieval/<model>/reranking`, where the model's dots are written as underscores
/// (`nvidia/llama-3.2-nv-rerankqa-1b-v2` → `nvidia/llama-3_2-nv-rerankqa-1b-v2`), as NVIDIA's
/// published invoke URLs spell them.
fn hosted_path(model: &str) -> String {
    let mut path = String::with_capacity(model.len() + 28);
    path.push_str("/v1/retrieval/");
    path.extend(model.chars().map(|c| if c == '.' { '_' } else { c }));
    path.push_str("/reranking");
    path
}

// ---- translation back ------------------------------------------------------------------------

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
    let text = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .and_then(ErrorBody::text);
    let mut err = status_error(provider, status, text.as_deref());
    match status {
        // Hosted: the model's function is not there for this account (retired, or not granted).
        404 => err.kind = UpstreamErrorKind::UnknownModel,
        // FastAPI's validation of the body, and a NIM refusing an input (too long, `NONE`).
        400 | 413 | 422 => err.kind = UpstreamErrorKind::InvalidRequest,
        _ => {}
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The NIM kind: Bearer key (required when hosted), rerank only.
pub(crate) fn kind(settings: &Settings, key: &str) -> Result<Kind, String> {
    let (auth, request) = if settings.hosted {
        (keyed(key, Auth::bearer)?, hosted_request as _)
    } else if key.is_empty() {
        (Auth::None, self_hosted_request as _)
    } else {
        (Auth::bearer(key)?, self_hosted_request as _)
    };
    Ok(Kind {
        auth,
        errors: error_response,
        remote: true,
        result_hosts: &[],
        adapters: crate::api::adapter::Adapters {
            rerank: Some(Box::new(RerankFns {
                request,
                response: rerank_response,
            })),
            ..Default::default()
        },
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "nvapi-secret-0123456789";

    fn provider() -> Arc<Provider> {
        support::provider("nim", KEY)
    }

    fn request<'a>(docs: &[&'a str], top_n: Option<usize>) -> RerankRequest<'a> {
        support::rerank_request(
            "nim-rerank",
            "nv-rerank",
            "which way?",
            docs,
            top_n,
            Vec::new(),
        )
    }

    #[test]
    fn self_hosted_body_wraps_texts_and_never_sends_top_n() {
        let target = support::target(provider(), "nvidia/llama-nemotron-rerank-1b-v2");
        let req = request(&["left", "right"], Some(1));
        let native = self_hosted_request(&target, &req).unwrap();
        assert_eq!(native.path, "/v1/ranking");
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            r#"{"model":"nvidia/llama-nemotron-rerank-1b-v2","query":{"text":"which way?"},"passages":[{"text":"left"},{"text":"right"}]}"#
        );
    }

    #[test]
    fn hosted_path_spells_dots_as_underscores() {
        let target = support::target(provider(), "nvidia/llama-3.2-nv-rerankqa-1b-v2");
        let req = request(&["a"], None);
        let native = hosted_request(&target, &req).unwrap();
        assert_eq!(
            native.path,
            "/v1/retrieval/nvidia/llama-3_2-nv-rerankqa-1b-v2/reranking"
        );
        // The body keeps the model's own spelling.
        assert!(std::str::from_utf8(&native.body)
            .unwrap()
            .starts_with("\x7b\"model\":\"nvidia/llama-3.2-nv-rerankqa-1b-v2\","));
    }

    #[test]
    fn reads_rankings_logits_and_usage() {
        let p = provider();
        let req = request(&["a", "b", "c"], Some(2));
        let body = br#"{"rankings":[{"index":2,"logit":0.5},{"index":0,"logit":-1.25},{"index":1,"logit":-8.0}],
            "usage":{"prompt_tokens":57,"total_tokens":57}}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.relevance_score))
            .collect();
        assert_eq!(got, vec![(2, 0.5), (0, -1.25)]);
        assert_eq!(out.usage.total_tokens, 57);
        assert_eq!(out.metadata["total_tokens_source"], "provider");
        assert_eq!(out.metadata["query_tokens_counted"], "per_document");

        // An older NIM: no usage, the gateway counts.
        let body = br#"{"rankings":[{"index":0,"logit":1.0}]}"#;
        let req = request(&["a"], None);
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
    }

    #[test]
    fn bad_answers_are_bad_responses() {
        let p = provider();
        let req = request(&["a"], None);
        for body in [
            &b"<html>"[..],
            br#"{"results":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"rankings":[{"index":0,"score":0.5}]}"#,
            br#"{"rankings":[{"index":4,"logit":0.5}]}"#,
        ] {
            let e = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{e}");
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let cases: &[(u16, &str, UpstreamErrorKind, &str)] = &[
            (
                404,
                r#"{"status":404,"title":"Not Found","detail":"Function 'f1': Not found for account 'acc'"}"#,
                UpstreamErrorKind::UnknownModel,
                "Function 'f1': Not found for account 'acc'",
            ),
            (
                401,
                r#"{"status":401,"title":"Unauthorized","detail":"Authentication failed"}"#,
                UpstreamErrorKind::AuthRejected,
                "Authentication failed",
            ),
            (
                422,
                r#"{"detail":[{"loc":["body","passages"],"msg":"Field required","type":"missing"}]}"#,
                UpstreamErrorKind::InvalidRequest,
                "body.passages: Field required",
            ),
            (
                400,
                r#"{"object":"error","message":"Input length 1024 exceeds maximum allowed token size 512","type":"invalid_request_error"}"#,
                UpstreamErrorKind::InvalidRequest,
                "Input length 1024 exceeds maximum allowed token size 512",
            ),
            (
                429,
                r#"{"status":429,"title":"Too Many Requests"}"#,
                UpstreamErrorKind::RateLimited,
                "Too Many Requests",
            ),
            (500, "oops", UpstreamErrorKind::Failure, "HTTP 500"),
        ];
        for (status, body, kind, message) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
            assert_eq!(e.message, *message, "{status}");
        }
        let e = error_response(
            &p,
            401,
            format!(r#"{{"detail":"bad key {KEY}"}}"#).as_bytes(),
        );
        assert!(!e.message.contains(KEY), "{}", e.message);
    }

    #[test]
    fn hosted_needs_a_key_self_hosted_does_not() {
        let hosted = Settings { hosted: true };
        assert!(matches!(kind(&hosted, "").unwrap().auth, Auth::Missing));
        assert!(matches!(kind(&hosted, KEY).unwrap().auth, Auth::Headers(_)));
        let own = Settings::default();
        assert!(matches!(kind(&own, "").unwrap().auth, Auth::None));
        assert!(matches!(kind(&own, KEY).unwrap().auth, Auth::Headers(_)));
    }
}
