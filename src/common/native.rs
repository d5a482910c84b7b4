//! What an adapter hands the exchange: a request in the provider's own wire format (an HTTP
//! request, or a WebSocket to open and the messages to send on it; for an in-process provider, the
//! answer itself), and the JSON helpers that build native bodies with the
//! caller's pass-through fields copied verbatim.

use std::borrow::Cow;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::common::error::GatewayError;
use crate::common::json::Str;

/// A request in the provider's own wire format, ready to send.
#[derive(Debug)]
pub struct NativeRequest {
    /// The HTTP method.
    pub method: Method,
    /// Path relative to the provider's base URL, with any query string.
    pub path: String,
    /// The body's `Content-Type`.
    pub content_type: Cow<'static, str>,
    /// Provider-specific headers besides auth (e.g. `Accept`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The body, sent whole (with its length).
    pub body: Bytes,
}

impl NativeRequest {
    /// A `GET` without a body (polling a task).
    pub fn get(path: impl Into<String>) -> NativeRequest {
        NativeRequest {
            method: Method::GET,
            path: path.into(),
            content_type: Cow::Borrowed("application/json"),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// A `POST` of a JSON `body` to `path`.
    pub fn post_json(path: impl Into<String>, body: Vec<u8>) -> NativeRequest {
        NativeRequest {
            method: Method::POST,
            path: path.into(),
            content_type: Cow::Borrowed("application/json"),
            headers: Vec::new(),
            body: Bytes::from(body),
        }
    }
}

/// A WebSocket to open on the provider's API (OpenAI's Realtime API) and the text messages to send
/// on it, in order, once it is open. The answer is the provider's incoming text messages, one per
/// chunk of the exchange's answer, up to the one `last` says ends the answer (the socket is then closed: a Realtime session stays open after its response).
#[derive(Debug)]
pub struct SocketRequest {
    /// Path relative to the provider's base URL, with its query (`/realtime?model=…`).
    pub path: String,
    /// Provider-specific headers besides auth (and the trace context the attempt adds).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The JSON text messages to send once the socket is open.
    pub messages: Vec<String>,
    /// Whether an incoming text message is the answer's last one.
    pub last: fn(&str) -> bool,
}

/// What an adapter prepared for one attempt: a request to send, or (for in-process providers) the
/// native answer itself.
#[derive(Debug)]
pub enum Prepared {
    /// A request for the exchange to send (every remote provider).
    Http(NativeRequest),
    /// A WebSocket for the exchange to open (OpenAI's Realtime API). The built-in adapters' only:
    /// not part of the extension point (`provider_api` does not export [`SocketRequest`]).
    #[doc(hidden)]
    Socket(SocketRequest),
    /// The native answer itself, from a provider that runs in process.
    Local(Bytes),
}

/// How to read a provider task's state.
#[derive(Debug)]
pub enum PollRequest {
    /// A request to the provider's API, relative to its base URL like any other.
    Api(NativeRequest),
    /// A `GET` of a URL the provider's own answer gave (BFL's `polling_url`), sent with the
    /// provider's credentials: the adapter has checked it is on the provider's own domain.
    Url(String),
}

/// Serialize `known` (a struct serializing as a JSON object) followed by the caller's pass-through
/// fields, copied verbatim as raw JSON.
pub fn json_with_extra<T: Serialize>(
    known: &T,
    extra: &[(Str<'_>, &RawValue)],
) -> Result<Vec<u8>, GatewayError> {
    let mut out = serde_json::to_vec(known)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    if extra.is_empty() {
        return Ok(out);
    }
    // `known` always serializes as an object: drop its closing brace and append the extra pairs.
    if out.pop() != Some(b'}') {
        return Err(GatewayError::Internal(
            "native request is not an object".into(),
        ));
    }
    let mut first = out.len() == 1;
    for (k, v) in extra {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut out, k.as_str())
            .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
    }
    out.push(b'}');
    Ok(out)
}

/// [`json_with_extra`] as a raw JSON value, for providers whose pass-through fields live in a
/// nested object of the native body (DashScope's `parameters`, `input`).
pub fn nested_with_extra<T: Serialize>(
    known: &T,
    extra: &[(Str<'_>, &RawValue)],
) -> Result<Box<RawValue>, GatewayError> {
    let bytes = json_with_extra(known, extra)?;
    let text = String::from_utf8(bytes)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    RawValue::from_string(text)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_fields_are_appended_verbatim() {
        #[derive(Serialize)]
        struct K {
            a: u8,
        }
        let raw = RawValue::from_string("{\"x\": [1, 2]}".into()).unwrap();
        let out = json_with_extra(&K { a: 1 }, &[(Str("s\"q".into()), &raw)]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":1,"s\"q":{"x": [1, 2]}}"#
        );
    }
}
