//! Models and what they can do.
//!
//! Two things live here. The capability table ([`FAMILIES`]) says, per model family, which values of
//! each public field the family accepts (sizes, qualities, speeds, formats, streaming, instructions…)
//! and which undeclared fields it takes natively; validation reads only this table, so a new model
//! family is one entry. The [`Catalog`] maps each public model name from the config to its family and
//! its ordered targets (provider + native model name).

use std::collections::HashMap;
use std::sync::Arc;

use crate::providers::Provider;

/// The three public operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Speech,
    Images,
    Rerank,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Speech => "speech",
            Operation::Images => "images",
            Operation::Rerank => "rerank",
        }
    }
}

/// What a speech model family accepts.
#[derive(Debug)]
pub struct SpeechCaps {
    /// Public `response_format` values this family can produce.
    pub formats: &'static [&'static str],
    /// Public `speed` values this family can honour.
    pub speeds: &'static [f64],
    pub instructions: bool,
    /// Formats available with `stream_format: sse` (empty: the family cannot stream as SSE).
    pub sse_formats: &'static [&'static str],
    pub max_input_chars: usize,
    /// Voice used when the request names none (a model's config may override it).
    pub default_voice: &'static str,
    /// Fields outside the public spec that the provider takes natively and that pass through verbatim.
    pub native_fields: &'static [&'static str],
}

/// What an image model family accepts.
#[derive(Debug)]
pub struct ImageCaps {
    pub sizes: &'static [&'static str],
    pub default_size: &'static str,
    /// `aspect_ratio` values and the `size` each one means for this family.
    pub aspect_ratios: &'static [(&'static str, &'static str)],
    pub qualities: &'static [&'static str],
    pub max_n: u64,
    pub response_formats: &'static [&'static str],
    pub output_formats: &'static [&'static str],
    pub negative_prompt: bool,
    pub reference_image: bool,
    pub mask: bool,
    pub watermark: bool,
    pub backgrounds: &'static [&'static str],
    pub style_presets: &'static [&'static str],
    pub extra_body_keys: &'static [&'static str],
    pub max_prompt_chars: usize,
    pub native_fields: &'static [&'static str],
}

/// What a rerank model family accepts.
#[derive(Debug)]
pub struct RerankCaps {
    pub max_documents: usize,
    pub max_query_chars: usize,
    pub native_fields: &'static [&'static str],
}

