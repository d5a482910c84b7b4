//! The capability schema as validation and the adapters read it: one struct per operation, plus the
//! small value types they share (input limits with a unit, image size rules) and the public value
//! sets capability lists are drawn from.
//!
//! Everything here is `&'static`: the table is loaded once at start and leaked (see `caps::load`),
//! so a validated request can borrow a family's values (its size, its format) for as long as it
//! lives without copying them.

use crate::common::Operation;
use std::fmt;

/// Every public speech `response_format` (families accept subsets).
pub const SPEECH_FORMATS: &[&str] = &["mp3", "opus", "aac", "flac", "wav", "pcm"];
/// Public speeds (spec: one of 0.25, 0.5, 1, 2, 4; families accept subsets).
pub const SPEEDS: &[f64] = &[0.25, 0.5, 1.0, 2.0, 4.0];
/// Most images one request may ask for (spec: bound not shown; families may allow fewer).
pub const MAX_N: u64 = 10;
/// Most reference images any family may take in one request (OpenAI's edits take 16).
pub(crate) const MAX_IMAGES: u64 = 16;
/// Every public image `quality` value (families accept subsets).
pub(crate) const QUALITIES: &[&str] = &[
    "std", "pro", "standard", "hd", "auto", "low", "medium", "high",
];
/// Every public image `output_format` (`svg`: vector models only, Recraft's).
pub(crate) const OUTPUT_FORMATS: &[&str] = &["png", "jpg", "webp", "svg"];
/// Every public image `background`.
pub(crate) const BACKGROUNDS: &[&str] = &["transparent", "opaque", "auto"];

/// What an input limit counts. Serialized (in `GET /api/v1/models`) with the names the table reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Unicode scalar values (what most providers mean by "characters").
    Characters,
    /// UTF-8 bytes (Google Cloud Text-to-Speech's 5,000-byte input, for one).
    Bytes,
    /// Tokens of the gateway's own tokenizer (`crate::tokens`), an estimate of the provider's.
    Tokens,
    /// Unicode scalar values with each Han ideograph (Chinese hanzi, Japanese kanji, Korean hanja)
    /// counted as two: how DashScope counts Qwen3-TTS's 600-character input.
    #[serde(rename = "han_weighted_characters")]
    HanWeightedCharacters,
}

impl Unit {
    /// The unit's name as the data and error messages spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Characters => "characters",
            Unit::Bytes => "bytes",
            Unit::Tokens => "tokens",
            Unit::HanWeightedCharacters => "characters (Han ideographs count two)",
        }
    }
}

/// Whether `c` is a Han ideograph: the CJK Unified Ideographs and their extensions, and the CJK
/// compatibility ideographs.
pub(crate) fn is_han(c: char) -> bool {
    matches!(c,
        '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FA1F}'
        | '\u{30000}'..='\u{323AF}')
}

/// The longest text a field may hold, in `unit`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The most `unit`s.
    pub max: usize,
    /// What is counted.
    pub unit: Unit,
}

/// An aspect ratio `W:H` (both positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    /// Width's share.
    pub w: u32,
    /// Height's share.
    pub h: u32,
}

impl Ratio {
    /// `W:H` with both parts positive integers written without a sign or leading zero.
    pub fn parse(s: &str) -> Option<Ratio> {
        let (w, h) = s.split_once(':')?;
        Some(Ratio {
            w: positive(w)?,
            h: positive(h)?,
        })
    }

    /// Whether a `width` × `height` shape is at least as wide as this ratio (compared exactly, by
    /// cross-multiplying, so `21:9` admits 1344x576 and nothing a rounding error away).
    fn no_narrower(self, width: u32, height: u32) -> bool {
        u64::from(self.w) * u64::from(height) <= u64::from(width) * u64::from(self.h)
    }

    /// Whether a `width` × `height` shape is at most as wide as this ratio.
    fn no_wider(self, width: u32, height: u32) -> bool {
        u64::from(width) * u64::from(self.h) <= u64::from(self.w) * u64::from(height)
    }

