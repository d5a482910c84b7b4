//! `cl100k_base`'s pre-tokenizer, matched by hand instead of by a backtracking regex.
//!
//! tiktoken splits text with this pattern (possessive form, as `tiktoken-rs` 0.12 and OpenAI's
//! tiktoken write it) before the byte-pair merge:
//!
//! ```text
//! '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ?[^\s\p{L}\p{N}]++[\r\n]*+
//!   | \s++$ | \s*[\r\n] | \s+(?!\S) | \s
//! ```
//!
//! Every branch only asks which of four classes a character is in (letter, number, whitespace,
//! other), plus a few literal characters, so [`piece_len`] tries the branches in the pattern's order
//! over those classes. Running `fancy-regex` over every document was about 80% of the gateway's CPU
//! per rerank request. The tests compare the counts with tiktoken's on generated text.

use super::layout::{LETTER, NUMBER, OTHER, SPACE};

static CLASSES: &[u8; 1 << 16] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_classes.bin"));
include!(concat!(env!("OUT_DIR"), "/cl100k_astral.rs"));

/// One character: its code point, class and length in bytes.
#[derive(Clone, Copy)]
struct Char {
    code: u32,
    class: u8,
    len: usize,
}

impl Char {
    fn is(self, c: char) -> bool {
        self.code == c as u32
    }

    fn is_line_break(self) -> bool {
        self.is('\r') || self.is('\n')
    }
}

/// The character starting at byte `i` of the UTF-8 text `s`, if any.
#[inline(always)]
fn char_at(s: &[u8], i: usize) -> Option<Char> {
    let b0 = *s.get(i)?;
    let (len, lead) = match b0 {
        0x00..=0x7F => {
            return Some(Char {
                code: u32::from(b0),
                class: CLASSES[usize::from(b0)],
                len: 1,
            })
        }
        0xC0..=0xDF => (2, u32::from(b0 & 0x1F)),
        0xE0..=0xEF => (3, u32::from(b0 & 0x0F)),
        _ => (4, u32::from(b0 & 0x07)),
    };
    let code = s
        .get(i + 1..i + len)?
        .iter()
        .fold(lead, |code, &b| code << 6 | u32::from(b & 0x3F));
    let class = match CLASSES.get(code as usize) {
        Some(&class) => class,
        None => astral_class(code),
    };
    Some(Char { code, class, len })
}

fn astral_class(code: u32) -> u8 {
    match ASTRAL.binary_search_by(|&(first, last, _)| {
        if last < code {
            std::cmp::Ordering::Less
        } else if first > code {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(k) => ASTRAL[k].2,
        Err(_) => OTHER,
    }
}

#[inline(always)]
fn class_at(s: &[u8], i: usize, class: u8) -> bool {
    char_at(s, i).is_some_and(|c| c.class == class)
}

/// End of the run of `class` characters starting at `i` (ASCII bytes classed without decoding).
fn run_end(s: &[u8], mut i: usize, class: u8) -> usize {
    loop {
        match s.get(i) {
            Some(&b) if b < 0x80 => {
                if CLASSES[usize::from(b)] != class {
                    return i;
                }
                i += 1;
            }
            Some(_) => match char_at(s, i) {
                Some(c) if c.class == class => i += c.len,
                _ => return i,
            },
            None => return i,
        }
    }
}

/// Length in bytes of the piece the pattern matches at byte `i` of `s` (UTF-8 text; `i` starts
/// a character). At least one character whenever `i < s.len()`.
///
/// Most pieces of prose are an ASCII word, alone or after one space or punctuation character:
/// those are matched here byte by byte; everything else, and any word that runs into a
/// non-ASCII byte, goes through [`any_piece_len`].
#[inline(always)]
pub(super) fn piece_len(s: &[u8], i: usize) -> usize {
    let word = match s.get(i..i + 2) {
        Some(&[c, _]) if c.is_ascii_alphabetic() => i,
        Some(&[c, next])
            if next.is_ascii_alphabetic()
                && c.is_ascii()
                && !c.is_ascii_alphanumeric()
                && !matches!(c, b'\r' | b'\n' | b'\'') =>
        {
            i + 1
        }
        _ => return any_piece_len(s, i),
    };
    let mut end = word + 1;
    while s.get(end).is_some_and(u8::is_ascii_alphabetic) {
        end += 1;
    }
    match s.get(end) {
        Some(b) if !b.is_ascii() => any_piece_len(s, i),
        _ => end - i,
    }
}

/// [`piece_len`] for any text: the pattern's branches in order over the four classes.
#[inline(never)]
fn any_piece_len(s: &[u8], i: usize) -> usize {
    let Some(c) = char_at(s, i) else {
        return 0;
    };
    // '(?i:[sdmt]|ll|ve|re): case-insensitive, so 'ſ' (U+017F, which folds to 's') counts.
    if c.is('\'') {
        if let Some(c1) = char_at(s, i + 1) {
            let lower = |c: Char| char::from_u32(c.code).map(|c| c.to_ascii_lowercase());
            match lower(c1) {
                Some('s' | 'd' | 'm' | 't' | 'ſ') => return 1 + c1.len,
                Some(first @ ('l' | 'v' | 'r')) => {
                    let second = if first == 'l' { 'l' } else { 'e' };
                    if char_at(s, i + 2).and_then(lower) == Some(second) {
                        return 3;
                    }
                }
                _ => {}
            }
        }
    }
    // [^\r\n\p{L}\p{N}]?+\p{L}++
    let mut j = i;
    if c.class != LETTER
        && c.class != NUMBER
        && !c.is_line_break()
        && class_at(s, i + c.len, LETTER)
    {
        j += c.len;
    }
    if class_at(s, j, LETTER) {
        return run_end(s, j, LETTER) - i;
    }
    // \p{N}{1,3}+
    if c.class == NUMBER {
        let mut j = i;
        for _ in 0..3 {
            match char_at(s, j).filter(|c| c.class == NUMBER) {
                Some(d) => j += d.len,
                None => break,
            }
        }
        return j - i;
    }
    //  ?[^\s\p{L}\p{N}]++[\r\n]*+
    let mut j = i;
    if c.is(' ') && class_at(s, i + 1, OTHER) {
        j += 1;
    }
    if class_at(s, j, OTHER) {
        j = run_end(s, j, OTHER);
        while char_at(s, j).is_some_and(Char::is_line_break) {
            j += 1;
        }
        return j - i;
    }
    // Whitespace: every other character matched a branch above.
    let (mut end, mut last_start, mut after_break) = (i, i, None);
    while let Some(w) = char_at(s, end).filter(|w| w.class == SPACE) {
        last_start = end;
        end += w.len;
        if w.is_line_break() {
            after_break = Some(end);
        }
    }
    if end == s.len() {
        // \s++$
        end - i
    } else if let Some(after_break) = after_break {
        // \s*[\r\n]: up to the run's last line break.
        after_break - i
    } else if last_start > i {
        // \s+(?!\S): the run less its last character, which goes with the next piece.
        last_start - i
    } else {
        // \s
        end - i
    }
}
