//! Speech streamed as server-sent events: the framing every SSE-speaking provider shares (events
//! split as they arrive, an incomplete event capped at the provider's `max_response_bytes`, a
//! last event without its blank line still read), with what each event means left to the
//! provider's [`EventHandler`].

use std::sync::Arc;

use bytes::Bytes;

use super::audio::{AudioDecoder, Finished, SpeechDecoding};
use super::sse::{data_of, EventSplitter};
use crate::common::error::UpstreamError;
use crate::upstream::provider::{bad_answer, Provider};

/// What one provider does with its speech stream's events.
pub(crate) trait EventHandler: Send {
    /// Handle one whole event (its raw bytes, `data:` lines and all); push any audio onto `out`.
    fn event(
        &mut self,
        provider: &Provider,
        event: &[u8],
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError>;

    /// The stream ended: say how, or why that end is an error (no end marker seen).
    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError>;
}

/// An [`AudioDecoder`] for an SSE speech stream, its events handled by `H`.
pub(crate) struct SseAudio<H> {
    provider: Arc<Provider>,
    events: EventSplitter,
    /// Bytes pushed into `events` and not yet taken out as whole events: one incomplete event,
    /// which must not grow without bound.
    buffered: usize,
    handler: H,
}

impl<H: EventHandler> SseAudio<H> {
    pub(crate) fn new(provider: &Arc<Provider>, handler: H) -> SseAudio<H> {
        SseAudio {
            provider: provider.clone(),
            events: EventSplitter::new(),
            buffered: 0,
            handler,
        }
    }
}

impl<H: EventHandler> AudioDecoder for SseAudio<H> {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        self.events.push(chunk);
        self.buffered = self.buffered.saturating_add(chunk.len());
        while let Some(event) = self.events.next_event() {
            self.buffered = self.buffered.saturating_sub(event.len());
            self.handler.event(&self.provider, &event, out)?;
        }
        let limit = self.provider.max_response_bytes;
        if self.buffered > limit {
            return Err(bad_answer(
                &self.provider,
                format!("stream event larger than {limit} bytes"),
            ));
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        // A last event missing its blank line still counts.
        if let Some(rest) = self.events.remainder() {
            self.buffered = 0;
            self.handler.event(&self.provider, &rest, out)?;
        }
        self.handler.end(&self.provider)
    }
}

impl SpeechDecoding {
    /// For a native answer streamed as server-sent events: split into events as it arrives
    /// (an incomplete event held up to the account's `max_response_bytes`; a last event
    /// without its blank line still read), each event's `data:` handed to `events` as it
    /// completes, so audio reaches the client while the server is still speaking.
    pub fn sse<H>(provider: &Arc<Provider>, events: H) -> SpeechDecoding
    where
        H: SseSpeech + 'static,
    {
        SpeechDecoding::Decode(Box::new(SseAudio::new(provider, DataEvents(events))))
    }
}

/// What an in-house provider does with the events of its SSE speech stream, for
/// [`SpeechDecoding::sse`](super::audio::SpeechDecoding::sse): each event's data in, audio out.
pub trait SseSpeech: Send {
    /// One event's data (its `data:` lines joined by `\n`; events without data, such as
    /// comments and keep-alives, are not handed over): push the audio it carries onto `out`
    /// ([`SpeechDecoding::base64_audio`](super::audio::SpeechDecoding::base64_audio) decodes
    /// base64 text), or refuse it (`bad_answer`): an error event, or
    /// data that does not read.
    fn data(
        &mut self,
        provider: &Provider,
        data: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError>;

    /// The stream ended: how ([`Finished::Done`] with the usage it reported), or why that end
    /// is an error (the server's end event never came: a cut answer must not pass for a whole
    /// one).
    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError>;
}

/// An [`SseSpeech`] as an [`EventHandler`]: the events' data handed on.
pub(crate) struct DataEvents<H>(pub(crate) H);

impl<H: SseSpeech> EventHandler for DataEvents<H> {
    fn event(
        &mut self,
        provider: &Provider,
        event: &[u8],
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError> {
        match data_of(event) {
            Some(data) => self.0.data(provider, &data, out),
            None => Ok(()),
        }
    }

    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError> {
        self.0.end(provider)
    }
}
