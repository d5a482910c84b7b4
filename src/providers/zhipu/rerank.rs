//! Zhipu AI / BigModel (智谱) rerank (`POST /api/paas/v4/rerank`).
//!
//! Cohere-like request (`model`, `query`, `documents`, `top_n`, `return_documents`). `top_n`
//! defaults to 0, meaning "all", so it is sent only when the caller gave one. Results carry
//! `document` as a plain string when asked for; the gateway never asks. The billed total is
//! `usage.total_tokens` (falling back to `usage.prompt_tokens`, which Zhipu reports equal to it).
//!
//! Errors are `{"error":{"code":"1214","message":"…"}}` with a business code that says more than
//! the HTTP status does (Zhipu sends 429 both for throttling and for an account in arrears); the
//! same envelope may arrive with HTTP 200 and is then classified by its code. The image adapter
//! ([`crate::providers::zhipu::images`]) shares this error mapping: Zhipu answers every API the same way.

use serde::{Deserialize, Serialize};

use crate::common::error::GatewayError;

use crate::common::error::UpstreamError;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::json::JsonStr;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const RERANK_PATH: &str = "/api/paas/v4/rerank";

/// Status assumed for an error envelope that came with HTTP 200 and a code this adapter does not
/// know: a provider-side failure.
const UNKNOWN_CODE_STATUS: u16 = 500;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct RerankBody<'a> {
    model: &'a str,
    query: &'a str,
    /// The caller's literals, copied as sent.
    documents: &'a [JsonStr<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    top_n: Option<usize>,
    return_documents: bool,
}

/// A success answer, or (with HTTP 200) an error envelope: both are read through this one shape.
#[derive(Deserialize)]
struct RerankResponse {
    #[serde(default)]
    results: Option<Vec<ResultItem>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ResultItem {
    index: usize,
    relevance_score: f64,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens: Option<u64>,
}

/// `{"error":{"code","message"}}`; the older flat `{"code","msg"}` shape is accepted too.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<ErrorDetail>,
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default, alias = "msg")]
    message: Option<String>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<String>,
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
    if let Some(err) = error_in_answer(provider, parsed.error.as_ref(), body) {
        return Err(err);
    }
    let results = parsed
        .results
        .ok_or_else(|| bad("rerank answer has no results".into()))?;
    let provider_total = parsed
        .usage
        .and_then(|u| u.total_tokens.or(u.prompt_tokens));
    let mut metadata = serde_json::Map::new();
    if let Some(id) = parsed.request_id.or(parsed.id).filter(|s| !s.is_empty()) {
        metadata.insert("request_id".into(), id.into());
    }
    req.build(
        results.iter().map(|r| (r.index, r.relevance_score)),
        provider_total,
        metadata,
    )
    .map_err(bad)
}

// ---- error mapping ---------------------------------------------------------------------------