    /// Whether this ratio is at most as wide as `other`.
    pub fn no_wider_than(self, other: Ratio) -> bool {
        self.no_narrower(other.w, other.h)
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.w, self.h)
    }
}

/// A positive decimal integer as a provider's docs write one: no sign, no leading zero.
fn positive(s: &str) -> Option<u32> {
    if s.is_empty() || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `WxH` in pixels, both positive, written without a sign or leading zero (so each size has one
/// spelling, the one adapters send on).
pub(crate) fn parse_size(s: &str) -> Option<(u32, u32)> {
    let (w, h) = s.split_once('x')?;
    Some((positive(w)?, positive(h)?))
}

/// Pixel sizes a family accepts beyond its listed ones: every `WxH` meeting all the bounds set.
/// Providers document their sizes this way ("512–2048 px per side, multiples of 16, at most 2^21
/// pixels"); a rule always has an upper bound (`max_side` or `max_pixels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SizeRule {
    /// Smallest width and smallest height, in pixels.
    pub min_side: Option<u32>,
    /// Largest width and largest height, in pixels.
    pub max_side: Option<u32>,
    /// Width and height must both be multiples of this.
    pub multiple_of: Option<u32>,
    /// Fewest pixels (width × height).
    pub min_pixels: Option<u64>,
    /// Most pixels (width × height).
    pub max_pixels: Option<u64>,
    /// Narrowest shape, as width:height (e.g. `9:21`).
    pub min_aspect_ratio: Option<Ratio>,
    /// Widest shape, as width:height (e.g. `21:9`).
    pub max_aspect_ratio: Option<Ratio>,
}

impl SizeRule {
    /// Whether a `width` × `height` image meets every bound.
    pub fn allows(&self, width: u32, height: u32) -> bool {
        let pixels = u64::from(width) * u64::from(height);
        self.min_side.is_none_or(|m| width >= m && height >= m)
            && self.max_side.is_none_or(|m| width <= m && height <= m)
            && self
                .multiple_of
                .is_none_or(|m| width.is_multiple_of(m) && height.is_multiple_of(m))
            && self.min_pixels.is_none_or(|m| pixels >= m)
            && self.max_pixels.is_none_or(|m| pixels <= m)
            && self
                .min_aspect_ratio
                .is_none_or(|r| r.no_narrower(width, height))
            && self
                .max_aspect_ratio
                .is_none_or(|r| r.no_wider(width, height))
    }
}

impl fmt::Display for SizeRule {
    /// The rule in words, for the `details` of a refused size ("any WxH with sides 256–1440 px,
    /// multiples of 32").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        match (self.min_side, self.max_side) {
            (Some(lo), Some(hi)) => parts.push(format!("sides {lo}–{hi} px")),
            (Some(lo), None) => parts.push(format!("sides of at least {lo} px")),
            (None, Some(hi)) => parts.push(format!("sides of at most {hi} px")),
            (None, None) => {}
        }
        if let Some(m) = self.multiple_of {
            parts.push(format!("multiples of {m}"));
        }
        match (self.min_pixels, self.max_pixels) {
            (Some(lo), Some(hi)) => parts.push(format!("{lo}–{hi} pixels")),
            (Some(lo), None) => parts.push(format!("at least {lo} pixels")),
            (None, Some(hi)) => parts.push(format!("at most {hi} pixels")),
            (None, None) => {}
        }
        match (self.min_aspect_ratio, self.max_aspect_ratio) {
            (Some(lo), Some(hi)) => parts.push(format!("aspect ratio {lo} to {hi}")),
            (Some(lo), None) => parts.push(format!("aspect ratio at least {lo}")),
            (None, Some(hi)) => parts.push(format!("aspect ratio at most {hi}")),
            (None, None) => {}
        }
        write!(f, "any WxH with {}", parts.join(", "))
    }
}

