//! MP3 of streamed PCM through LAME: constant 160 kbit/s, the MPEG-2 Layer III top rate at 24 kHz
//! and what OpenAI's own mp3 speech is reported to be (docs/providers/openai.md). Each push gives
//! the frames its samples complete; no Xing/LAME tag (it would have to be written first, before
//! the length is known).

use bytes::Bytes;
use mp3lame_encoder::{
    max_required_buffer_size, Bitrate, Builder, FlushGap, Mode, MonoPcm, Quality,
};

use super::samples::Samples;
use super::PcmEncoder;

/// The MP3 encoder of mono 16-bit PCM at one rate.
pub(super) struct Mp3 {
    lame: mp3lame_encoder::Encoder,
    samples: Samples,
    /// The samples of one push, reused.
    pcm: Vec<i16>,
    finished: bool,
}

impl Mp3 {
    pub(super) fn new(rate: u32) -> Result<Mp3, String> {
        let lame = Builder::new()
            .ok_or("LAME could not be initialised")?
            .with_num_channels(1)
            .and_then(|b| b.with_sample_rate(rate))
            .and_then(|b| b.with_brate(Bitrate::Kbps160))
            .and_then(|b| b.with_mode(Mode::Mono))
            // LAME's recommended "high quality" setting (-q 2): little slower than the default.
            .and_then(|b| b.with_quality(Quality::NearBest))
            .and_then(|b| b.with_to_write_vbr_tag(false))
            .and_then(|b| b.build())
            .map_err(|e| format!("LAME refused the settings: {e}"))?;
        Ok(Mp3 {
            lame,
            samples: Samples::default(),
            pcm: Vec::new(),
            finished: false,
        })
    }
}

impl PcmEncoder for Mp3 {
    fn push(&mut self, pcm: &[u8], out: &mut Vec<Bytes>) -> Result<(), String> {
        self.samples.append(pcm, &mut self.pcm);
        if self.pcm.is_empty() {
            return Ok(());
        }
        let mut mp3 = Vec::with_capacity(max_required_buffer_size(self.pcm.len()));
        let encoded = self.lame.encode_to_vec(MonoPcm(&self.pcm), &mut mp3);
        self.pcm.clear();
        encoded.map_err(|e| format!("LAME: {e}"))?;
        if !mp3.is_empty() {
            out.push(Bytes::from(mp3));
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<(), String> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        // LAME's flush needs room for its last frames (7,200 bytes, as its documentation says).
        let mut mp3 = Vec::with_capacity(max_required_buffer_size(0));
        self.lame
            .flush_to_vec::<FlushGap>(&mut mp3)
            .map_err(|e| format!("LAME: {e}"))?;
        if !mp3.is_empty() {
            out.push(Bytes::from(mp3));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_tone, decode, encode, sine, RATE};
    use super::*;

    /// An MPEG-2 Layer III frame: 576 samples.
    const FRAME: usize = 576;

    #[test]
    fn a_tone_streams_as_mp3_of_its_length() {
        let mut enc = Mp3::new(RATE).unwrap();
        let (before, file) = encode(&mut enc, &sine(1.0));
        assert!(
            before > file.len() / 2,
            "most frames left before finish ({before} of {})",
            file.len()
        );
        let (rate, samples) = decode(&file, "mp3");
        assert_eq!(rate, RATE);
        // LAME's priming (576 + 529 samples) and the last frame's padding are decoded too: an
        // untagged stream has no way to say they should be trimmed.
        assert_tone(&samples, rate, RATE as usize + 1_105, 2 * FRAME);
    }

    #[test]
    fn empty_input_is_an_empty_file_and_a_second_finish_adds_nothing() {
        let mut enc = Mp3::new(RATE).unwrap();
        let (_, file) = encode(&mut enc, &[]);
        assert!(
            file.is_empty() || file.starts_with(&[0xFF]),
            "{:?}",
            &file[..4.min(file.len())]
        );
    }
}
