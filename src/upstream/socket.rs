//! A WebSocket to a provider (OpenAI's Realtime API) over Pingora's own connector.
//!
//! The TCP/TLS stream is opened the way the exchange opens an HTTP/1 peer's (the account's CA
//! file, resolver, connect timeout and TLS; ALPN `http/1.1`, which a WebSocket upgrade needs), then
//! the WebSocket client handshake runs over it (`tokio-tungstenite`), carrying the provider's own
//! auth headers (never the caller's). A handshake answered with anything but 101 is classified by
//! the provider's error map exactly like an HTTP error answer. Once open, the request's messages are
//! sent in order, and the answer is read one incoming text message at a time: pings are answered
//! by the WebSocket layer, a close ends the answer, and so does the message the request names as
//! its last (a Realtime session stays open after its response; the gateway closes it). Each read
//! waits at most the account's read timeout: a stalled provider fails the attempt.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use pingora::protocols::Stream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::common::native::SocketRequest;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::provider::{Provider, Signable};

/// How long closing an open socket may take (a courtesy to the provider; the answer is complete).
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// An open WebSocket whose incoming messages are the answer.
pub(crate) struct Socket {
    ws: WebSocketStream<Stream>,
    last: fn(&str) -> bool,
    read_timeout: Option<Duration>,
    /// The answer's last message was read, or the provider closed the socket.
    ended: bool,
}

/// Run `req`'s WebSocket handshake over `stream` (connected to `ep` by the exchange, with the
/// account's TLS and timeouts) and send its messages.
pub(crate) async fn handshake(
    stream: Stream,
    provider: &Provider,
    ep: &Endpoint,
    req: &SocketRequest,
) -> Result<Socket, UpstreamError> {
    let name = provider.name.as_str();
    let path = ep.path(&req.path);
    let request = handshake_request(provider, ep, &path, req)?;
    let read_timeout = ep.options.read_timeout;
    let config = WebSocketConfig::default().max_message_size(Some(provider.max_response_bytes));
    let handshake = tokio_tungstenite::client_async_with_config(request, stream, Some(config));
    let (mut ws, _) = within(read_timeout, name, handshake)
        .await?
        .map_err(|e| handshake_error(provider, e))?;
    for message in &req.messages {
        let send = ws.send(Message::text(message.as_str()));
        within(read_timeout, name, send)
            .await?
            .map_err(|e| socket_error(name, &e))?;
    }
    Ok(Socket {
        ws,
        last: req.last,
        read_timeout,
        ended: false,
    })
}

impl Socket {
    /// The next incoming text message, `None` once the answer ended.
    pub(crate) async fn next(&mut self, provider: &str) -> Result<Option<Bytes>, UpstreamError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let message = within(self.read_timeout, provider, self.ws.next()).await?;
            match message {
                None | Some(Ok(Message::Close(_))) => {
                    self.ended = true;
                    return Ok(None);
                }
                Some(Ok(Message::Text(text))) => {
                    self.ended = (self.last)(text.as_str());
                    return Ok(Some(Bytes::from(text)));
                }
                // Pings are answered by the WebSocket layer; nothing else is part of the answer.
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(socket_error(provider, &e)),
            }
        }
    }

    /// Close the socket (the answer is complete, or abandoned).
    pub(crate) async fn close(mut self) {
        let _ = tokio::time::timeout(CLOSE_WAIT, self.ws.close(None)).await;
    }
}

/// The handshake's request: `ws(s)://authority/path` with the provider's auth headers and the
/// request's own.
fn handshake_request(
    provider: &Provider,
    ep: &Endpoint,
    path: &str,
    req: &SocketRequest,
) -> Result<http::Request<()>, UpstreamError> {
    let name = provider.name.as_str();
    let internal = |m: String| UpstreamError::new(UpstreamErrorKind::Failure, name, m);
    let scheme = if ep.tls { "wss" } else { "ws" };
    let uri = format!("{scheme}://{}{path}", ep.authority);
    let mut request = uri
        .into_client_request()
        .map_err(|e| internal(format!("WebSocket request: {e}")))?;
    let signable = Signable {
        method: &http::Method::GET,
        authority: &ep.authority,
        path,
        content_type: None,
        body: &Bytes::new(),
    };
    let auth = provider.auth_headers(&signable).map_err(internal)?;
    let headers = request.headers_mut();
    for (name, value) in auth.iter() {
        headers.insert(name.clone(), value.clone());
    }
    for (name, value) in &req.headers {
        headers.insert(name.clone(), value.clone());
    }
    Ok(request)
}

/// `fut`, failed as a timeout after `limit` (none: unbounded).
async fn within<F: std::future::Future>(
    limit: Option<Duration>,
    provider: &str,
    fut: F,
) -> Result<F::Output, UpstreamError> {
    match limit {
        None => Ok(fut.await),
        Some(limit) => tokio::time::timeout(limit, fut).await.map_err(|_| {
            UpstreamError::new(
                UpstreamErrorKind::Timeout,
                provider,
                format!("no answer on the WebSocket within {} ms", limit.as_millis()),
            )
        }),
    }
}

/// A failed handshake: an HTTP answer (not 101) through the provider's error map, as any error
/// answer; anything else as a socket failure.
fn handshake_error(provider: &Provider, e: WsError) -> UpstreamError {
    match e {
        WsError::Http(resp) => {
            let status = resp.status().as_u16();
            let body = resp.body().as_deref().unwrap_or_default();
            provider.error_response(status, resp.headers(), body)
        }
        e => socket_error(&provider.name, &e),
    }
}

/// A WebSocket failure after the connect: the connection was lost or broke the protocol (retryable
/// before the first byte, like a connection reset on an HTTP answer). Never the message of a
/// provider's frame: only the failure's kind.
fn socket_error(provider: &str, e: &WsError) -> UpstreamError {
    let what = match e {
        WsError::ConnectionClosed | WsError::AlreadyClosed => "the WebSocket was closed",
        WsError::Io(_) => "the WebSocket connection failed",
        WsError::Capacity(_) => "a WebSocket message was too large",
        WsError::Protocol(_) | WsError::Utf8(_) => "the WebSocket broke its protocol",
        _ => "the WebSocket failed",
    };
    UpstreamError::new(UpstreamErrorKind::Failure, provider, what)
}
