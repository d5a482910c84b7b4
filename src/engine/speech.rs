//! The speech answer from a provider's first byte to the client's last.
//!
//! [`prime`] runs inside the attempt loop: it reads the native body until the decoder has produced
//! the first audio (or the body ended), downloading a result file first when the answer only names
//! one. Anything that fails there — a 200 answer carrying an error, a 200 answer that is not audio
//! at all (an HTML page, a JSON document; `stream::expect`), a stream that ends before any audio —
//! is still retryable, because nothing has reached the client. [`relay`] then writes the
//! audio out: raw bytes for `stream_format: audio`, or the gateway's public SSE events for `sse`:
//!
//! ```text
//! data: {"type":"speech.audio.delta","audio":"<base64>"}
//!
//! data: {"type":"speech.audio.done","usage":{"input_tokens":N,"output_tokens":N,"total_tokens":N}}
//!
//! ```
//!
//! A failure after the first byte ends an SSE stream with `data: {"type":"error",…}` and cuts a raw
//! audio answer off without its terminating chunk; either way the relay returns the failure, so the
//! request is recorded as an answer cut short (`aborted`, not charged).

use std::future::Future;
use std::sync::Arc;

use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};

use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::engine::client::{Client, Relayed};
use crate::engine::passthrough;
use crate::engine::passthrough::StreamError;
use crate::stream::audio::{AudioDecoder, Finished, Raw, SpeechDecoding, SpeechUsage};
use crate::stream::expect::{self, Native, Verdict};
use crate::upstream::exchange::{Response, Upstream};
use crate::upstream::provider::bad_answer;
use crate::upstream::provider::Provider;

/// A speech answer whose first audio is in hand.
pub(crate) struct Primed<'u> {
    resp: Response<'u>,
    decoder: Option<Box<dyn crate::stream::audio::AudioDecoder>>,
    /// Audio (or, for pass-through, native bytes) read but not yet written.
    pending: Vec<Bytes>,
    /// Set when the native body has already ended.
    done: Option<SpeechUsage>,
    /// The provider's `Content-Length`, when its bytes are what the client gets (see
    /// [`Primed::known_length`]).
    length: Option<u64>,
}

impl Primed<'_> {
    /// The answer's length when it is known before its body: raw audio passed through as the
    /// provider sent it, with a `Content-Length` and no other coding. The client then gets that
    /// length instead of chunked framing (no chunk sizes, no terminator: fewer bytes and writes).
    pub(crate) fn known_length(&self) -> Option<u64> {
        self.length
    }
}

/// The length of `resp`'s body as its head states it, when the body is plain bytes (no
/// `Transfer-Encoding`, no `Content-Encoding` but `identity`): what a client can be told.
fn stated_length(resp: &Response<'_>) -> Option<u64> {
    let headers = resp.headers()?;
    if headers.contains_key(http::header::TRANSFER_ENCODING) {
        return None;
    }
    let coded = headers
        .get(http::header::CONTENT_ENCODING)
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    if coded {
        return None;
    }
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Read until the first audio is decoded (see the module docs). `sse` is the caller's
/// `stream_format: sse`, which decides what a passed-through body must be.
///
/// Before anything is decoded or held for the client, the answer is checked to be what was asked
/// for (`stream::expect`): its type, then its first bytes. Native chunks are held until those
/// bytes are judged.
pub(crate) async fn prime<'u>(
    upstream: &'u Upstream,
    provider: Arc<Provider>,
    mut resp: Response<'u>,
    decoding: SpeechDecoding,
    sse: bool,
) -> Result<Primed<'u>, UpstreamError> {
    let (mut decoder, mut native) = reader(decoding, sse);
    expect::content_type(&provider, native, resp.headers())?;
    // Raw audio passed through keeps the provider's length; anything decoded or re-framed
    // (SSE, a downloaded result file) is streamed chunked.
    let length = if decoder.is_none() && native == Native::Audio {
        stated_length(&resp)
    } else {
        None
    };
    let mut pending = Vec::new();
    // Native chunks read before the verdict on the body's first bytes; `None` once judged.
    let mut held: Option<Vec<Bytes>> = Some(Vec::new());
    let mut fetched = false;
    loop {
        let chunk = resp.chunk().await?;
        let ended = chunk.is_none();
        let Some(arrived) = arrived(&mut held, chunk, ended, native, &provider)? else {
            continue;
        };
        decode_arrived(&mut decoder, arrived, &mut pending)?;
        if ended {
            let usage = match &mut decoder {
                None => SpeechUsage::default(),
                Some(d) => match d.finish(&mut pending)? {
                    Finished::Done(usage) => usage,
                    Finished::Fetch(url) if !fetched => {
                        resp.release().await;
                        resp = upstream.fetch(&provider, &url).await?;
                        let raw = Raw::file(&provider, provider.max_response_bytes);
                        native = raw.native();
                        decoder = Some(Box::new(raw));
                        expect::content_type(&provider, native, resp.headers())?;
                        held = Some(Vec::new());
                        fetched = true;
                        continue;
                    }
                    Finished::Fetch(_) => {
                        return Err(bad_answer(&provider, "result file names another file"))
                    }
                },
            };
            if pending.is_empty() {
                return Err(bad_answer(&provider, "answer carried no audio"));
            }
            return Ok(Primed {
                resp,
                length: length.filter(|_| !fetched),
                decoder,
                pending,
                done: Some(usage),
            });
        }
        if !pending.is_empty() {
            let mut primed = Primed {
                resp,
                length: length.filter(|_| !fetched),
                decoder,
                pending,
                done: None,
            };
            if primed.decoder.is_none() && !sse {
                primed.take_in_hand()?;
            }
            return Ok(primed);
        }
    }
}

