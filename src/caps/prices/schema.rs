//! What a native model costs, in the units its provider bills: the runtime [`Price`] and its
//! rates. A price may carry several units at once — a GPT image model is billed in tokens by
//! kind, and its provider also publishes what one image of a size and quality costs, which is
//! what can be known before the call — and the cost computation (the `cost` module) picks the one
//! the usage at hand fits.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::caps::lifecycle::Date;
use crate::money::{Amount, Currency};

/// A native model's price at one provider kind, with where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Price {
    /// The currency of every rate below.
    pub currency: Currency,
    /// Per character of speech input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub characters: Option<Rate>,
    /// Per token, by kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenRates>,
    /// Per image: flat, or by size and quality.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<ImageRates>,
    /// Per megapixel of each image (BFL's FLUX.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub megapixels: Option<MegapixelRates>,
    /// Per search unit (Cohere rerank): a query with up to `documents` documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_units: Option<GroupRate>,
    /// Per query (Bedrock-style rerank): a query with up to `documents` documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queries: Option<GroupRate>,
    /// Where the price was read (a URL for the built-in entries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When it was last checked against its source.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "date")]
    pub checked: Option<Date>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn date<S: serde::Serializer>(d: &Option<Date>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.collect_str(d),
        None => s.serialize_none(),
    }
}

impl Price {
    /// The units it is billed in, by their keys (`characters`, `tokens`, …), for messages.
    pub(crate) fn units(&self) -> Vec<&'static str> {
        let mut units = Vec::new();
        let has = [
            ("characters", self.characters.is_some()),
            ("tokens", self.tokens.is_some()),
            ("images", self.images.is_some()),
            ("megapixels", self.megapixels.is_some()),
            ("search_units", self.search_units.is_some()),
            ("queries", self.queries.is_some()),
        ];
        for (name, present) in has {
            if present {
                units.push(name);
            }
        }
        units
    }
}

/// `price` per `per` units (`15` per `1000000` characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Rate {
    pub price: Amount,
    pub per: u64,
}

impl Rate {
    /// What `quantity` units cost.
    pub(crate) fn of(&self, quantity: u64) -> Amount {
        self.price.times(quantity, self.per)
    }
}

/// The kinds of token a provider prices apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TokenKind {
    /// Input of no stated kind (a rerank request's query and documents).
    Input,
    TextIn,
    ImageIn,
    AudioIn,
    TextOut,
    ImageOut,
    AudioOut,
}

impl TokenKind {
    /// Every kind, by its key in the table.
    pub(crate) const ALL: [(&'static str, TokenKind); 7] = [
        ("input", TokenKind::Input),
        ("text_in", TokenKind::TextIn),
        ("image_in", TokenKind::ImageIn),
        ("audio_in", TokenKind::AudioIn),
        ("text_out", TokenKind::TextOut),
        ("image_out", TokenKind::ImageOut),
        ("audio_out", TokenKind::AudioOut),
    ];

    /// Its key in the table (`text_in`).
    pub(crate) fn as_str(self) -> &'static str {
        TokenKind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("input", |(n, _)| n)
    }
}

/// Prices per `per` tokens, by kind; a kind not listed is not billed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TokenRates {
    pub per: u64,
    #[serde(flatten)]
    pub rates: BTreeMap<TokenKind, Amount>,
}

impl TokenRates {
    /// The rate of `kind`, when it is billed.
    pub(crate) fn rate(&self, kind: TokenKind) -> Option<Rate> {
        self.rates.get(&kind).map(|&price| Rate {
            price,
            per: self.per,
        })
    }
}

/// What one image costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ImageRates {
    /// The same whatever its size or quality.
    PerImage(Amount),
    /// By size and/or quality: the first entry whose size and quality match (an entry without
    /// one matches any).
    Table(Vec<ImageRate>),
}

impl ImageRates {
    /// What one image of `size` (`WxH`) and `quality` costs; `None` when the table has no entry
    /// for them (or needs one that is not known).
    pub(crate) fn per_image(&self, size: Option<&str>, quality: Option<&str>) -> Option<Amount> {
        match self {
            ImageRates::PerImage(a) => Some(*a),
            ImageRates::Table(rows) => rows
                .iter()
                .find(|r| {
                    let fits = |want: &Option<String>, have: Option<&str>| {
                        want.as_deref().is_none_or(|w| Some(w) == have)
                    };
                    fits(&r.size, size) && fits(&r.quality, quality)
                })
                .map(|r| r.price),
        }
    }
}

/// One row of an image price table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ImageRate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    pub price: Amount,
}

/// Pixels in a megapixel as BFL counts it (1024 × 1024: its "1 MP" image is 1024×1024).
pub(crate) const MEGAPIXEL: u64 = 1 << 20;

/// Per megapixel of output (the first, and each one after it, started megapixels counted whole)
/// and of input images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct MegapixelRates {
    pub first: Amount,
    pub additional: Amount,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Amount>,
}

impl MegapixelRates {
    /// One output image of `pixels` pixels.
    pub(crate) fn output(&self, pixels: u64) -> Amount {
        let mp = megapixels(pixels).max(1);
        self.first.plus(self.additional.times(mp - 1, 1))
    }
}

/// Started megapixels in `pixels` (rounded up).
pub(crate) fn megapixels(pixels: u64) -> u64 {
    pixels.div_ceil(MEGAPIXEL)
}

/// `price` per `per` groups of up to `documents` documents, a document longer than
/// `chunk_tokens` (the query included) counting as one per started chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct GroupRate {
    pub price: Amount,
    pub per: u64,
    pub documents: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_tokens: Option<u64>,
}

impl GroupRate {
    /// Groups billed for a request whose documents count as `chunks` (at least one group: a
    /// request is billed even with no document).
    pub(crate) fn groups(&self, chunks: u64) -> u64 {
        chunks.div_ceil(self.documents.max(1)).max(1)
    }

    /// Chunks of one document of `document_tokens` with a query of `query_tokens` (at least one).
    pub(crate) fn chunks_of(&self, query_tokens: u64, document_tokens: u64) -> u64 {
        match self.chunk_tokens {
            Some(size) => (query_tokens + document_tokens)
                .div_ceil(size.max(1))
                .max(1),
            None => 1,
        }
    }
}
