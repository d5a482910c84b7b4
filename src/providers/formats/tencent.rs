//! What every Tencent Cloud API 3.0 provider (Hunyuan image, TTS) shares: the account's
//! credentials and region as the configuration gives them, the TC3 signer built from them
//! (`upstream/tc3.rs`), the request shape (`POST /` with the action and version in `X-TC-Action`
//! and `X-TC-Version`) and the `{"Response": {…, "RequestId"}}` envelope with its error codes.
//!
//! A Tencent Cloud account is configured with `api_key` = the SecretId, `secret_key` = the
//! SecretKey, an optional `session_token` (temporary credentials, sent as `X-TC-Token`) and
//! `region` (`ap-guangzhou`; sent as `X-TC-Region`, which both APIs require). The secret and the
//! token are credential-named, so the configuration registers them with the logger's filter; they
//! are never sent (only the signature is) and never shown by `Debug`.
//!
//! Tencent reports errors inside the envelope, usually with HTTP 200:
//! `{"Response": {"Error": {"Code": "AuthFailure.SignatureFailure", "Message": "…"}, "RequestId":
//! "…"}}`. Every answer is read through [`answer`], which turns such an error into the
//! [`UpstreamError`] its code means; a non-2xx answer is read by [`error_response`] the same way.
//! The codes (Tencent's common error code list, and each product's own list in its SDK's
//! `errorcodes`): `AuthFailure.*` and `UnauthorizedOperation` refuse the gateway's credentials (a
//! `SignatureExpire` too: the clock is the operator's); `RequestLimitExceeded*` and
//! `LimitExceeded*` are rate limits (retried); `OperationDenied.*IllegalDetected` are content
//! verdicts; `InvalidParameter*`, `MissingParameter`, `UnknownParameter` and the image-input
//! failures (`FailedOperation.Image*`, `RequestEntityTooLarge`) are the caller's request, except
//! `InvalidParameterValue.VoiceType` (an unknown voice); `InvalidAction`, `ActionOffline`,
//! `NoSuchVersion`, `InvalidRegion`, `UnsupportedRegion`, `UnsupportedOperation*` and the
//! account's state (`ResourceUnavailable.*`, `ResourcesSoldOut.*`: in arrears, not opened,
//! stopped) are the operator's, not retried; anything else (`InternalError*`,
//! `ServiceUnavailable`, `ResourceInsufficient`, `FailedOperation.*`) is a provider failure worth
//! retrying.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::common::native::NativeRequest;
use crate::upstream::provider::{bad_answer, Auth, Provider};
use crate::upstream::tc3::{Credentials, Tc3};

/// The settings a Tencent Cloud kind takes beside `api_key` (the SecretId).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// The SecretKey.
    #[serde(default)]
    pub secret_key: Option<String>,
    /// The token of temporary credentials (STS).
    #[serde(default)]
    pub session_token: Option<String>,
    /// The region requests are sent for (`ap-guangzhou`).
    #[serde(default)]
    pub region: Option<String>,
}

impl std::fmt::Debug for Settings {
    // Never the secret or the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// The TC3 credentials for `service` (the product: `tts`, `aiart`), or [`Auth::Missing`] when no
/// SecretId is configured (the account is then disabled). A SecretId without its SecretKey or
/// region is a configuration error.
pub(crate) fn auth(
    kind: &str,
    settings: &Settings,
    key: &str,
    service: &'static str,
) -> Result<Auth, String> {
    let key = key.trim();
    if key.is_empty() {
        return Ok(Auth::Missing);
    }
    let secret = settings.secret_key.as_deref().map(str::trim).unwrap_or("");
    if secret.is_empty() {
        return Err(format!(
            "{kind} signs requests with Tencent Cloud's TC3-HMAC-SHA256: set secret_key (the \
             SecretKey) as well as api_key (the SecretId)"
        ));
    }
    let region = settings
        .region
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let Some(region) = region else {
        return Err(format!(
            "{kind} sends every request for one Tencent Cloud region: set region (e.g. ap-guangzhou)"
        ));
    };
    let token = settings
        .session_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let credentials = Credentials {
        secret_id: key.to_string(),
        secret_key: secret.to_string(),
        token,
    };
    Ok(Auth::Signed(Box::new(Tc3::new(
        credentials,
        region,
        service,
    ))))
}

/// `POST /` of a JSON `body` for `action` of API `version` (`X-TC-Action`, `X-TC-Version`); the
/// signer adds the time, region and `Authorization`.
pub(crate) fn api_request(
    action: &'static str,
    version: &'static str,
    body: Vec<u8>,
) -> NativeRequest {
    let mut req = NativeRequest::post_json("/", body);
    req.headers.push((
        http::HeaderName::from_static("x-tc-action"),
        http::HeaderValue::from_static(action),
    ));
    req.headers.push((
        http::HeaderName::from_static("x-tc-version"),
        http::HeaderValue::from_static(version),
    ));
    req
}

/// The envelope every answer is wrapped in.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "Response")]
    response: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "Code", default)]
    code: Option<String>,
    #[serde(rename = "Message", default)]
    message: Option<String>,
}