/// What a speech model accepts.
#[derive(Debug)]
pub struct SpeechCaps {
    /// The built-in family these capabilities come from (a model's overrides keep it), for adapters
    /// that serve several families differently.
    pub family: &'static str,
    /// Public `response_format` values this model can produce.
    pub formats: &'static [&'static str],
    /// Public `speed` values this model can honour.
    pub speeds: &'static [f64],
    /// Whether `instructions` is accepted.
    pub instructions: bool,
    /// Formats available with `stream_format: sse` (empty: the model cannot stream as SSE).
    pub sse_formats: &'static [&'static str],
    /// Longest `input`; longer is a 413 `input_too_long`.
    pub input_limit: Limit,
    /// A second bound on `input`, in tokens, where the provider counts both (OpenAI's
    /// gpt-4o-mini-tts: 4,096 characters and 2,000 tokens); longer is a 413 `input_too_long`
    /// (optional key).
    pub input_token_limit: Option<Limit>,
    /// Voice used when the request names none (optional key: `None` where no voice serves every
    /// account, as at ElevenLabs, so the configuration must name one; see `config`).
    pub default_voice: Option<&'static str>,
    /// Voices the model accepts (empty: any; the provider judges).
    pub voices: &'static [&'static str],
    /// Whether `voice` may also be a custom voice, `{"id": "voice_…"}` (optional key, default
    /// false).
    pub custom_voices: bool,
    /// Fields outside the public spec that the provider takes natively and that pass through verbatim.
    pub native_fields: &'static [&'static str],
}

/// What an image model accepts. Validation reads only this; adapters read it to translate
/// (`aspect_ratios` doubles as the size ↔ ratio table for providers that take only one of them).
#[derive(Debug)]
pub struct ImageCaps {
    /// The built-in family these capabilities come from (a model's overrides keep it), for adapters
    /// that serve several families differently.
    pub family: &'static str,
    /// Public `size` values (`WxH`, or a provider keyword such as `auto` or `2K`).
    pub sizes: &'static [&'static str],
    /// Pixel sizes accepted beyond `sizes`.
    pub size_rule: Option<SizeRule>,
    /// The size when the caller names none.
    pub default_size: &'static str,
    /// `aspect_ratio` values and the `size` each one means for this model.
    pub aspect_ratios: &'static [(&'static str, &'static str)],
    /// The `quality` values accepted (empty: the field is refused).
    pub qualities: &'static [&'static str],
    /// `quality` used when the request names none (`None`: none is sent; the provider decides).
    pub default_quality: Option<&'static str>,
    /// Most images one public request may ask for.
    pub max_n: u64,
    /// Most images one native call returns; beyond it the gateway fans out concurrent calls.
    pub per_call_n: u64,
    /// Public `output_format` values.
    pub output_formats: &'static [&'static str],
    /// `output_format` used when the request names none.
    pub default_output_format: &'static str,
    /// Whether `negative_prompt` is accepted.
    pub negative_prompt: bool,
    /// Takes a reference `image`.
    pub reference_image: bool,
    /// Most reference images one request may give (`image` as an array): 1 unless the provider
    /// takes several (OpenAI's edits: 16).
    pub max_images: u64,
    /// Cannot work without a reference `image` (editing models).
    pub image_required: bool,
    /// Honours `strength` (the reference image's influence).
    pub strength: bool,
    /// Whether `mask` is accepted (image edits).
    pub mask: bool,
    /// Can add a watermark when asked (`watermark: true`).
    pub watermark: bool,
    /// The `background` values accepted.
    pub backgrounds: &'static [&'static str],
    /// The `style_preset` values accepted.
    pub style_presets: &'static [&'static str],
    /// The `extra_body` keys accepted.
    pub extra_body_keys: &'static [&'static str],
    /// Longest `prompt`.
    pub prompt_limit: Limit,
    /// Fields outside the public spec that the provider takes natively and that pass through verbatim.
    pub native_fields: &'static [&'static str],
}

