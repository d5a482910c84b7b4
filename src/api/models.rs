//! `GET /api/v1/models`: the public shape of the model list. It is OpenAI's list
//! (`{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}, …]}`), so the
//! `models.list()` and `models.retrieve()` of OpenAI's SDKs read it, with the gateway's own fields
//! alongside each model: its `operation`, `family`, whether it is `available`, its `targets`
//! (provider kind and native model: never an account's name, key or URL) and its `capabilities`;
//! for a model being retired, its `lifecycle` (dates, replacement, source; also per target) and
//! `successor`; each target's `price` (its units, rates, currency, source and date; `null` when
//! unpriced).
//!
//! The capabilities are rendered from the catalog's own values, the ones validation checks
//! requests against, under the names `caps/families.yaml` and a model's `capabilities:` override
//! use; so the list cannot say a model takes what the gateway then refuses.
//!
//! The catalog does not change while it serves, so [`Listing::build`] renders it once into bytes
//! and answering is a lookup. Whoever builds a catalog builds its listing with it.

use std::collections::HashMap;

use bytes::Bytes;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::caps::lifecycle::Lifecycle;
use crate::caps::prices::Price;
use crate::caps::schema::MAX_N;
use crate::caps::{Caps, ImageCaps, Limit, RerankCaps, SizeRule, SpeechCaps, Unit};
use crate::catalog::{Catalog, Model};

/// A catalog's model list, rendered: the whole list and each model's own object, as JSON bytes.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    list: Bytes,
    by_id: HashMap<String, Bytes>,
}

impl Listing {
    /// Render `catalog`. `created` is every model's `created` (Unix seconds): the gateway knows no
    /// model's release date, so it is when the configuration was loaded.
    pub(crate) fn build(catalog: &Catalog, created: i64) -> Result<Listing, String> {
        let mut list = Vec::from(&b"{\"object\":\"list\",\"data\":["[..]);
        let mut by_id = HashMap::new();
        for (i, model) in catalog.models().into_iter().enumerate() {
            let entry = serde_json::to_vec(&Entry::of(model, created))
                .map_err(|e| format!("rendering model {} for the model list: {e}", model.name))?;
            if i > 0 {
                list.push(b',');
            }
            list.extend_from_slice(&entry);
            by_id.insert(model.name.clone(), Bytes::from(entry));
        }
        list.extend_from_slice(b"]}");
        Ok(Listing {
            list: Bytes::from(list),
            by_id,
        })
    }

    /// The whole list (`GET /api/v1/models`).
    pub(crate) fn list(&self) -> Bytes {
        self.list.clone()
    }

    /// One model's object (`GET /api/v1/models/{id}`), as it appears in the list.
    pub(crate) fn get(&self, id: &str) -> Option<Bytes> {
        self.by_id.get(id).cloned()
    }
}

/// One model of the list.
#[derive(Serialize)]
struct Entry<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    /// The provider kind of the model's first target (OpenAI's field names the model's owner).
    owned_by: &'a str,
    operation: &'static str,
    family: &'static str,
    /// Whether a request can be served now: some target's provider has its credentials. A model
    /// without one is listed (a request names it and gets `503 model_unavailable`, not an unknown
    /// model), so a client can show it as unavailable.
    available: bool,
    targets: Vec<TargetView<'a>>,
    capabilities: CapsView,
    /// The model's deprecation and shutdown (when every target has them): when it is deprecated
    /// (the last target's deprecation), shut down (the last target's shutdown), the provider's
    /// recommended replacement and the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: Option<LifecycleView<'a>>,
    /// The public model that serves this one's requests once it is shut down.
    #[serde(skip_serializing_if = "Option::is_none")]
    successor: Option<&'a str>,
}

