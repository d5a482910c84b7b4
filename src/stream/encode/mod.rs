//! Encoding 16-bit PCM into the public speech formats as it streams.
//!
//! Some providers answer speech only as raw PCM (OpenAI's Realtime API: base64 deltas of 24 kHz
//! PCM; Gemini's speech: 24 kHz PCM): for them the gateway produces the format the caller asked
//! for itself, piece by piece, so the first bytes still leave as soon as the first audio arrives.
//! [`encoder`] picks the [`PcmEncoder`] of a public format; [`Encoded`] wraps an adapter's
//! [`AudioDecoder`] that yields PCM so that it yields the asked format instead.
//!
//! `pcm` and `wav` are always built; with the `speech-encoding` feature also mp3 (LAME, `mp3.rs`),
//! Ogg Opus (libopus, `ogg_opus.rs`), ADTS AAC (FDK AAC, `aac.rs`) and FLAC (`flac.rs`). Each
//! encoder gives out what a push completes (a frame, a page), so nothing waits for the end of the
//! answer but its last frame.

#[cfg(feature = "speech-encoding")]
mod aac;
#[cfg(feature = "speech-encoding")]
mod flac;
#[cfg(feature = "speech-encoding")]
mod mp3;
#[cfg(feature = "speech-encoding")]
mod ogg_opus;
#[cfg(feature = "speech-encoding")]
mod samples;
#[cfg(test)]
mod testing;
mod wav;

use std::sync::Arc;

use bytes::Bytes;

use crate::common::error::UpstreamError;
use crate::stream::audio::{AudioDecoder, Finished};
use crate::upstream::provider::{bad_answer, Provider};

/// Encodes mono, signed 16-bit little-endian PCM at one sample rate into one public format.
pub trait PcmEncoder: Send {
    /// Take the next PCM bytes (any length: a sample split across two calls is carried over);
    /// push any encoded output they complete onto `out`.
    fn push(&mut self, pcm: &[u8], out: &mut Vec<Bytes>) -> Result<(), String>;

    /// The PCM ended: push what the format still holds (a last frame, a trailer).
    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<(), String>;
}

/// The public formats this build can encode PCM into.
pub(crate) fn encodable(format: &str) -> bool {
    matches!(format, "pcm" | "wav")
        || (cfg!(feature = "speech-encoding") && matches!(format, "mp3" | "opus" | "aac" | "flac"))
}

/// The encoder for `format` of mono PCM at `rate` Hz, or `None` when this build cannot produce
/// that format (the adapter refuses the request with a 400 naming `response_format`).
pub fn encoder(format: &str, rate: u32) -> Option<Box<dyn PcmEncoder>> {
    match format {
        "pcm" => Some(Box::new(Pcm)),
        "wav" => Some(Box::new(wav::Wav::new(rate))),
        #[cfg(feature = "speech-encoding")]
        "mp3" | "opus" | "aac" | "flac" => coded(format, rate),
        _ => None,
    }
}

/// The encoder of a compressed format, `None` (logged: a rate its codec does not take) when
/// it cannot be made.
#[cfg(feature = "speech-encoding")]
fn coded(format: &str, rate: u32) -> Option<Box<dyn PcmEncoder>> {
    let made: Result<Box<dyn PcmEncoder>, String> = match format {
        "mp3" => mp3::Mp3::new(rate).map(|e| Box::new(e) as _),
        "opus" => ogg_opus::OggOpus::new(rate).map(|e| Box::new(e) as _),
        "aac" => aac::Adts::new(rate).map(|e| Box::new(e) as _),
        "flac" => flac::Flac::new(rate).map(|e| Box::new(e) as _),
        _ => return None,
    };
    made.map_err(|e| log::error!("no {format} encoder at {rate} Hz: {e}"))
        .ok()
}

/// PCM as it is: OpenAI's `pcm` is 24 kHz signed 16-bit little-endian mono, the Realtime API's
/// and Gemini's native output.
struct Pcm;

impl PcmEncoder for Pcm {
    fn push(&mut self, pcm: &[u8], out: &mut Vec<Bytes>) -> Result<(), String> {
        if !pcm.is_empty() {
            out.push(Bytes::copy_from_slice(pcm));
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Bytes>) -> Result<(), String> {
        Ok(())
    }
}

/// An adapter's decoder of PCM, re-encoded into the asked format as it streams.
pub(crate) struct Encoded {
    inner: Box<dyn AudioDecoder>,
    encoder: Box<dyn PcmEncoder>,
    provider: Arc<Provider>,
    /// The PCM pieces of one step, reused.
    pcm: Vec<Bytes>,
}

impl Encoded {
    /// `inner` yields PCM at `rate` Hz; the result yields `format`. `None` when this build
    /// cannot produce `format`.
    pub(crate) fn wrap(
        inner: Box<dyn AudioDecoder>,
        format: &str,
        rate: u32,
        provider: &Arc<Provider>,
    ) -> Option<Encoded> {
        Some(Encoded {
            inner,
            encoder: encoder(format, rate)?,
            provider: provider.clone(),
            pcm: Vec::new(),
        })
    }

    fn encode(&mut self, out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        for piece in self.pcm.drain(..) {
            self.encoder
                .push(&piece, out)
                .map_err(|e| bad_answer(&self.provider, format!("encoding the audio: {e}")))?;
        }
        Ok(())
    }
}

impl AudioDecoder for Encoded {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        self.inner.push(chunk, &mut self.pcm)?;
        self.encode(out)
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        let finished = self.inner.finish(&mut self.pcm)?;
        self.encode(out)?;
        if let Finished::Done(_) = finished {
            self.encoder
                .finish(out)
                .map_err(|e| bad_answer(&self.provider, format!("encoding the audio: {e}")))?;
        }
        Ok(finished)
    }

    fn native(&self) -> crate::stream::expect::Native {
        self.inner.native()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encodable_format_has_an_encoder_at_24_khz() {
        for format in ["pcm", "wav", "mp3", "opus", "aac", "flac", "ulaw", ""] {
            assert_eq!(
                encodable(format),
                encoder(format, 24_000).is_some(),
                "{format}"
            );
        }
        assert!(encodable("pcm") && encodable("wav"));
        let compressed = ["mp3", "opus", "aac", "flac"];
        assert!(compressed
            .iter()
            .all(|f| encodable(f) == cfg!(feature = "speech-encoding")));
    }

    #[cfg(feature = "speech-encoding")]
    #[test]
    fn a_rate_a_codec_does_not_take_gives_no_encoder() {
        assert!(encoder("opus", 22_050).is_none());
        assert!(encoder("mp3", 22_050).is_some());
    }
}
