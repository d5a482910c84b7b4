//! FLAC of streamed PCM through the pure-Rust `flacenc`: `fLaC` and a STREAMINFO block leave
//! first, with the total sample count unknown (0) and no MD5 (zero), which the format allows for
//! a stream whose length is not known when it starts; then each block of 2,048 samples (85 ms at
//! 24 kHz) leaves as a frame as soon as it is full, and the last, shorter one at the end.

use bytes::Bytes;
use flacenc::bitsink::ByteSink;
use flacenc::component::{BitRepr, Stream, StreamInfo};
use flacenc::config;
use flacenc::error::{Verified, Verify};
use flacenc::source::{Fill, FrameBuf};

use super::PcmEncoder;

/// Samples per frame: shorter than the reference encoder's 4,096 so a frame waits less.
const BLOCK: usize = 2_048;

/// The FLAC encoder of mono 16-bit PCM at one rate.
pub(super) struct Flac {
    config: Verified<config::Encoder>,
    info: StreamInfo,
    block: FrameBuf,
    /// PCM bytes not yet a whole block.
    pcm: Vec<u8>,
    frames: usize,
    header_sent: bool,
    finished: bool,
}

impl Flac {
    pub(super) fn new(rate: u32) -> Result<Flac, String> {
        let e = |e: flacenc::error::VerifyError| format!("FLAC settings: {e}");
        let mut info = StreamInfo::new(rate as usize, 1, 16).map_err(e)?;
        info.set_block_sizes(BLOCK, BLOCK).map_err(e)?;
        // Frame sizes unknown (0): they are written before any frame is.
        info.set_frame_sizes(0, 0).map_err(e)?;
        let mut settings = config::Encoder::default();
        settings.block_size = BLOCK;
        Ok(Flac {
            config: settings.into_verified().map_err(|(_, e)| e).map_err(e)?,
            info,
            block: FrameBuf::with_size(1, BLOCK).map_err(e)?,
            pcm: Vec::with_capacity(2 * BLOCK),
            frames: 0,
            header_sent: false,
            finished: false,
        })
    }

    fn header(&mut self, out: &mut Vec<Bytes>) -> Result<(), String> {
        if !self.header_sent {
            self.header_sent = true;
            let mut sink = ByteSink::new();
            Stream::with_stream_info(self.info.clone())
                .write(&mut sink)
                .map_err(|e| format!("FLAC header: {e}"))?;
            out.push(Bytes::from(sink.into_inner()));
        }
        Ok(())
    }

    /// One frame of `bytes` (whole samples, at most a block).
    fn frame(&mut self, bytes: &[u8], out: &mut Vec<Bytes>) -> Result<(), String> {
        self.block
            .fill_le_bytes(bytes, 2)
            .map_err(|e| format!("FLAC input: {e}"))?;
        let frame =
            flacenc::encode_fixed_size_frame(&self.config, &self.block, self.frames, &self.info)
                .map_err(|e| format!("FLAC: {e}"))?;
        self.frames += 1;
        let mut sink = ByteSink::new();
        frame
            .write(&mut sink)
            .map_err(|e| format!("FLAC frame: {e}"))?;
        out.push(Bytes::from(sink.into_inner()));
        Ok(())
    }
}

impl PcmEncoder for Flac {
    fn push(&mut self, pcm: &[u8], out: &mut Vec<Bytes>) -> Result<(), String> {
        self.header(out)?;
        let mut rest = pcm;
        while !rest.is_empty() {
            let room = 2 * BLOCK - self.pcm.len();
            let (now, later) = rest.split_at(room.min(rest.len()));
            rest = later;
            if self.pcm.is_empty() && now.len() == 2 * BLOCK {
                // A whole block in the caller's bytes: no copy.
                self.frame(now, out)?;
                continue;
            }
            self.pcm.extend_from_slice(now);
            if self.pcm.len() == 2 * BLOCK {
                let block = std::mem::take(&mut self.pcm);
                self.frame(&block, out)?;
                self.pcm = block;
                self.pcm.clear();
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<(), String> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        self.header(out)?;
        // A byte of half a sample left over is dropped.
        let whole = self.pcm.len() & !1;
        if whole > 0 {
            let last = std::mem::take(&mut self.pcm);
            self.frame(&last[..whole], out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_tone, decode, encode, sine, RATE};
    use super::*;

    #[test]
    fn a_tone_streams_as_flac_losslessly() {
        let pcm = sine(1.0);
        let mut enc = Flac::new(RATE).unwrap();
        let (before, file) = encode(&mut enc, &pcm);
        assert!(
            before > file.len() / 2,
            "most frames left before finish ({before} of {})",
            file.len()
        );
        assert!(file.starts_with(b"fLaC"));
        let (rate, samples) = decode(&file, "flac");
        assert_eq!(rate, RATE);
        assert_tone(&samples, rate, RATE as usize, 0);
        let original: Vec<i16> = pcm
            .chunks_exact(2)
            .map(|p| i16::from_le_bytes([p[0], p[1]]))
            .collect();
        assert_eq!(samples, original, "FLAC is lossless");
    }

    #[test]
    fn empty_input_is_a_header_only_file() {
        let mut enc = Flac::new(RATE).unwrap();
        let (_, file) = encode(&mut enc, &[]);
        assert_eq!(&file[..4], b"fLaC");
        // The STREAMINFO block, marked last: 4 + 4 + 34 bytes.
        assert_eq!(file.len(), 42);
        assert_eq!(file[4], 0x80);
    }
}
