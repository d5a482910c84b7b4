//! Ogg Opus (RFC 7845) of streamed PCM through libopus, what OpenAI's `opus` is: an `OpusHead`
//! page (pre-skip = the encoder's lookahead, the input rate), an `OpusTags` page, then 20 ms
//! packets, the packets each push completes ending a page so they leave at once. Granule
//! positions count 48 kHz samples; the last page ends the stream and its granule position trims
//! the padding of the last frame (end trimming).

use bytes::Bytes;
use ogg::{PacketWriteEndInfo, PacketWriter};
use opus::{Application, Bitrate, Channels};

use super::samples::Samples;
use super::PcmEncoder;

/// 32 kbit/s: transparent for mono speech at 24 kHz with Opus (its authors' guidance for
/// fullband speech is 24–40 kbit/s); OpenAI does not publish its own figure.
const BITRATE: i32 = 32_000;
/// libopus's recommended upper bound on a packet's size.
const MAX_PACKET: usize = 4_000;

/// The Ogg Opus encoder of mono 16-bit PCM at one of Opus's rates (8, 12, 16, 24, 48 kHz).
pub(super) struct OggOpus {
    opus: opus::Encoder,
    pages: PacketWriter<'static, Vec<u8>>,
    serial: u32,
    /// Samples per 20 ms frame at the input rate.
    frame: usize,
    /// 48 kHz samples per input sample.
    scale: u64,
    /// The encoder's lookahead, in 48 kHz samples: what a player drops from the start.
    pre_skip: u16,
    rate: u32,
    samples: Samples,
    /// Samples not yet a whole frame.
    pcm: Vec<i16>,
    /// Input samples taken (at the input rate) and samples encoded (whole frames, padding too).
    taken: u64,
    encoded: u64,
    headers_sent: bool,
    finished: bool,
}

impl OggOpus {
    pub(super) fn new(rate: u32) -> Result<OggOpus, String> {
        let e = |e: opus::Error| format!("libopus: {e}");
        if !matches!(rate, 8_000 | 12_000 | 16_000 | 24_000 | 48_000) {
            return Err(format!("Opus does not take {rate} Hz"));
        }
        let mut opus = opus::Encoder::new(rate, Channels::Mono, Application::Audio).map_err(e)?;
        opus.set_bitrate(Bitrate::Bits(BITRATE)).map_err(e)?;
        let scale = u64::from(48_000 / rate);
        let lookahead = u64::try_from(opus.get_lookahead().map_err(e)?).unwrap_or(0);
        Ok(OggOpus {
            opus,
            pages: PacketWriter::new(Vec::new()),
            serial: rand::random(),
            frame: rate as usize / 50,
            scale,
            pre_skip: u16::try_from(lookahead * scale).unwrap_or(u16::MAX),
            rate,
            samples: Samples::default(),
            pcm: Vec::new(),
            taken: 0,
            encoded: 0,
            headers_sent: false,
            finished: false,
        })
    }

    /// `OpusHead` (RFC 7845 §5.1: mono, mapping family 0) and `OpusTags` (§5.2), each on its
    /// own page.
    fn headers(&mut self) -> std::io::Result<()> {
        let mut head = Vec::with_capacity(19);
        head.extend_from_slice(b"OpusHead");
        head.push(1); // version
        head.push(1); // channels
        head.extend_from_slice(&self.pre_skip.to_le_bytes());
        head.extend_from_slice(&self.rate.to_le_bytes());
        head.extend_from_slice(&0i16.to_le_bytes()); // output gain
        head.push(0); // mapping family: mono/stereo, no table
        let vendor = concat!("switchyard ", env!("CARGO_PKG_VERSION"));
        let mut tags = Vec::with_capacity(16 + vendor.len());
        tags.extend_from_slice(b"OpusTags");
        tags.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
        tags.extend_from_slice(vendor.as_bytes());
        tags.extend_from_slice(&0u32.to_le_bytes()); // no user comments
        self.pages
            .write_packet(head, self.serial, PacketWriteEndInfo::EndPage, 0)?;
        self.pages
            .write_packet(tags, self.serial, PacketWriteEndInfo::EndPage, 0)
    }

    /// Encode the whole frames in `pcm`, the last one ending its page. When `end`, the last
    /// frame is first padded with silence, and frames of silence follow until the encoder's
    /// lookahead has given out every input sample; the last page ends the stream.
    fn frames(&mut self, end: bool) -> Result<(), String> {
        let mut packet = [0u8; MAX_PACKET];
        if end {
            // What a player must get: the pre-skip and every input sample; whole frames of it.
            let needed = u64::from(self.pre_skip) + self.taken * self.scale;
            let have = (self.encoded + self.pcm.len() as u64) * self.scale;
            let frame48 = self.frame as u64 * self.scale;
            let missing = needed.saturating_sub(have).div_ceil(frame48) * self.frame as u64;
            let whole = self.pcm.len().div_ceil(self.frame) * self.frame;
            // At least one frame: the stream's last page must carry a packet.
            let len = (self.pcm.len() + missing as usize)
                .max(whole)
                .max(self.frame);
            self.pcm.resize(len, 0);
        }
        let count = self.pcm.len() / self.frame;
        let last_granule = u64::from(self.pre_skip) + self.taken * self.scale;
        for (i, frame) in self.pcm.chunks_exact(self.frame).enumerate() {
            let n = self
                .opus
                .encode(frame, &mut packet)
                .map_err(|e| format!("libopus: {e}"))?;
            self.encoded += self.frame as u64;
            let last = i + 1 == count;
            let (info, granule) = match (last, end) {
                (true, true) => (PacketWriteEndInfo::EndStream, last_granule),
                (true, false) => (PacketWriteEndInfo::EndPage, self.encoded * self.scale),
                (false, _) => (
                    PacketWriteEndInfo::NormalPacket,
                    (self.encoded * self.scale).min(if end { last_granule } else { u64::MAX }),
                ),
            };
            self.pages
                .write_packet(packet[..n].to_vec(), self.serial, info, granule)
                .map_err(|e| format!("Ogg: {e}"))?;
        }
        self.pcm.drain(..count * self.frame);
        Ok(())
    }

