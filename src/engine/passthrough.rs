//! Copying a provider's streamed body to the client as it arrives.
//!
//! Audio is copied chunk by chunk (constant memory: one chunk in flight). An SSE stream is copied
//! event by event, each written (and so flushed) as soon as it is complete. A failure after the
//! first byte went out cannot become an error status any more: an SSE client gets a final `error`
//! event; an audio client sees the connection close without the terminating chunk, which every HTTP
//! client reports as a truncated body rather than a success.

use bytes::Bytes;
use pingora::proxy::Session;

use crate::common::error::GatewayError;
use crate::stream::sse::{self, EventSplitter};
use crate::upstream::exchange::Response;

/// How a streamed copy ended badly.
pub enum StreamError {
    /// The provider failed mid-stream; for raw audio the connection must be dropped unfinished.
    Upstream(GatewayError),
    /// The client went away; nothing more can be sent.
    Client,
}

/// Copy raw bytes (after `first`, already read) until the provider's body ends, then finish the
/// client's body.
pub async fn bytes(
    session: &mut Session,
    mut resp: Response<'_>,
    first: Vec<Bytes>,
) -> Result<(), StreamError> {
    for chunk in first {
        session
            .write_response_body(Some(chunk), false)
            .await
            .map_err(|_| StreamError::Client)?;
    }
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => session
                .write_response_body(Some(chunk), false)
                .await
                .map_err(|_| StreamError::Client)?,
            Ok(None) => break,
            Err(e) => return Err(StreamError::Upstream(GatewayError::Upstream(e))),
        }
    }
    session
        .write_response_body(None, true)
        .await
        .map_err(|_| StreamError::Client)?;
    resp.release().await;
    Ok(())
}

/// Copy an SSE stream (after `first`, already read) event by event; a provider failure becomes a
/// final `error` event.
pub async fn events(
    session: &mut Session,
    mut resp: Response<'_>,
    first: Vec<Bytes>,
) -> Result<(), StreamError> {
    let mut splitter = EventSplitter::new();
    for chunk in first {
        splitter.push(&chunk);
        while let Some(ev) = splitter.next_event() {
            session
                .write_response_body(Some(ev), false)
                .await
                .map_err(|_| StreamError::Client)?;
        }
    }
    let failure = loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                splitter.push(&chunk);
                while let Some(ev) = splitter.next_event() {
                    session
                        .write_response_body(Some(ev), false)
                        .await
                        .map_err(|_| StreamError::Client)?;
                }
            }
            Ok(None) => break None,
            Err(e) => break Some(GatewayError::Upstream(e)),
        }
    };
    match failure {
        None => {
            if let Some(rest) = splitter.remainder() {
                session
                    .write_response_body(Some(rest), false)
                    .await
                    .map_err(|_| StreamError::Client)?;
            }
            session
                .write_response_body(None, true)
                .await
                .map_err(|_| StreamError::Client)?;
            resp.release().await;
        }
        Some(err) => {
            // The half event in the splitter is dropped: the client only ever sees whole events.
            session
                .write_response_body(Some(error_event(&err)), true)
                .await
                .map_err(|_| StreamError::Client)?;
        }
    }
    Ok(())
}

/// `data: {"type":"error","error":{"code":…,"message":…}}`
pub fn error_event(err: &GatewayError) -> bytes::Bytes {
    let body = serde_json::json!({
        "type": "error",
        "error": {"code": err.code(), "message": err.message()},
    });
    sse::event(body.to_string().as_bytes())
}
