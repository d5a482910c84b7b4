//! Mono signed 16-bit little-endian PCM bytes into samples, for the encoders that take samples:
//! a push may end in the middle of a sample (a provider's delta is any number of bytes), so its
//! first byte is kept for the next push.

/// The byte of a sample split across two pushes.
#[derive(Default)]
pub(super) struct Samples {
    odd: Option<u8>,
}

impl Samples {
    /// Append the whole samples `pcm` completes (with the byte carried over) to `into`.
    pub(super) fn append(&mut self, mut pcm: &[u8], into: &mut Vec<i16>) {
        if let Some(low) = self.odd.take() {
            match pcm.split_first() {
                Some((&high, rest)) => {
                    into.push(i16::from_le_bytes([low, high]));
                    pcm = rest;
                }
                None => {
                    self.odd = Some(low);
                    return;
                }
            }
        }
        let pairs = pcm.chunks_exact(2);
        if let [last] = pairs.remainder() {
            self.odd = Some(*last);
        }
        into.extend(pairs.map(|p| i16::from_le_bytes([p[0], p[1]])));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_split_across_pushes_is_joined() {
        let mut s = Samples::default();
        let mut out = Vec::new();
        s.append(&[0x01, 0x02, 0x03], &mut out);
        assert_eq!(out, [0x0201]);
        s.append(&[], &mut out);
        s.append(&[0x04], &mut out);
        assert_eq!(out, [0x0201, 0x0403]);
        s.append(&[0xFF], &mut out);
        s.append(&[0xFF, 0x05, 0x00], &mut out);
        assert_eq!(out, [0x0201, 0x0403, -1, 5]);
    }
}
