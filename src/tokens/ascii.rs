//! An exact, faster `cl100k_base` token count for ASCII text.
//!
//! Counting rerank usage with `tiktoken-rs` costs about 9 µs per short document, almost all of it in
//! the `fancy-regex` pre-tokenizer (the benchmark in `benches/` measured token counting at 90% of
//! the gateway's CPU per rerank request). For ASCII text the cl100k pattern
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]*
//!   | \s*[\r\n]+ | \s+(?!\S) | \s+
//! ```
//!
//! reduces to byte classes (letter, digit, whitespace, other), so it is matched here by hand, branch
//! by branch in the pattern's order, and each piece is merged with the same byte-pair ranks
//! tiktoken uses. Non-ASCII text still goes through tiktoken. The tests compare both on thousands of
//! generated strings.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Byte sequence → BPE rank, for every token of the vocabulary.
pub struct Ranks {
    ranks: HashMap<Box<[u8]>, u32, BuildHasherDefault<WordHasher>>,
}

impl Ranks {
    /// Build from the vocabulary: `decode(rank)` gives each rank's bytes.
    pub fn new(vocabulary_size: u32, decode: impl Fn(u32) -> Option<Vec<u8>>) -> Ranks {
        let mut ranks =
            HashMap::with_capacity_and_hasher(vocabulary_size as usize, Default::default());
        for rank in 0..vocabulary_size {
            if let Some(bytes) = decode(rank) {
                ranks.insert(bytes.into_boxed_slice(), rank);
            }
        }
        Ranks { ranks }
    }

    fn rank(&self, bytes: &[u8]) -> u32 {
        self.ranks.get(bytes).copied().unwrap_or(u32::MAX)
    }

    /// Tokens in ASCII `text`.
    pub fn count(&self, text: &[u8]) -> usize {
        let mut i = 0;
        let mut tokens = 0;
        while i < text.len() {
            let len = piece_len(text, i);
            tokens += self.merged_len(&text[i..i + len]);
            i += len;
        }
        tokens
    }

    /// Tokens one pre-tokenized piece merges into (tiktoken's byte-pair merge: repeatedly join the
    /// adjacent pair with the lowest rank).
    fn merged_len(&self, piece: &[u8]) -> usize {
        if piece.len() <= 1 || self.ranks.contains_key(piece) {
            return piece.len().min(1);
        }
        // (start of part, rank of joining it with the next part)
        let mut parts: Vec<(usize, u32)> = (0..piece.len() - 1)
            .map(|i| (i, self.rank(&piece[i..i + 2])))
            .collect();
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        let joined_rank = |parts: &[(usize, u32)], i: usize| {
            if i + 3 < parts.len() {
                self.rank(&piece[parts[i].0..parts[i + 3].0])
            } else {
                u32::MAX
            }
        };
        loop {
            let (min_i, min_rank) = parts[..parts.len() - 1]
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, rank))| *rank)
                .map(|(i, (_, rank))| (i, *rank))
                .unwrap_or((0, u32::MAX));
            if min_rank == u32::MAX {
                break;
            }
            if min_i > 0 {
                parts[min_i - 1].1 = joined_rank(&parts, min_i - 1);
            }
            parts[min_i].1 = joined_rank(&parts, min_i);
            parts.remove(min_i + 1);
        }
        parts.len() - 1
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

fn is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// Neither whitespace, letter nor digit (`[^\s\p{L}\p{N}]`).
fn is_other(b: u8) -> bool {
    !is_space(b) && !is_letter(b) && !is_digit(b)
}

/// Length of the piece the cl100k pattern matches at `i` (always at least 1).
fn piece_len(s: &[u8], i: usize) -> usize {
    let at = |k: usize| s.get(k).copied();
    let c = s[i];
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if c == b'\'' {
        let l1 = at(i + 1).map(|b| b.to_ascii_lowercase());
        let l2 = at(i + 2).map(|b| b.to_ascii_lowercase());
        match (l1, l2) {
            (Some(b's' | b't' | b'm' | b'd'), _) => return 2,
            (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => {
                return 3
            }
            _ => {}
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    let mut j = i;
    if c != b'\r' && c != b'\n' && !is_letter(c) && !is_digit(c) && at(i + 1).is_some_and(is_letter)
    {
        j += 1;
    }
    if at(j).is_some_and(is_letter) {
        while at(j).is_some_and(is_letter) {
            j += 1;
        }
        return j - i;
    }
    // \p{N}{1,3}
    if is_digit(c) {
        let mut j = i;
        while j < i + 3 && at(j).is_some_and(is_digit) {
            j += 1;
        }
        return j - i;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    let mut j = i;
    if c == b' ' && at(i + 1).is_some_and(is_other) {
        j += 1;
    }
    if at(j).is_some_and(is_other) {
        while at(j).is_some_and(is_other) {
            j += 1;
        }
        while matches!(at(j), Some(b'\r' | b'\n')) {
            j += 1;
        }
        return j - i;
    }
    // Whitespace (c is whitespace here: every other byte matched a branch above).
    let mut end = i;
    while at(end).is_some_and(is_space) {
        end += 1;
    }
    // \s*[\r\n]+ : up to the last line break of the run.
    if let Some(k) = (i..end).rev().find(|&k| s[k] == b'\r' || s[k] == b'\n') {
        return k + 1 - i;
    }
    // \s+(?!\S) : the run, less the space that belongs to the next word; \s+ : a lone space.
    if end == s.len() || end - i < 2 {
        end - i
    } else {
        end - i - 1
    }
}

/// A fast hasher for short byte strings (the vocabulary is fixed, so no flooding concern).
#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
    }

    fn write_usize(&mut self, i: usize) {
        self.0 = (self.0.rotate_left(5) ^ i as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}