impl ImageCaps {
    /// Whether this model accepts `requested` as a size: a listed size, or a `WxH` its rule allows.
    pub fn accepts_size(&self, requested: &str) -> bool {
        self.sizes.contains(&requested)
            || self
                .size_rule
                .is_some_and(|rule| parse_size(requested).is_some_and(|(w, h)| rule.allows(w, h)))
    }
}

/// What a rerank model accepts.
#[derive(Debug)]
pub struct RerankCaps {
    /// The built-in family these capabilities come from (a model's overrides keep it).
    pub family: &'static str,
    /// Most documents one request may carry.
    pub max_documents: usize,
    /// Longest `query`.
    pub query_limit: Limit,
    /// Longest document, each checked (optional key; `None`: the provider truncates or judges).
    pub document_limit: Option<Limit>,
    /// Fields outside the public spec that the provider takes natively and that pass through verbatim.
    pub native_fields: &'static [&'static str],
}

/// A model's capabilities, one variant per operation.
#[derive(Debug, Clone, Copy)]
pub enum Caps {
    /// A text-to-speech model's.
    Speech(&'static SpeechCaps),
    /// An image model's.
    Images(&'static ImageCaps),
    /// A rerank model's.
    Rerank(&'static RerankCaps),
}

impl Caps {
    /// The operation these capabilities are for.
    pub fn operation(self) -> Operation {
        match self {
            Caps::Speech(_) => Operation::Speech,
            Caps::Images(_) => Operation::Images,
            Caps::Rerank(_) => Operation::Rerank,
        }
    }

    /// The built-in family these capabilities come from.
    pub fn family(self) -> &'static str {
        match self {
            Caps::Speech(c) => c.family,
            Caps::Images(c) => c.family,
            Caps::Rerank(c) => c.family,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ratios_have_one_spelling() {
        assert_eq!(parse_size("1024x768"), Some((1024, 768)));
        for bad in [
            "01024x768",
            "1024X768",
            "1024x",
            "x768",
            "0x768",
            "+1x1",
            "1024x768 ",
            "auto",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(Ratio::parse("21:9"), Some(Ratio { w: 21, h: 9 }));
        assert_eq!(Ratio::parse("21/9"), None);
        assert_eq!(Ratio::parse("0:1"), None);
        let (tall, wide) = (Ratio { w: 9, h: 21 }, Ratio { w: 21, h: 9 });
        assert!(tall.no_wider_than(wide) && tall.no_wider_than(tall));
        assert!(!wide.no_wider_than(tall));
    }

    #[test]
    fn a_rule_checks_every_bound() {
        let rule = SizeRule {
            min_side: Some(512),
            max_side: Some(2048),
            multiple_of: Some(16),
            max_pixels: Some(1 << 21),
            min_aspect_ratio: Some(Ratio { w: 9, h: 21 }),
            max_aspect_ratio: Some(Ratio { w: 21, h: 9 }),
            ..SizeRule::default()
        };
        assert!(rule.allows(1024, 1024));
        assert!(rule.allows(2048, 1024)); // exactly 2^21 pixels
        assert!(rule.allows(1344, 576)); // exactly 21:9
        assert!(!rule.allows(496, 1024), "side below 512");
        assert!(!rule.allows(2064, 512), "side above 2048");
        assert!(!rule.allows(1000, 1000), "not a multiple of 16");
        assert!(!rule.allows(2048, 1040), "more than 2^21 pixels");
        assert!(!rule.allows(1376, 576), "wider than 21:9");
        assert!(!rule.allows(576, 1376), "narrower than 9:21");
        let pixels = SizeRule {
            min_pixels: Some(1 << 20),
            max_side: Some(4096),
            ..SizeRule::default()
        };
        assert!(!pixels.allows(512, 512));
        assert!(pixels.allows(1024, 1024));
    }

    #[test]
    fn a_rule_describes_itself() {
        let rule = SizeRule {
            min_side: Some(256),
            max_side: Some(1440),
            multiple_of: Some(32),
            ..SizeRule::default()
        };
        assert_eq!(
            rule.to_string(),
            "any WxH with sides 256–1440 px, multiples of 32"
        );
    }
}