/// A family's capabilities, one variant per operation.
#[derive(Debug, Clone, Copy)]
pub enum Caps {
    Speech(&'static SpeechCaps),
    Images(&'static ImageCaps),
    Rerank(&'static RerankCaps),
}

impl Caps {
    pub fn operation(self) -> Operation {
        match self {
            Caps::Speech(_) => Operation::Speech,
            Caps::Images(_) => Operation::Images,
            Caps::Rerank(_) => Operation::Rerank,
        }
    }
}

const ALL_SPEEDS: &[f64] = &[0.25, 0.5, 1.0, 2.0, 4.0];
const OPENAI_FORMATS: &[&str] = &["mp3", "opus", "aac", "flac", "wav", "pcm"];

static OPENAI_TTS: SpeechCaps = SpeechCaps {
    formats: OPENAI_FORMATS,
    speeds: ALL_SPEEDS,
    instructions: false,
    sse_formats: &[],
    max_input_chars: 4096,
    default_voice: "alloy",
    native_fields: &[],
};

static OPENAI_TTS_INSTRUCT: SpeechCaps = SpeechCaps {
    formats: OPENAI_FORMATS,
    speeds: ALL_SPEEDS,
    instructions: true,
    sse_formats: OPENAI_FORMATS,
    max_input_chars: 4096,
    default_voice: "alloy",
    native_fields: &[],
};

/// ElevenLabs: `voice_settings.speed` accepts 0.7–1.2, so of the public speeds only 1; no AAC or
/// FLAC output. SSE is the `/stream` endpoint's audio wrapped in the gateway's events.
static ELEVENLABS_TTS: SpeechCaps = SpeechCaps {
    formats: &["mp3", "opus", "wav", "pcm"],
    speeds: &[1.0],
    instructions: false,
    sse_formats: &["mp3", "opus", "wav", "pcm"],
    max_input_chars: 10_000,
    default_voice: "21m00Tcm4TlvDq8ikWAM",
    native_fields: &[
        "language_code",
        "seed",
        "voice_settings",
        "apply_text_normalization",
        "previous_text",
        "next_text",
        "pronunciation_dictionary_locators",
    ],
};

/// MiniMax T2A v2: speed 0.5–2; WAV only without streaming.
static MINIMAX_TTS: SpeechCaps = SpeechCaps {
    formats: &["mp3", "flac", "wav", "pcm"],
    speeds: &[0.5, 1.0, 2.0],
    instructions: false,
    sse_formats: &["mp3", "flac", "pcm"],
    max_input_chars: 10_000,
    default_voice: "male-qn-qingse",
    native_fields: &["language_boost", "pronunciation_dict"],
};

/// Volcengine / Doubao (V3 HTTP streaming): `speech_rate` −50..100 is 0.5×–2×, so only the public
/// speeds 0.5, 1 and 2; Ogg-Opus is labelled `opus`.
static DOUBAO_TTS: SpeechCaps = SpeechCaps {
    formats: &["mp3", "opus", "pcm"],
    speeds: &[0.5, 1.0, 2.0],
    instructions: false,
    sse_formats: &["mp3", "opus", "pcm"],
    max_input_chars: 1_024,
    default_voice: "zh_female_cancan_mars_bigtts",
    native_fields: &[],
};

/// DashScope Qwen-TTS: no speed control; a WAV file by URL, or 24 kHz PCM when streamed.
static QWEN_TTS: SpeechCaps = SpeechCaps {
    formats: &["wav", "pcm"],
    speeds: &[1.0],
    instructions: false,
    sse_formats: &["pcm"],
    max_input_chars: 600,
    default_voice: "Cherry",
    native_fields: &["language_type"],
};

/// Google Cloud Text-to-Speech: `speakingRate` 0.25–4; streaming is gRPC only, so no SSE.
static GOOGLE_TTS: SpeechCaps = SpeechCaps {
    formats: &["mp3", "opus", "wav", "pcm"],
    speeds: ALL_SPEEDS,
    instructions: false,
    sse_formats: &[],
    max_input_chars: 5_000,
    default_voice: "en-US-Standard-C",
    native_fields: &[],
};

static DALL_E_3: ImageCaps = ImageCaps {
    sizes: &["1024x1024", "1792x1024", "1024x1792"],
    default_size: "1024x1024",
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("7:4", "1792x1024"),
        ("16:9", "1792x1024"),
        ("4:7", "1024x1792"),
        ("9:16", "1024x1792"),
    ],
    qualities: &["standard", "hd"],
    max_n: 1,
    response_formats: &["url", "b64_json"],
    output_formats: &["png"],
    negative_prompt: false,
    reference_image: false,
    mask: false,
    watermark: false,
    backgrounds: &[],
    style_presets: &[],
    extra_body_keys: &[],
    max_prompt_chars: 4000,
    native_fields: &["style", "user"],
};

static COHERE_RERANK: RerankCaps = RerankCaps {
    max_documents: 1000,
    max_query_chars: 32_000,
    native_fields: &["max_tokens_per_doc", "priority"],
};

static COHERE_V1_RERANK: RerankCaps = RerankCaps {
    max_documents: 1000,
    max_query_chars: 32_000,
    native_fields: &["max_chunks_per_doc"],
};

static JINA_RERANK: RerankCaps = RerankCaps {
    max_documents: 1000,
    max_query_chars: 32_000,
    native_fields: &[],
};

static VOYAGE_RERANK: RerankCaps = RerankCaps {
    max_documents: 1000,
    max_query_chars: 32_000,
    native_fields: &["truncation"],
};

static DASHSCOPE_RERANK: RerankCaps = RerankCaps {
    max_documents: 500,
    max_query_chars: 4_000,
    native_fields: &["instruct"],
};

static SILICONFLOW_RERANK: RerankCaps = RerankCaps {
    max_documents: 1000,
    max_query_chars: 32_000,
    native_fields: &["max_chunks_per_doc", "overlap_tokens", "instruction"],
};

static ZHIPU_RERANK: RerankCaps = RerankCaps {
    max_documents: 128,
    max_query_chars: 4096,
    native_fields: &[],
};

static MIXEDBREAD_RERANK: RerankCaps = RerankCaps {
    max_documents: 1000,
    max_query_chars: 32_000,
    native_fields: &["rewrite_query"],
};

/// TEI's own default `--max-client-batch-size` is 32; raise `max_documents` per model to match a
/// server started with a larger one.
static TEI_RERANK: RerankCaps = RerankCaps {
    max_documents: 32,
    max_query_chars: 32_000,
    native_fields: &["truncate", "truncation_direction"],
};

static LOCAL_RERANK: RerankCaps = RerankCaps {
    max_documents: 10_000,
    max_query_chars: 32_000,
    native_fields: &[],
};

/// The capability table: family name → capabilities. Config entries name a family from here.
pub static FAMILIES: &[(&str, Caps)] = &[
    ("openai-tts", Caps::Speech(&OPENAI_TTS)),
    ("openai-tts-instruct", Caps::Speech(&OPENAI_TTS_INSTRUCT)),
    ("elevenlabs-tts", Caps::Speech(&ELEVENLABS_TTS)),
    ("minimax-tts", Caps::Speech(&MINIMAX_TTS)),
    ("doubao-tts", Caps::Speech(&DOUBAO_TTS)),
    ("qwen-tts", Caps::Speech(&QWEN_TTS)),
    ("google-tts", Caps::Speech(&GOOGLE_TTS)),
    ("dall-e-3", Caps::Images(&DALL_E_3)),
    ("cohere-rerank", Caps::Rerank(&COHERE_RERANK)),
    ("cohere-v1-rerank", Caps::Rerank(&COHERE_V1_RERANK)),
    ("jina-rerank", Caps::Rerank(&JINA_RERANK)),
    ("voyage-rerank", Caps::Rerank(&VOYAGE_RERANK)),
    ("dashscope-rerank", Caps::Rerank(&DASHSCOPE_RERANK)),
    ("siliconflow-rerank", Caps::Rerank(&SILICONFLOW_RERANK)),
    ("zhipu-rerank", Caps::Rerank(&ZHIPU_RERANK)),
    ("mixedbread-rerank", Caps::Rerank(&MIXEDBREAD_RERANK)),
    ("tei-rerank", Caps::Rerank(&TEI_RERANK)),
    ("local-rerank", Caps::Rerank(&LOCAL_RERANK)),
];

pub fn family(name: &str) -> Option<Caps> {
    FAMILIES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

pub fn family_names() -> String {
    FAMILIES
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One place a model can be served from.
#[derive(Debug)]
pub struct Target {
    pub provider: Arc<Provider>,
    pub native_model: String,
}

/// A public model name, resolved.
#[derive(Debug)]
pub struct Model {
    pub name: String,
    pub caps: Caps,
    /// Tried in order; retries move to the next one (wrapping).
    pub targets: Vec<Target>,
    pub default_voice: Option<String>,
    /// Speech: longest `input` accepted (characters). Rerank: longest `query`.
    pub max_input_chars: usize,
    /// Rerank: most documents accepted in one request.
    pub max_documents: usize,
}

impl Model {
    /// Targets whose provider has credentials; a disabled provider's targets are skipped.
    pub fn enabled_targets(&self) -> impl Iterator<Item = &Target> {
        self.targets.iter().filter(|t| t.provider.enabled())
    }
}

/// Public model name → model, built once at start.
#[derive(Debug, Default)]
pub struct Catalog {
    models: HashMap<String, Arc<Model>>,
}

impl Catalog {
    pub fn insert(&mut self, model: Model) {
        self.models.insert(model.name.clone(), Arc::new(model));
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Model>> {
        self.models.get(name)
    }

    /// Model names serving `op`, sorted, for error messages.
    pub fn names_for(&self, op: Operation) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .models
            .values()
            .filter(|m| m.caps.operation() == op)
            .map(|m| m.name.as_str())
            .collect();
        names.sort_unstable();
        names
    }
}

/// Formats a list of allowed values for a `details` message.
pub fn one_of<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