/// A lifecycle, as the list shows it: dates as `YYYY-MM-DD` (UTC).
#[derive(Serialize)]
struct LifecycleView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    deprecated: Option<String>,
    /// Absent while the provider has announced no shutdown date (deprecated only).
    #[serde(skip_serializing_if = "Option::is_none")]
    shutdown: Option<String>,
    /// The provider's own model ids, best first; empty when it names none (then `note` says why).
    replacement: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    /// The operator says the account still serves it past `shutdown`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    still_available: bool,
}

impl<'a> LifecycleView<'a> {
    fn of(l: &'a Lifecycle) -> LifecycleView<'a> {
        LifecycleView {
            deprecated: l.deprecated.map(|d| d.to_string()),
            shutdown: l.shutdown.map(|d| d.to_string()),
            replacement: &l.replacement,
            note: l.note.as_deref(),
            source: l.source.as_deref(),
            still_available: l.still_available,
        }
    }
}

impl<'a> Entry<'a> {
    fn of(model: &'a Model, created: i64) -> Entry<'a> {
        // Two accounts of one kind serving one native model are one public fact, listed once.
        let mut targets: Vec<TargetView<'a>> = Vec::with_capacity(model.targets.len());
        for t in &model.targets {
            let enabled = t.provider.enabled();
            let price = t.price.as_deref();
            match targets.iter_mut().find(|v| {
                v.provider == t.provider.kind && v.model == t.native_model && v.price == price
            }) {
                Some(seen) => seen.available |= enabled,
                None => targets.push(TargetView {
                    provider: &t.provider.kind,
                    model: &t.native_model,
                    available: enabled,
                    lifecycle: t.lifecycle.as_deref().map(LifecycleView::of),
                    price,
                }),
            }
        }
        Entry {
            id: &model.name,
            object: "model",
            created,
            owned_by: targets.first().map(|t| t.provider).unwrap_or("switchyard"),
            operation: model.operation().as_str(),
            family: model.caps.family(),
            available: targets.iter().any(|t| t.available),
            targets,
            capabilities: CapsView(model.caps),
            lifecycle: model.lifecycle.summary.as_ref().map(LifecycleView::of),
            successor: model.lifecycle.successor.as_deref(),
        }
    }
}

/// Where a model is served from, as far as a caller may know.
#[derive(Serialize)]
struct TargetView<'a> {
    /// The provider's kind (`openai`, `cohere`, …).
    provider: &'a str,
    /// The provider's name for the model.
    model: &'a str,
    available: bool,
    /// Its provider's deprecation and shutdown of the model, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: Option<LifecycleView<'a>>,
    /// What the native model costs at this provider, in the units it bills (`caps::prices`):
    /// always present, `null` when no price is known or the operator declared it unpriced — never
    /// a price of 0. Amounts are exact decimal strings.
    price: Option<&'a Price>,
}

/// A model's capabilities, under the capability table's names.
struct CapsView(Caps);

impl Serialize for CapsView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Caps::Speech(c) => SpeechView::of(c).serialize(s),
            Caps::Images(c) => ImagesView::of(c).serialize(s),
            Caps::Rerank(c) => RerankView::of(c).serialize(s),
        }
    }
}

#[derive(Serialize)]
struct LimitView {
    max: usize,
    unit: Unit,
}

impl From<Limit> for LimitView {
    fn from(l: Limit) -> LimitView {
        LimitView {
            max: l.max,
            unit: l.unit,
        }
    }
}

#[derive(Serialize)]
struct SpeechView {
    /// Empty: any voice name (the provider judges it).
    voices: &'static [&'static str],
    /// `null`: none; a request must name its voice.
    default_voice: Option<&'static str>,
    custom_voices: bool,
    formats: &'static [&'static str],
    sse_formats: &'static [&'static str],
    speeds: &'static [f64],
    instructions: bool,
    input_limit: LimitView,
    /// A second bound on `input`, in tokens (omitted when there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    input_token_limit: Option<LimitView>,
    native_fields: &'static [&'static str],
}

