//! Token lookups in the generated `cl100k_base` tables, and the byte-pair merge that counts the
//! tokens of one pre-tokenized piece.
//!
//! The tables are compiled into the binary (`build.rs`, layout in [`super::layout`]): nothing is
//! parsed or allocated at start, and only the pages a workload touches become resident.

use super::cache;
use super::layout::{head_word_in, home_slot, RANK_BITS, SLOTS, SLOT_BYTES};

static VOCAB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_vocab.bin"));
static PAIRS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_pairs.bin"));

/// No rank: the bytes are not a token.
const NONE: u32 = u32::MAX;

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The rank of the token whose bytes are exactly `text[at..at + len]`, or [`NONE`].
#[inline(always)]
fn rank_in(text: &[u8], at: usize, len: usize) -> u32 {
    let bytes = &text[at..at + len];
    let head = head_word_in(text, at, len);
    rank(bytes, head, home_slot(bytes, head))
}

/// The rank of the token whose bytes are exactly `bytes` (whose [`head_word`] is `head`, probing
/// from `slot`, its [`home_slot`]), or [`NONE`].
///
/// [`head_word`]: super::layout::head_word
#[inline(always)]
fn rank(bytes: &[u8], head: u64, mut slot: usize) -> u32 {
    loop {
        let at = slot * SLOT_BYTES;
        let meta = u32_at(VOCAB, at + 8);
        if meta == 0 {
            return NONE;
        }
        if (meta >> RANK_BITS) as usize == bytes.len() && u64_at(VOCAB, at) == head {
            let tail_matches = bytes.len() <= 8 || {
                let tail = SLOTS * SLOT_BYTES + u32_at(VOCAB, at + 12) as usize;
                VOCAB.get(tail..tail + bytes.len() - 8) == Some(&bytes[8..])
            };
            if tail_matches {
                return meta & ((1 << RANK_BITS) - 1);
            }
        }
        // The table is less than 40% full, so an empty slot always ends the probe.
        slot = (slot + 1) & (SLOTS - 1);
    }
}

fn pair_rank(a: u8, b: u8) -> u32 {
    u32_at(PAIRS, (usize::from(a) << 8 | usize::from(b)) * 4)
}

/// Tokens the pre-tokenized piece `text[at..at + len]` encodes to: 1 when the piece is a token,
/// else tiktoken's byte-pair merge (repeatedly join the adjacent pair whose joined bytes have the
/// lowest rank, leftmost on ties) counted without building the tokens.
#[inline(always)]
pub(super) fn piece_tokens(text: &[u8], at: usize, len: usize) -> usize {
    if len < 3 {
        return match len {
            2 if pair_rank(text[at], text[at + 1]) == NONE => 2,
            2 => 1,
            _ => len,
        };
    }
    let piece = &text[at..at + len];
    let head = head_word_in(text, at, len);
    let slot = home_slot(piece, head);
    if rank(piece, head, slot) != NONE {
        return 1;
    }
    cache::merged(piece, slot, merged_len)
}

/// Tokens `piece` (not itself a token) merges into. Kept out of line: most pieces are tokens.
#[inline(never)]
fn merged_len(piece: &[u8]) -> usize {
    // parts[k] = (start of part k, rank of joining part k with part k + 1); the last entry marks
    // the piece's end. Short pieces (nearly all) merge on the stack.
    let n = piece.len();
    let mut stack = [(0usize, NONE); 48];
    let mut heap = Vec::new();
    let parts: &mut [(usize, u32)] = if n < stack.len() {
        &mut stack[..=n]
    } else {
        heap.resize(n + 1, (0, NONE));
        &mut heap
    };
    for (k, part) in parts.iter_mut().enumerate() {
        let rank = if k + 1 < n {
            pair_rank(piece[k], piece[k + 1])
        } else {
            NONE
        };
        *part = (k, rank);
    }
    let mut len = n + 1;
    loop {
        let mut best = (NONE, 0);
        for (k, &(_, rank)) in parts[..len - 1].iter().enumerate() {
            if rank < best.0 {
                best = (rank, k);
            }
        }
        if best.0 == NONE {
            return len - 1;
        }
        let k = best.1;
        parts.copy_within(k + 2..len, k + 1);
        len -= 1;
        let joined = |parts: &[(usize, u32)], k: usize| {
            if k + 2 < len {
                rank_in(piece, parts[k].0, parts[k + 2].0 - parts[k].0)
            } else {
                NONE
            }
        };
        parts[k].1 = joined(parts, k);
        if k > 0 {
            parts[k - 1].1 = joined(parts, k - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every token of the vocabulary is found, with its rank, and the table's probes stay short.
    #[test]
    fn every_token_round_trips() {
        let bpe = tiktoken_rs::cl100k_base_singleton();
        let mut probes = 0;
        for expected in 0..100_256u32 {
            let Ok(bytes) = bpe.decode_bytes(&[expected]) else {
                continue;
            };
            assert_eq!(
                super::rank_in(&bytes, 0, bytes.len()),
                expected,
                "{bytes:?}"
            );
            let head = super::head_word_in(&bytes, 0, bytes.len());
            let mut slot = super::home_slot(&bytes, head);
            while super::u32_at(super::VOCAB, slot * super::SLOT_BYTES + 8)
                & ((1 << super::RANK_BITS) - 1)
                != expected
            {
                slot = (slot + 1) & (super::SLOTS - 1);
                probes += 1;
            }
            probes += 1;
        }
        let mean = f64::from(probes) / 100_256.0;
        assert!(mean < 1.5, "{mean} probes per lookup");
    }
}
