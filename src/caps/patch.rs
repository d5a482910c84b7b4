//! Capabilities as written: one "patch" type per operation whose every key is optional, so the same
//! types read a family, a template it extends, and a model's `capabilities:` override in the
//! config. Patches merge (a later one's keys win; `sizes` and the `*_limit` mappings merge key by
//! key) and only the merged result is checked and built (`caps::check`).
//!
//! Unknown keys are not refused by serde here but collected with their paths by the caller
//! (`serde_ignored`), so every one of them is reported, not only the first.

use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::schema::Unit;

/// The three kinds of capabilities (the operation a family serves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Speech,
    Images,
    Rerank,
}

impl Kind {
    pub(crate) const NAMES: &'static [&'static str] = &["speech", "images", "rerank"];

    pub(crate) fn parse(s: &str) -> Option<Kind> {
        match s {
            "speech" => Some(Kind::Speech),
            "images" => Some(Kind::Images),
            "rerank" => Some(Kind::Rerank),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Speech => "speech",
            Kind::Images => "images",
            Kind::Rerank => "rerank",
        }
    }
}

/// `{max, unit}`: the longest text a field may hold.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct LimitPatch {
    pub max: Option<usize>,
    pub unit: Option<Unit>,
}

impl LimitPatch {
    fn merge(&mut self, over: LimitPatch) {
        set(&mut self.max, over.max);
        set(&mut self.unit, over.unit);
    }
}

/// `sizes`: a list (`[1024x1024, auto]`), or a mapping with a `list` and/or size-rule bounds.
/// Aspect ratios stay text here so the check can name a malformed one.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct SizesPatch {
    pub list: Option<Vec<String>>,
    pub min_side: Option<u32>,
    pub max_side: Option<u32>,
    pub multiple_of: Option<u32>,
    pub min_pixels: Option<u64>,
    pub max_pixels: Option<u64>,
    pub min_aspect_ratio: Option<String>,
    pub max_aspect_ratio: Option<String>,
    /// Whether `list` was written as the short form (`sizes: [...]`), so errors name its entries
    /// `sizes[i]` rather than `sizes.list[i]`, as the author wrote them.
    #[serde(skip)]
    pub short_form: bool,
}

impl SizesPatch {
    fn merge(&mut self, over: SizesPatch) {
        if over.list.is_some() {
            self.short_form = over.short_form;
        }
        set(&mut self.list, over.list);
        set(&mut self.min_side, over.min_side);
        set(&mut self.max_side, over.max_side);
        set(&mut self.multiple_of, over.multiple_of);
        set(&mut self.min_pixels, over.min_pixels);
        set(&mut self.max_pixels, over.max_pixels);
        set(&mut self.min_aspect_ratio, over.min_aspect_ratio);
        set(&mut self.max_aspect_ratio, over.max_aspect_ratio);
    }

    /// Whether any rule bound is set.
    pub(super) fn has_rule(&self) -> bool {
        self.min_side.is_some()
            || self.max_side.is_some()
            || self.multiple_of.is_some()
            || self.min_pixels.is_some()
            || self.max_pixels.is_some()
            || self.min_aspect_ratio.is_some()
            || self.max_aspect_ratio.is_some()
    }
}

/// `sizes` accepts either form; a hand-written visitor rather than `#[serde(untagged)]`, whose
/// "did not match any variant" would hide which key was wrong.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sizes(pub SizesPatch);

impl<'de> Deserialize<'de> for Sizes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Sizes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of sizes or a mapping of `list` and size-rule bounds")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Sizes, A::Error> {
                let list = Vec::<String>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Sizes(SizesPatch {
                    list: Some(list),
                    short_form: true,
                    ..SizesPatch::default()
                }))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Sizes, A::Error> {
                SizesPatch::deserialize(de::value::MapAccessDeserializer::new(map)).map(Sizes)
            }
        }
        d.deserialize_any(V)
    }
}

/// `aspect_ratios`: a mapping `W:H → size`, kept in the order written (the first ratio meaning a
/// size is the one adapters send for it, and error messages list them in this order).
#[derive(Debug, Clone, Default)]
pub(crate) struct Pairs(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of aspect ratio (W:H) to size")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    pairs.push((k, v));
                }
                Ok(Pairs(pairs))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct SpeechPatch {
    pub formats: Option<Vec<String>>,
    pub speeds: Option<Vec<f64>>,
    pub instructions: Option<bool>,
    pub sse_formats: Option<Vec<String>>,
    pub input_limit: Option<LimitPatch>,
    pub input_token_limit: Option<LimitPatch>,
    pub default_voice: Option<String>,
    pub voices: Option<Vec<String>>,
    pub custom_voices: Option<bool>,
    pub native_fields: Option<Vec<String>>,
}