impl SpeechView {
    fn of(c: &'static SpeechCaps) -> SpeechView {
        SpeechView {
            voices: c.voices,
            default_voice: c.default_voice,
            custom_voices: c.custom_voices,
            formats: c.formats,
            sse_formats: c.sse_formats,
            speeds: c.speeds,
            instructions: c.instructions,
            input_limit: c.input_limit.into(),
            input_token_limit: c.input_token_limit.map(Into::into),
            native_fields: c.native_fields,
        }
    }
}

#[derive(Serialize)]
struct ImagesView {
    sizes: &'static [&'static str],
    /// `null`: only the listed sizes.
    size_rule: Option<RuleView>,
    default_size: &'static str,
    aspect_ratios: Ratios,
    qualities: &'static [&'static str],
    default_quality: Option<&'static str>,
    max_n: u64,
    output_formats: &'static [&'static str],
    default_output_format: &'static str,
    negative_prompt: bool,
    reference_image: bool,
    /// 0 when the model takes no reference image.
    max_images: u64,
    image_required: bool,
    strength: bool,
    mask: bool,
    watermark: bool,
    backgrounds: &'static [&'static str],
    style_presets: &'static [&'static str],
    extra_body_keys: &'static [&'static str],
    prompt_limit: LimitView,
    native_fields: &'static [&'static str],
}

impl ImagesView {
    fn of(c: &'static ImageCaps) -> ImagesView {
        ImagesView {
            sizes: c.sizes,
            size_rule: c.size_rule.map(RuleView),
            default_size: c.default_size,
            aspect_ratios: Ratios(c.aspect_ratios),
            qualities: c.qualities,
            default_quality: c.default_quality,
            // Validation refuses more than the public bound whatever a family says.
            max_n: c.max_n.min(MAX_N),
            output_formats: c.output_formats,
            default_output_format: c.default_output_format,
            negative_prompt: c.negative_prompt,
            reference_image: c.reference_image,
            max_images: if c.reference_image { c.max_images } else { 0 },
            image_required: c.image_required,
            strength: c.strength,
            mask: c.mask,
            watermark: c.watermark,
            backgrounds: c.backgrounds,
            style_presets: c.style_presets,
            extra_body_keys: c.extra_body_keys,
            prompt_limit: c.prompt_limit.into(),
            native_fields: c.native_fields,
        }
    }
}

/// `aspect_ratios` as an object `{"W:H": "size"}` in the table's order (the order error messages
/// list them in).
struct Ratios(&'static [(&'static str, &'static str)]);

impl Serialize for Ratios {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (ratio, size) in self.0 {
            m.serialize_entry(ratio, size)?;
        }
        m.end()
    }
}

/// A size rule: only the bounds it sets, aspect ratios as `W:H`.
struct RuleView(SizeRule);

impl Serialize for RuleView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = &self.0;
        let mut m = s.serialize_map(None)?;
        for (key, value) in [
            ("min_side", r.min_side.map(u64::from)),
            ("max_side", r.max_side.map(u64::from)),
            ("multiple_of", r.multiple_of.map(u64::from)),
            ("min_pixels", r.min_pixels),
            ("max_pixels", r.max_pixels),
        ] {
            if let Some(v) = value {
                m.serialize_entry(key, &v)?;
            }
        }
        for (key, value) in [
            ("min_aspect_ratio", r.min_aspect_ratio),
            ("max_aspect_ratio", r.max_aspect_ratio),
        ] {
            if let Some(v) = value {
                m.serialize_entry(key, &v.to_string())?;
            }
        }
        m.end()
    }
}

#[derive(Serialize)]
struct RerankView {
    max_documents: usize,
    query_limit: LimitView,
    #[serde(skip_serializing_if = "Option::is_none")]
    document_limit: Option<LimitView>,
    native_fields: &'static [&'static str],
}

impl RerankView {
    fn of(c: &'static RerankCaps) -> RerankView {
        RerankView {
            max_documents: c.max_documents,
            query_limit: c.query_limit.into(),
            document_limit: c.document_limit.map(Into::into),
            native_fields: c.native_fields,
        }
    }
}
