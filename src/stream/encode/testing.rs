//! What the encoders' tests share: a 440 Hz tone fed in odd-sized pieces, a decoder for the
//! formats symphonia reads, and the checks that decoded audio is the tone, of the right length.

use std::io::Cursor;

use bytes::Bytes;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::DecoderOptions;
use symphonia::core::errors::Error;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use super::PcmEncoder;

/// The tests' rate: OpenAI's Realtime API's and Gemini's PCM.
pub(super) const RATE: u32 = 24_000;

/// `seconds` of a 440 Hz sine at half scale, as 16-bit little-endian PCM at [`RATE`].
pub(super) fn sine(seconds: f64) -> Vec<u8> {
    let n = (seconds * f64::from(RATE)) as usize;
    (0..n)
        .flat_map(|i| {
            let t = i as f64 / f64::from(RATE);
            let v = (t * 440.0 * std::f64::consts::TAU).sin() * 16_000.0;
            (v as i16).to_le_bytes()
        })
        .collect()
}

/// What the encoder produced from `pcm` fed in pieces of odd sizes (one of one byte, so a
/// sample is split across pushes): the bytes out before `finish`, and all of them.
pub(super) fn encode(enc: &mut dyn PcmEncoder, pcm: &[u8]) -> (usize, Vec<u8>) {
    const PIECES: [usize; 6] = [1, 7, 333, 1_001, 4_800, 2];
    let mut out = Vec::new();
    let mut rest = pcm;
    for size in PIECES.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at((*size).min(rest.len()));
        enc.push(piece, &mut out).unwrap();
        rest = tail;
    }
    let before = out.iter().map(Bytes::len).sum();
    enc.finish(&mut out).unwrap();
    // A second finish adds nothing and fails nothing.
    let mut again = Vec::new();
    enc.finish(&mut again).unwrap();
    assert!(again.is_empty(), "a second finish produced output");
    (before, out.concat())
}

/// The first channel's samples of `file` and its rate, read by symphonia (`ext` hints the format).
pub(super) fn decode(file: &[u8], ext: &str) -> (u32, Vec<i16>) {
    let source = MediaSourceStream::new(Box::new(Cursor::new(file.to_vec())), Default::default());
    let mut hint = Hint::new();
    hint.with_extension(ext);
    let probed = symphonia::default::get_probe()
        .format(
            &hint,
            source,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .unwrap();
    let mut format = probed.format;
    let track = format.default_track().unwrap().clone();
    let rate = track.codec_params.sample_rate.unwrap();
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .unwrap();
    let mut samples = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(Error::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => panic!("reading {ext}: {e}"),
        };
        let audio = decoder.decode(&packet).unwrap();
        let channels = audio.spec().channels.count();
        let mut buf = SampleBuffer::<i16>::new(audio.capacity() as u64, *audio.spec());
        buf.copy_interleaved_ref(audio);
        samples.extend(buf.samples().iter().step_by(channels));
    }
    (rate, samples)
}

/// `samples` at `rate` are the tone: loud, at 440 Hz by their zero crossings, and `expected`
/// samples long give or take `slack` (a codec's frame, plus its priming where the format has
/// no way to say how much to trim).
pub(super) fn assert_tone(samples: &[i16], rate: u32, expected: usize, slack: usize) {
    assert!(
        samples.len() + slack >= expected && samples.len() <= expected + slack,
        "{} samples decoded, {expected} ± {slack} expected",
        samples.len()
    );
    let rms =
        (samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len() as f64).sqrt();
    assert!(
        rms > 5_000.0,
        "the decoded audio is nearly silent (rms {rms})"
    );
    // Sign changes between loud samples only: a lossy codec's near-silent priming dithers
    // around zero, which a plain count would take for a high tone.
    let mut crossings = 0;
    let mut last = None;
    for &s in samples.iter().filter(|s| s.unsigned_abs() > 2_000) {
        let negative = s < 0;
        if last.is_some_and(|l| l != negative) {
            crossings += 1;
        }
        last = Some(negative);
    }
    // Over the loud span: priming and padding are not part of the tone.
    let loud = |s: &&i16| s.unsigned_abs() > 2_000;
    let first = samples.iter().position(|s| loud(&s)).unwrap_or(0);
    let end = samples.iter().rposition(|s| loud(&s)).unwrap_or(0);
    let hz = crossings as f64 / 2.0 / ((end - first + 1) as f64 / f64::from(rate));
    assert!((hz - 440.0).abs() < 25.0, "the decoded tone is at {hz} Hz");
}
