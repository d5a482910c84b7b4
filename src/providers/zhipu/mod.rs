//! Zhipu AI / BigModel (智谱): rerank and CogView / GLM-Image generation, sharing one error
//! envelope, which this module reads for both: Zhipu answers every API the same way.
//!
//! Errors are `{"error":{"code":"1214","message":"…"}}` with a business code that says more than
//! the HTTP status does (Zhipu sends 429 both for throttling and for an account in arrears); the
//! same envelope may arrive with HTTP 200 and is then classified by its code.

pub(crate) mod images;
pub(crate) mod rerank;

use serde::Deserialize;
use serde_json::Value;

use crate::common::error::UpstreamError;

use crate::api::adapter::Adapters;
use crate::common::error::UpstreamErrorKind;
use crate::providers::formats::errors::{numeric_code, status_error, UNKNOWN_CODE_STATUS};
use crate::providers::registry::{ImageFns, Kind, RerankFns};
use crate::upstream::provider::Auth;
use crate::upstream::provider::Provider;

// ---- error mapping ---------------------------------------------------------------------------

/// `{"error":{"code","message"}}`; the older flat `{"code","msg"}` shape is accepted too.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<ErrorDetail>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default, alias = "msg")]
    message: Option<String>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
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
    let mut err = status_error(provider, status, message.as_deref());
    if let Some((kind, _)) = code.and_then(native_code) {
        err.kind = kind;
    }
    err
}

/// An error envelope that came with HTTP 200 (`error` is the answer's `error` member), classified
/// as if it had come with the status Zhipu documents for its code; `None` when the answer is not
/// an error (`error` absent or `null`). Rerank and image answers both do this.
pub(crate) fn error_in_answer(
    provider: &Provider,
    error: Option<&Value>,
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
fn code_number(v: &Value) -> Option<u32> {
    numeric_code(v).and_then(|n| u32::try_from(n).ok())
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
        // The configured native model does not exist (1211), or does not serve this kind of call
        // (1212): the engine names the public and native model to the caller.
        1211 | 1212 => (UnknownModel, 400),
        // The API itself is offline or does not exist: a wrong base URL, an operator problem.
        1221 | 1222 => (Failure, 400),
        // Blocked by policy / unsafe or sensitive content.
        1300 | 1301 => (ContentPolicy, 400),
        // Too much concurrency, too frequent, or the service is temporarily overloaded.
        1302 | 1303 | 1305 => (RateLimited, 429),
        500 | 1230 | 1234 => (Failure, 500),
        _ => return None,
    })
}

/// The Zhipu kind: Bearer key; images and rerank.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // CogView links to `aigc-files.bigmodel.cn` / `*.z.ai` storage.
        result_hosts: &["*.bigmodel.cn", "*.z.ai"],
        adapters: Adapters {
            images: Some(Box::new(ImageFns {
                request: images::image_request,
                validate: crate::providers::registry::no_checks,
                response: |p, r, h, b| {
                    crate::providers::registry::images(images::image_response(p, r, h, b))
                },
                input_as_bytes: false,
                tasks: None,
            })),
            rerank: Some(Box::new(RerankFns {
                request: rerank::rerank_request,
                response: rerank::rerank_response,
            })),
            speech: None,
        },
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "zhipu-secret-abcdef.123456";

    fn provider() -> Arc<Provider> {
        support::provider("zhipu", KEY)
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

        for code in ["1211", "1212"] {
            let body = format!(
                r#"{{"error":{{"code":"{code}","message":"Model does not exist, please check the model code"}}}}"#
            );
            let e = error_response(&p, 400, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::UnknownModel, "{code}");
            assert!(!e.retryable());
        }
        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":"1221","message":"API has been taken offline"}}"#,
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
