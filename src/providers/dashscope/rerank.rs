//! Alibaba Cloud Model Studio (DashScope / 百炼) text rerank, native endpoint
//! (`POST /api/v1/services/rerank/text-rerank/text-rerank`).
//!
//! The native protocol nests the request: `input{query,documents}` and `parameters{top_n,
//! return_documents,instruct}`; results come back under `output.results` with the billed total in
//! `usage.total_tokens`. Documents are never asked back (the gateway re-attaches the caller's own
//! strings). The API's own default is "all documents" when `top_n` is absent (the 3 seen in the
//! LlamaIndex/LangChain wrappers is theirs, not the API's), so `top_n` is sent only when the caller
//! gave one.
//!
//! Errors use one envelope, `{"request_id","code","message"}`, normally with a 4xx/5xx status but
//! sometimes with HTTP 200, so a 200 body carrying a `code` is classified like the error it is.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::common::error::GatewayError;

use crate::common::error::UpstreamError;

use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::json::JsonStr;
use crate::common::native::nested_with_extra;
use crate::common::native::NativeRequest;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const RERANK_PATH: &str = "/api/v1/services/rerank/text-rerank/text-rerank";

/// Status assumed for an error envelope that came with HTTP 200 and a code this adapter does not
/// know: a provider-side failure.
const UNKNOWN_CODE_STATUS: u16 = 500;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct RerankBody<'a> {
    model: &'a str,
    input: Input<'a>,
    /// `Parameters` plus the caller's pass-through fields, already serialized: DashScope's native
    /// options (`instruct`) live inside `parameters`, not at the top level.
    parameters: Box<RawValue>,
}

#[derive(Serialize)]
struct Input<'a> {
    query: &'a str,
    /// The caller's literals, copied as sent.
    documents: &'a [JsonStr<'a>],
}

#[derive(Serialize)]
struct Parameters {
    return_documents: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_n: Option<usize>,
}

/// A success answer, or (with HTTP 200) an error envelope: both are read through this one shape.
#[derive(Deserialize)]
struct RerankResponse {
    #[serde(default)]
    output: Option<Output>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Output {
    results: Vec<ResultItem>,
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
}

/// The native envelope `{"code","message"}`; the OpenAI-compatible mode nests the same pair under
/// `error`, accepted too in case a base URL points there.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<NestedError>,
}

