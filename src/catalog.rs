//! Models and what they can do.
//!
//! Two things live here. The capability table ([`FAMILIES`]) says, per model family, which values of
//! each public field the family accepts (sizes, qualities, speeds, formats, streaming, instructions…)
//! and which undeclared fields it takes natively; validation reads only this table, so a new model
//! family is one entry. The [`Catalog`] maps each public model name from the config to its family and
//! its ordered targets (provider + native model name).

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::Operation;
use crate::upstream::provider::Provider;

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

/// What an image model family accepts. Validation reads only this; adapters read it to translate
/// (`aspect_ratios` doubles as the size ↔ ratio table for providers that take only one of them).
#[derive(Debug)]
pub struct ImageCaps {
    /// Public `size` values (`WxH`, or a provider keyword such as `auto` or `2K`).
    pub sizes: &'static [&'static str],
    pub default_size: &'static str,
    /// `aspect_ratio` values and the `size` each one means for this family.
    pub aspect_ratios: &'static [(&'static str, &'static str)],
    pub qualities: &'static [&'static str],
    /// Most images one public request may ask for.
    pub max_n: u64,
    /// Most images one native call returns; beyond it the gateway fans out concurrent calls.
    pub per_call_n: u64,
    /// Public `output_format` values; the default is `png` when listed, else the first.
    pub output_formats: &'static [&'static str],
    pub negative_prompt: bool,
    /// Takes a reference `image`.
    pub reference_image: bool,
    /// Cannot work without a reference `image` (editing models).
    pub image_required: bool,
    /// Honours `strength` (the reference image's influence).
    pub strength: bool,
    pub mask: bool,
    /// Can add a watermark when asked (`watermark: true`).
    pub watermark: bool,
    pub backgrounds: &'static [&'static str],
    pub style_presets: &'static [&'static str],
    pub extra_body_keys: &'static [&'static str],
    pub max_prompt_chars: usize,
    /// Fields outside the public spec that the provider takes natively and that pass through verbatim.
    pub native_fields: &'static [&'static str],
}

/// Family A of the spec's size table.
const DALL_E_3_SIZES: &[&str] = &["1024x1024", "1792x1024", "1024x1792"];
/// Family B of the spec's size table (Zhipu CogView's recommended sizes).
const COGVIEW_SIZES: &[&str] = &[
    "1024x1024",
    "768x1344",
    "864x1152",
    "1344x768",
    "1152x864",
    "1440x720",
    "720x1440",
];

/// Every field off; families spell out what they support on top of this.
const IMAGE_NONE: ImageCaps = ImageCaps {
    sizes: &["1024x1024"],
    default_size: "1024x1024",
    aspect_ratios: &[("1:1", "1024x1024")],
    qualities: &[],
    max_n: 1,
    per_call_n: 1,
    output_formats: &["png"],
    negative_prompt: false,
    reference_image: false,
    image_required: false,
    strength: false,
    mask: false,
    watermark: false,
    backgrounds: &[],
    style_presets: &[],
    extra_body_keys: &[],
    max_prompt_chars: 1000,
    native_fields: &[],
};

/// OpenAI dall-e-2: square sizes, `n` up to 10 natively, edits (image + mask) via `/images/edits`.
static DALL_E_2: ImageCaps = ImageCaps {
    sizes: &["256x256", "512x512", "1024x1024"],
    qualities: &["standard"],
    max_n: 10,
    per_call_n: 10,
    reference_image: true,
    mask: true,
    native_fields: &["user"],
    ..IMAGE_NONE
};

static DALL_E_3: ImageCaps = ImageCaps {
    sizes: DALL_E_3_SIZES,
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("7:4", "1792x1024"),
        ("16:9", "1792x1024"),
        ("4:7", "1024x1792"),
        ("9:16", "1024x1792"),
    ],
    qualities: &["standard", "hd"],
    max_prompt_chars: 4000,
    native_fields: &["style", "user"],
    ..IMAGE_NONE
};

