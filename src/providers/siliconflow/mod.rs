//! SiliconFlow (硅基流动): rerank and image generation, sharing one error envelope, which this
//! module reads for both.
//!
//! Errors are `{"code":<int>,"message":"…","data":null}`; a rejected key may instead come as a bare
//! JSON string or plain text (`"Invalid token"`), so the message is read from any of those.

pub(crate) mod images;
pub(crate) mod rerank;

use serde::Deserialize;
use serde_json::Value;

use crate::common::error::UpstreamError;

use crate::api::adapter::Adapters;
use crate::common::error::UpstreamErrorKind;
use crate::providers::formats::errors::{numeric_code, status_error};
use crate::providers::registry::{ImageFns, Kind, RerankFns};
use crate::upstream::provider::Auth;
use crate::upstream::provider::Provider;

// ---- error mapping ---------------------------------------------------------------------------

/// Longest plain-text error body taken as a message; anything longer is probably a page, not a
/// reason.
const MAX_PLAIN_MESSAGE: usize = 200;

/// "Sorry, your account balance is insufficient" (sent with 402 or 403).
const CODE_BALANCE: i64 = 30001;
/// "Model does not exist. Please check it carefully."
const CODE_NO_MODEL: i64 = 20012;

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorBody {
    Envelope {
        #[serde(default)]
        code: Option<Value>,
        #[serde(default)]
        message: Option<String>,
    },
    Text(String),
}

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody::Envelope { code, message }) => {
            (code.as_ref().and_then(numeric_code), message)
        }
        Ok(ErrorBody::Text(t)) => (None, Some(t)),
        Err(_) => (None, plain_text(body)),
    };
    let mut err = status_error(provider, status, message.as_deref().map(str::trim));
    match code {
        // Out of money: not the caller's fault and retrying will not help; the 4xx status keeps
        // it from being retried.
        Some(CODE_BALANCE) => err.kind = UpstreamErrorKind::Failure,
        // The configured native model does not exist (HTTP 400): the engine names the public and
        // native model to the caller.
        Some(CODE_NO_MODEL) => err.kind = UpstreamErrorKind::UnknownModel,
        _ => {}
    }
    err
}

/// A short single-line, non-markup text body (the plain-text 401), else nothing.
fn plain_text(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?.trim();
    (!text.is_empty()
        && text.len() <= MAX_PLAIN_MESSAGE
        && !text.contains('\n')
        && !text.starts_with('<')
        && !text.starts_with('\u{7b}'))
    .then(|| text.to_string())
}

/// The SiliconFlow kind: Bearer key; images and rerank.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // SiliconFlow links to its OSS buckets (`sc-maas.oss-cn-shanghai.aliyuncs.com`).
        result_hosts: &["*.aliyuncs.com", "*.siliconflow.cn"],
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

    const KEY: &str = "sk-sf-secret-123456";

    fn provider() -> Arc<Provider> {
        support::provider("siliconflow", KEY)
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = error_response(
            &p,
            400,
            br#"{"code":20015,"message":"The parameter is invalid. Please check again.","data":null}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "The parameter is invalid. Please check again.");

        let e = error_response(&p, 401, b"Invalid token");
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert_eq!(e.message, "Invalid token");
        let e = error_response(&p, 401, br#""Api key is invalid""#);
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert_eq!(e.message, "Api key is invalid");

        for status in [402, 403] {
            let e = error_response(
                &p,
                status,
                br#"{"code":30001,"message":"Sorry, your account balance is insufficient","data":null}"#,
            );
            assert_eq!(e.kind, UpstreamErrorKind::Failure, "{status}");
            assert!(!e.retryable());
        }

        let e = error_response(
            &p,
            400,
            br#"{"code":20012,"message":"Model does not exist. Please check it carefully.","data":null}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert!(!e.retryable());

        let e = error_response(&p, 429, br#"{"code":50603,"message":"TPM limit reached."}"#);
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);

        let e = error_response(
            &p,
            503,
            br#"{"code":50505,"message":"Model service overloaded. Please try again later."}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());

        let e = error_response(&p, 500, b"<html>oops</html>");
        assert_eq!(e.message, "HTTP 500");

        let e = error_response(
            &p,
            400,
            br#"{"code":20015,"message":"bad key sk-sf-secret-123456"}"#,
        );
        assert!(!e.message.contains(KEY));
    }
}
