//! The tokenizer the gateway counts rerank usage with.
//!
//! No rerank provider reports the query/documents split the public `usage` needs, so the gateway
//! counts tokens itself, with OpenAI's `cl100k_base` BPE (via `tiktoken-rs`, whose vocabulary ships
//! inside the crate: nothing is downloaded). The README documents the choice. ASCII text, the
//! common case, is counted by an exact hand-written pre-tokenizer ([`ascii`]) several times faster
//! than tiktoken's regex.

mod ascii;

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

/// Name reported in rerank `metadata`.
pub const TOKENIZER: &str = "cl100k_base";

fn bpe() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

/// Size of the cl100k_base vocabulary (ordinary tokens).
const VOCABULARY: u32 = 100_256;

fn ranks() -> &'static ascii::Ranks {
    static RANKS: OnceLock<ascii::Ranks> = OnceLock::new();
    RANKS.get_or_init(|| ascii::Ranks::new(VOCABULARY, |rank| bpe().decode_bytes(&[rank]).ok()))
}

/// Load the vocabulary now, so the first request does not pay for it.
pub fn warm_up() {
    let _ = ranks();
}

/// Tokens in `text` (special-token strings are counted as ordinary text).
pub fn count(text: &str) -> usize {
    if text.is_ascii() {
        ranks().count(text.as_bytes())
    } else {
        bpe().encode_ordinary(text).len()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_known_strings() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert!(super::count("这是一个测试") >= 3);
    }

    /// The ASCII path must agree with tiktoken exactly, on text built to hit every branch of the
    /// cl100k pattern: contractions in both cases, letter runs after punctuation or spaces, digit
    /// runs longer than three, punctuation runs with trailing line breaks, mixed whitespace.
    #[test]
    fn ascii_path_matches_tiktoken() {
        use rand::{Rng, SeedableRng};
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
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let bpe = super::bpe();
        for _ in 0..4000 {
            let n = rng.gen_range(0..12);
            let text: String = (0..n)
                .map(|_| PARTS[rng.gen_range(0..PARTS.len())])
                .collect();
            assert_eq!(
                super::count(&text),
                bpe.encode_ordinary(&text).len(),
                "{text:?}"
            );
        }
        // A long document and long runs.
        let doc =
            "The Eiffel Tower, built in 1889, is 330 m tall.\r\n\n  It's in Paris!! ".repeat(40);
        for text in [
            doc.as_str(),
            &"a".repeat(500),
            &" ".repeat(300),
            &"9".repeat(100),
        ] {
            assert_eq!(super::count(text), bpe.encode_ordinary(text).len());
        }
    }
}
