//! MiniMax: speech (T2A v2, `speech.rs`) and image generation (`image-01`, `images.rs`) on one
//! account, Bearer key. This module holds what the two share: the `base_resp` envelope every
//! answer carries and its error codes.
//!
//! MiniMax reports most errors as HTTP 200 with `base_resp.status_code != 0` (in a streamed speech
//! event, or as a plain JSON body), so each operation checks `base_resp` before taking any result.
//! Codes (platform.minimax.io error-code table): 1002 rate limit, 1039 token (TPM) limit and
//! 1041 connection limit are rate limits; 1004 and 2049 reject the gateway's key; 1008 (and 1028,
//! 1030, which MiniMax's own CLI treats as exhausted quota) mean the account cannot pay, which a
//! retry does not fix; 1026/1027 are the sensitive-content filter; 1042 (invisible characters)
//! and the 2xxx parameter family (2013 invalid params) are the caller's request, 20132 (unknown
//! voice) too unless the voice was the model's default, which makes it the operator's; anything
//! else (1000 unknown, 1001 timeout, 1024 internal, 1033 system…) is a provider failure worth
//! retrying.

pub(crate) mod images;
pub(crate) mod speech;

use serde::Deserialize;

use crate::api::adapter::Adapters;
use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::providers::registry::{keyed, ImageFns, Kind, SpeechFns};
use crate::upstream::provider::{Auth, Provider};

/// Where MiniMax links its images: Alibaba Cloud OSS buckets (`hailuo-image-algeng-data*.oss-…
/// .aliyuncs.com`) and its own CDN.
const RESULT_HOSTS: &[&str] = &["*.aliyuncs.com", "*.minimax.io", "*.minimaxi.com"];

// ---- the shared envelope ---------------------------------------------------------------------

/// `base_resp`: `status_code` 0 is success.
#[derive(Deserialize)]
pub(crate) struct BaseResp {
    #[serde(default)]
    pub(crate) status_code: i64,
    #[serde(default)]
    pub(crate) status_msg: String,
}

/// Any answer, read only for its `base_resp` (error bodies).
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    base_resp: Option<BaseResp>,
}

// ---- error mapping ---------------------------------------------------------------------------

/// An error for a `base_resp` that reports one.
pub(crate) fn check_base_resp(
    provider: &Provider,
    base: Option<&BaseResp>,
) -> Result<(), UpstreamError> {
    match base {
        Some(b) if b.status_code != 0 => {
            let (kind, status) =
                classify(b.status_code).unwrap_or((UpstreamErrorKind::Failure, None));
            Err(native_error(provider, b, kind, status))
        }
        _ => Ok(()),
    }
}

/// What a `base_resp.status_code` means (see the module docs); `None` for codes not listed.
fn classify(code: i64) -> Option<(UpstreamErrorKind, Option<u16>)> {
    use UpstreamErrorKind as K;
    Some(match code {
        1002 | 1039 | 1041 => (K::RateLimited, None),
        1004 | 2049 => (K::AuthRejected, None),
        // The account cannot pay: an operator problem a retry does not fix.
        1008 | 1028 | 1030 => (K::Failure, Some(402)),
        1026 | 1027 => (K::ContentPolicy, None),
        20132 => (K::UnknownVoice, None),
        1042 | 2000..=2999 | 20000..=29999 => (K::InvalidRequest, None),
        1000 | 1001 | 1013 | 1024 | 1033 => (K::Failure, None),
        _ => return None,
    })
}

fn native_error(
    provider: &Provider,
    base: &BaseResp,
    kind: UpstreamErrorKind,
    status: Option<u16>,
) -> UpstreamError {
    let err = UpstreamError::new(kind, &provider.name, native_message(provider, base));
    match status {
        Some(s) => err.with_status(s),
        None => err,
    }
}

/// The provider's text (redacted) with its code, which is what MiniMax's docs are indexed by.
fn native_message(provider: &Provider, base: &BaseResp) -> String {
    let text = provider.redact(base.status_msg.trim());
    if text.is_empty() {
        format!("MiniMax status_code {}", base.status_code)
    } else {
        format!("{text} (status_code {})", base.status_code)
    }
}

/// A non-2xx answer of either operation.
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let base = serde_json::from_slice::<Envelope>(body)
        .ok()
        .and_then(|a| a.base_resp);
    let Some(base) = base else {
        return UpstreamError::from_status(&provider.name, status, format!("HTTP {status}"));
    };
    if base.status_code == 0 {
        let text = provider.redact(base.status_msg.trim());
        let message = if text.is_empty() {
            format!("HTTP {status}")
        } else {
            text
        };
        return UpstreamError::from_status(&provider.name, status, message);
    }
    match classify(base.status_code) {
        Some((kind, code_status)) => native_error(provider, &base, kind, code_status),
        // A code not in MiniMax's table: the HTTP status says more than a guess would.
        None => UpstreamError::from_status(&provider.name, status, native_message(provider, &base)),
    }
}

// ---- registration ----------------------------------------------------------------------------

/// The MiniMax kind: Bearer key; speech and images.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        result_hosts: RESULT_HOSTS,
        adapters: Adapters {
            speech: Some(Box::new(SpeechFns {
                request: speech::speech_request,
                decoding: Some(speech::speech_decoding),
            })),
            images: Some(Box::new(ImageFns {
                request: images::image_request,
                validate: crate::providers::registry::no_checks,
                response: |p, r, h, b| {
                    crate::providers::registry::images(images::image_response(p, r, h, b))
                },
                input_as_bytes: false,
                tasks: None,
            })),
            rerank: None,
        },
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-minimax-secret-42";

    fn provider() -> Arc<Provider> {
        support::provider("minimax", KEY)
    }

    #[test]
    fn maps_http_errors() {
        let p = provider();
        let e = error_response(
            &p,
            401,
            format!(
                r#"{{"base_resp":{{"status_code":2049,"status_msg":"invalid api key {KEY}"}}}}"#
            )
            .as_bytes(),
        );
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY));

        let e = error_response(
            &p,
            200,
            br#"{"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}"#,
        );
        assert_eq!((e.kind, e.status), (UpstreamErrorKind::Failure, Some(402)));
        assert!(!e.retryable());

        // An unknown code falls back to the HTTP status.
        let e = error_response(
            &p,
            400,
            br#"{"base_resp":{"status_code":7777,"status_msg":"odd"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "odd (status_code 7777)");

        let e = error_response(&p, 503, b"<html>busy</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
        assert_eq!(e.message, "HTTP 503");

        let e = error_response(
            &p,
            429,
            br#"{"base_resp":{"status_code":0,"status_msg":""}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert_eq!(e.message, "HTTP 429");
    }
}
