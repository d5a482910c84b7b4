//! The tokenizer the gateway counts usage with.
//!
//! No rerank provider reports the query/documents split the public `usage` needs (and some speech
//! providers report no input tokens), so the gateway counts tokens itself, with OpenAI's
//! `cl100k_base` byte-pair encoding. docs/guide/choices.md (rerank `usage`) documents the choice.
//!
//! Counting is on the rerank hot path (every document of every request), so it does not run
//! tiktoken: `pretokenize` splits text the way cl100k's pattern does, and `vocab` merges each
//! piece over tables generated at build time from tiktoken's own vocabulary (`build.rs`). The
//! counts are tiktoken's, to the token (the tests compare them on generated ASCII and Unicode
//! text); the cost is about 2 ns per character, with no allocation except for pieces of 48 bytes
//! or more that are not tokens.

mod cache;
mod layout;
mod pretokenize;
mod texts;
mod vocab;

/// [`count`], remembered per text: a text counted before is looked up, not counted again.
pub use texts::count as count_cached;

/// Name reported in rerank `metadata`.
pub(crate) const TOKENIZER: &str = "cl100k_base";

/// Tokens in `text` (special-token strings are counted as ordinary text).
pub fn count(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut tokens = 0;
    while i < bytes.len() {
        let len = pretokenize::piece_len(bytes, i);
        tokens += vocab::piece_tokens(bytes, i, len);
        i += len;
    }
    tokens
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    fn tiktoken(text: &str) -> usize {
        tiktoken_rs::cl100k_base_singleton()
            .encode_ordinary(text)
            .len()
    }

    /// Random concatenations of `parts`, each compared with tiktoken.
    fn compare_on(parts: &[&str], strings: usize, seed: u64) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..strings {
            let n = rng.gen_range(0..12);
            let text: String = (0..n)
                .map(|_| parts[rng.gen_range(0..parts.len())])
                .collect();
            assert_eq!(super::count(&text), tiktoken(&text), "{text:?}");
        }
    }

    #[test]
    fn counts_known_strings() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert_eq!(super::count("<|endoftext|>"), tiktoken("<|endoftext|>"));
    }

    /// Text built to hit every branch of the pattern with ASCII: contractions in both cases, letter
    /// runs after punctuation or spaces, digit runs longer than three, punctuation runs with
    /// trailing line breaks, whitespace runs inside and at the end of the text.
    #[test]
    fn ascii_matches_tiktoken() {
        const PARTS: &[&str] = &[
            "a",
            "Z",
            "hello",
            "World",
            "'s",
            "'T",
            "'re",
            "'VE",
            "'m",
            "'ll",
            "'D",
            "'x",
            "'",
            "1",
            "12",
            "1234567",
            " ",
            "  ",
            "   ",
            "\t",
            "\n",
            "\r\n",
            "\n\n",
            " \n ",
            "\n    ",
            "\x0b",
            "\x0c",
            ".",
            "!!",
            "?!.",
            "--",
            " -",
            "(",
            ")",
            "\"",
            "#",
            "$5",
            "e.g.",
            "U.S.",
            "don't",
            "I'LL",
            "x\ty",
            "\x00",
            "\x7f",
            "~",
            "_",
            "@user",
            "http://a.b/c?d=1",
            "antidisestablishmentarianism",
            "Kilimanjaro",
            "                                                                      ",
        ];
        compare_on(PARTS, 6000, 7);
    }

    /// Non-ASCII text: letters of many scripts (BMP and above it), combining marks (class
    /// "other"), numbers that are not ASCII digits, Unicode whitespace, zero-width characters,
    /// emoji, and 'ſ', which the pattern's case-insensitive contractions match.
    #[test]
    fn unicode_matches_tiktoken() {
        const PARTS: &[&str] = &[
            "这是一个测试",
            "中文",
            "。",
            "，",
            "カタカナ",
            "ひらがな",
            "한국어",
            "Привет",
            "мир",
            "Ελληνικά",
            "العربية",
            "हिन्दी",
            "ภาษาไทย",
            "e\u{301}",
            "é",
            "\u{301}",
            "Ⅻ",
            "²",
            "１２３",
            "٣٤٥",
            "𝐀𝐁",
            "𝟘𝟙𝟚𝟛",
            "😀",
            "👍🏽",
            "\u{a0}",
            "\u{3000}",
            "\u{2028}",
            "\u{85}",
            "\u{200b}",
            "\u{feff}",
            "ſ",
            "'ſ",
            "'S",
            "'",
            " ",
            "\n",
            "  ",
            "a",
            "x1",
            "-",
            "«",
            "»",
            "€5",
            "straße",
            "naïve",
        ];
        compare_on(PARTS, 6000, 11);
    }

    /// Whole sentences, as documents are: the figures the benchmark's documents give.
    #[test]
    fn prose_matches_tiktoken() {
        for text in [
            "Carson City is the capital city of the American state of Nevada. (Passage 0.)",
            "The Great Barrier Reef is the world's largest coral reef system, off Queensland.",
            "北京是中华人民共和国的首都，也是全国的政治、文化中心。",
            "Der Bundestag ist das Parlament der Bundesrepublik Deutschland.\r\n\r\n  ",
            "fn main() {\n    let total: u32 = [1, 2].iter().sum();\n}\n",
            "L'été dernier, nous sommes allés à Montréal — c'était génial!",
        ] {
            assert_eq!(super::count(text), tiktoken(text), "{text:?}");
        }
    }
}
