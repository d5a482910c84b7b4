//! Copying a provider's streamed body to the client as it arrives.
//!
//! Audio is copied chunk by chunk (constant memory: one chunk in flight). An SSE stream (OpenAI's
//! and Azure's own speech events) is copied event by event, each written (and so flushed) as soon
//! as it is complete. A failure after the first byte went out cannot become an error status any
//! more: an SSE client gets a final `error` event; an audio client sees the connection close
//! without the terminating chunk, which every HTTP client reports as a truncated body rather than a
//! success. An SSE stream that ends without its closing `speech.audio.done` event was cut short, and
//! ends with an `error` event too; a half event it ended inside is never forwarded.

use bytes::Bytes;

use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::engine::client::{Client, Relayed};
// Named here too: the relays' callers (`engine::speech`) take it from this file.
pub(crate) use crate::engine::client::StreamError;
use crate::stream::audio::SpeechUsage;
use crate::stream::sse::{self, EventSplitter};
use crate::upstream::exchange::Response;

/// The `type` of the event that closes a complete OpenAI speech stream (it carries the usage).
const END_EVENT: &str = "speech.audio.done";

/// Copy raw bytes (after `first`, already read; `ended`: the body ended with them) until the
/// provider's body ends, then finish the client's body. Raw audio reports no usage: the usage
/// returned is empty.
///
/// `first` is what of the body had already arrived when it was primed ([`in_hand`], read inside
/// the attempt loop), written in one piece (one chunk when the answer is chunked) before anything
/// more is read: the head goes out with the first write (`respond::stream_head`), so an answer in
/// hand is one write, head included, plus a chunked answer's terminator, and a provider failing
/// after it fails an answer the client has bytes of. Nothing waits for more: later pieces go out
/// as they arrive.
pub(crate) async fn bytes(
    client: &mut Client<'_>,
    mut resp: Response<'_>,
    first: Vec<Bytes>,
    ended: bool,
) -> Result<Relayed, StreamError> {
    let first = join(first);
    match first {
        // The whole answer in hand: its bytes and the body's end together.
        Some(all) if ended => client.finish_with(all).await?,
        _ => {
            if let Some(piece) = first {
                client.write(piece, false).await?;
            }
            if !ended {
                loop {
                    match resp.chunk().await {
                        Ok(Some(chunk)) => client.write(chunk, false).await?,
                        Ok(None) => break,
                        Err(e) => return Err(StreamError::Upstream(GatewayError::Upstream(e))),
                    }
                }
            }
            client.end().await?;
        }
    }
    resp.release().await;
    Ok(client.relayed(SpeechUsage::default(), true))
}

/// Most bytes [`in_hand`] gathers: past it, what keeps arriving streams piece by piece (a long
/// answer arriving fast must not be gathered whole: memory stays one piece per relay).
const IN_HAND_BYTES: usize = 64 * 1024;

/// `first` and every body piece that can be read without waiting, up to [`IN_HAND_BYTES`],
/// joined into one (`None`: no bytes); and whether the body ended. (A body read that would wait
/// is dropped unstarted: reading a body changes nothing until bytes arrive.) A failure already
/// arrived is returned, whatever was gathered before it.
pub(crate) fn in_hand(
    resp: &mut Response<'_>,
    mut first: Vec<Bytes>,
) -> Result<(Option<Bytes>, bool), UpstreamError> {
    use futures_util::FutureExt;
    let mut ended = false;
    let mut gathered: usize = first.iter().map(Bytes::len).sum();
    while gathered < IN_HAND_BYTES {
        match resp.chunk().now_or_never() {
            Some(Ok(Some(more))) => {
                gathered += more.len();
                first.push(more);
            }
            Some(Ok(None)) => {
                ended = true;
                break;
            }
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    Ok((join(first), ended))
}

/// `pieces` as one (`None`: no bytes), copied only when there are several.
fn join(mut pieces: Vec<Bytes>) -> Option<Bytes> {
    pieces.retain(|piece| !piece.is_empty());
    match pieces.len() {
        0 => None,
        1 => pieces.pop(),
        _ => {
            let mut joined = bytes::BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
            for piece in &pieces {
                joined.extend_from_slice(piece);
            }
            Some(joined.freeze())
        }
    }
}

/// Copy an SSE speech stream (after `first`, already read) event by event; a provider failure,
/// or an end without the closing `END_EVENT`, becomes a final `error` event and is returned
/// ([`StreamError::Upstream`]). The usage the closing event reports is returned.
pub(crate) async fn events(
    client: &mut Client<'_>,
    mut resp: Response<'_>,
    first: Vec<Bytes>,
) -> Result<Relayed, StreamError> {
    let mut splitter = EventSplitter::new();
    let mut ended: Option<SpeechUsage> = None;
    for chunk in first {
        splitter.push(&chunk);
        while let Some(ev) = splitter.next_event() {
            ended = ended.or_else(|| closing(&ev));
            client.write(ev, false).await?;
        }
    }
    let failure = loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                splitter.push(&chunk);
                while let Some(ev) = splitter.next_event() {
                    ended = ended.or_else(|| closing(&ev));
                    client.write(ev, false).await?;
                }
            }
            Ok(None) => {
                // Bytes after the last blank line are an event the stream ended inside. Only a
                // whole closing event (its JSON complete, just its blank line missing) is
                // forwarded, completed: an SSE client would drop it unterminated. Anything else
                // is half an event and never reaches the client.
                if let Some((rest, usage)) = splitter
                    .remainder()
                    .and_then(|rest| closing(&rest).map(|u| (rest, u)))
                {
                    ended = Some(usage);
                    client.write(terminated(rest), false).await?;
                }
                if ended.is_some() {
                    break None;
                }
                break Some(GatewayError::Upstream(UpstreamError::new(
                    UpstreamErrorKind::BadResponse,
                    resp.provider(),
                    format!("speech stream ended before its `{END_EVENT}` event"),
                )));
            }
            Err(e) => break Some(GatewayError::Upstream(e)),
        }
    };
    match failure {
        None => {
            client.end().await?;
            resp.release().await;
            Ok(client.relayed(ended.unwrap_or_default(), true))
        }
        Some(err) => {
            // A half event in the splitter is dropped: the client only ever sees whole events.
            client.write(error_event(&err), true).await?;
            // Cut short, as a raw answer is: recorded so (`aborted`) and not charged.
            Err(StreamError::Upstream(err))
        }
    }
}

