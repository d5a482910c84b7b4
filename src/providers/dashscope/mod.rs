//! Alibaba Cloud Model Studio (DashScope / 百炼): text rerank, Qwen-TTS and CosyVoice speech and Wan images, all
//! answering errors in one `{"request_id","code","message"}` envelope, which this module reads
//! for all three.
//!
//! The envelope normally comes with a 4xx/5xx status but sometimes with HTTP 200 (or, for speech,
//! inside an SSE event); its `code` says more than the status, so the kind comes from the code when
//! this module knows it.

pub(crate) mod cosyvoice;
pub(crate) mod discovery;
pub(crate) mod images;
pub(crate) mod rerank;
pub(crate) mod speech;

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::common::error::UpstreamError;

use crate::api::adapter::Adapters;
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::NativeRequest;
use crate::common::native::PollRequest;
use crate::providers::formats::errors::{status_error, UNKNOWN_CODE_STATUS};
use crate::providers::registry::{ImageFns, Kind, RerankFns, SpeechFns, TaskFns};
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Auth;
use crate::upstream::provider::Provider;

// ---- error mapping ---------------------------------------------------------------------------

/// The native envelope `{"code","message"}`; the OpenAI-compatible mode nests the same pair under
/// `error`, accepted too in case a base URL points there.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<NestedError>,
}

#[derive(Deserialize)]
struct NestedError {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
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
    let mut err = status_error(provider, status, message.as_deref());
    if let Some(code) = code.as_deref() {
        if let Some((kind, _)) = native_code(code) {
            err.kind = kind;
        }
        if names_a_missing_model(code, message.as_deref()) {
            err.kind = UpstreamErrorKind::UnknownModel;
        }
    }
    err
}

/// Whether an error says the native model does not exist. The native API answers an unknown
/// model name with the generic `InvalidParameter` code and the message "Model not exist." (HTTP
/// 400), so the message is what tells it from other bad parameters; only that exact message is
/// read this way.
pub(crate) fn names_a_missing_model(code: &str, message: Option<&str>) -> bool {
    code == "InvalidParameter"
        && message.is_some_and(|m| {
            m.trim()
                .trim_end_matches('.')
                .eq_ignore_ascii_case("model not exist")
        })
}

/// An error envelope that came with HTTP 200 (`code` is the answer's `code` member), classified as
/// if it had come with the status DashScope documents for its code; `None` when the answer is not
/// an error (no code, or an empty one).
pub(crate) fn error_in_answer(
    provider: &Provider,
    code: Option<&Value>,
    body: &[u8],
) -> Option<UpstreamError> {
    let code = code.and_then(code_string)?;
    let status = native_code(&code)
        .map(|(_, s)| s)
        .unwrap_or(UNKNOWN_CODE_STATUS);
    Some(error_response(provider, status, body))
}