#[derive(Deserialize)]
struct NestedError {
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
    let parameters = Parameters {
        return_documents: false,
        top_n: req.top_n_given.then_some(req.top_n),
    };
    let parameters = nested_with_extra(&parameters, &req.passthrough)?;
    let body = RerankBody {
        model: &target.native_model,
        input: Input {
            query: req.query.as_str(),
            documents: &req.documents,
        },
        parameters,
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    Ok(NativeRequest::post_json(RERANK_PATH, body))
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
    // DashScope may report an error with HTTP 200: classify it as if it had come with the status
    // DashScope documents for its code.
    if let Some(code) = parsed.code.as_ref().and_then(code_string) {
        let status = native_code(&code)
            .map(|(_, s)| s)
            .unwrap_or(UNKNOWN_CODE_STATUS);
        return Err(error_response(provider, status, body));
    }
    let output = parsed
        .output
        .ok_or_else(|| bad("rerank answer has no output.results".into()))?;
    let mut metadata = serde_json::Map::new();
    if let Some(id) = parsed.request_id.filter(|s| !s.is_empty()) {
        metadata.insert("request_id".into(), id.into());
    }
    req.build(
        output.results.iter().map(|r| (r.index, r.relevance_score)),
        parsed.usage.and_then(|u| u.total_tokens),
        metadata,
    )
    .map_err(bad)
}

// ---- error mapping ---------------------------------------------------------------------------

pub fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let (code, message) = match parsed {
        Some(ErrorBody {
            error: Some(nested),
            code: None,
            message: None,
        }) => (nested.code, nested.message),
        Some(e) => (e.code, e.message),
        None => (None, None),
    };
    let code = code.as_ref().and_then(code_string);
    let message = message
        .filter(|m| !m.is_empty())
        .map(|m| provider.redact(&m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    if let Some((kind, _)) = code.as_deref().and_then(native_code) {
        err.kind = kind;
    }
    err
}

/// A non-empty error code as text (DashScope sends strings; numbers are tolerated).
pub(crate) fn code_string(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What a DashScope error code means, and the HTTP status DashScope documents for it (used when
/// the code arrives with HTTP 200). `None`: the HTTP status decides.
/// Shared with the speech adapter, whose errors also arrive in-band.
pub(crate) fn native_code(code: &str) -> Option<(UpstreamErrorKind, u16)> {
    use UpstreamErrorKind::*;
    Some(match code {
        "InvalidApiKey" => (AuthRejected, 401),
        // Account not entitled to the model or API (e.g. `AccessDenied.Unpurchased`).
        c if c.starts_with("AccessDenied") => (AuthRejected, 403),
        c if c.starts_with("Throttling") => (RateLimited, 429),
        // Out of money or free quota: retrying will not help and it is not the caller's fault;
        // the 4xx status keeps it from being retried.
        "Arrearage" => (Failure, 400),
        c if c.starts_with("AllocationQuota") => (Failure, 403),
        c if c.starts_with("DataInspection") => (ContentPolicy, 400),
        c if c.starts_with("InvalidParameter") || c.starts_with("BadRequest") => {
            (InvalidRequest, 400)
        }
        // The configured native model is wrong: an operator problem.
        "ModelNotFound" | "ModelNotExist" => (Failure, 404),
        c if c.starts_with("InternalError") || c.starts_with("SystemError") => (Failure, 500),
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

    const KEY: &str = "sk-dash-secret-123456";

    fn provider() -> Arc<Provider> {
        support::provider("dashscope", KEY)
    }

    fn catalog() -> Catalog {
        let target = support::target(provider(), "gte-rerank-v2");
        support::catalog("gte", "dashscope-rerank", target, 4000, 500)
    }

    fn native_json(body: &'static [u8]) -> serde_json::Value {
        let native = support::native_request(&catalog(), body, rerank_request);
        assert_eq!(native.path, RERANK_PATH);
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_nested_request_without_top_n() {
        let b = native_json(br#"{"model":"gte","query":"q","documents":["a","b"]}"#);
        assert_eq!(
            b,
            serde_json::json!({
                "model": "gte-rerank-v2",
                "input": {"query": "q", "documents": ["a", "b"]},
                "parameters": {"return_documents": false}
            })
        );
    }

    #[test]
    fn top_n_and_instruct_go_inside_parameters() {
        let b = native_json(
            br#"{"model":"gte","query":"q","documents":["a","b"],"top_n":1,"instruct":"Retrieve semantically similar text."}"#,
        );
        assert_eq!(
            b,
            serde_json::json!({
                "model": "gte-rerank-v2",
                "input": {"query": "q", "documents": ["a", "b"]},
                "parameters": {
                    "return_documents": false,
                    "top_n": 1,
                    "instruct": "Retrieve semantically similar text."
                }
            })
        );
    }

    #[test]
    fn reads_output_results_and_usage() {
        let catalog = catalog();
        let req = support::parse(
            &catalog,
            br#"{"model":"gte","query":"q","documents":["a","b"]}"#,
        );
        let p = provider();
        let body = br#"{"output":{"results":[{"index":1,"relevance_score":0.9,"document":{"text":"b"}},{"index":0,"relevance_score":0.1}]},"usage":{"total_tokens":79},"request_id":"r-1"}"#;
        let out = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap();
        assert_eq!(out.results[0].index, 1);
        assert_eq!(out.results[0].document.as_str(), "b");
        assert_eq!(out.usage.total_tokens, 79);
        assert_eq!(out.metadata["request_id"], "r-1");

        let e =
            rerank_response(&p, &req, &http::HeaderMap::new(), br#"{"results":[]}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn error_in_a_200_is_classified_like_its_status() {
        let catalog = catalog();
        let req = support::parse(
            &catalog,
            br#"{"model":"gte","query":"q","documents":["a"]}"#,
        );
        let p = provider();
        let cases: [(&[u8], UpstreamErrorKind); 4] = [
            (
                br#"{"code":"InvalidParameter","message":"Range of top_n should be [1, 500]","request_id":"x"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                br#"{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded"}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                br#"{"code":"DataInspectionFailed","message":"Input data may contain inappropriate content."}"#,
                UpstreamErrorKind::ContentPolicy,
            ),
            (
                br#"{"code":"SomethingNew","message":"?"}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (body, kind) in cases {
            let e = rerank_response(&p, &req, &http::HeaderMap::new(), body).unwrap_err();
            assert_eq!(e.kind, kind, "{}", String::from_utf8_lossy(body));
        }
        // An empty code is not an error marker.
        let ok = br#"{"code":"","output":{"results":[{"index":0,"relevance_score":0.5}]}}"#;
        assert!(rerank_response(&p, &req, &http::HeaderMap::new(), ok).is_ok());
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            401,
            br#"{"code":"InvalidApiKey","message":"Invalid API-key provided: sk-dash-secret-123456","request_id":"x"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY));

        let e = error_response(
            &p,
            400,
            br#"{"code":"InvalidParameter","message":"Required parameter(s) missing or invalid"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Required parameter(s) missing or invalid");

        let e = error_response(
            &p,
            400,
            br#"{"code":"DataInspectionFailed","message":"Input data may contain inappropriate content."}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);

        let e = error_response(
            &p,
            400,
            br#"{"code":"Arrearage","message":"Access denied, please make sure your account is in good standing."}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.status, Some(400));
        assert!(!e.retryable());

        let e = error_response(
            &p,
            403,
            br#"{"code":"AllocationQuota.FreeTierOnly","message":"free tier exhausted"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = error_response(
            &p,
            429,
            br#"{"code":"Throttling.AllocationQuota","message":"Allocated quota exceeded"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert!(e.retryable());

        let e = error_response(&p, 500, br#"{"code":"InternalError","message":"oops"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());

        let e = error_response(&p, 502, b"<html>bad gateway</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 502");

        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":"invalid_parameter_error","message":"bad top_n"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "bad top_n");
    }
}
