//! Turning a provider's native speech answer into audio, piece by piece.
//!
//! Providers answer speech in many shapes: the audio itself (OpenAI, ElevenLabs), SSE events
//! carrying hex or base64 pieces (MiniMax, DashScope), JSON lines carrying base64 (Volcengine), one
//! JSON document with the whole audio inside (Google), or a JSON document naming a file to download
//! (DashScope without streaming). Each adapter hands the gateway a [`SpeechDecoding`]: either "the
//! body is already the public answer" or an [`AudioDecoder`] that is fed the native body as it
//! arrives and yields plain audio bytes. The gateway then writes those bytes raw, or wraps each one
//! in its public SSE event; either way one piece is in flight at a time, so memory stays flat.

use bytes::{Bytes, BytesMut};
use std::sync::Arc;

use super::expect::Native;
use crate::common::error::UpstreamError;
use crate::upstream::provider::bad_answer;
use crate::upstream::provider::Provider;

/// Token counts a provider reported for a speech answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpeechUsage {
    /// Input tokens, when reported.
    pub input_tokens: Option<u64>,
    /// Output tokens, when reported.
    pub output_tokens: Option<u64>,
}

/// How a native body ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Finished {
    /// All audio has been produced.
    Done(SpeechUsage),
    /// The answer named a result file (a URL on one of the provider's result hosts) that holds the
    /// audio; the gateway downloads it and streams it on.
    Fetch(String),
}

/// Decodes one native speech body into audio, fed the body piece by piece as it arrives.
///
/// The gateway sends each piece of audio it is handed to the client at once (raw, or wrapped
/// in the public SSE events), so a decoder that pushes audio as soon as it has some keeps the
/// first byte early and memory flat. Hand one to the gateway as [`SpeechDecoding::Decode`]; the
/// ready-made ones ([`SpeechDecoding::json_document`], [`SpeechDecoding::sse`]) cover JSON
/// and event answers.
pub trait AudioDecoder: Send {
    /// Take the next piece of the native body; push any audio it completes onto `out`.
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<Bytes>) -> Result<(), UpstreamError>;

    /// The native body ended: push what is left, and say how it ended. An answer that stops
    /// without the provider's end marker is an error, never a silently short success.
    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError>;

    /// What kind of native body this decoder reads, checked before its first byte is decoded
    /// (`stream::expect`). Most decoders parse the provider's JSON or SSE and know its in-band
    /// errors themselves.
    fn native(&self) -> Native {
        Native::Decoded
    }
}

/// What the gateway does with a 2xx native speech body: an adapter's
/// `SpeechAdapter::decoding`.
///
/// For an answer that is the audio, [`SpeechDecoding::raw_audio`]. For audio inside JSON, as
/// many TTS servers send it (base64 or hex in a JSON document, or in the `data:` of SSE events),
/// [`SpeechDecoding::json_document`] or [`SpeechDecoding::sse`] with
/// [`SpeechDecoding::base64_audio`] or [`SpeechDecoding::hex_audio`]; any other framing, a
/// decoder of your own ([`AudioDecoder`]). `examples/inhouse_tts.rs` is a whole one.
pub enum SpeechDecoding {
    /// The body already is the public answer (raw audio, or OpenAI's own SSE): copied as is.
    Passthrough,
    /// The body is decoded to audio first.
    Decode(Box<dyn AudioDecoder>),
}

impl SpeechDecoding {
    /// For a native body that is the audio itself: copied as is for `audio`, wrapped in the
    /// gateway's events for `sse`.
    pub fn raw_audio(provider: &Arc<Provider>, sse: bool) -> SpeechDecoding {
        if sse {
            SpeechDecoding::Decode(Box::new(Raw::new(provider, usize::MAX)))
        } else {
            SpeechDecoding::Passthrough
        }
    }

    /// For a native answer that is one JSON document holding the audio: the body is buffered
    /// (up to the account's `max_response_bytes`; more is a bad answer) and handed whole to
    /// `decode`, which pushes the audio onto its `Vec` (all of it, or in pieces) and says how
    /// the answer ended ([`Finished::Done`] with the usage it reports, or [`Finished::Fetch`]
    /// for a result file to download). A JSON error envelope sent with status 200 is for
    /// `decode` to refuse (`bad_answer`).
    pub fn json_document<F>(provider: &Arc<Provider>, decode: F) -> SpeechDecoding
    where
        F: FnMut(&Provider, &[u8], &mut Vec<Bytes>) -> Result<Finished, UpstreamError>
            + Send
            + 'static,
    {
        SpeechDecoding::Decode(Box::new(Whole::new(provider, decode)))
    }

    /// Decode audio sent as base64 text (standard alphabet, padding optional, surrounding
    /// whitespace ignored); not base64 is a bad answer of `provider`.
    pub fn base64_audio(provider: &Provider, text: &str) -> Result<Bytes, UpstreamError> {
        base64_audio(provider, text)
    }

    /// Decode audio sent as hex text (either case); not hex is a bad answer of `provider`.
    pub fn hex_audio(provider: &Provider, text: &str) -> Result<Bytes, UpstreamError> {
        hex_audio(provider, text)
    }
}

