//! Checking a merged patch (a family with everything it inherits, plus a model's overrides) and
//! building the runtime capabilities from it.
//!
//! Every problem is reported with its key path (`families.flux.sizes[2]: …`,
//! `switchyard.models.x.capabilities.max_n: …`), all of them rather than the first. Values are
//! checked against the public API's value sets, so a typo in a list (`jpeg` for `jpg`) is an error
//! at start rather than a value no request can ever match.
//!
//! Only a patch without problems is built, and building leaks its values (see `caps::load` for
//! why), so nothing is leaked for a table or an override that is refused.

use std::collections::HashSet;

use super::patch::{ImagePatch, LimitPatch, Pairs, Patch, RerankPatch, SizesPatch, SpeechPatch};
use super::schema::{
    parse_size, Caps, ImageCaps, Limit, Ratio, RerankCaps, SizeRule, SpeechCaps, Unit, BACKGROUNDS,
    MAX_IMAGES, MAX_N, OUTPUT_FORMATS, QUALITIES, SPEECH_FORMATS, SPEEDS,
};

/// Check `patch` and, when neither it nor anything before it (`errors` is not empty) has a problem,
/// build the capabilities of `family` from it. Problems are pushed onto `errors`, each path
/// starting with `at`.
pub(crate) fn build(
    patch: &Patch,
    family: &'static str,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<Caps> {
    let mut c = Checker { at, errors };
    match patch {
        Patch::Speech(p) => c.speech(p, family).map(|s| Caps::Speech(leak(s))),
        Patch::Images(p) => c.images(p, family).map(|s| Caps::Images(leak(s))),
        Patch::Rerank(p) => c.rerank(p, family).map(|s| Caps::Rerank(leak(s))),
    }
}

struct Checker<'a> {
    at: &'a str,
    errors: &'a mut Vec<String>,
}

