//! The inputs of a cost: what a finished request used ([`Metered`]), made of the usage types the
//! request path already carries — the speech stream's reported [`SpeechUsage`], an image answer's
//! [`ImageUsage`] and facts, rerank's [`RerankUsage`] and Cohere's billed search units — plus the
//! gateway's own counts (characters, images delivered); and what a request is known to use before
//! the provider is called ([`Planned`]).

use crate::api::rerank::{QueryCounting, Usage as RerankUsage};
use crate::common::images::ImageUsage;
use crate::stream::audio::SpeechUsage;

/// What a finished request used.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Metered<'a> {
    Speech(SpeechMetered),
    Images(ImagesMetered<'a>),
    Rerank(RerankMetered<'a>),
}

/// A speech answer's usage.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SpeechMetered {
    /// The input's characters (Unicode scalar values), the gateway's count.
    pub characters: u64,
    /// The input's tokens by the gateway's tokenizer (an estimate of the provider's), for a
    /// token-priced model whose provider reported none.
    pub text_tokens: u64,
    /// The provider's token counts (the speech stream's final event), when it reported them.
    pub reported: Option<SpeechUsage>,
}

/// An image answer's usage.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ImagesMetered<'a> {
    /// Images delivered.
    pub images: u64,
    /// Their size (`WxH`): the answer's when it says, else the request's.
    pub size: Option<&'a str>,
    /// Their quality: the answer's when it says, else the request's.
    pub quality: Option<&'a str>,
    /// The pixels of each input (reference) image whose size is known, for megapixel pricing.
    pub input_pixels: &'a [u64],
    /// Input images whose size is not known (given as URLs the gateway did not fetch): a price
    /// that bills input pixels leaves them out, and says so.
    pub unmeasured_inputs: u64,
    /// The provider's token usage (GPT image models), when it reported it.
    pub reported: Option<&'a ImageUsage>,
}

/// A rerank answer's usage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RerankMetered<'a> {
    /// The answer's usage (`total_tokens` is the provider's billed figure when `billed`).
    pub usage: &'a RerankUsage,
    /// Whether `usage.total_tokens` is the provider's billed figure.
    pub billed: bool,
    /// The query's tokens, counted once (the gateway's count).
    pub query_tokens: u64,
    /// Each document's tokens (the gateway's count), for chunked search-unit billing.
    pub document_tokens: &'a [u64],
    /// The search units the provider says it billed (Cohere's `meta.billed_units.search_units`).
    pub search_units: Option<f64>,
}

/// What a request is known to use before the provider is called.
#[derive(Debug, Clone, Copy)]
// Speech plans the cost its answer's head carries; images and rerank are planned by money
// budgets (issue 28), which the request path does not call yet.
#[allow(dead_code)]
pub(crate) enum Planned<'a> {
    /// Speech of `characters` characters (`text_tokens` by the gateway's tokenizer).
    Speech { characters: u64, text_tokens: u64 },
    /// `n` images of `size` and `quality` (`None`: the provider chooses, e.g. `auto`), from input
    /// images of `input_pixels` pixels each, and `unmeasured_inputs` more of unknown size.
    Images {
        n: u64,
        size: Option<&'a str>,
        quality: Option<&'a str>,
        input_pixels: &'a [u64],
        unmeasured_inputs: u64,
    },
    /// Reranking: the query's tokens and each document's (the gateway's counts), and how the
    /// provider counts the query when it bills tokens (the adapter's `QueryCounting`).
    Rerank {
        query_tokens: u64,
        document_tokens: &'a [u64],
        counting: QueryCounting,
    },
}
