//! Cohere rerank v2 (`POST /v2/rerank`).
//!
//! Cohere v2 returns only `index` and `relevance_score`: the gateway re-attaches each document from
//! the request. Cohere bills rerank in search units (`meta.billed_units.search_units`), which go to
//! `metadata`; a token figure it reports as billed (`meta.billed_units.input_tokens`) would be the
//! public `total_tokens`, while `meta.tokens.input_tokens` (the tokens the model read, not a
//! billed figure) goes to `metadata.provider_input_tokens`. Without a billed token figure, usage is
//! the gateway's count, the query counted with every document as Cohere scores it.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::NativeRequest;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::rerank::{self, billed, Count, Reported, Wire};
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// The format's own spelling: `documents`, `top_n` (only when the caller gave one), `results[]`
/// of `{index, relevance_score}`; the query is scored with each document (`Wire::COHERE`).
const WIRE: Wire = Wire::COHERE;

/// Cohere's "request cancelled" (its errors page: "try the request again"), e.g. `failed to get
/// rerank inference: request cancelled`. The gateway never cancels a request it is still reading,
/// so the cancellation was Cohere's.
const CANCELLED: u16 = 499;

// ---- wire types ------------------------------------------------------------------------------

/// Cohere's `meta` (cohere-python `ApiMeta`), v1 and v2 alike: what was billed and the tokens the
/// model read.
#[derive(Deserialize, Default)]
pub(super) struct Meta {
    #[serde(default)]
    meta: Option<MetaBody>,
}

#[derive(Deserialize)]
struct MetaBody {
    #[serde(default)]
    billed_units: Option<BilledUnits>,
    #[serde(default)]
    tokens: Option<Tokens>,
}

/// `ApiMetaBilledUnits`: rerank answers carry `search_units`.
#[derive(Deserialize)]
struct BilledUnits {
    #[serde(default)]
    search_units: Count,
    #[serde(default)]
    input_tokens: Count,
}

/// `ApiMetaTokens`: "the number of tokens used as input to the model", not a billed figure.
#[derive(Deserialize)]
struct Tokens {
    #[serde(default)]
    input_tokens: Count,
}

impl Reported for Meta {
    fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64> {
        let meta = self.meta?;
        if let Some(tokens) = meta.tokens.and_then(|t| billed(&[t.input_tokens])) {
            metadata.insert("provider_input_tokens".into(), tokens.into());
        }
        let units = meta.billed_units?;
        // Search units have no public field; they keep Cohere's own number (a float in its schema).
        if let Some(su) = units.search_units.filter(|u| u.is_finite() && *u >= 0.0) {
            metadata.insert("search_units".into(), serde_json::json!(su));
        }
        billed(&[units.input_tokens])
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
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
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    rerank::response::<Meta>(&WIRE, provider, req, body)
}

// ---- error mapping ---------------------------------------------------------------------------

/// Cohere's `{"message": …}` errors, for v1 and v2 alike.
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let message = serde_json::from_slice::<ErrorBody>(body).ok();
    let text = message.as_ref().map(|e| e.message.as_str());
    let mut err = status_error(provider, status, text);
    match status {
        // Cohere's "invalid token": the gateway's key, not the caller's request.
        498 => err.kind = UpstreamErrorKind::AuthRejected,
        // Cohere cancelled the request; its errors page says to try again. A 4xx status is never
        // retried, so the status moves into the message and the failure counts as Cohere's.
        CANCELLED => {
            err.kind = UpstreamErrorKind::Failure;
            err.status = None;
            err.message = format!("{} (HTTP {CANCELLED})", err.message);
        }
        // "model 'xyz' not found, make sure the correct model ID was used and that you have access
        // to the model.", or a 404 saying the model was sunset (what a shut-down model such as
        // rerank-multilingual-v2.0 answers). A bare 404 (a wrong base URL: "404 page not found")
        // stays a failure.
        404 if text.is_some_and(|m| unknown_model(m) || sunset_model(m)) => {
            err.kind = UpstreamErrorKind::UnknownModel
        }
        _ => {}
    }
    err
}

/// Cohere's "no such model" message, as its errors page lists it.
fn unknown_model(message: &str) -> bool {
    message.starts_with("model '") && message.contains("' not found")
}

/// A 404 saying a model was shut down ("… was sunset on …", deprecated, removed).
fn sunset_model(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("model")
        && ["sunset", "deprecated", "removed"]
            .iter()
            .any(|w| m.contains(w))
}

// ---- what the account serves -----------------------------------------------------------------

/// `GET /v1/models?endpoint=rerank` (cohere-python `ModelsClient.list`): the models usable on the
/// rerank endpoint, `{"models": [{"name": …}], "next_page_token": …}`, up to 1,000 a page.
pub(crate) const DISCOVERY: crate::api::discovery::Discovery = crate::api::discovery::Discovery {
    models: Some(crate::api::discovery::ListFns {
        request: models_request,
        response: read_models,
    }),
    voices: None,
};

fn models_request(page: Option<&str>) -> NativeRequest {
    let mut path = String::from("/v1/models?endpoint=rerank&page_size=1000");
    if let Some(token) = page {
        path.push_str("&page_token=");
        for b in token.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                path.push(b as char);
            } else {
                path.push_str(&format!("%{b:02X}"));
            }
        }
    }
    NativeRequest::get(path)
}

