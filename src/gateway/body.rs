//! Reading the request body, bounded.
//!
//! The limit is checked against `Content-Length` before anything is read, so an oversized upload
//! is refused without receiving it; chunked uploads are counted as they arrive. `Expect:
//! 100-continue` is answered only once the declared length is known to be acceptable.

use bytes::{Bytes, BytesMut};
use pingora::proxy::Session;

use crate::common::error::GatewayError;

pub async fn read(session: &mut Session, limit: usize) -> Result<Bytes, GatewayError> {
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
    loop {
        let chunk = session.read_request_body().await.map_err(|_| {
            GatewayError::field("body", "the request body could not be read completely")
        })?;
        let Some(chunk) = chunk else { break };
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
