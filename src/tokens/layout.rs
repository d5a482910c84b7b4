//! The byte layout of the generated `cl100k_base` tables, shared by `build.rs` (which writes them)
//! and `vocab.rs` (which reads them), so the two cannot disagree.
//!
//! - **Vocabulary**: an open-addressing hash table of [`SLOTS`] slots of [`SLOT_BYTES`] bytes,
//!   followed by the bytes of every token longer than 8 bytes past its eighth byte. A slot is
//!   `key: u64` (the token's first 8 bytes, zero-padded, little-endian), `meta: u32`
//!   (`rank | len << 17`; 0 marks an empty slot: every token has at least one byte) and
//!   `tail: u32` (offset of bytes 8.. in the tail area). Keys sit inline, so a lookup of a token of
//!   up to 8 bytes (most of them) reads one slot and nothing else.
//! - **Pairs**: 65,536 little-endian `u32`s, the rank of each two-byte token (`u32::MAX` if none),
//!   indexed by `first << 8 | second`. The byte-pair merge starts from these.
//! - **Classes**: one byte per Basic Multilingual Plane code point: [`LETTER`], [`NUMBER`],
//!   [`SPACE`] or [`OTHER`], as the tokenizer's pattern classes them (`\p{L}`, `\p{N}`, `\s`).

/// log2 of the number of slots: 2^18 slots for about 100k tokens keeps probe runs short.
pub(super) const SLOT_BITS: u32 = 18;
/// Slots in the vocabulary table.
pub(super) const SLOTS: usize = 1 << SLOT_BITS;
/// Bytes per slot.
pub(super) const SLOT_BYTES: usize = 16;
/// Bits of `meta` that hold the rank (ranks are below 2^17).
pub(super) const RANK_BITS: u32 = 17;

/// Character classes of the pre-tokenizer's pattern.
pub(super) const OTHER: u8 = 0;
pub(super) const LETTER: u8 = 1;
pub(super) const NUMBER: u8 = 2;
pub(super) const SPACE: u8 = 3;

/// The first up-to-8 bytes of `bytes`, zero-padded, as a little-endian word.
#[inline(always)]
pub(super) fn head_word(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(word) => u64::from_le_bytes(*word),
        // Byte by byte: a variable-length copy would be a `memcpy` call per lookup.
        None => bytes
            .iter()
            .rev()
            .fold(0, |word, &b| word << 8 | u64::from(b)),
    }
}

/// [`head_word`] of `text[at..at + len]` (`len` ≥ 1), read as one 8-byte load and a mask when the
/// text has 8 bytes from `at`: the lookup of every piece starts here.
#[inline(always)]
pub(super) fn head_word_in(text: &[u8], at: usize, len: usize) -> u64 {
    match text.get(at..).and_then(|rest| rest.first_chunk::<8>()) {
        Some(word) if len >= 8 => u64::from_le_bytes(*word),
        Some(word) => u64::from_le_bytes(*word) & (u64::MAX >> (64 - 8 * len)),
        None => head_word(&text[at..at + len]),
    }
}

/// The slot a token's probe starts at: a folded multiply (the high and low halves of a 128-bit
/// product, xored) of its head word and length, then of each further 8 bytes. A plain multiply
/// clustered the short tokens' slots enough to double the probes per lookup.
#[inline(always)]
pub(super) fn home_slot(bytes: &[u8], head: u64) -> usize {
    let mut h = fold_mul(head ^ (bytes.len() as u64) << 58, 0x9e37_79b9_7f4a_7c15);
    if bytes.len() > 8 {
        for chunk in bytes[8..].chunks(8) {
            h = fold_mul(h ^ head_word(chunk), 0xa076_1d64_78bd_642f);
        }
    }
    (h >> (64 - SLOT_BITS)) as usize
}

#[inline(always)]
fn fold_mul(x: u64, k: u64) -> u64 {
    let product = u128::from(x) * u128::from(k);
    (product as u64) ^ (product >> 64) as u64
}
