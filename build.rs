//! Generates the `cl100k_base` tables the token counter reads (`src/tokens/`): the vocabulary as a
//! flat hash table, the ranks of two-byte tokens, and the character classes of the tokenizer's
//! pattern. The vocabulary comes from `tiktoken-rs` (which ships OpenAI's published file) and the
//! classes from `regex-syntax` (the Unicode tables the pattern's regex engine itself uses), so the
//! gateway's counts follow tiktoken's exactly without tiktoken, its regex engine or its 20-odd MiB
//! of maps in the running process. Layout: `src/tokens/layout.rs`.

#[path = "src/tokens/layout.rs"]
mod layout;

use std::error::Error;
use std::fs;
use std::path::Path;

use layout::{head_word_in, home_slot, LETTER, NUMBER, RANK_BITS, SLOTS, SLOT_BYTES, SPACE};

/// Ordinary tokens of `cl100k_base` (special tokens start at 100,257 and are never counted).
const VOCABULARY: u32 = 100_256;

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/tokens/layout.rs");
    let out = std::env::var("OUT_DIR")?;
    let out = Path::new(&out);
    let (vocab, pairs) = vocabulary()?;
    fs::write(out.join("cl100k_vocab.bin"), vocab)?;
    fs::write(out.join("cl100k_pairs.bin"), pairs)?;
    let (bmp, astral) = classes()?;
    fs::write(out.join("cl100k_classes.bin"), bmp)?;
    fs::write(out.join("cl100k_astral.rs"), astral)?;
    Ok(())
}

/// The vocabulary table and the two-byte ranks.
fn vocabulary() -> Res<(Vec<u8>, Vec<u8>)> {
    let bpe = tiktoken_rs::cl100k_base()?;
    let mut slots = vec![0u8; SLOTS * SLOT_BYTES];
    let mut tail = Vec::new();
    let mut pairs = vec![u32::MAX; 1 << 16];
    for rank in 0..VOCABULARY {
        let bytes = bpe.decode_bytes(&[rank])?;
        if bytes.is_empty() || bytes.len() >= 1 << (32 - RANK_BITS) || rank >= 1 << RANK_BITS {
            return Err(format!("token {rank} does not fit the table layout").into());
        }
        if let [a, b] = bytes[..] {
            pairs[usize::from(a) << 8 | usize::from(b)] = rank;
        }
        let head = head_word_in(&bytes, 0, bytes.len());
        let mut slot = home_slot(&bytes, head);
        while slots[slot * SLOT_BYTES + 8..slot * SLOT_BYTES + 12] != [0; 4] {
            slot = (slot + 1) % SLOTS;
        }
        let at = slot * SLOT_BYTES;
        let meta = rank | (bytes.len() as u32) << RANK_BITS;
        let tail_at = u32::try_from(tail.len())?;
        slots[at..at + 8].copy_from_slice(&head.to_le_bytes());
        slots[at + 8..at + 12].copy_from_slice(&meta.to_le_bytes());
        slots[at + 12..at + 16].copy_from_slice(&tail_at.to_le_bytes());
        if bytes.len() > 8 {
            tail.extend_from_slice(&bytes[8..]);
        }
    }
    slots.extend_from_slice(&tail);
    Ok((slots, pairs.iter().flat_map(|r| r.to_le_bytes()).collect()))
}

/// One class byte per BMP code point, and the classed ranges above it as Rust source.
fn classes() -> Res<(Vec<u8>, String)> {
    let mut bmp = vec![layout::OTHER; 1 << 16];
    let mut astral = Vec::new();
    for (pattern, class) in [(r"\p{L}", LETTER), (r"\p{N}", NUMBER), (r"\s", SPACE)] {
        let hir = regex_syntax::parse(pattern)?;
        let regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(set)) = hir.kind()
        else {
            return Err(format!("{pattern} is not a Unicode class").into());
        };
        for range in set.ranges() {
            let (start, end) = (u32::from(range.start()), u32::from(range.end()));
            for cp in start..=end.min(0xFFFF) {
                bmp[cp as usize] = class;
            }
            if end > 0xFFFF {
                astral.push((start.max(0x10000), end, class));
            }
        }
    }
    astral.sort_unstable();
    let mut src = String::from(
        "/// Classed code-point ranges above the BMP, sorted: (first, last, class).\n\
         static ASTRAL: &[(u32, u32, u8)] = &[\n",
    );
    for (start, end, class) in astral {
        src.push_str(&format!("    ({start:#x}, {end:#x}, {class}),\n"));
    }
    src.push_str("];\n");
    Ok((bmp, src))
}
