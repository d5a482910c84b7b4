//! Reading the request body, bounded.
//!
//! The limit is checked against `Content-Length` before anything is read, so an oversized upload
//! is refused without receiving it; chunked uploads are counted as they arrive. `Expect:
//! 100-continue` is answered only once the declared length is known to be acceptable.
//!
//! The body is held to a deadline that grows with what has arrived: `clients.body_timeout`, plus
//! one second per `clients.body_min_rate` bytes received. A client sending at least that fast is
//! never cut off, one trickling is cut off with `408` (and the connection closed) once it falls
//! behind — Pingora's own read timeout is per read, so a byte every few seconds would never end.

use bytes::{Bytes, BytesMut};
use pingora::proxy::Session;
use tokio::time::Instant;

use crate::common::error::GatewayError;
use crate::config::ClientLimits;

pub(crate) async fn read(
    session: &mut Session,
    limit: usize,
    clients: &ClientLimits,
) -> Result<Bytes, GatewayError> {
    let declared = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(GatewayError::PayloadTooLarge { limit });
    }
    let expects_continue = session
        .req_header()
        .headers
        .get(http::header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    if expects_continue {
        session.write_continue_response().await.map_err(|_| {
            GatewayError::field("body", "the connection closed before the body arrived")
        })?;
    }

    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    let start = Instant::now();
    let mut received: u64 = 0;
    loop {
        let allowed = clients.body_timeout
            + std::time::Duration::from_secs_f64(received as f64 / clients.body_min_rate as f64);
        let chunk = tokio::time::timeout_at(start + allowed, session.read_request_body())
            .await
            .map_err(|_| {
                GatewayError::RequestTimeout(format!(
                    "{received} bytes in {:.1} s; the gateway waits {} ms plus 1 s per {} bytes",
                    start.elapsed().as_secs_f64(),
                    clients.body_timeout.as_millis(),
                    clients.body_min_rate
                ))
            })?
            .map_err(|_| {
                GatewayError::field("body", "the request body could not be read completely")
            })?;
        let Some(chunk) = chunk else { break };
        received += chunk.len() as u64;
        // A body that arrives in one piece is kept as is, without a copy.
        if first.is_none() && buf.is_empty() {
            if chunk.len() > limit {
                return Err(GatewayError::PayloadTooLarge { limit });
            }
            first = Some(chunk);
            continue;
        }
        if let Some(f) = first.take() {
            buf.reserve(declared.unwrap_or(0).max(f.len() + chunk.len()));
            buf.extend_from_slice(&f);
        }
        if buf.len() + chunk.len() > limit {
            return Err(GatewayError::PayloadTooLarge { limit });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(match first {
        Some(f) => f,
        None => buf.freeze(),
    })
}