/// OpenAI GPT image models (gpt-image-1 and successors): base64 answers only (the gateway hosts
/// them for `response_format: url`), edits via `/images/edits`.
static GPT_IMAGE: ImageCaps = ImageCaps {
    sizes: &["1024x1024", "1536x1024", "1024x1536", "auto"],
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("3:2", "1536x1024"),
        ("2:3", "1024x1536"),
    ],
    qualities: &["auto", "low", "medium", "high"],
    max_n: 10,
    per_call_n: 10,
    output_formats: &["png", "jpg", "webp"],
    reference_image: true,
    mask: true,
    backgrounds: &["transparent", "opaque", "auto"],
    max_prompt_chars: 32_000,
    native_fields: &["moderation", "output_compression", "input_fidelity", "user"],
    ..IMAGE_NONE
};

/// Zhipu CogView: one image per call (the gateway fans out), URL answers, `watermark_enabled`.
static COGVIEW: ImageCaps = ImageCaps {
    sizes: COGVIEW_SIZES,
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("4:7", "768x1344"),
        ("3:4", "864x1152"),
        ("7:4", "1344x768"),
        ("4:3", "1152x864"),
        ("2:1", "1440x720"),
        ("1:2", "720x1440"),
    ],
    qualities: &["standard", "hd"],
    max_n: 10,
    watermark: true,
    max_prompt_chars: 1000,
    native_fields: &["user_id"],
    ..IMAGE_NONE
};

/// Zhipu GLM-Image: CogView's wire format with its own sizes; `hd` is its only (and default)
/// quality.
static GLM_IMAGE: ImageCaps = ImageCaps {
    sizes: &[
        "1280x1280",
        "1568x1056",
        "1056x1568",
        "1472x1088",
        "1088x1472",
        "1728x960",
        "960x1728",
    ],
    default_size: "1280x1280",
    aspect_ratios: &[
        ("1:1", "1280x1280"),
        ("3:2", "1568x1056"),
        ("2:3", "1056x1568"),
        ("4:3", "1472x1088"),
        ("3:4", "1088x1472"),
        ("16:9", "1728x960"),
        ("9:16", "960x1728"),
    ],
    qualities: &["hd"],
    max_n: 10,
    watermark: true,
    max_prompt_chars: 1000,
    native_fields: &["user_id"],
    ..IMAGE_NONE
};

/// Seedream's recommended pixel sizes at 2K (Ark's table for 4.0 and 4.5). Every one lies inside
/// the pixel ranges of 4.0, 4.5 and 5.0-lite alike, so the list is shared.
const SEEDREAM_2K_SIZES: &[(&str, &str)] = &[
    ("1:1", "2048x2048"),
    ("4:3", "2304x1728"),
    ("3:4", "1728x2304"),
    ("16:9", "2560x1440"),
    ("9:16", "1440x2560"),
    ("3:2", "2496x1664"),
    ("2:3", "1664x2496"),
    ("21:9", "3024x1296"),
];

/// What every Ark image family shares: one image per call (Ark has no `n`; the gateway fans out,
/// while a set comes from `extra_body.sequential_image_generation`), JPEG output, and a watermark
/// the adapter always sends because Ark's default is on. Ark recommends at most 300 CJK
/// characters or 600 English words (~4000 characters); it does not refuse longer prompts.
const ARK_IMAGE_BASE: ImageCaps = ImageCaps {
    max_n: 10,
    output_formats: &["jpg"],
    watermark: true,
    max_prompt_chars: 4000,
    ..IMAGE_NONE
};

/// Volcengine Ark Seedream 4.0 / 4.5: `1K`/`2K`/`4K` or the recommended 2K pixel sizes, a
/// reference image, sets. 4.5's smallest output is 2560x1440 pixels, so it refuses `1K` itself
/// (Ark's 400 reaches the caller as `invalid_request`). No `seed` or `guidance_scale` (3.0 and
/// SeedEdit only).
static SEEDREAM: ImageCaps = ImageCaps {
    sizes: &[
        "1K",
        "2K",
        "4K",
        "2048x2048",
        "2304x1728",
        "1728x2304",
        "2560x1440",
        "1440x2560",
        "2496x1664",
        "1664x2496",
        "3024x1296",
    ],
    default_size: "2048x2048",
    aspect_ratios: SEEDREAM_2K_SIZES,
    reference_image: true,
    extra_body_keys: &[
        "sequential_image_generation",
        "sequential_image_generation_options",
    ],
    native_fields: &["optimize_prompt_options"],
    ..ARK_IMAGE_BASE
};