impl SpeechPatch {
    fn merge(&mut self, over: SpeechPatch) {
        set(&mut self.formats, over.formats);
        set(&mut self.speeds, over.speeds);
        set(&mut self.instructions, over.instructions);
        set(&mut self.sse_formats, over.sse_formats);
        merge_limit(&mut self.input_limit, over.input_limit);
        merge_limit(&mut self.input_token_limit, over.input_token_limit);
        set(&mut self.default_voice, over.default_voice);
        set(&mut self.voices, over.voices);
        set(&mut self.custom_voices, over.custom_voices);
        set(&mut self.native_fields, over.native_fields);
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ImagePatch {
    pub sizes: Option<Sizes>,
    pub default_size: Option<String>,
    pub aspect_ratios: Option<Pairs>,
    pub qualities: Option<Vec<String>>,
    pub default_quality: Option<String>,
    pub max_n: Option<u64>,
    pub per_call_n: Option<u64>,
    pub output_formats: Option<Vec<String>>,
    pub default_output_format: Option<String>,
    pub negative_prompt: Option<bool>,
    pub reference_image: Option<bool>,
    pub max_images: Option<u64>,
    pub image_required: Option<bool>,
    pub strength: Option<bool>,
    pub mask: Option<bool>,
    pub watermark: Option<bool>,
    pub backgrounds: Option<Vec<String>>,
    pub style_presets: Option<Vec<String>>,
    pub extra_body_keys: Option<Vec<String>>,
    pub prompt_limit: Option<LimitPatch>,
    pub native_fields: Option<Vec<String>>,
}

impl ImagePatch {
    fn merge(&mut self, over: ImagePatch) {
        match (&mut self.sizes, over.sizes) {
            (Some(base), Some(over)) => base.0.merge(over.0),
            (base, over) => set(base, over),
        }
        set(&mut self.default_size, over.default_size);
        set(&mut self.aspect_ratios, over.aspect_ratios);
        set(&mut self.qualities, over.qualities);
        set(&mut self.default_quality, over.default_quality);
        set(&mut self.max_n, over.max_n);
        set(&mut self.per_call_n, over.per_call_n);
        set(&mut self.output_formats, over.output_formats);
        set(&mut self.default_output_format, over.default_output_format);
        set(&mut self.negative_prompt, over.negative_prompt);
        set(&mut self.reference_image, over.reference_image);
        set(&mut self.max_images, over.max_images);
        set(&mut self.image_required, over.image_required);
        set(&mut self.strength, over.strength);
        set(&mut self.mask, over.mask);
        set(&mut self.watermark, over.watermark);
        set(&mut self.backgrounds, over.backgrounds);
        set(&mut self.style_presets, over.style_presets);
        set(&mut self.extra_body_keys, over.extra_body_keys);
        merge_limit(&mut self.prompt_limit, over.prompt_limit);
        set(&mut self.native_fields, over.native_fields);
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RerankPatch {
    pub max_documents: Option<usize>,
    pub query_limit: Option<LimitPatch>,
    pub document_limit: Option<LimitPatch>,
    pub native_fields: Option<Vec<String>>,
}

impl RerankPatch {
    fn merge(&mut self, over: RerankPatch) {
        set(&mut self.max_documents, over.max_documents);
        merge_limit(&mut self.query_limit, over.query_limit);
        merge_limit(&mut self.document_limit, over.document_limit);
        set(&mut self.native_fields, over.native_fields);
    }
}

/// One entry's keys, of its operation's type.
#[derive(Debug, Clone)]
pub(crate) enum Patch {
    Speech(SpeechPatch),
    // Boxed: the image patch is several times the size of the others.
    Images(Box<ImagePatch>),
    Rerank(RerankPatch),
}

impl Patch {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Patch::Speech(_) => Kind::Speech,
            Patch::Images(_) => Kind::Images,
            Patch::Rerank(_) => Kind::Rerank,
        }
    }

    /// `over`'s keys on top of this one's. Patches of different kinds never meet (the loader
    /// checks that an entry extends one of its own operation), so a mismatch changes nothing.
    pub(crate) fn merge(&mut self, over: Patch) {
        match (self, over) {
            (Patch::Speech(base), Patch::Speech(over)) => base.merge(over),
            (Patch::Images(base), Patch::Images(over)) => base.merge(*over),
            (Patch::Rerank(base), Patch::Rerank(over)) => base.merge(over),
            _ => {}
        }
    }

    /// Read `value` as a patch of `kind`; problems (unknown keys included, each by name) are pushed
    /// onto `errors` as `{at}.{path}: …`.
    pub(crate) fn read(
        kind: Kind,
        value: serde_yaml::Value,
        at: &str,
        errors: &mut Vec<String>,
    ) -> Option<Patch> {
        match kind {
            Kind::Speech => read(value, at, errors).map(Patch::Speech),
            Kind::Images => read(value, at, errors).map(|p| Patch::Images(Box::new(p))),
            Kind::Rerank => read(value, at, errors).map(Patch::Rerank),
        }
    }
}

fn read<T: serde::de::DeserializeOwned>(
    value: serde_yaml::Value,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<T> {
    let mut unknown = Vec::new();
    let parsed: Result<T, _> =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut |path| {
            unknown.push(format!("{}: unknown key", join(at, &ignored_path(&path))))
        }));
    errors.extend(unknown);
    match parsed {
        Ok(t) => Some(t),
        Err(e) => {
            let path = e.path().to_string();
            // serde_path_to_error writes the root as `.`.
            let path = if path == "." { String::new() } else { path };
            errors.push(format!("{}: {}", join(at, &path), e.inner()));
            None
        }
    }
}

/// `serde_ignored`'s path in the config's spelling (`sizes.bogus`, `voices[2]`): its own `Display`
/// writes sequence indexes as `.2` and an `Option`'s content as `?`.
fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        Path::Map { parent, key } => join(&ignored_path(parent), key),
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_path(parent),
    }
}

/// `at.path`, or whichever is not empty.
pub(crate) fn join(at: &str, path: &str) -> String {
    match (at.is_empty(), path.is_empty()) {
        (_, true) => at.to_string(),
        (true, false) => path.to_string(),
        (false, false) if path.starts_with('[') => format!("{at}{path}"),
        (false, false) => format!("{at}.{path}"),
    }
}

fn set<T>(base: &mut Option<T>, over: Option<T>) {
    if over.is_some() {
        *base = over;
    }
}

fn merge_limit(base: &mut Option<LimitPatch>, over: Option<LimitPatch>) {
    match (base.as_mut(), over) {
        (Some(b), Some(o)) => b.merge(o),
        (None, Some(o)) => *base = Some(o),
        (_, None) => {}
    }
}