/// A 2xx answer's `Response` as `T`, or the error it reports.
pub(crate) fn answer<T: DeserializeOwned>(
    provider: &Provider,
    body: &[u8],
) -> Result<T, UpstreamError> {
    let envelope: Envelope = crate::providers::parse_answer(provider, body)?;
    let Some(response) = envelope.response else {
        return Err(bad_answer(provider, "answer has no Response"));
    };
    if let Some(err) = reported_error(provider, None, &response) {
        return Err(err);
    }
    serde_json::from_value(Value::Object(response)).map_err(|e| {
        bad_answer(
            provider,
            format!("answer is not the expected Response: {e}"),
        )
    })
}

/// A non-2xx answer: classified by its envelope's error code when it has one, else by status.
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let response = serde_json::from_slice::<Envelope>(body)
        .ok()
        .and_then(|e| e.response);
    match response.and_then(|r| reported_error(provider, Some(status), &r)) {
        Some(err) => err,
        None => UpstreamError::from_status(&provider.name, status, format!("HTTP {status}")),
    }
}

/// The error `response` reports, if any; `http` is the answer's status (`None` inside a 2xx).
fn reported_error(
    provider: &Provider,
    http: Option<u16>,
    response: &Map<String, Value>,
) -> Option<UpstreamError> {
    let error = response.get("Error")?;
    let error: ErrorBody = serde_json::from_value(error.clone()).unwrap_or(ErrorBody {
        code: None,
        message: None,
    });
    let code = error.code.as_deref().map(str::trim).unwrap_or("");
    let request_id = response
        .get("RequestId")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| !r.is_empty());
    Some(code_error(
        provider,
        http,
        code,
        error.message.as_deref(),
        request_id,
    ))
}

/// The error for Tencent error `code` with its message; the request id (what Tencent's support
/// asks for) is kept in the message.
pub(crate) fn code_error(
    provider: &Provider,
    http: Option<u16>,
    code: &str,
    message: Option<&str>,
    request_id: Option<&str>,
) -> UpstreamError {
    let text = message
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| provider.redact(m));
    let code_shown = if code.is_empty() { "no code" } else { code };
    let request = request_id
        .map(|r| format!(", request {}", provider.redact(r)))
        .unwrap_or_default();
    let message = match text {
        Some(t) => format!("{t} ({}{request})", provider.redact(code_shown)),
        None => format!("{}{request}", provider.redact(code_shown)),
    };
    let (kind, status) = classify(code);
    let err = UpstreamError::new(kind, &provider.name, message);
    // A code not to retry keeps a 4xx status, whatever HTTP status came with it; otherwise an
    // error status the answer had is kept (an error inside a 200 has none, and stays retryable
    // when it is a failure).
    match status.or(http.filter(|s| *s >= 400)) {
        Some(s) => err.with_status(s),
        None => err,
    }
}