/// `event` ending in the blank line that dispatches it.
fn terminated(event: Bytes) -> Bytes {
    let missing: &[u8] = if event.ends_with(b"\n\n") || event.ends_with(b"\r\n\r\n") {
        b""
    } else if event.ends_with(b"\n") {
        b"\n"
    } else {
        b"\n\n"
    };
    if missing.is_empty() {
        return event;
    }
    let mut out = Vec::with_capacity(event.len() + missing.len());
    out.extend_from_slice(&event);
    out.extend_from_slice(missing);
    Bytes::from(out)
}

/// The usage of `event` if it is the stream's closing event (`None` otherwise): OpenAI's
/// `usage.input_tokens` and `usage.output_tokens`, each when present as a whole number. Audio
/// deltas are base64 (no `.`), so only a small event can hold the name; only those are parsed.
fn closing(event: &[u8]) -> Option<SpeechUsage> {
    if !event
        .windows(END_EVENT.len())
        .any(|w| w == END_EVENT.as_bytes())
    {
        return None;
    }
    let v = sse::data_of(event)
        .and_then(|data| serde_json::from_str::<serde_json::Value>(&data).ok())?;
    if v.get("type").and_then(|t| t.as_str()) != Some(END_EVENT) {
        return None;
    }
    let count = |name: &str| v.get("usage")?.get(name)?.as_u64();
    Some(SpeechUsage {
        input_tokens: count("input_tokens"),
        output_tokens: count("output_tokens"),
    })
}

/// Whether `event` is the stream's closing event.
#[cfg(test)]
fn closes(event: &[u8]) -> bool {
    closing(event).is_some()
}

/// `data: {"type":"error","request_id":…,"error":{"code":…,"message":…}}`: the request id,
/// which the answer's head carried too, since the event comes after it.
pub(crate) fn error_event(err: &GatewayError) -> bytes::Bytes {
    let body = serde_json::json!({
        "type": "error",
        "request_id": super::trace::request_id().as_str(),
        "error": {"code": err.code(), "message": err.message()},
    });
    sse::event(body.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_done_event_closes_the_stream() {
        assert!(closes(
            b"data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":1}}\n\n"
        ));
        assert!(closes(
            b"event: x\r\ndata: {\"type\": \"speech.audio.done\"}"
        ));
        assert!(!closes(
            b"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\n"
        ));
        // The name elsewhere than in `type` is not the end.
        assert!(!closes(
            b"data: {\"type\":\"error\",\"message\":\"before speech.audio.done\"}\n\n"
        ));
        assert!(!closes(b"data: speech.audio.done\n\n"));
    }

    #[test]
    fn the_done_event_hands_back_its_usage() {
        assert_eq!(
            closing(b"data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":14,\"output_tokens\":101,\"total_tokens\":115}}\n\n"),
            Some(SpeechUsage {
                input_tokens: Some(14),
                output_tokens: Some(101)
            })
        );
        assert_eq!(
            closing(b"data: {\"type\":\"speech.audio.done\"}\n\n"),
            Some(SpeechUsage::default())
        );
    }

    #[test]
    fn a_last_event_is_terminated() {
        for (raw, want) in [
            (&b"data: x"[..], &b"data: x\n\n"[..]),
            (b"data: x\n", b"data: x\n\n"),
            (b"data: x\n\n", b"data: x\n\n"),
            (b"data: x\r\n\r\n", b"data: x\r\n\r\n"),
        ] {
            assert_eq!(&terminated(Bytes::copy_from_slice(raw))[..], want);
        }
    }
}