/// Volcengine Ark Seedream 5.0 (lite): `2K`/`3K` or pixel sizes, JPEG or PNG (`output_format`
/// exists only from 5.0), web search `tools`, and layer decomposition (5.0 pro).
static SEEDREAM_5: ImageCaps = ImageCaps {
    sizes: &[
        "2K",
        "3K",
        "2048x2048",
        "2304x1728",
        "1728x2304",
        "2560x1440",
        "1440x2560",
        "2496x1664",
        "1664x2496",
        "3024x1296",
    ],
    default_size: "2048x2048",
    aspect_ratios: SEEDREAM_2K_SIZES,
    output_formats: &["png", "jpg"],
    reference_image: true,
    extra_body_keys: &[
        "sequential_image_generation",
        "sequential_image_generation_options",
        "layer_decomposition",
    ],
    native_fields: &["optimize_prompt_options", "tools"],
    ..ARK_IMAGE_BASE
};

/// Volcengine Ark Seedream 3.0 text-to-image: pixel sizes in [512, 2048] (Ark's recommended
/// list), `seed` and `guidance_scale`, no reference image.
static SEEDREAM_3: ImageCaps = ImageCaps {
    sizes: &[
        "1024x1024",
        "864x1152",
        "1152x864",
        "1280x720",
        "720x1280",
        "832x1248",
        "1248x832",
        "1512x648",
    ],
    default_size: "1024x1024",
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("3:4", "864x1152"),
        ("4:3", "1152x864"),
        ("16:9", "1280x720"),
        ("9:16", "720x1280"),
        ("2:3", "832x1248"),
        ("3:2", "1248x832"),
        ("21:9", "1512x648"),
    ],
    native_fields: &["seed", "guidance_scale"],
    ..ARK_IMAGE_BASE
};

/// Volcengine Ark SeedEdit 3.0: edits exactly one reference image; the output keeps its size
/// (`adaptive`). Several images are several edits of the same input, fanned out.
static SEEDEDIT: ImageCaps = ImageCaps {
    sizes: &["adaptive"],
    default_size: "adaptive",
    aspect_ratios: &[],
    reference_image: true,
    image_required: true,
    native_fields: &["seed", "guidance_scale"],
    ..ARK_IMAGE_BASE
};

/// Stability AI Stable Image v2beta (Ultra, Core, SD3.5): multipart, `aspect_ratio` natively, one
/// image per call. Sizes are the pixel sizes each ratio means at ~1 MP (Stability's own ratio set;
/// the exact pixels each model renders are not documented, Core reportedly ~1.5 MP): the gateway
/// maps a `size` back to its ratio and sends only that.
const STABILITY_SIZES: &[&str] = &[
    "1024x1024",
    "1344x768",
    "1536x640",
    "832x1216",
    "1216x832",
    "896x1088",
    "1088x896",
    "768x1344",
    "640x1536",
];
const STABILITY_RATIOS: &[(&str, &str)] = &[
    ("1:1", "1024x1024"),
    ("16:9", "1344x768"),
    ("21:9", "1536x640"),
    ("2:3", "832x1216"),
    ("3:2", "1216x832"),
    ("4:5", "896x1088"),
    ("5:4", "1088x896"),
    ("9:16", "768x1344"),
    ("9:21", "640x1536"),
];
/// `style_preset` values of Ultra, Core and SD3.5.
const STABILITY_STYLES: &[&str] = &[
    "3d-model",
    "analog-film",
    "anime",
    "cinematic",
    "comic-book",
    "digital-art",
    "enhance",
    "fantasy-art",
    "isometric",
    "line-art",
    "low-poly",
    "modeling-compound",
    "neon-punk",
    "origami",
    "photographic",
    "pixel-art",
    "tile-texture",
];

