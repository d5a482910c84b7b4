//! What a standard conformance request costs, per public model of the shared test config, worked
//! out by hand from the built-in prices (`src/caps/prices.yaml`) and what each fake's documented
//! answer reports; the `cost` case of every conformance suite (speech, images, rerank) checks the
//! answer's `Switchyard-Cost` header against it. A model missing here fails its `cost` case: a
//! provider added to the conformance suites comes with its figure (or with its reason for having
//! none).
//!
//! The standard requests: speech says "The quick brown fox jumps over the lazy dog." (44 characters) in the
//! case's first format; images ask one image at the model's defaults; rerank sends one query and
//! four documents.

use super::client::Response;

/// A model with no price says so, never 0.
const UNPRICED: &str = "unknown; reason=unpriced";

/// The `Switchyard-Cost` header a standard request to `model` must carry.
fn expected(model: &str) -> Option<&'static str> {
    Some(match model {
        // Speech: 44 characters.
        // $0.10 per 1,000 characters: 44 × $0.0001.
        "eleven-multilingual-v2" => "0.0044 USD; basis=gateway",
        // $100 per 1M characters: 44 × $0.0001.
        "speech-2.8-hd" => "0.0044 USD; basis=gateway",
        // 0.8 CNY per 10,000 characters: 44 × 0.00008 CNY.
        "qwen3-tts-flash" => "0.00352 CNY; basis=gateway",
        // 1 CNY per 10,000 characters: 44 × 0.0001 CNY.
        "cosyvoice-v3-flash" => "0.0044 CNY; basis=gateway",
        // $0.60 per 1M text tokens in; the sentence is 10 cl100k tokens: $0.000006, a lower bound
        // (raw audio reports no audio tokens, billed at $12 per 1M).
        "gpt-4o-mini-tts" => "0.000006 USD; basis=gateway; estimate",
        // Amazon Polly's neural engine: $16 per 1M characters: 44 × $0.000016.
        "polly-neural" => "0.000704 USD; basis=gateway",
        // Its generative engine: $30 per 1M characters: 44 × $0.00003.
        "polly-generative" => "0.00132 USD; basis=gateway",
        // Azure deployments, Google's `default` voice tier, Volcengine, Azure AI Speech; Cartesia
        // (credits per plan), Deepgram, Fish Audio (per UTF-8 byte): no confirmed price in the
        // units the table holds.
        "azure-tts" | "azure-tts-v1" | "google-tts" | "doubao-tts" | "azure-neural" | "sonic-3"
        | "aura-2" | "fish-s2.1-pro" => UNPRICED,
        // Tencent Cloud TTS bills per character in resource packs; no confirmed price entry.
        "tencent-tts" => UNPRICED,
        // xAI text to speech: its price is not confirmed from xAI's own pages.
        "grok-tts" => UNPRICED,
        // Mistral publishes its Voxtral TTS price only on a page not confirmed here
        // (docs/providers/mistral.md).
        "voxtral-mini-tts" => UNPRICED,
        // StepFun's price page could not be read at its source (docs/providers/stepfun.md).
        "step-tts-2" | "stepaudio-2.5-tts" => UNPRICED,

        // Images: one at the model's defaults.
        // OpenAI's usage: 10 text in × $5 + 40 image in × $8 + 50 out (not itemised: image
        // out) × $30, per 1M = (50 + 320 + 1,500) / 1M.
        "gpt-image-2" => "0.00187 USD; basis=provider",
        // usageMetadata: 10 text in × $2 + 1,120 image out × $120 + 100 thinking tokens as text
        // out × $12, per 1M = (20 + 134,400 + 1,200) / 1M.
        "gemini-3-pro-image" => "0.13562 USD; basis=provider",
        // The same answer at $0.50 in, $60 image out, $3 text out: (5 + 67,200 + 300) / 1M.
        "gemini-3.1-flash-image" => "0.067505 USD; basis=provider",
        // Stability's credits: 6.5 and 8 at $0.01.
        "sd3.5-large" => "0.065 USD; basis=gateway",
        "stable-image-ultra" => "0.08 USD; basis=gateway",
        // Zhipu: 0.06 CNY an image.
        "cogview-4" => "0.06 CNY; basis=gateway",
        // Recraft: 35 and 40 API units an image, at 1,000 units to the dollar.
        "recraft-v4.1" => "0.035 USD; basis=gateway",
        "recraft-v3" => "0.04 USD; basis=gateway",
        // Replicate: FLUX schnell at $0.003 an output image; FLUX1.1 [pro]'s price on Replicate's
        // own page was not confirmed.
        "replicate-flux-schnell" => "0.003 USD; basis=gateway",
        "replicate-flux-1.1-pro" => UNPRICED,
        // No confirmed price: MiniMax images, Together, Ideogram, Gemini on Vertex AI (the
        // Gemini API's prices are the `gemini` kind's; Vertex's own page was not confirmed).
        "image-01"
        | "flux.1-schnell"
        | "flux.1-kontext-pro"
        | "ideogram-v3"
        | "vertex-gemini-3-pro-image"
        | "vertex-gemini-3.1-flash-image" => UNPRICED,
        // Stability's models on Bedrock: AWS's per-image prices load dynamically and were not
        // confirmed.
        "bedrock-stable-image-ultra" => UNPRICED,
        // Tencent Hunyuan image 3.0: no confirmed price entry.
        "hunyuan-image-3" => UNPRICED,
        // No confirmed price: Ark, Azure deployments, `gpt-image-1`, SiliconFlow.
        "seedream-4" | "seededit-3" | "azure-gpt-image" | "azure-gpt-image-2" | "gpt-image-1"
        | "qwen-image" | "kolors" => UNPRICED,

        // Rerank: one query, four documents.
        // Cohere bills one search unit (its `billed_units`): $2 per 1,000.
        "rerank-v3.5" => "0.002 USD; basis=provider",
        // DashScope's reported 79 tokens at 0.8 CNY per 1M.
        "gte-rerank-v2" => "0.0000632 CNY; basis=provider",
        // Voyage's billed 1,234 tokens at $0.05 per 1M.
        "voyage-rerank-2.5" => "0.0000617 USD; basis=provider",
        // Mixedbread's billed 120 tokens at $0.15 per 1M (its model page; it was read as $0).
        "mxbai-rerank-large-v2" => "0.000018 USD; basis=provider",
        // No confirmed price: Cohere v3.0, Jina (token packs), SiliconFlow, Zhipu; TEI is
        // self-hosted.
        "rerank-english-v3.0"
        | "jina-reranker-v2"
        | "bge-reranker-v2-m3"
        | "zhipu-rerank"
        | "tei-reranker" => UNPRICED,
        // Issue 30: NVIDIA NIM (API-catalog credits; self-hosted), vLLM and Infinity
        // (self-hosted) have no price; Bedrock bills per query but its amounts are unconfirmed.
        "nim-reranker"
        | "nim-hosted-reranker"
        | "vllm-reranker"
        | "infinity-reranker"
        | "bedrock-cohere-rerank" => UNPRICED,
        // Vertex AI ranking: Google's price for the ranking API is not confirmed
        // (docs/providers/vertex-ranking.md).
        "vertex-semantic-ranker" => UNPRICED,
        // Pinecone bills rerank units; its price per unit is not confirmed from Pinecone's pages.
        "pinecone-bge-reranker" => UNPRICED,
        _ => return None,
    })
}

/// Assert `resp`'s `Switchyard-Cost` is the hand-computed figure for `model`; returns it.
pub fn assert_cost<'r>(model: &str, resp: &'r Response) -> &'r str {
    let got = resp
        .header("switchyard-cost")
        .unwrap_or_else(|| panic!("{model}: no Switchyard-Cost header"));
    match expected(model) {
        Some(want) => assert_eq!(got, want, "{model}: Switchyard-Cost"),
        None => panic!(
            "{model}: no hand-computed cost in tests/it/support/costs.rs (it answered {got:?})"
        ),
    }
    got
}
