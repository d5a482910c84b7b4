//! WAV of streamed PCM: a RIFF header whose sizes are unknown when it leaves (written as
//! `0xFFFFFFFF`, as OpenAI's own streamed WAV is), then the samples as they come.

use bytes::Bytes;

use super::PcmEncoder;

/// The WAV encoder of mono 16-bit PCM at one rate.
pub(super) struct Wav {
    rate: u32,
    header_sent: bool,
}

impl Wav {
    pub(super) fn new(rate: u32) -> Wav {
        Wav {
            rate,
            header_sent: false,
        }
    }

    fn header(&self) -> Bytes {
        let mut h = Vec::with_capacity(44);
        h.extend_from_slice(b"RIFF");
        h.extend_from_slice(&u32::MAX.to_le_bytes());
        h.extend_from_slice(b"WAVEfmt ");
        h.extend_from_slice(&16u32.to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes()); // PCM
        h.extend_from_slice(&1u16.to_le_bytes()); // mono
        h.extend_from_slice(&self.rate.to_le_bytes());
        h.extend_from_slice(&(self.rate * 2).to_le_bytes()); // bytes per second
        h.extend_from_slice(&2u16.to_le_bytes()); // block align
        h.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
        h.extend_from_slice(b"data");
        h.extend_from_slice(&u32::MAX.to_le_bytes());
        Bytes::from(h)
    }
}

impl PcmEncoder for Wav {
    fn push(&mut self, pcm: &[u8], out: &mut Vec<Bytes>) -> Result<(), String> {
        if !self.header_sent {
            out.push(self.header());
            self.header_sent = true;
        }
        if !pcm.is_empty() {
            out.push(Bytes::copy_from_slice(pcm));
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<(), String> {
        // An answer with no samples is still a valid (empty) WAV file.
        if !self.header_sent {
            out.push(self.header());
            self.header_sent = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_leaves_once_before_the_samples() {
        let mut w = Wav::new(24_000);
        let mut out = Vec::new();
        w.push(&[1, 0, 2, 0], &mut out).unwrap();
        w.push(&[3, 0], &mut out).unwrap();
        w.finish(&mut out).unwrap();
        let all: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(&all[0..4], b"RIFF");
        assert_eq!(&all[8..16], b"WAVEfmt ");
        assert_eq!(
            u32::from_le_bytes([all[24], all[25], all[26], all[27]]),
            24_000
        );
        assert_eq!(&all[36..40], b"data");
        assert_eq!(&all[44..], &[1, 0, 2, 0, 3, 0]);
    }
}