/// The body is the audio; optionally refuse more than `limit` bytes (downloaded result files).
pub struct Raw {
    provider: Arc<Provider>,
    limit: usize,
    seen: usize,
    native: Native,
}

impl Raw {
    /// The provider's own answer is the audio.
    pub fn new(provider: &Arc<Provider>, limit: usize) -> Raw {
        Raw {
            provider: provider.clone(),
            limit,
            seen: 0,
            native: Native::Audio,
        }
    }

    /// A result file the answer named, downloaded (labelled as the object store says).
    pub fn file(provider: &Arc<Provider>, limit: usize) -> Raw {
        Raw {
            native: Native::File,
            ..Raw::new(provider, limit)
        }
    }
}

impl AudioDecoder for Raw {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        self.seen = self.seen.saturating_add(chunk.len());
        if self.seen > self.limit {
            return Err(bad_answer(
                &self.provider,
                format!("audio file larger than {} bytes", self.limit),
            ));
        }
        if !chunk.is_empty() {
            out.push(chunk.clone());
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        Ok(Finished::Done(SpeechUsage::default()))
    }

    fn native(&self) -> Native {
        self.native
    }
}

/// A native answer that is one JSON document (Google, MiniMax without streaming, DashScope's URL
/// answer): buffered up to the provider's `max_response_bytes`, then handed whole to `decode`.
pub struct Whole<F> {
    provider: Arc<Provider>,
    buf: BytesMut,
    decode: F,
}

impl<F> Whole<F>
where
    F: FnMut(&Provider, &[u8], &mut Vec<Bytes>) -> Result<Finished, UpstreamError> + Send,
{
    /// A buffer for `provider`'s answer, decoded by `decode` once it is whole.
    pub fn new(provider: &Arc<Provider>, decode: F) -> Whole<F> {
        Whole {
            provider: provider.clone(),
            buf: BytesMut::new(),
            decode,
        }
    }
}

impl<F> AudioDecoder for Whole<F>
where
    F: FnMut(&Provider, &[u8], &mut Vec<Bytes>) -> Result<Finished, UpstreamError> + Send,
{
    fn push(&mut self, chunk: &Bytes, _out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        let limit = self.provider.max_response_bytes;
        if self.buf.len() + chunk.len() > limit {
            return Err(bad_answer(
                &self.provider,
                format!("answer larger than {limit} bytes"),
            ));
        }
        self.buf.extend_from_slice(chunk);
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        let body = self.buf.split().freeze();
        (self.decode)(&self.provider, &body, out)
    }
}

/// Decode base64 audio from a provider answer (standard alphabet, padding optional).
pub fn base64_audio(provider: &Provider, text: &str) -> Result<Bytes, UpstreamError> {
    use base64::Engine;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine
        .decode(text.trim())
        .map(Bytes::from)
        .map_err(|e| bad_answer(provider, format!("audio is not valid base64: {e}")))
}

/// Decode hex audio from a provider answer (MiniMax).
pub fn hex_audio(provider: &Provider, text: &str) -> Result<Bytes, UpstreamError> {
    hex::decode(text.trim())
        .map(Bytes::from)
        .map_err(|e| bad_answer(provider, format!("audio is not valid hex: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support;

    #[test]
    fn raw_copies_and_caps() {
        let p = test_support::provider("p", "k");
        let mut d = Raw::new(&p, 5);
        let mut out = Vec::new();
        d.push(&Bytes::from_static(b"abc"), &mut out).unwrap();
        assert_eq!(out, vec![Bytes::from_static(b"abc")]);
        assert!(d.push(&Bytes::from_static(b"def"), &mut out).is_err());
    }

    #[test]
    fn whole_buffers_until_the_end() {
        let p = test_support::provider("p", "k");
        let mut d = Whole::new(&p, |p: &Provider, body: &[u8], out: &mut Vec<Bytes>| {
            out.push(base64_audio(p, std::str::from_utf8(body).unwrap_or(""))?);
            Ok(Finished::Done(SpeechUsage::default()))
        });
        let mut out = Vec::new();
        d.push(&Bytes::from_static(b"aGVs"), &mut out).unwrap();
        d.push(&Bytes::from_static(b"bG8="), &mut out).unwrap();
        assert!(out.is_empty());
        d.finish(&mut out).unwrap();
        assert_eq!(out, vec![Bytes::from_static(b"hello")]);
    }

    #[test]
    fn decodes_hex_and_base64() {
        let p = test_support::provider("p", "k");
        assert_eq!(
            &hex_audio(&p, "4944 33".replace(' ', "").as_str()).unwrap()[..],
            b"ID3"
        );
        assert!(hex_audio(&p, "zz").is_err());
        assert_eq!(&base64_audio(&p, "SUQz").unwrap()[..], b"ID3");
        assert_eq!(&base64_audio(&p, "SUQ").unwrap()[..], b"ID");
        assert!(base64_audio(&p, "!!").is_err());
    }
}