pub fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody {
            error: Some(d),
            code,
            message,
        }) => (d.code.or(code), d.message.or(message)),
        Ok(ErrorBody { code, message, .. }) => (code, message),
        Err(_) => (None, None),
    };
    let code = code.as_ref().and_then(code_number);
    let message = message
        .filter(|m| !m.is_empty())
        .map(|m| provider.redact(&m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    if let Some((kind, _)) = code.and_then(native_code) {
        err.kind = kind;
    }
    err
}

/// An error envelope that came with HTTP 200 (`error` is the answer's `error` member), classified
/// as if it had come with the status Zhipu documents for its code; `None` when the answer is not
/// an error (`error` absent or `null`). Shared with the image adapter, whose answers do the same.
pub(crate) fn error_in_answer(
    provider: &Provider,
    error: Option<&serde_json::Value>,
    body: &[u8],
) -> Option<UpstreamError> {
    if error.is_none_or(|e| e.is_null()) {
        return None;
    }
    let code = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .and_then(|e| e.error.and_then(|d| d.code))
        .as_ref()
        .and_then(code_number);
    let status = code
        .and_then(native_code)
        .map(|(_, s)| s)
        .unwrap_or(UNKNOWN_CODE_STATUS);
    Some(error_response(provider, status, body))
}

/// The business code as a number (Zhipu sends numeric strings such as `"1214"`; numbers are
/// tolerated).
fn code_number(v: &serde_json::Value) -> Option<u32> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// What a Zhipu business code means, and the HTTP status Zhipu documents for it (used when the
/// code arrives with HTTP 200). `None`: the HTTP status decides.
fn native_code(code: u32) -> Option<(UpstreamErrorKind, u16)> {
    use UpstreamErrorKind::*;
    Some(match code {
        // Authentication failed / token missing, invalid or expired.
        1000..=1004 => (AuthRejected, 401),
        // Account inactive, missing or locked; no permission for the API: the operator must act.
        1110..=1112 | 1121 | 1220 => (AuthRejected, 401),
        // In arrears, or a daily/plan/period quota used up: retrying will not help and it is not
        // the caller's fault; the 4xx status keeps it from being retried.
        1113 | 1304 | 1308..=1310 => (Failure, 429),
        // Bad or missing parameters.
        1210 | 1213..=1215 => (InvalidRequest, 400),
        // The configured native model or API does not exist or does not serve this call.
        1211 | 1212 | 1221 | 1222 => (Failure, 400),
        // Blocked by policy / unsafe or sensitive content.
        1300 | 1301 => (ContentPolicy, 400),
        // Too much concurrency, too frequent, or the service is temporarily overloaded.
        1302 | 1303 | 1305 => (RateLimited, 429),
        500 | 1230 | 1234 => (Failure, 500),
        _ => return None,
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::Catalog;
    use crate::providers::test_support as support;

    const KEY: &str = "zhipu-secret-abcdef.123456";

    fn provider() -> Arc<Provider> {
        support::provider("zhipu", KEY)
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "rerank");
        support::catalog("zr", "zhipu-rerank", target, 4096, 128)
    }

    fn native_json(body: &'static [u8]) -> serde_json::Value {
        let native = support::native_request(&catalog(), body, rerank_request);
        assert_eq!(native.path, RERANK_PATH);
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_request() {
        let b = native_json(br#"{"model":"zr","query":"q","documents":["a","b"]}"#);
        assert_eq!(
            b,
            serde_json::json!({
                "model": "rerank",
                "query": "q",
                "documents": ["a", "b"],
                "return_documents": false
            })
        );
        let b = native_json(br#"{"model":"zr","query":"q","documents":["a","b"],"top_n":1}"#);
        assert_eq!(
            b,
            serde_json::json!({
                "model": "rerank",
                "query": "q",
                "documents": ["a", "b"],
                "top_n": 1,
                "return_documents": false
            })
        );
    }

    #[test]
    fn reads_results_with_string_documents() {
        let catalog = catalog();
        let req = support::parse(
            &catalog,
            br#"{"model":"zr","query":"q","documents":["a","b"]}"#,
        );
        let p = provider();
        let h = http::HeaderMap::new();
        let body = br#"{"created":1732083164,"id":"2024112014","request_id":"r-9","results":[{"document":"b","index":1,"relevance_score":0.99866986},{"index":0,"relevance_score":0.1}],"usage":{"prompt_tokens":72,"total_tokens":72}}"#;
        let out = rerank_response(&p, &req, &h, body).unwrap();
        assert_eq!(out.results[0].index, 1);
        assert_eq!(out.results[0].document.as_str(), "b");
        assert_eq!(out.usage.total_tokens, 72);
        assert_eq!(out.metadata["request_id"], "r-9");

        let e = rerank_response(&p, &req, &h, br#"{"data":[]}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        let e = rerank_response(&p, &req, &h, b"not json").unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn error_in_a_200_is_classified_by_its_code() {
        let catalog = catalog();
        let req = support::parse(&catalog, br#"{"model":"zr","query":"q","documents":["a"]}"#);
        let p = provider();
        let h = http::HeaderMap::new();
        let cases: [(&[u8], UpstreamErrorKind); 4] = [
            (
                br#"{"error":{"code":"1214","message":"Invalid top_n parameter"}}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                br#"{"error":{"code":"1301","message":"unsafe content"}}"#,
                UpstreamErrorKind::ContentPolicy,
            ),
            (
                br#"{"error":{"code":1302,"message":"High concurrency"}}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                br#"{"error":{"code":"9999","message":"?"}}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (body, kind) in cases {
            let e = rerank_response(&p, &req, &h, body).unwrap_err();
            assert_eq!(e.kind, kind, "{}", String::from_utf8_lossy(body));
        }
        // `error: null` is not an error marker.
        let ok = br#"{"error":null,"results":[{"index":0,"relevance_score":0.5}]}"#;
        assert!(rerank_response(&p, &req, &h, ok).is_ok());
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            401,
            br#"{"error":{"code":"1002","message":"Invalid token zhipu-secret-abcdef.123456"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY));

        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":"1214","message":"Invalid documents parameter"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Invalid documents parameter");

        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":"1301","message":"System detected potentially unsafe or sensitive content"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);

        let e = error_response(
            &p,
            429,
            br#"{"error":{"code":"1113","message":"Your account is in arrears"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.status, Some(429));
        assert!(!e.retryable());

        let e = error_response(
            &p,
            429,
            br#"{"error":{"code":"1303","message":"High frequency"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":"1211","message":"Model does not exist"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = error_response(&p, 500, br#"{"code":500,"msg":"Internal Error"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "Internal Error");
        assert!(e.retryable());

        let e = error_response(&p, 503, b"upstream connect error");
        assert_eq!(e.message, "HTTP 503");
    }
}