impl Checker<'_> {
    /// Whether there is any problem, this patch's or an earlier one's: then the table or the
    /// configuration is refused, so nothing is built and nothing leaked; the checks still run, so
    /// every problem is reported.
    fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    fn error(&mut self, key: &str, message: impl std::fmt::Display) {
        self.errors
            .push(format!("{}: {message}", super::patch::join(self.at, key)));
    }

    /// A key every family must have, its own or inherited.
    fn need<'p, T>(&mut self, key: &str, value: &'p Option<T>) -> Option<&'p T> {
        if value.is_none() {
            self.error(key, "missing (set it, or inherit it with `extends`)");
        }
        value.as_ref()
    }

    /// A list of names: none blank, none twice, each in `allowed` when given (`what` names the
    /// value set in the message), and at least one when `non_empty`.
    fn names(
        &mut self,
        key: &str,
        values: &[String],
        allowed: Option<(&[&str], &str)>,
        non_empty: bool,
    ) {
        if non_empty && values.is_empty() {
            self.error(key, "must list at least one value");
        }
        let mut seen = HashSet::new();
        for (i, v) in values.iter().enumerate() {
            let at = format!("{key}[{i}]");
            if v.trim().is_empty() {
                self.error(&at, "must not be empty");
            } else if let Some((set, what)) = allowed.filter(|(set, _)| !set.contains(&v.as_str()))
            {
                self.error(
                    &at,
                    format!("`{v}` is not {what} (one of {})", set.join(", ")),
                );
            } else if !seen.insert(v.as_str()) {
                self.error(&at, format!("`{v}` is listed twice"));
            }
        }
    }

    fn limit(&mut self, key: &str, value: &Option<LimitPatch>) -> Option<Limit> {
        let l = self.need(key, value)?;
        let max = *self.need(&format!("{key}.max"), &l.max)?;
        let unit = *self.need(&format!("{key}.unit"), &l.unit)?;
        if max == 0 {
            self.error(&format!("{key}.max"), "must be at least 1");
        }
        Some(Limit { max, unit })
    }

    fn speech(&mut self, p: &SpeechPatch, family: &'static str) -> Option<SpeechCaps> {
        let formats = self.need("formats", &p.formats);
        let speeds = self.need("speeds", &p.speeds);
        let instructions = self.need("instructions", &p.instructions);
        let sse_formats = self.need("sse_formats", &p.sse_formats);
        let input_limit = self.limit("input_limit", &p.input_limit);
        let input_token_limit = match &p.input_token_limit {
            Some(_) => self.limit("input_token_limit", &p.input_token_limit),
            None => None,
        };
        if input_token_limit.is_some_and(|l| l.unit != Unit::Tokens) {
            self.error("input_token_limit.unit", "must be tokens");
        }
        // Optional: a family whose provider has no voice every account can use names none, and
        // the configuration must (`config`'s check of each model).
        let default_voice = p.default_voice.as_ref();
        let native_fields = self.need("native_fields", &p.native_fields);
        let voices = p.voices.as_deref().unwrap_or_default();

        self.speech_formats(formats, sse_formats);
        if let Some(speeds) = speeds {
            self.speeds(speeds);
        }
        self.names("voices", voices, None, false);
        if let Some(v) = default_voice {
            if v.trim().is_empty() {
                self.error("default_voice", "must not be empty");
            } else if !voices.is_empty() && !voices.contains(v) {
                self.error(
                    "default_voice",
                    format!("`{v}` is not one of the voices ({})", voices.join(", ")),
                );
            }
        }
        if let Some(n) = native_fields {
            self.names("native_fields", n, None, false);
        }
        if self.failed() {
            return None;
        }
        Some(SpeechCaps {
            family,
            formats: strs(formats?),
            speeds: leak_slice(speeds?.clone()),
            instructions: *instructions?,
            sse_formats: strs(sse_formats?),
            input_limit: input_limit?,
            input_token_limit,
            default_voice: default_voice.map(|v| string(v.as_str())),
            voices: strs(voices),
            custom_voices: p.custom_voices.unwrap_or(false),
            native_fields: strs(native_fields?),
        })
    }

    /// `formats`: public formats, at least one; `sse_formats`: some of them.
    fn speech_formats(&mut self, formats: Option<&Vec<String>>, sse_formats: Option<&Vec<String>>) {
        if let Some(formats) = formats {
            self.names(
                "formats",
                formats,
                Some((SPEECH_FORMATS, "a public response_format")),
                true,
            );
        }
        if let (Some(sse), Some(formats)) = (sse_formats, formats) {
            let offered: Vec<&str> = formats.iter().map(String::as_str).collect();
            self.names(
                "sse_formats",
                sse,
                Some((&offered, "one of the family's formats")),
                false,
            );
        }
    }

    /// `speeds`: public speeds, at least one, each once.
    fn speeds(&mut self, speeds: &[f64]) {
        if speeds.is_empty() {
            self.error("speeds", "must list at least one value");
        }
        for (i, s) in speeds.iter().enumerate() {
            if !SPEEDS.contains(s) {
                let public: Vec<String> = SPEEDS.iter().map(f64::to_string).collect();
                self.error(
                    &format!("speeds[{i}]"),
                    format!("{s} is not a public speed (one of {})", public.join(", ")),
                );
            } else if speeds[..i].contains(s) {
                self.error(&format!("speeds[{i}]"), format!("{s} is listed twice"));
            }
        }
    }

    fn rerank(&mut self, p: &RerankPatch, family: &'static str) -> Option<RerankCaps> {
        let max_documents = self.need("max_documents", &p.max_documents).copied();
        let query_limit = self.limit("query_limit", &p.query_limit);
        // Optional: only where the provider refuses (or cuts) a long document and says how long.
        let document_limit = match &p.document_limit {
            Some(_) => self.limit("document_limit", &p.document_limit),
            None => None,
        };
        let native_fields = self.need("native_fields", &p.native_fields);
        if max_documents == Some(0) {
            self.error("max_documents", "must be at least 1");
        }
        if let Some(n) = native_fields {
            self.names("native_fields", n, None, false);
        }
        if self.failed() {
            return None;
        }
        Some(RerankCaps {
            family,
            max_documents: max_documents?,
            query_limit: query_limit?,
            document_limit,
            native_fields: strs(native_fields?),
        })
    }

    /// The size rule in `s`, checked; `None` when it sets no bound (or a bound is malformed, which
    /// is reported).
    fn size_rule(&mut self, s: &SizesPatch) -> Option<SizeRule> {
        if !s.has_rule() {
            return None;
        }
        let mut ratio = |key: &str, v: &Option<String>| -> Option<Ratio> {
            let text = v.as_ref()?;
            let r = Ratio::parse(text);
            if r.is_none() {
                self.error(
                    &format!("sizes.{key}"),
                    format!("`{text}` is not an aspect ratio W:H (e.g. 21:9)"),
                );
            }
            r
        };
        let rule = SizeRule {
            min_side: s.min_side,
            max_side: s.max_side,
            multiple_of: s.multiple_of,
            min_pixels: s.min_pixels,
            max_pixels: s.max_pixels,
            min_aspect_ratio: ratio("min_aspect_ratio", &s.min_aspect_ratio),
            max_aspect_ratio: ratio("max_aspect_ratio", &s.max_aspect_ratio),
        };
        for (key, v) in [
            ("min_side", rule.min_side),
            ("max_side", rule.max_side),
            ("multiple_of", rule.multiple_of),
        ] {
            if v == Some(0) {
                self.error(&format!("sizes.{key}"), "must be at least 1");
            }
        }
        if rule.min_pixels == Some(0) || rule.max_pixels == Some(0) {
            let key = if rule.min_pixels == Some(0) {
                "min_pixels"
            } else {
                "max_pixels"
            };
            self.error(&format!("sizes.{key}"), "must be at least 1");
        }
        if let (Some(lo), Some(hi)) = (rule.min_side, rule.max_side) {
            if lo > hi {
                self.error(
                    "sizes.min_side",
                    format!("{lo} is larger than max_side {hi}"),
                );
            }
        }
        if let (Some(lo), Some(hi)) = (rule.min_pixels, rule.max_pixels) {
            if lo > hi {
                self.error(
                    "sizes.min_pixels",
                    format!("{lo} is larger than max_pixels {hi}"),
                );
            }
        }
        if let (Some(lo), Some(hi)) = (rule.min_aspect_ratio, rule.max_aspect_ratio) {
            if !lo.no_wider_than(hi) {
                self.error(
                    "sizes.min_aspect_ratio",
                    format!("{lo} is wider than max_aspect_ratio {hi}"),
                );
            }
        }
        // Without an upper bound a rule would let a caller ask for any size at all; every provider
        // documents one.
        if rule.max_side.is_none() && rule.max_pixels.is_none() {
            self.error(
                "sizes",
                "a size rule needs an upper bound: max_side or max_pixels",
            );
        }
        Some(rule)
    }

    fn images(&mut self, p: &ImagePatch, family: &'static str) -> Option<ImageCaps> {
        let n = self.image_needs(p);
        let empty = Vec::new();
        let list = n.sizes.and_then(|s| s.list.as_ref()).unwrap_or(&empty);
        let rule = n.sizes.and_then(|s| self.size_rule(s));
        if let Some(s) = n.sizes {
            self.size_list(s, list, rule);
        }
        self.sizes_accepted(&n, list, rule);
        self.image_values(p, &n);
        let max_images = self.reference_images(p, &n);
        if let Some(b) = n.backgrounds {
            self.names(
                "backgrounds",
                b,
                Some((BACKGROUNDS, "a public background")),
                false,
            );
        }
        for (key, v) in [
            ("style_presets", n.style_presets),
            ("extra_body_keys", n.extra_body_keys),
            ("native_fields", n.native_fields),
        ] {
            if let Some(v) = v {
                self.names(key, v, None, false);
            }
        }

        if self.failed() {
            return None;
        }
        image_caps(p, family, n, (list, rule), max_images)
    }

    /// The keys every image family must have, each reported when missing.
    fn image_needs<'p>(&mut self, p: &'p ImagePatch) -> ImageNeeds<'p> {
        ImageNeeds {
            sizes: self.need("sizes", &p.sizes).map(|s| &s.0),
            default_size: self.need("default_size", &p.default_size),
            aspect_ratios: self.need("aspect_ratios", &p.aspect_ratios),
            qualities: self.need("qualities", &p.qualities),
            max_n: self.need("max_n", &p.max_n).copied(),
            per_call_n: self.need("per_call_n", &p.per_call_n).copied(),
            output_formats: self.need("output_formats", &p.output_formats),
            negative_prompt: self.need("negative_prompt", &p.negative_prompt).copied(),
            reference_image: self.need("reference_image", &p.reference_image).copied(),
            image_required: self.need("image_required", &p.image_required).copied(),
            strength: self.need("strength", &p.strength).copied(),
            mask: self.need("mask", &p.mask).copied(),
            watermark: self.need("watermark", &p.watermark).copied(),
            backgrounds: self.need("backgrounds", &p.backgrounds),
            style_presets: self.need("style_presets", &p.style_presets),
            extra_body_keys: self.need("extra_body_keys", &p.extra_body_keys),
            prompt_limit: self.limit("prompt_limit", &p.prompt_limit),
            native_fields: self.need("native_fields", &p.native_fields),
        }
    }

    /// `sizes`: something accepted (a list or a rule), each listed size well formed and once.
    fn size_list(&mut self, s: &SizesPatch, list: &[String], rule: Option<SizeRule>) {
        let key = |i: usize| {
            if s.short_form {
                format!("sizes[{i}]")
            } else {
                format!("sizes.list[{i}]")
            }
        };
        if list.is_empty() && rule.is_none() {
            self.error(
                "sizes",
                "accepts no size: list at least one or give a size rule",
            );
        }
        for (i, v) in list.iter().enumerate() {
            if !is_size(v) {
                self.error(
                    &key(i),
                    format!("`{v}` is neither WxH in pixels (e.g. 1024x768) nor a keyword of letters and digits (e.g. 2K, 1.5K, auto)"),
                );
            } else if list[..i].contains(v) {
                self.error(&key(i), format!("`{v}` is listed twice"));
            }
        }
    }

    /// `default_size` and each of `aspect_ratios`' sizes: sizes the family accepts.
    fn sizes_accepted(&mut self, n: &ImageNeeds<'_>, list: &[String], rule: Option<SizeRule>) {
        let accepted = |s: &str| {
            list.iter().any(|l| l == s)
                || rule.is_some_and(|r| parse_size(s).is_some_and(|(w, h)| r.allows(w, h)))
        };
        let explain = || match rule {
            Some(r) if list.is_empty() => r.to_string(),
            Some(r) => format!("{}, or {r}", list.join(", ")),
            None => list.join(", "),
        };
        if let (Some(d), Some(_)) = (n.default_size, n.sizes) {
            if !accepted(d) {
                self.error(
                    "default_size",
                    format!("`{d}` is not a size the family accepts ({})", explain()),
                );
            }
        }
        if let (Some(ratios), Some(_)) = (n.aspect_ratios, n.sizes) {
            for (k, v) in &ratios.0 {
                let at = format!("aspect_ratios.{k}");
                if Ratio::parse(k).is_none() {
                    self.error(&at, format!("`{k}` is not an aspect ratio W:H (e.g. 16:9)"));
                } else if !accepted(v) {
                    self.error(
                        &at,
                        format!("`{v}` is not a size the family accepts ({})", explain()),
                    );
                }
            }
        }
    }

    /// `qualities` and `output_formats` (public values; their defaults among them), `max_n` and
    /// `per_call_n` in bounds.
    fn image_values(&mut self, p: &ImagePatch, n: &ImageNeeds<'_>) {
        if let Some(q) = n.qualities {
            self.names("qualities", q, Some((QUALITIES, "a public quality")), false);
            if let Some(d) = &p.default_quality {
                if !q.contains(d) {
                    self.error(
                        "default_quality",
                        format!("`{d}` is not one of the qualities ({})", q.join(", ")),
                    );
                }
            }
        }
        if let Some(n) = n.max_n {
            if n == 0 || n > MAX_N {
                self.error(
                    "max_n",
                    format!("must be from 1 to {MAX_N} (the API's own bound)"),
                );
            }
        }
        if n.per_call_n == Some(0) {
            self.error("per_call_n", "must be at least 1");
        }
        if let Some(f) = n.output_formats {
            self.names(
                "output_formats",
                f,
                Some((OUTPUT_FORMATS, "a public output_format")),
                true,
            );
            if let Some(d) = &p.default_output_format {
                if !f.contains(d) {
                    self.error(
                        "default_output_format",
                        format!("`{d}` is not one of the output_formats ({})", f.join(", ")),
                    );
                }
            }
        }
    }

    /// `max_images` in bounds (one unless the family says it takes more), and what refines a
    /// reference image only with one. The number of reference images taken.
    fn reference_images(&mut self, p: &ImagePatch, n: &ImageNeeds<'_>) -> u64 {
        let max_images = p.max_images.unwrap_or(1);
        if !(1..=MAX_IMAGES).contains(&max_images) {
            self.error(
                "max_images",
                format!(
                    "must be from 1 to {MAX_IMAGES} (OpenAI's bound, the highest any provider has)"
                ),
            );
        }
        if max_images > 1 && n.reference_image == Some(false) {
            self.error("max_images", "needs reference_image: true");
        }
        // These refine a reference image; without one they could never apply.
        if n.reference_image == Some(false) {
            for (key, on) in [
                ("image_required", n.image_required),
                ("strength", n.strength),
                ("mask", n.mask),
            ] {
                if on == Some(true) {
                    self.error(key, "needs reference_image: true");
                }
            }
        }
        max_images
    }
}