/// Stable Image Core (`/generate/core`): text-to-image only (the endpoint takes no `image`).
static STABLE_IMAGE_CORE: ImageCaps = ImageCaps {
    sizes: STABILITY_SIZES,
    aspect_ratios: STABILITY_RATIOS,
    max_n: 10,
    output_formats: &["png", "jpg", "webp"],
    negative_prompt: true,
    style_presets: STABILITY_STYLES,
    max_prompt_chars: 10_000,
    native_fields: &["seed"],
    ..IMAGE_NONE
};

/// Stable Image Ultra (`/generate/ultra`): Core's fields plus an optional reference `image`, which
/// Stability accepts only together with `strength` (the gateway's default 0.5 fills it in).
static STABLE_IMAGE: ImageCaps = ImageCaps {
    reference_image: true,
    strength: true,
    ..STABLE_IMAGE_CORE
};

/// Stability SD3.5 (`/generate/sd3`, native model in the `model` field): image-to-image like
/// Ultra, no WebP output, `cfg_scale`.
static STABILITY_SD3: ImageCaps = ImageCaps {
    output_formats: &["png", "jpg"],
    native_fields: &["seed", "cfg_scale"],
    ..STABLE_IMAGE
};

/// DashScope Wan / Wanx text-to-image (`wanx2.1-t2i-*`, `wan2.2-t2i-*`): asynchronous task API,
/// up to 4 images per task, sides 512–1440 px (`W*H` natively).
static WAN: ImageCaps = ImageCaps {
    sizes: &[
        "1024x1024",
        "1440x1440",
        "1280x720",
        "720x1280",
        "1152x864",
        "864x1152",
        "1440x720",
        "720x1440",
    ],
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("16:9", "1280x720"),
        ("9:16", "720x1280"),
        ("4:3", "1152x864"),
        ("3:4", "864x1152"),
        ("2:1", "1440x720"),
        ("1:2", "720x1440"),
    ],
    max_n: 4,
    per_call_n: 4,
    negative_prompt: true,
    watermark: true,
    max_prompt_chars: 800,
    native_fields: &["seed", "prompt_extend"],
    ..IMAGE_NONE
};

/// Black Forest Labs FLUX with pixel sizes (`flux-pro-1.1`, `flux-dev`, `flux-pro`): asynchronous,
/// one image per task (the gateway fans out), width and height multiples of 32 in 256–1440.
static FLUX: ImageCaps = ImageCaps {
    sizes: &[
        "1024x1024",
        "1344x768",
        "768x1344",
        "1152x896",
        "896x1152",
        "1216x832",
        "832x1216",
        "1440x1440",
    ],
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("16:9", "1344x768"),
        ("9:16", "768x1344"),
        ("4:3", "1152x896"),
        ("3:4", "896x1152"),
        ("3:2", "1216x832"),
        ("2:3", "832x1216"),
    ],
    max_n: 4,
    per_call_n: 1,
    output_formats: &["png", "jpg"],
    max_prompt_chars: 10_000,
    native_fields: &["seed", "safety_tolerance", "prompt_upsampling"],
    ..IMAGE_NONE
};

/// FLUX Kontext (`flux-kontext-pro`, `flux-kontext-max`): text-to-image and editing of a
/// reference image (`input_image`); sized by aspect ratio only (21:9 to 9:21, about a megapixel).
pub static FLUX_KONTEXT: ImageCaps = ImageCaps {
    sizes: &[
        "1024x1024",
        "1344x768",
        "768x1344",
        "1152x896",
        "896x1152",
        "1216x832",
        "832x1216",
        "1568x672",
        "672x1568",
    ],
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("16:9", "1344x768"),
        ("9:16", "768x1344"),
        ("4:3", "1152x896"),
        ("3:4", "896x1152"),
        ("3:2", "1216x832"),
        ("2:3", "832x1216"),
        ("21:9", "1568x672"),
        ("9:21", "672x1568"),
    ],
    reference_image: true,
    ..FLUX
};

