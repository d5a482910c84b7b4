//! ADTS AAC-LC of streamed PCM through the Fraunhofer FDK AAC encoder, what OpenAI's `aac` is:
//! each 1,024-sample frame leaves with its 7-byte ADTS header as soon as the encoder gives it.
//! Constant 64 kbit/s (ample for mono speech at 24 kHz; OpenAI does not publish its figure).
//! ADTS has no way to say how much of the start is the encoder's priming, so a decoder plays it.

use bytes::Bytes;
use fdk_aac::enc::{AudioObjectType, BitRate, ChannelMode, Encoder, EncoderParams, Transport};

use super::samples::Samples;
use super::PcmEncoder;

const BITRATE: u32 = 64_000;
/// Room for one frame: AAC's 6,144 bits per channel, an ADTS header and slack.
const MAX_FRAME: usize = 8_192;

/// The ADTS AAC encoder of mono 16-bit PCM at one rate.
pub(super) struct Adts {
    fdk: Encoder,
    samples: Samples,
    /// Samples the encoder has not taken yet.
    pcm: Vec<i16>,
    /// Silence that pushes the last input samples through the encoder: its delay and a frame.
    tail: usize,
    finished: bool,
}

impl Adts {
    pub(super) fn new(rate: u32) -> Result<Adts, String> {
        let fdk = Encoder::new(EncoderParams {
            bit_rate: BitRate::Cbr(BITRATE),
            sample_rate: rate,
            transport: Transport::Adts,
            channels: ChannelMode::Mono,
            audio_object_type: AudioObjectType::Mpeg4LowComplexity,
        })
        .map_err(|e| format!("FDK AAC refused the settings: {e:?}"))?;
        let info = fdk.info().map_err(|e| format!("FDK AAC: {e:?}"))?;
        Ok(Adts {
            fdk,
            samples: Samples::default(),
            pcm: Vec::new(),
            tail: info.nDelay as usize + info.frameLength as usize,
            finished: false,
        })
    }

    /// Give the encoder what it takes of `pcm`; push the frames it completes.
    fn encode(&mut self, out: &mut Vec<Bytes>) -> Result<(), String> {
        let mut frame = [0u8; MAX_FRAME];
        let mut taken = 0;
        while taken < self.pcm.len() {
            let step = self
                .fdk
                .encode(&self.pcm[taken..], &mut frame)
                .map_err(|e| format!("FDK AAC: {e:?}"))?;
            if step.output_size > 0 {
                out.push(Bytes::copy_from_slice(&frame[..step.output_size]));
            }
            if step.input_consumed == 0 && step.output_size == 0 {
                break;
            }
            taken += step.input_consumed;
        }
        self.pcm.drain(..taken.min(self.pcm.len()));
        Ok(())
    }
}

impl PcmEncoder for Adts {
    fn push(&mut self, pcm: &[u8], out: &mut Vec<Bytes>) -> Result<(), String> {
        self.samples.append(pcm, &mut self.pcm);
        self.encode(out)
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<(), String> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        // The FDK's own flush (a negative sample count) is not in the crate's safe API; silence
        // does the same: the encoder pads its last frame with zeros too.
        let len = self.pcm.len() + self.tail;
        self.pcm.resize(len, 0);
        self.encode(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_tone, decode, encode, sine, RATE};
    use super::*;

    const FRAME: usize = 1_024;

    #[test]
    fn a_tone_streams_as_adts_aac_of_its_length() {
        let mut enc = Adts::new(RATE).unwrap();
        let (before, file) = encode(&mut enc, &sine(1.0));
        assert!(
            before > file.len() / 2,
            "most frames left before finish ({before} of {})",
            file.len()
        );
        assert_eq!(
            (file[0], file[1] & 0xF6),
            (0xFF, 0xF0),
            "an ADTS sync word, layer 0"
        );
        let (rate, samples) = decode(&file, "aac");
        assert_eq!(rate, RATE);
        // The encoder's priming is decoded too (ADTS cannot say to trim it); then the tone.
        let delay = enc.tail - FRAME;
        assert_tone(&samples, rate, RATE as usize + delay, 2 * FRAME);
    }

    #[test]
    fn empty_input_gives_a_valid_file() {
        let mut enc = Adts::new(RATE).unwrap();
        let (_, file) = encode(&mut enc, &[]);
        assert!(file.is_empty() || file.starts_with(&[0xFF]));
    }
}