/// A non-empty error code as text (DashScope sends strings; numbers are tolerated).
pub(crate) fn code_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What a DashScope error code means, and the HTTP status DashScope documents for it (used when
/// the code arrives with HTTP 200). `None`: the HTTP status decides.
pub(crate) fn native_code(code: &str) -> Option<(UpstreamErrorKind, u16)> {
    use UpstreamErrorKind::*;
    Some(match code {
        "InvalidApiKey" => (AuthRejected, 401),
        // The account may not use this model (not activated, or not offered in the key's
        // workspace or region): for this gateway the configured model is unavailable.
        "Model.AccessDenied" => (UnknownModel, 403),
        // Account not entitled to the API (e.g. `AccessDenied.Unpurchased`).
        c if c.starts_with("AccessDenied") => (AuthRejected, 403),
        c if c.starts_with("Throttling") => (RateLimited, 429),
        // Out of money or free quota: retrying will not help and it is not the caller's fault;
        // the 4xx status keeps it from being retried.
        "Arrearage" => (Failure, 400),
        c if c.starts_with("AllocationQuota") => (Failure, 403),
        // Refused for its content: moderation (`DataInspectionFailed`, `DataInspection*`) or
        // suspected intellectual-property infringement (Wan image models).
        c if c.starts_with("DataInspection") => (ContentPolicy, 400),
        "IPInfringementSuspect" => (ContentPolicy, 400),
        c if c.starts_with("InvalidParameter") || c.starts_with("BadRequest") => {
            (InvalidRequest, 400)
        }
        // The configured native model does not exist (or is no longer served): the engine names
        // the public and native model to the caller.
        // `model_not_found` is the OpenAI-compatible surface's form of it.
        "ModelNotFound" | "ModelNotExist" | "model_not_found" => (UnknownModel, 404),
        c if c.starts_with("InternalError") || c.starts_with("SystemError") => (Failure, 500),
        _ => return None,
    })
}

/// A speech request to DashScope: CosyVoice's families have their own endpoint and body
/// (`cosyvoice.rs`); every other model is Qwen-TTS (`speech.rs`).
fn speech_request(target: &Target, req: &SpeechRequest<'_>) -> Result<NativeRequest, GatewayError> {
    if cosyvoice::serves(req) {
        cosyvoice::speech_request(target, req)
    } else {
        speech::speech_request(target, req)
    }
}

/// How the answer to [`speech_request`]'s request is read.
fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    if cosyvoice::serves(req) {
        cosyvoice::speech_decoding(provider, req)
    } else {
        speech::speech_decoding(provider, req)
    }
}

/// The DashScope kind: Bearer key; speech, images (run as tasks) and rerank.
pub(crate) fn kind(key: &str) -> Result<Kind, String> {
    Ok(Kind {
        auth: crate::providers::registry::keyed(key, Auth::bearer)?,
        errors: error_response,
        remote: true,
        // Qwen-TTS answers with an OSS URL (`dashscope-result-*.oss-*.aliyuncs.com`).
        result_hosts: &["*.aliyuncs.com"],
        adapters: Adapters {
            speech: Some(Box::new(SpeechFns {
                request: speech_request,
                decoding: Some(speech_decoding),
            })),
            images: Some(Box::new(ImageFns {
                request: images::image_request,
                validate: crate::providers::registry::no_checks,
                response: images::image_response,
                input_as_bytes: false,
                tasks: Some(TaskFns {
                    poll_request: |_, task| Ok(PollRequest::Api(images::poll_request(task))),
                    poll_response: images::poll_response,
                }),
            })),
            rerank: Some(Box::new(RerankFns {
                request: rerank::rerank_request,
                response: rerank::rerank_response,
            })),
        },
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-dash-secret-123456";

    fn provider() -> Arc<Provider> {
        support::provider("dashscope", KEY)
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
    }

    #[test]
    fn a_model_it_does_not_serve_is_an_unknown_model() {
        let p = provider();
        // A model DashScope does not serve: its 400 `InvalidParameter` "Model not exist.", the
        // `ModelNotFound` code, or an account that may not use the model.
        for (status, body) in [
            (
                400,
                &br#"{"request_id":"r","code":"InvalidParameter","message":"Model not exist."}"#[..],
            ),
            (
                404,
                br#"{"code":"ModelNotFound","message":"Model not found (wanx-v9)!"}"#,
            ),
            (
                403,
                br#"{"code":"Model.AccessDenied","message":"Model access denied."}"#,
            ),
        ] {
            let e = error_response(&p, status, body);
            assert_eq!(
                e.kind,
                UpstreamErrorKind::UnknownModel,
                "{}",
                String::from_utf8_lossy(body)
            );
            assert!(!e.retryable());
        }
        // Other parameter errors stay the caller's.
        let e = error_response(
            &p,
            400,
            br#"{"code":"InvalidParameter","message":"Model not exist in this size list: 99x99"}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
    }

    #[test]
    fn maps_ip_and_compatible_mode_errors() {
        let p = provider();
        let e = error_response(
            &p,
            400,
            br#"{"code":"IPInfringementSuspect","message":"Input data is suspected of being involved in IP infringement."}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);

        let e = error_response(
            &p,
            400,
            br#"{"error":{"code":"invalid_parameter_error","message":"bad top_n"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "bad top_n");
    }
}