/// Kling (可灵) images (`kling-v1` … `kling-v2-1`): asynchronous, up to 9 images per task, sized by
/// aspect ratio; `quality` std/pro is the native `resolution` 1k/2k; a reference image with
/// `strength` (native `image_fidelity`).
static KLING: ImageCaps = ImageCaps {
    sizes: &[
        "1024x1024",
        "1280x720",
        "720x1280",
        "1024x768",
        "768x1024",
        "1152x768",
        "768x1152",
        "1344x576",
    ],
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("16:9", "1280x720"),
        ("9:16", "720x1280"),
        ("4:3", "1024x768"),
        ("3:4", "768x1024"),
        ("3:2", "1152x768"),
        ("2:3", "768x1152"),
        ("21:9", "1344x576"),
    ],
    qualities: &["std", "pro"],
    max_n: 9,
    per_call_n: 9,
    negative_prompt: true,
    reference_image: true,
    strength: true,
    max_prompt_chars: 2_500,
    native_fields: &["image_reference", "human_fidelity"],
    ..IMAGE_NONE
};

/// SiliconFlow Kolors: `batch_size` up to 4 per call, negative prompt, reference image.
static KOLORS: ImageCaps = ImageCaps {
    sizes: &["1024x1024", "960x1280", "768x1024", "720x1440", "720x1280"],
    aspect_ratios: &[
        ("1:1", "1024x1024"),
        ("3:4", "768x1024"),
        ("1:2", "720x1440"),
        ("9:16", "720x1280"),
    ],
    max_n: 10,
    per_call_n: 4,
    negative_prompt: true,
    reference_image: true,
    native_fields: &["seed", "num_inference_steps", "guidance_scale"],
    ..IMAGE_NONE
};

/// SiliconFlow Qwen-Image.
static QWEN_IMAGE: ImageCaps = ImageCaps {
    sizes: &[
        "1328x1328",
        "1664x928",
        "928x1664",
        "1472x1140",
        "1140x1472",
        "1584x1056",
        "1056x1584",
    ],
    default_size: "1328x1328",
    aspect_ratios: &[
        ("1:1", "1328x1328"),
        ("16:9", "1664x928"),
        ("9:16", "928x1664"),
        ("4:3", "1472x1140"),
        ("3:4", "1140x1472"),
        ("3:2", "1584x1056"),
        ("2:3", "1056x1584"),
    ],
    max_n: 10,
    negative_prompt: true,
    native_fields: &["seed", "num_inference_steps", "cfg"],
    ..IMAGE_NONE
};

/// SiliconFlow Qwen-Image-Edit: edits one reference image, whose size the output keeps (the
/// native API takes no `image_size`, hence the single size `auto`). The 2509 release also takes
/// up to two more references as `image2` / `image3` (URLs or data URLs, passed through).
static QWEN_IMAGE_EDIT: ImageCaps = ImageCaps {
    sizes: &["auto"],
    default_size: "auto",
    aspect_ratios: &[],
    max_n: 10,
    negative_prompt: true,
    reference_image: true,
    image_required: true,
    native_fields: &["seed", "num_inference_steps", "cfg", "image2", "image3"],
    ..IMAGE_NONE
};

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
    ("dall-e-2", Caps::Images(&DALL_E_2)),
    ("dall-e-3", Caps::Images(&DALL_E_3)),
    ("gpt-image", Caps::Images(&GPT_IMAGE)),
    ("cogview", Caps::Images(&COGVIEW)),
    ("glm-image", Caps::Images(&GLM_IMAGE)),
    ("seedream", Caps::Images(&SEEDREAM)),
    ("seedream-5", Caps::Images(&SEEDREAM_5)),
    ("seedream-3", Caps::Images(&SEEDREAM_3)),
    ("seededit", Caps::Images(&SEEDEDIT)),
    ("stable-image", Caps::Images(&STABLE_IMAGE)),
    ("stable-image-core", Caps::Images(&STABLE_IMAGE_CORE)),
    ("stability-sd3", Caps::Images(&STABILITY_SD3)),
    ("kolors", Caps::Images(&KOLORS)),
    ("qwen-image", Caps::Images(&QWEN_IMAGE)),
    ("qwen-image-edit", Caps::Images(&QWEN_IMAGE_EDIT)),
    ("wan", Caps::Images(&WAN)),
    ("flux", Caps::Images(&FLUX)),
    ("flux-kontext", Caps::Images(&FLUX_KONTEXT)),
    ("kling", Caps::Images(&KLING)),
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
