//! The provider adapters: one home per provider (a folder when it serves several operations, a
//! file otherwise), the wire formats several providers share (`formats`), and the registry that
//! turns a provider's typed config into its adapters. Kinds a host adds from outside the crate
//! are registered in `external` and built beside the registry's.
//!
//! An adapter implements the trait of each operation it serves (`crate::api::adapter`).
//! Translation is a pure function of the validated request and the target, so the attempt loop
//! can rebuild the native request on every retry without touching the caller's bytes.

pub(crate) mod ark;
pub(crate) mod azure;
pub(crate) mod azure_speech;
pub(crate) mod bfl;
pub(crate) mod cartesia;
pub(crate) mod cohere;
pub(crate) mod cohere_v1;
pub(crate) mod dashscope;
pub(crate) mod deepgram;
pub(crate) mod elevenlabs;
pub(crate) mod external;
pub(crate) mod fish_audio;
pub(crate) mod formats;
pub(crate) mod gemini;
pub(crate) mod google;
pub(crate) mod ideogram;
pub(crate) mod jina;
pub(crate) mod kling;
pub(crate) mod local;
pub(crate) mod minimax;
pub(crate) mod mistral;
pub(crate) mod mixedbread;
// ---- rerank: NVIDIA NIM, vLLM, Infinity, Bedrock (issue 30) ----
pub(crate) mod bedrock;
pub(crate) mod bedrock_image;
pub(crate) mod infinity;
pub(crate) mod nim;
pub(crate) mod vllm;
// ---- end rerank (issue 30) ----
pub(crate) mod openai;
pub(crate) mod pinecone;
pub(crate) mod polly;
pub(crate) mod recraft;
pub(crate) mod registry;
pub(crate) mod replicate;
pub(crate) mod siliconflow;
pub(crate) mod stability;
pub(crate) mod stepfun;
pub(crate) mod tei;
// Tencent Cloud (issue 30).
pub(crate) mod tencent_hunyuan;
pub(crate) mod tencent_tts;
#[cfg(test)]
pub(crate) mod test_support;
pub(crate) mod together;
pub(crate) mod vertex;
pub(crate) mod vertex_ranking;
pub(crate) mod volcengine;
pub(crate) mod voyage;
pub(crate) mod xai;
pub(crate) mod zhipu;

use crate::common::error::UpstreamError;
use crate::upstream::provider::{bad_answer, Provider};

/// Parse a provider's JSON answer into its wire type; a mismatch is a bad response.
pub(crate) fn parse_answer<T: serde::de::DeserializeOwned>(
    provider: &Provider,
    body: &[u8],
) -> Result<T, UpstreamError> {
    serde_json::from_slice(body)
        .map_err(|e| bad_answer(provider, format!("answer is not the expected JSON: {e}")))
}

/// A billed token count as a provider reported it: only a finite, non-negative number is believed.
pub(crate) fn billed_tokens(reported: Option<f64>) -> Option<u64> {
    reported
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| t as u64)
}