/// The keys an image family must have, as [`Checker::image_needs`] found them (`None`: missing,
/// reported).
struct ImageNeeds<'p> {
    sizes: Option<&'p SizesPatch>,
    default_size: Option<&'p String>,
    aspect_ratios: Option<&'p Pairs>,
    qualities: Option<&'p Vec<String>>,
    max_n: Option<u64>,
    per_call_n: Option<u64>,
    output_formats: Option<&'p Vec<String>>,
    negative_prompt: Option<bool>,
    reference_image: Option<bool>,
    image_required: Option<bool>,
    strength: Option<bool>,
    mask: Option<bool>,
    watermark: Option<bool>,
    backgrounds: Option<&'p Vec<String>>,
    style_presets: Option<&'p Vec<String>>,
    extra_body_keys: Option<&'p Vec<String>>,
    prompt_limit: Option<Limit>,
    native_fields: Option<&'p Vec<String>>,
}

/// The image capabilities of a checked patch (`None` only if a key is missing, which was
/// reported), its sizes (`list`, `rule`) checked already.
fn image_caps(
    p: &ImagePatch,
    family: &'static str,
    n: ImageNeeds<'_>,
    (list, rule): (&[String], Option<SizeRule>),
    max_images: u64,
) -> Option<ImageCaps> {
    let output_formats = n.output_formats?;
    // The spec's default `png`, or the family's own first format when it cannot make PNG
    // (labelling a JPEG as PNG would be a lie; failing a request that named none, a surprise).
    let default_output_format = match &p.default_output_format {
        Some(d) => string(d),
        None if output_formats.iter().any(|f| f == "png") => "png",
        None => output_formats.first().map(|f| string(f)).unwrap_or("png"),
    };
    Some(ImageCaps {
        family,
        sizes: strs(list),
        size_rule: rule,
        default_size: string(n.default_size?),
        aspect_ratios: leak_slice(
            n.aspect_ratios?
                .0
                .iter()
                .map(|(k, v)| (string(k), string(v)))
                .collect(),
        ),
        qualities: strs(n.qualities?),
        default_quality: p.default_quality.as_deref().map(string),
        max_n: n.max_n?,
        per_call_n: n.per_call_n?,
        output_formats: strs(output_formats),
        default_output_format,
        negative_prompt: n.negative_prompt?,
        reference_image: n.reference_image?,
        max_images,
        image_required: n.image_required?,
        strength: n.strength?,
        mask: n.mask?,
        watermark: n.watermark?,
        backgrounds: strs(n.backgrounds?),
        style_presets: strs(n.style_presets?),
        extra_body_keys: strs(n.extra_body_keys?),
        prompt_limit: n.prompt_limit?,
        native_fields: strs(n.native_fields?),
    })
}

/// `WxH` in pixels, or a keyword of ASCII letters and digits (`auto`, `2K`, `adaptive`; a dot
/// inside one for a fractional tier, Ark's `1.5K`) that is not a mistyped `WxH` (`1024X768`).
fn is_size(s: &str) -> bool {
    if parse_size(s).is_some() {
        return true;
    }
    let looks_like_pixels =
        s.starts_with(|c: char| c.is_ascii_digit()) && s.contains(['x', 'X', '*', '×']);
    !s.is_empty()
        && !looks_like_pixels
        && !s.starts_with('.')
        && !s.ends_with('.')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.')
}

// The table is loaded once at start and a model's overrides once per configuration load, and
// requests borrow from both for as long as they live (`&'static str` sizes and formats in validated
// requests, `&'static` capabilities in the catalog); leaking each value once keeps those types, and
// so the hot path and the adapters, as they were when the table was Rust statics.

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

fn leak_slice<T>(values: Vec<T>) -> &'static [T] {
    Box::leak(values.into_boxed_slice())
}

fn string(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

fn strs(values: &[String]) -> &'static [&'static str] {
    leak_slice(values.iter().map(|s| string(s)).collect())
}
