//! Writing the gateway's own answers: JSON bodies, errors in the spec's shape, and the head of a
//! streamed answer.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;

use super::client_conn::Clocked;
use crate::api::compat::Surface;
use crate::common::error::GatewayError;

/// Write a complete JSON answer.
pub(crate) async fn json(
    session: &mut Session,
    status: u16,
    body: Bytes,
    extra: &[(&'static str, String)],
) -> pingora::Result<()> {
    let mut h = ResponseHeader::build(status, Some(3 + extra.len()))?;
    h.insert_header(http::header::CONTENT_TYPE, "application/json")?;
    h.insert_header(http::header::CONTENT_LENGTH, body.len().to_string())?;
    for (name, value) in extra {
        h.insert_header(*name, value.as_str())?;
    }
    session.write_response_header(Box::new(h), false).await?;
    session.write_response_body(Some(body), true).await
}

/// Write `err` as the spec's Error object with its status (outside a gateway request: no
/// request id).
pub(crate) async fn error(session: &mut Session, err: &GatewayError) -> pingora::Result<()> {
    error_with(session, err, Surface::Native, "", &[]).await
}

/// Write `err` with its status, its body in `surface`'s error shape, with `extra` headers besides
/// the error's own (a deprecated model's). `request_id` (empty: none) goes out twice, from the
/// one value: as the `X-Request-Id` header and as the body's `request_id`.
pub(crate) async fn error_with(
    session: &mut Session,
    err: &GatewayError,
    surface: Surface,
    request_id: &str,
    extra: &[(&'static str, String)],
) -> pingora::Result<()> {
    // A body we did not read (or not completely) would be parsed as the next request on a
    // kept-alive connection, so such a connection is closed after the answer.
    if !session.is_body_done() {
        session.set_keepalive(None);
    }
    let body = surface.error_body(err, request_id);
    let mut headers = err.extra_headers();
    headers.extend_from_slice(extra);
    if !request_id.is_empty() {
        headers.push((crate::common::request_id::HEADER, request_id.to_string()));
    }
    json(session, err.status(), body, &headers).await
}

/// Write the head of a streamed answer. `length` is the body's length when it is known before
/// the body (raw audio passed through as the provider sent it): the client gets it as
/// `Content-Length`, and each body write still goes out at once (`ConnClock::each_write`), since
/// a client playing the audio wants each piece as it arrives and Pingora holds the writes of an
/// answer with a length until the length is written.
///
/// Without a length, HTTP/1.1 gets the body chunked. HTTP/1.0 has no chunked coding (RFC 9112
/// §6.1: a server must not send it to a 1.0 client), so the body is delimited by closing the
/// connection: no `Transfer-Encoding`, no `Content-Length`, and `Connection: close` (Pingora
/// frames a body with neither header that way). HTTP/2 frames bodies itself and forbids
/// `Transfer-Encoding`: nothing is added.
///
/// The caller has the first body bytes in hand, so the head goes out with them (one `send`;
/// `gateway/client_conn.rs`).
/// `extra` headers (a deprecated model's) go with it: they are known before the first byte.
pub(crate) async fn stream_head(
    session: &mut Session,
    content_type: &str,
    length: Option<u64>,
    extra: &[(&'static str, String)],
) -> pingora::Result<()> {
    if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
        match length {
            // Pingora does not flush a head with a length: it waits for the first body write.
            Some(_) => clock.each_write(),
            None => clock.body_follows(),
        }
    }
    let mut h = ResponseHeader::build(200, Some(4 + extra.len()))?;
    h.insert_header(http::header::CONTENT_TYPE, content_type)?;
    h.insert_header(http::header::CACHE_CONTROL, "no-cache")?;
    // Every streamed answer (a miss, a cache hit, a collapsed follower) says which request it is.
    let id = crate::engine::trace::request_id();
    if !id.is_empty() {
        h.insert_header(crate::common::request_id::HEADER, id.as_str())?;
    }
    for (name, value) in extra {
        h.insert_header(*name, value.as_str())?;
    }
    let version = session.req_header().version;
    if let Some(length) = length {
        h.insert_header(http::header::CONTENT_LENGTH, length.to_string())?;
    } else if version == http::Version::HTTP_11 {
        h.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    } else if version < http::Version::HTTP_11 {
        // Even if the client asked to keep the connection alive: its end is the body's end.
        session.set_keepalive(None);
    }
    session.write_response_header(Box::new(h), false).await
}

/// Write a stored file (`HEAD`: the same head, no body).
pub(crate) async fn file(
    session: &mut Session,
    content_type: &str,
    body: Bytes,
    max_age_secs: u64,
    head_only: bool,
) -> pingora::Result<()> {
    let mut h = ResponseHeader::build(200, Some(5))?;
    h.insert_header(http::header::CONTENT_TYPE, content_type)?;
    let id = crate::engine::trace::request_id();
    if !id.is_empty() {
        h.insert_header(crate::common::request_id::HEADER, id.as_str())?;
    }
    h.insert_header(http::header::CONTENT_LENGTH, body.len().to_string())?;
    // The link is the credential: shared caches must not keep it past its expiry, nor at all.
    h.insert_header(
        http::header::CACHE_CONTROL,
        format!("private, max-age={max_age_secs}"),
    )?;
    h.insert_header("x-content-type-options", "nosniff")?;
    session
        .write_response_header(Box::new(h), head_only)
        .await?;
    if head_only {
        return Ok(());
    }
    session.write_response_body(Some(body), true).await
}