    fn take_pages(&mut self, out: &mut Vec<Bytes>) {
        let pages = std::mem::take(self.pages.inner_mut());
        if !pages.is_empty() {
            out.push(Bytes::from(pages));
        }
    }

    fn start(&mut self) -> Result<(), String> {
        if !self.headers_sent {
            self.headers_sent = true;
            self.headers().map_err(|e| format!("Ogg: {e}"))?;
        }
        Ok(())
    }
}

impl PcmEncoder for OggOpus {
    fn push(&mut self, pcm: &[u8], out: &mut Vec<Bytes>) -> Result<(), String> {
        self.start()?;
        let before = self.pcm.len();
        self.samples.append(pcm, &mut self.pcm);
        self.taken += (self.pcm.len() - before) as u64;
        self.frames(false)?;
        self.take_pages(out);
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<(), String> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        self.start()?;
        self.frames(true)?;
        self.take_pages(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::super::testing::{assert_tone, encode, sine, RATE};
    use super::*;

    /// The Ogg packets of `file` with their pages' granule positions and end-of-stream marks.
    fn packets(file: &[u8]) -> Vec<ogg::Packet> {
        let mut reader = ogg::PacketReader::new(Cursor::new(file.to_vec()));
        let mut all = Vec::new();
        while let Some(p) = reader.read_packet().unwrap() {
            all.push(p);
        }
        all
    }

    /// The samples a player gives from `file`: decoded at [`RATE`] by libopus, the pre-skip
    /// dropped and the end trimmed to the last granule position.
    fn play(file: &[u8]) -> Vec<i16> {
        let all = packets(file);
        let head = &all[0].data;
        assert_eq!(&head[..8], b"OpusHead");
        assert_eq!(
            (head[8], head[9], head[18]),
            (1, 1, 0),
            "version, channels, mapping"
        );
        assert_eq!(u32::from_le_bytes(head[12..16].try_into().unwrap()), RATE);
        let pre_skip = u16::from_le_bytes([head[10], head[11]]) as usize;
        assert!(pre_skip > 0, "libopus has a lookahead");
        assert_eq!(&all[1].data[..8], b"OpusTags");
        assert!(
            all[0].last_in_page() && all[1].last_in_page(),
            "headers on their own pages"
        );
        let audio = &all[2..];
        let last = audio.last().unwrap();
        assert!(last.last_in_stream(), "the last page ends the stream");
        let granules: Vec<u64> = audio.iter().map(|p| p.absgp_page()).collect();
        assert!(granules.windows(2).all(|w| w[0] <= w[1]), "{granules:?}");
        let mut decoder = opus::Decoder::new(RATE, Channels::Mono).unwrap();
        let mut pcm = Vec::new();
        let mut frame = [0i16; 5_760];
        for p in audio {
            let n = decoder.decode(&p.data, &mut frame, false).unwrap();
            pcm.extend_from_slice(&frame[..n]);
        }
        let end = (last.absgp_page() as usize).saturating_sub(pre_skip) / 2;
        let skip = pre_skip / 2;
        assert!(
            pcm.len() >= skip + end,
            "fewer samples than the granule position says"
        );
        pcm[skip..skip + end].to_vec()
    }

    #[test]
    fn a_tone_streams_as_ogg_opus_of_its_exact_length() {
        let mut enc = OggOpus::new(RATE).unwrap();
        let (before, file) = encode(&mut enc, &sine(1.0));
        assert!(
            before > file.len() / 2,
            "most pages left before finish ({before} of {})",
            file.len()
        );
        assert!(file.starts_with(b"OggS"));
        let samples = play(&file);
        // End trimming makes the length exact.
        assert_tone(&samples, RATE, RATE as usize, 0);
    }

    #[test]
    fn the_headers_leave_with_the_first_push() {
        let mut enc = OggOpus::new(RATE).unwrap();
        let mut out = Vec::new();
        enc.push(&[0, 0, 1], &mut out).unwrap();
        let first = out.concat();
        assert!(first.starts_with(b"OggS"));
        assert!(first.windows(8).any(|w| w == b"OpusTags"));
    }

    #[test]
    fn empty_input_is_a_valid_stream_of_no_samples() {
        let mut enc = OggOpus::new(RATE).unwrap();
        let (_, file) = encode(&mut enc, &[]);
        assert!(play(&file).is_empty());
    }

    #[test]
    fn a_rate_opus_does_not_take_is_refused() {
        assert!(OggOpus::new(22_050).is_err());
    }
}