/// What a Tencent error code means (see the module docs), and the 4xx status that keeps a
/// failure from being retried, when it is not the caller's nor worth a retry.
pub(crate) fn classify(code: &str) -> (UpstreamErrorKind, Option<u16>) {
    use UpstreamErrorKind as K;
    let family = code.split('.').next().unwrap_or(code);
    match family {
        "AuthFailure" | "UnauthorizedOperation" => (K::AuthRejected, None),
        "RequestLimitExceeded" | "LimitExceeded" => (K::RateLimited, None),
        "OperationDenied" if code.ends_with("IllegalDetected") => (K::ContentPolicy, None),
        "InvalidParameterValue" if code == "InvalidParameterValue.VoiceType" => {
            (K::UnknownVoice, None)
        }
        "InvalidParameter" | "InvalidParameterValue" | "MissingParameter" | "UnknownParameter" => {
            (K::InvalidRequest, None)
        }
        // The caller's reference image could not be read or is too large.
        "FailedOperation"
            if code.starts_with("FailedOperation.Image")
                || code == "FailedOperation.RequestEntityTooLarge" =>
        {
            (K::InvalidRequest, None)
        }
        "UnsupportedOperation" if code == "UnsupportedOperation.TextTooLong" => {
            (K::InvalidRequest, None)
        }
        // The gateway's configuration or the account's state: a retry does not fix them.
        "InvalidAction"
        | "ActionOffline"
        | "NoSuchVersion"
        | "InvalidRegion"
        | "UnsupportedRegion"
        | "UnsupportedProtocol" => (K::Failure, Some(400)),
        "UnsupportedOperation" | "ResourceUnavailable" | "ResourcesSoldOut" | "OperationDenied" => {
            (K::Failure, Some(403))
        }
        // A polled job Tencent no longer knows.
        "FailedOperation"
            if code == "FailedOperation.JobNotExist" || code == "FailedOperation.NoSuchTask" =>
        {
            (K::Failure, Some(404))
        }
        _ => (K::Failure, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;

    fn settings(secret: &str, token: Option<&str>, region: &str) -> Settings {
        Settings {
            secret_key: Some(secret.into()),
            session_token: token.map(str::to_string),
            region: Some(region.into()),
        }
    }

    #[test]
    fn credentials_are_checked_and_never_shown() {
        let s = settings("tc-secret-key", Some("tok-123"), "ap-guangzhou");
        assert!(matches!(
            auth("tencent-tts", &s, "", "tts").unwrap(),
            Auth::Missing
        ));
        assert!(matches!(
            auth("tencent-tts", &s, "AKIDexample", "tts").unwrap(),
            Auth::Signed(_)
        ));
        let e = auth(
            "tencent-tts",
            &settings("", None, "ap-guangzhou"),
            "AK",
            "tts",
        )
        .err();
        assert!(e.unwrap().contains("secret_key"));
        let e = auth("tencent-tts", &settings("s", None, " "), "AK", "tts").err();
        assert!(e.unwrap().contains("region"));
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("tc-secret") && !debug.contains("tok-123"),
            "{debug}"
        );
    }

    #[test]
    fn requests_name_the_action_and_version() {
        let r = api_request("TextToVoice", "2019-08-23", b"{}".to_vec());
        assert_eq!(r.path, "/");
        assert_eq!(r.method, http::Method::POST);
        let h: Vec<_> = r
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(
            h,
            [
                ("x-tc-action", "TextToVoice"),
                ("x-tc-version", "2019-08-23")
            ]
        );
    }

    #[test]
    fn errors_inside_and_outside_a_200() {
        let p = support::provider("tencent", "AKIDexample");
        let body = br#"{"Response":{"Error":{"Code":"AuthFailure.SignatureFailure","Message":"The provided credentials could not be validated."},"RequestId":"ed93f3cb"}}"#;
        let err = answer::<Value>(&p, body).unwrap_err();
        assert_eq!(err.kind, UpstreamErrorKind::AuthRejected);
        assert!(err.message.contains("AuthFailure.SignatureFailure"));
        assert!(err.message.contains("ed93f3cb"));
        let err = error_response(&p, 500, body);
        assert_eq!(err.kind, UpstreamErrorKind::AuthRejected);
        let err = error_response(&p, 502, b"<html>bad gateway</html>");
        assert_eq!(err.kind, UpstreamErrorKind::Failure);
        let ok: Value = answer(&p, br#"{"Response":{"JobId":"j1","RequestId":"r"}}"#).unwrap();
        assert_eq!(ok["JobId"], "j1");
        assert_eq!(
            answer::<Value>(&p, br#"{"nope":1}"#).unwrap_err().kind,
            UpstreamErrorKind::BadResponse
        );
    }

    #[test]
    fn codes() {
        use UpstreamErrorKind as K;
        let cases = [
            ("AuthFailure.SecretIdNotFound", K::AuthRejected, None),
            ("AuthFailure.SignatureExpire", K::AuthRejected, None),
            ("RequestLimitExceeded", K::RateLimited, None),
            ("RequestLimitExceeded.JobNumExceed", K::RateLimited, None),
            ("LimitExceeded.AccessLimit", K::RateLimited, None),
            (
                "OperationDenied.TextIllegalDetected",
                K::ContentPolicy,
                None,
            ),
            ("InvalidParameterValue.VoiceType", K::UnknownVoice, None),
            ("InvalidParameterValue.TextTooLong", K::InvalidRequest, None),
            (
                "FailedOperation.ImageDownloadError",
                K::InvalidRequest,
                None,
            ),
            ("ResourceUnavailable.InArrears", K::Failure, Some(403)),
            ("UnsupportedOperation.PkgExhausted", K::Failure, Some(403)),
            ("InvalidAction", K::Failure, Some(400)),
            ("FailedOperation.JobNotExist", K::Failure, Some(404)),
            ("InternalError", K::Failure, None),
            ("ResourceInsufficient", K::Failure, None),
            ("FailedOperation.GenerateImageFailed", K::Failure, None),
        ];
        for (code, kind, status) in cases {
            assert_eq!(classify(code), (kind, status), "{code}");
        }
    }
}
