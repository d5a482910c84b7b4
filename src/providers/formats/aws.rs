//! What every AWS provider (Bedrock, Polly) shares: the account's credentials and region as the
//! configuration gives them, the SigV4 signer built from them (`upstream/sigv4.rs`), and AWS's
//! REST-JSON error body.
//!
//! An AWS account is configured with `api_key` = the access key id, `secret_key`, an optional
//! `session_token` (temporary credentials) and `region` — usually all from the environment
//! (`${AWS_ACCESS_KEY_ID:-}`, …). The secret and the token are credential-named, so the
//! configuration registers them with the logger's filter; they are never sent (only the
//! signature is) and never shown by `Debug`.

use serde::Deserialize;

use crate::upstream::provider::Auth;
use crate::upstream::sigv4::{Credentials, SigV4};

/// The settings an AWS kind takes beside `api_key` (the access key id).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// The secret access key.
    #[serde(default)]
    pub secret_key: Option<String>,
    /// The session token of temporary credentials (STS, SSO, an assumed role).
    #[serde(default)]
    pub session_token: Option<String>,
    /// The AWS region requests are signed for (`us-east-1`); it must be the endpoint's.
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

impl Settings {
    /// The region, trimmed; `None` when not set.
    pub(crate) fn region(&self) -> Option<&str> {
        self.region
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
    }
}

/// The SigV4 credentials for `service` (its signing name), or [`Auth::Missing`] when no access
/// key is configured (the account is then disabled). An access key without its secret or
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
            "{kind} signs requests with AWS Signature Version 4: set secret_key (the secret access key) as well"
        ));
    }
    let Some(region) = settings.region() else {
        return Err(format!(
            "{kind} signs requests for one AWS region: set region (e.g. us-east-1)"
        ));
    };
    let session_token = settings
        .session_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let credentials = Credentials {
        access_key_id: key.to_string(),
        secret: secret.to_string(),
        session_token,
    };
    Ok(Auth::Signed(Box::new(SigV4::new(
        credentials,
        region,
        service,
    ))))
}

/// AWS's REST-JSON error body: `{"message": …}` (some services `Message`), with the error's type
/// in the `x-amzn-ErrorType` header and sometimes in `__type` too.
#[derive(Deserialize, Default)]
pub(crate) struct ErrorBody {
    #[serde(default, alias = "Message")]
    message: Option<String>,
    #[serde(default, rename = "__type")]
    kind: Option<String>,
}

impl ErrorBody {
    /// `body` as this envelope; empty when it is not one.
    pub(crate) fn parse(body: &[u8]) -> ErrorBody {
        serde_json::from_slice(body).unwrap_or_default()
    }

    /// The message, unless blank.
    pub(crate) fn message(&self) -> Option<&str> {
        self.message.as_deref().filter(|m| !m.trim().is_empty())
    }

    /// The error type's short name (`ValidationException`), when the body names it
    /// (`__type` may carry a namespace: `com.amazon.coral.service#ValidationException`).
    pub(crate) fn kind(&self) -> Option<&str> {
        self.kind
            .as_deref()
            .map(|k| k.rsplit('#').next().unwrap_or(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(secret: &str, token: Option<&str>, region: &str) -> Settings {
        Settings {
            secret_key: Some(secret.into()),
            session_token: token.map(str::to_string),
            region: Some(region.into()),
        }
    }

    #[test]
    fn credentials_are_checked_and_never_shown() {
        let s = settings(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("tok"),
            "us-west-2",
        );
        assert!(matches!(
            auth("bedrock", &s, "", "bedrock").unwrap(),
            Auth::Missing
        ));
        assert!(matches!(
            auth("bedrock", &s, "AKIDEXAMPLE", "bedrock").unwrap(),
            Auth::Signed(_)
        ));
        let e = auth("bedrock", &settings("", None, "us-west-2"), "AK", "bedrock").err();
        assert!(e.unwrap().contains("secret_key"));
        let e = auth("bedrock", &settings("s", None, " "), "AK", "bedrock").err();
        assert!(e.unwrap().contains("region"));
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("wJalr") && !debug.contains("tok"),
            "{debug}"
        );
    }

    #[test]
    fn error_bodies() {
        let e = ErrorBody::parse(br#"{"message":"Rate exceeded"}"#);
        assert_eq!(e.message(), Some("Rate exceeded"));
        let e = ErrorBody::parse(
            br#"{"__type":"com.amazon.coral.validate#ValidationException","Message":"bad"}"#,
        );
        assert_eq!(e.kind(), Some("ValidationException"));
        assert_eq!(e.message(), Some("bad"));
        let e = ErrorBody::parse(b"<html>");
        assert_eq!(e.message(), None);
    }
}
