//! Gemini speech (Gemini 3.8 Flash TTS and Flash-Lite TTS) through the Gemini API's
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`, keyed by `x-goog-api-key` like the
//! image models of the same kind.
//!
//! The request is a `generateContent` body asking for audio: the text is the one user part,
//! spoken verbatim (Gemini 3.8 TTS reads inline directions aloud, so `instructions` travel as the
//! part's `speech_metadata.style`, never in the text), and
//! `generationConfig.speechConfig.voiceConfig` names the voice: one of the 30 prebuilt voices as
//! `prebuiltVoiceConfig.voiceName`, any other (the Extended Voice Library of `/v1beta/voices`, a
//! designed voice's id) as `voice`. There is no speed: pace comes from the style.
//!
//! The gateway always asks for the stream, whatever the caller's `stream_format`: its events
//! carry raw 24 kHz 16-bit mono PCM (a unary 3.8 answer is a whole WAV file by default), and the
//! first audio then leaves as soon as Google sends it. Each event is a `GenerateContentResponse`
//! whose `candidates[0].content.parts[].inlineData` holds a base64 piece labelled
//! `audio/L16;codec=pcm;rate=24000`; the last one has a `finishReason` and the cumulative
//! `usageMetadata` (text tokens in, audio tokens out). The PCM is encoded into the asked format by
//! `stream::encode`; a format this build cannot encode is refused before anything is sent. A stream
//! without a `finishReason` was cut; a safety `finishReason` or a blocked prompt is a
//! content-policy refusal; an `{"error"}` event is classified as Google's error answers are.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::native::NativeRequest;
use crate::stream::audio::{base64_audio, AudioDecoder, Finished, SpeechDecoding, SpeechUsage};
use crate::stream::encode::{encodable, Encoded};
use crate::stream::sse::data_of;
use crate::stream::sse_audio::{EventHandler, SseAudio};
use crate::upstream::provider::{bad_answer, Provider};

// ---- constants -------------------------------------------------------------------------------

/// The sample rate of Gemini's speech (its PCM's `rate=` parameter), which the encoders are built
/// for before the answer arrives; an answer at another rate is refused.
pub(crate) const RATE: u32 = 24_000;

/// The 30 prebuilt voices, sent as `prebuiltVoiceConfig.voiceName` (the field every Gemini TTS
/// model takes); any other voice goes as the 3.8 models' `voiceConfig.voice`.
pub(crate) const PREBUILT_VOICES: &[&str] = &[
    "Zephyr",
    "Puck",
    "Charon",
    "Kore",
    "Fenrir",
    "Leda",
    "Orus",
    "Aoede",
    "Callirrhoe",
    "Autonoe",
    "Enceladus",
    "Iapetus",
    "Umbriel",
    "Algieba",
    "Despina",
    "Erinome",
    "Algenib",
    "Rasalgethi",
    "Laomedeia",
    "Achernar",
    "Alnilam",
    "Schedar",
    "Gacrux",
    "Pulcherrima",
    "Achird",
    "Zubenelgenubi",
    "Vindemiatrix",
    "Sadachbia",
    "Sadaltager",
    "Sulafat",
];

/// `finishReason` values that mean the audio was withheld for what the text says.
const REFUSALS: &[&str] = &[
    "SAFETY",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "RECITATION",
];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: [Content<'a>; 1],
    generation_config: GenerationConfig<'a>,
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: [Part<'a>; 1],
}

#[derive(Serialize)]
struct Part<'a> {
    text: &'a str,
    /// Spelled as the Gemini API's TTS guide spells it for `generateContent` parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    speech_metadata: Option<SpeechMetadata<'a>>,
}

#[derive(Serialize)]
struct SpeechMetadata<'a> {
    style: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    response_modalities: [&'static str; 1],
    speech_config: SpeechConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SpeechConfig<'a> {
    voice_config: VoiceConfig<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    language_code: Option<String>,
}

/// One of the two: a prebuilt voice's name, or any other voice.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VoiceConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    prebuilt_voice_config: Option<Prebuilt<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    voice: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Prebuilt<'a> {
    voice_name: &'a str,
}

/// One streamed `GenerateContentResponse` (or an error event), as far as speech reads it. Gemini
/// answers in camelCase; the snake_case spellings its SDKs also read are taken too.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default, alias = "prompt_feedback")]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default, alias = "usage_metadata")]
    usage_metadata: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<ContentIn>,
    #[serde(default, alias = "finish_reason")]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ContentIn {
    #[serde(default)]
    parts: Vec<PartIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartIn {
    #[serde(default, alias = "inline_data")]
    inline_data: Option<BlobIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlobIn {
    #[serde(default, alias = "mime_type")]
    mime_type: Option<String>,
    #[serde(default)]
    data: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default, alias = "block_reason")]
    block_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default, alias = "prompt_token_count")]
    prompt_token_count: Option<u64>,
    #[serde(default, alias = "candidates_token_count")]
    candidates_token_count: Option<u64>,
}

// ---- translation to native -------------------------------------------------------------------

/// The native request: the streamed `generateContent` of the target's model.
pub(crate) fn speech_request(
    target: &Target,
    req: &SpeechRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    if !encodable(req.response_format) {
        let can: Vec<&str> = req
            .caps
            .formats
            .iter()
            .copied()
            .filter(|f| encodable(f))
            .collect();
        return Err(GatewayError::field(
            "response_format",
            format!(
                "model {} is answered as PCM, which this gateway cannot encode as `{}`; it \
                 produces: {}",
                req.model.name,
                req.response_format,
                can.join(", ")
            ),
        ));
    }
    let voice = req.voice.as_str();
    let prebuilt = PREBUILT_VOICES.contains(&voice);
    let voice_config = VoiceConfig {
        prebuilt_voice_config: prebuilt.then_some(Prebuilt { voice_name: voice }),
        voice: (!prebuilt).then_some(voice),
    };
    let body = Body {
        contents: [Content {
            role: "user",
            parts: [Part {
                text: req.input.as_str(),
                speech_metadata: req
                    .instructions
                    .as_ref()
                    .map(|i| SpeechMetadata { style: i.as_str() }),
            }],
        }],
        generation_config: GenerationConfig {
            response_modalities: ["AUDIO"],
            speech_config: SpeechConfig {
                voice_config,
                language_code: language_code(req)?,
            },
        },
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    Ok(NativeRequest::post_json(
        format!(
            "/v1beta/models/{}:streamGenerateContent?alt=sse",
            target.native_model.trim_start_matches("models/")
        ),
        body,
    ))
}

/// The caller's `language_code` (the family's one native field): `speechConfig.languageCode`, a
/// BCP-47 tag as a string.
fn language_code(req: &SpeechRequest<'_>) -> Result<Option<String>, GatewayError> {
    let Some((_, raw)) = req
        .passthrough
        .iter()
        .find(|(k, _)| k.as_str() == "language_code")
    else {
        return Ok(None);
    };
    match serde_json::from_str::<String>(raw.get()) {
        Ok(code) if !code.trim().is_empty() => Ok(Some(code)),
        _ => Err(GatewayError::field(
            "language_code",
            "must be a BCP-47 language tag as a string (`en-US`)",
        )),
    }
}

// ---- translation back ------------------------------------------------------------------------

/// The stream's PCM, encoded into the asked format. `speech_request` refused any format this build
/// cannot encode, so the fallback (an error on the first byte) only guards that contract.
pub(crate) fn speech_decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    let pcm = Box::new(SseAudio::new(provider, PcmEvents::default()));
    match Encoded::wrap(pcm, req.response_format, RATE, provider) {
        Some(encoded) => SpeechDecoding::Decode(Box::new(encoded)),
        None => SpeechDecoding::Decode(Box::new(Unencodable {
            provider: provider.clone(),
            format: req.response_format,
        })),
    }
}

/// The events of one speech stream: PCM pieces, then the one that ends it.
#[derive(Default)]
pub(crate) struct PcmEvents {
    /// The `finishReason` of the last candidate seen (the stream's end marker).
    finished: Option<String>,
    usage: SpeechUsage,
}

impl EventHandler for PcmEvents {
    fn event(
        &mut self,
        provider: &Provider,
        event: &[u8],
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError> {
        let Some(data) = data_of(event).filter(|d| !d.trim().is_empty()) else {
            return Ok(());
        };
        let event: Event = serde_json::from_str(&data).map_err(|e| {
            bad_answer(
                provider,
                format!("speech stream event is not Gemini's JSON: {e}"),
            )
        })?;
        if let Some(error) = &event.error {
            return Err(in_band_error(provider, error, data.as_bytes()));
        }
        if let Some(u) = &event.usage_metadata {
            // Cumulative: the last event's counts are the request's.
            self.usage = SpeechUsage {
                input_tokens: u.prompt_token_count.or(self.usage.input_tokens),
                output_tokens: u.candidates_token_count.or(self.usage.output_tokens),
            };
        }
        let Some(candidate) = event.candidates.first() else {
            return match event.prompt_feedback.and_then(|f| f.block_reason) {
                Some(reason) => Err(UpstreamError::new(
                    UpstreamErrorKind::ContentPolicy,
                    &provider.name,
                    format!("Gemini blocked the text ({reason})"),
                )),
                None => Ok(()),
            };
        };
        let parts = candidate.content.iter().flat_map(|c| &c.parts);
        for blob in parts.filter_map(|p| p.inline_data.as_ref()) {
            pcm_of(provider, blob, out)?;
        }
        if let Some(reason) = &candidate.finish_reason {
            self.finished = Some(reason.clone());
        }
        Ok(())
    }

    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError> {
        match self.finished.as_deref() {
            Some("STOP") => Ok(Finished::Done(self.usage)),
            Some(reason) if REFUSALS.contains(&reason) => Err(UpstreamError::new(
                UpstreamErrorKind::ContentPolicy,
                &provider.name,
                format!("Gemini withheld the audio (finishReason {reason})"),
            )),
            Some(reason) => Err(bad_answer(
                provider,
                format!("Gemini stopped the audio early (finishReason {reason})"),
            )),
            None => Err(bad_answer(
                provider,
                "speech stream ended before its last event (no finishReason)",
            )),
        }
    }
}

/// One `inlineData` piece as PCM, after checking it is the 24 kHz PCM the encoder was built for.
fn pcm_of(provider: &Provider, blob: &BlobIn, out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
    let mime = blob.mime_type.as_deref().unwrap_or("");
    match pcm_rate(mime) {
        Some(RATE) => {}
        Some(rate) => {
            return Err(bad_answer(
                provider,
                format!("audio at {rate} Hz ({mime}); the gateway expects {RATE} Hz PCM"),
            ))
        }
        None => {
            return Err(bad_answer(
                provider,
                format!("audio labelled `{mime}`; the gateway expects audio/L16 PCM"),
            ))
        }
    }
    if blob.data.is_empty() {
        return Ok(());
    }
    let pcm = base64_audio(provider, &blob.data)?;
    if !pcm.is_empty() {
        out.push(pcm);
    }
    Ok(())
}

/// The sample rate of a raw PCM type (`audio/L16;codec=pcm;rate=24000`, or `audio/pcm`): its
/// `rate` parameter, [`RATE`] when it names none; `None` for any other type or an unreadable rate.
pub(crate) fn pcm_rate(mime: &str) -> Option<u32> {
    let mut params = mime.split(';').map(str::trim);
    let base = params.next()?.to_ascii_lowercase();
    if base != "audio/l16" && base != "audio/pcm" {
        return None;
    }
    let mut rate = RATE;
    for param in params {
        if let Some((name, value)) = param.split_once('=') {
            if name.trim().eq_ignore_ascii_case("rate") {
                rate = value.trim().parse().ok()?;
            }
        }
    }
    Some(rate)
}

/// An `{"error": {...}}` event inside the stream: classified as a non-2xx answer with its code.
fn in_band_error(provider: &Provider, error: &Value, body: &[u8]) -> UpstreamError {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(500);
    super::error_response(provider, status, body)
}

/// The decoder for a format `stream::encode` cannot produce: unreachable while `speech_request`
/// refuses such formats, and an error rather than a panic if that ever changes.
struct Unencodable {
    provider: Arc<Provider>,
    format: &'static str,
}

impl AudioDecoder for Unencodable {
    fn push(&mut self, _chunk: &Bytes, _out: &mut Vec<Bytes>) -> Result<(), UpstreamError> {
        Err(bad_answer(
            &self.provider,
            format!("the gateway cannot encode PCM as {}", self.format),
        ))
    }

    fn finish(&mut self, _out: &mut Vec<Bytes>) -> Result<Finished, UpstreamError> {
        Err(bad_answer(
            &self.provider,
            format!("the gateway cannot encode PCM as {}", self.format),
        ))
    }
}

#[cfg(test)]
#[path = "speech_tests.rs"]
mod tests;
