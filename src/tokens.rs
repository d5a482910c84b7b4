//! The tokenizer the gateway counts rerank usage with.
//!
//! No rerank provider reports the query/documents split the public `usage` needs, so the gateway
//! counts tokens itself, with OpenAI's `cl100k_base` BPE (via `tiktoken-rs`, whose vocabulary ships
//! inside the crate: nothing is downloaded). The README documents the choice.

use tiktoken_rs::CoreBPE;

/// Name reported in rerank `metadata`.
pub const TOKENIZER: &str = "cl100k_base";

fn bpe() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

/// Load the vocabulary now, so the first request does not pay for it.
pub fn warm_up() {
    let _ = bpe();
}

/// Tokens in `text` (special-token strings are counted as ordinary text).
pub fn count(text: &str) -> usize {
    bpe().encode_ordinary(text).len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_known_strings() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert!(super::count("这是一个测试") >= 3);
    }
}