/// What the first step of a speech answer reads with: its decoder (none: the body is passed
/// through) and the kind of native body it is.
fn reader(decoding: SpeechDecoding, sse: bool) -> (Option<Box<dyn AudioDecoder>>, Native) {
    match decoding {
        SpeechDecoding::Passthrough if sse => (None, Native::Events),
        SpeechDecoding::Passthrough => (None, Native::Audio),
        SpeechDecoding::Decode(d) => {
            let native = d.native();
            (Some(d), native)
        }
    }
}

/// The native chunks to decode now: `chunk` itself once the body's first bytes are judged;
/// before that, chunks are held until the bytes can be judged (`None`: not yet).
fn arrived(
    held: &mut Option<Vec<Bytes>>,
    chunk: Option<Bytes>,
    ended: bool,
    native: Native,
    provider: &Arc<Provider>,
) -> Result<Option<Vec<Bytes>>, UpstreamError> {
    let Some(held_chunks) = held.as_mut() else {
        return Ok(Some(chunk.into_iter().collect()));
    };
    held_chunks.extend(chunk);
    match expect::judge(native, &first_bytes(held_chunks), ended) {
        Verdict::NeedMore if !ended => Ok(None),
        Verdict::Not(what) => Err(expect::not_the_answer(provider, native, what)),
        Verdict::NeedMore | Verdict::Fine => Ok(Some(held.take().unwrap_or_default())),
    }
}

/// Decode `arrived` onto `pending` (passed through as it is without a decoder).
fn decode_arrived(
    decoder: &mut Option<Box<dyn AudioDecoder>>,
    arrived: Vec<Bytes>,
    pending: &mut Vec<Bytes>,
) -> Result<(), UpstreamError> {
    for chunk in arrived {
        match decoder {
            None => {
                if !chunk.is_empty() {
                    pending.push(chunk);
                }
            }
            Some(d) => d.push(&chunk, pending)?,
        }
    }
    Ok(())
}

impl Primed<'_> {
    /// Raw audio passed through: take what else of the body has already arrived
    /// (`passthrough::in_hand`), so that it goes out in one write with the first piece. Done here,
    /// inside the attempt loop and before the answer's head is written, because what has arrived
    /// may be the provider's failure (a connection closed or reset right after its first piece):
    /// nothing has reached the client then, so the attempt fails and is retried. Found after
    /// the head, it would end an answer the client got nothing of.
    fn take_in_hand(&mut self) -> Result<(), UpstreamError> {
        let (first, ended) =
            passthrough::in_hand(&mut self.resp, std::mem::take(&mut self.pending))?;
        self.pending = first.into_iter().collect();
        if ended {
            self.done = Some(SpeechUsage::default());
        }
        Ok(())
    }
}

/// The first [`expect::WINDOW`] bytes of `chunks`.
fn first_bytes(chunks: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(expect::WINDOW);
    for chunk in chunks {
        let room = expect::WINDOW - out.len();
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() == expect::WINDOW {
            break;
        }
    }
    out
}

/// Write the primed answer to the client. `input` is the caller's text, for usage the provider
/// does not report. The usage the provider reported is handed back (empty where it reported
/// none: raw audio passed through, or a stream that failed), for the request's cost.
///
/// Not an `async fn`: that would hold the primed answer, then its parts, then the copy's future
/// that holds them again (7.3 KB, in the request's future); the copy is picked here and its
/// future returned as it is.
pub(crate) fn relay<'a>(
    client: &'a mut Client<'a>,
    primed: Primed<'a>,
    sse: bool,
    input: &'a str,
) -> impl Future<Output = Result<Relayed, StreamError>> + Send + 'a {
    use futures_util::future::Either;
    let Primed {
        resp,
        decoder,
        pending,
        done,
        length: _,
    } = primed;
    match decoder {
        None if sse => Either::Left(Either::Left(passthrough::events(client, resp, pending))),
        None => Either::Left(Either::Right(passthrough::bytes(
            client,
            resp,
            pending,
            done.is_some(),
        ))),
        Some(decoder) => Either::Right(decode(client, resp, decoder, pending, done, sse, input)),
    }
}