#[derive(Deserialize)]
struct ModelList {
    models: Vec<ListedModel>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct ListedModel {
    name: String,
}

fn read_models(body: &[u8]) -> Result<crate::api::discovery::Page, String> {
    let list: ModelList = serde_json::from_slice(body)
        .map_err(|e| format!("model list is not the expected JSON: {e}"))?;
    Ok(crate::api::discovery::Page {
        items: list
            .models
            .into_iter()
            .map(|m| crate::api::discovery::Listed::new(m.name, None))
            .collect(),
        next: list.next_page_token.filter(|t| !t.is_empty()),
    })
}

// ---- registration ----------------------------------------------------------------------------

/// The Cohere v2 kind: Bearer key, rerank only.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    crate::providers::registry::bearer_rerank(key, error_response, rerank_request, rerank_response)
}

// ---- tests -------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-cohere-secret-42";

    fn provider() -> Arc<Provider> {
        support::provider("cohere", KEY)
    }

    fn answer(meta: &str) -> Vec<u8> {
        format!(r#"{{"id":"x","results":[{{"index":1,"relevance_score":0.9}},{{"index":0,"relevance_score":0.1}}]{meta}}}"#)
            .into_bytes()
    }

    #[test]
    fn the_model_list_is_read_page_by_page() {
        assert_eq!(
            models_request(None).path,
            "/v1/models?endpoint=rerank&page_size=1000"
        );
        assert_eq!(
            models_request(Some("a b/c")).path,
            "/v1/models?endpoint=rerank&page_size=1000&page_token=a%20b%2Fc"
        );
        let page = read_models(
            br#"{"models":[{"name":"rerank-v3.5","endpoints":["rerank"]}],"next_page_token":"t2"}"#,
        )
        .unwrap();
        assert_eq!(page.items[0].id, "rerank-v3.5");
        assert_eq!(page.next.as_deref(), Some("t2"));
        let last = read_models(br#"{"models":[],"next_page_token":""}"#).unwrap();
        assert!(last.next.is_none());
    }

    #[test]
    fn usage_counts_the_query_per_document_and_keeps_search_units_apart() {
        let catalog = support::catalog(
            "rerank-v3.5",
            "cohere-rerank",
            support::target(provider(), "rerank-v3.5"),
            32_000,
            10_000,
        );
        let req = support::parse(
            &catalog,
            br#"{"model":"rerank-v3.5","query":"capital of France","documents":["Paris is in France.","Berlin"]}"#,
        );
        let q = crate::tokens::count("capital of France") as u64;
        let d =
            (crate::tokens::count("Paris is in France.") + crate::tokens::count("Berlin")) as u64;
        let h = http::HeaderMap::new();

        // What v2 answers: search units billed, and the tokens the model read (not billed).
        let body = answer(
            r#","meta":{"api_version":{"version":"2"},"billed_units":{"search_units":1},"tokens":{"input_tokens":57}}"#,
        );
        let out = rerank_response(&provider(), &req, &h, &body).unwrap();
        assert_eq!(out.usage.query_tokens, 2 * q);
        assert_eq!(out.usage.documents_tokens, d);
        assert_eq!(out.usage.total_tokens, 2 * q + d);
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
        assert_eq!(out.metadata["query_tokens_counted"], "per_document");
        assert_eq!(out.metadata["search_units"], 1.0);
        assert_eq!(out.metadata["provider_input_tokens"], 57);

        // Billed input tokens, should Cohere ever report them, are the billed total.
        let body = answer(r#","meta":{"billed_units":{"search_units":1,"input_tokens":40.0}}"#);
        let out = rerank_response(&provider(), &req, &h, &body).unwrap();
        assert_eq!(out.usage.total_tokens, 40);
        assert_eq!(out.metadata["total_tokens_source"], "provider");

        // No meta at all, or nonsense figures: the gateway's count, nothing invented.
        for meta in [
            "",
            r#","meta":null"#,
            r#","meta":{"billed_units":{"search_units":-1,"input_tokens":-5},"tokens":{"input_tokens":"x"}}"#,
        ] {
            let body = answer(meta);
            match rerank_response(&provider(), &req, &h, &body) {
                Ok(out) => {
                    assert_eq!(out.usage.total_tokens, 2 * q + d, "{meta}");
                    assert_eq!(out.metadata["total_tokens_source"], "gateway");
                    assert!(out.metadata.get("search_units").is_none(), "{meta}");
                }
                // A string where Cohere's schema has a number is not Cohere's answer.
                Err(e) => {
                    assert!(meta.contains("\"x\""), "{meta}: {e}");
                    assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
                }
            }
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            404,
            br#"{"id":"da62","message":"model 'rerank-v9' not found, make sure the correct model ID was used and that you have access to the model."}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert!(e.message.contains("rerank-v9"));
        // A model shut down (kotaemon#822 reports this 404 for rerank-multilingual-v2.0).
        let e = error_response(
            &p,
            404,
            br#"{"message":"model 'rerank-multilingual-v2.0' was sunset on December 1st, 2025"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        // A wrong path, not a model.
        let e = error_response(&p, 404, br#"{"message":"404 page not found"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = error_response(
            &p,
            499,
            br#"{"message":"failed to get rerank inference: request cancelled"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        assert!(e.message.contains("HTTP 499"), "{}", e.message);

        assert_eq!(
            error_response(&p, 498, br#"{"message":"invalid api token"}"#).kind,
            UpstreamErrorKind::AuthRejected
        );
        assert_eq!(
            error_response(
                &p,
                400,
                br#"{"message":"invalid request: list of documents must not be empty"}"#
            )
            .kind,
            UpstreamErrorKind::InvalidRequest
        );
    }
}