/// [`relay`] through the decoder.
async fn decode(
    client: &mut Client<'_>,
    mut resp: Response<'_>,
    mut decoder: Box<dyn AudioDecoder>,
    pending: Vec<Bytes>,
    done: Option<SpeechUsage>,
    sse: bool,
    input: &str,
) -> Result<Relayed, StreamError> {
    let write = |piece: &Bytes| {
        if sse {
            delta_event(piece)
        } else {
            piece.clone()
        }
    };

    let mut out = pending;
    let mut done = done;
    let failure: Option<UpstreamError> = loop {
        for piece in out.drain(..) {
            client.write(write(&piece), false).await?;
        }
        if done.is_some() {
            break None;
        }
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if let Err(e) = decoder.push(&chunk, &mut out) {
                    break Some(e);
                }
            }
            Ok(None) => match decoder.finish(&mut out) {
                Ok(Finished::Done(usage)) => done = Some(usage),
                Ok(Finished::Fetch(_)) => {
                    break Some(bad_answer_for(&resp, "result URL after audio"));
                }
                Err(e) => break Some(e),
            },
            Err(e) => break Some(e),
        }
    };
    match failure {
        None => {
            let usage = done.unwrap_or_default();
            if sse {
                client.write(done_event(usage, input), false).await?;
            }
            client.end().await?;
            resp.release().await;
            Ok(client.relayed(usage, true))
        }
        Some(err) => {
            let err = GatewayError::Upstream(err);
            if sse {
                client.write(passthrough::error_event(&err), true).await?;
            }
            Err(StreamError::Upstream(err))
        }
    }
}

fn bad_answer_for(resp: &Response<'_>, message: &str) -> UpstreamError {
    UpstreamError::new(
        crate::common::error::UpstreamErrorKind::BadResponse,
        resp.provider(),
        message,
    )
}

/// `data: {"type":"speech.audio.delta","audio":"<base64>"}`
pub fn delta_event(audio: &[u8]) -> Bytes {
    const HEAD: &[u8] = b"data: {\"type\":\"speech.audio.delta\",\"audio\":\"";
    const TAIL: &[u8] = b"\"}\n\n";
    let b64_len = audio.len().div_ceil(3) * 4;
    let mut b = BytesMut::with_capacity(HEAD.len() + b64_len + TAIL.len());
    b.put_slice(HEAD);
    let start = b.len();
    b.resize(start + b64_len, 0);
    // The buffer was sized for exactly this encoding, so this cannot fail.
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(audio, &mut b[start..])
        .unwrap_or(0);
    b.truncate(start + written);
    b.put_slice(TAIL);
    b.freeze()
}

/// The closing event. Token counts are the provider's where it reports them; otherwise input
/// tokens are counted with the gateway's tokenizer and output tokens are 0.
pub(crate) fn done_event(usage: SpeechUsage, input: &str) -> Bytes {
    let input_tokens = usage
        .input_tokens
        .unwrap_or_else(|| crate::tokens::count(input) as u64);
    let output_tokens = usage.output_tokens.unwrap_or(0);
    let body = serde_json::json!({
        "type": "speech.audio.done",
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
    });
    crate::stream::sse::event(body.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_events_carry_base64() {
        for n in 0..10 {
            let audio: Vec<u8> = (0..n).map(|i: usize| (i * 37 % 256) as u8).collect();
            let ev = delta_event(&audio);
            let data = crate::stream::sse::data_of(&ev).unwrap();
            let v: serde_json::Value = serde_json::from_str(&data).unwrap();
            assert_eq!(v["type"], "speech.audio.delta");
            let back = base64::engine::general_purpose::STANDARD
                .decode(v["audio"].as_str().unwrap())
                .unwrap();
            assert_eq!(back, audio);
            assert!(ev.ends_with(b"\n\n"));
        }
    }

    #[test]
    fn done_event_prefers_reported_usage() {
        let ev = done_event(
            SpeechUsage {
                input_tokens: Some(7),
                output_tokens: Some(30),
            },
            "hello",
        );
        let v: serde_json::Value =
            serde_json::from_str(&crate::stream::sse::data_of(&ev).unwrap()).unwrap();
        assert_eq!(
            v["usage"],
            serde_json::json!({"input_tokens": 7, "output_tokens": 30, "total_tokens": 37})
        );
        let ev = done_event(SpeechUsage::default(), "hello world");
        let v: serde_json::Value =
            serde_json::from_str(&crate::stream::sse::data_of(&ev).unwrap()).unwrap();
        assert_eq!(v["usage"]["input_tokens"], 2);
        assert_eq!(v["usage"]["output_tokens"], 0);
    }
}
