//! Speech: validated, sent with retries until a provider's first audio is in hand, then relayed
//! to the client as it arrives (raw audio, or SSE): through the response cache when the model's
//! cache is on (`speech_cached.rs`), else straight (`speech_provide.rs`).

use super::super::cached::Plan;
use super::super::limited;
use super::super::outcome::{Call, Failure, Outcome};
use super::speech_provide::provide;
use crate::api::speech::{self, SpeechRequest};
use crate::cache::KeyBuilder;
use crate::common::Operation;
use crate::engine::trace;

/// `POST /api/v1/audio/speech`.
pub(crate) async fn speech(call: &mut Call<'_>, body: &[u8]) -> Outcome {
    let s = call.settings;
    let started = trace::now();
    let parsed = speech::parse(body, &s.catalog, s.retry.max_retries);
    trace::step("validate", started, parsed.as_ref().err());
    let req = match parsed {
        Ok(req) => req,
        Err(e) => return Outcome::failed(e),
    };
    let mut out = Outcome::new();
    out.model = Some(req.model.clone());
    let characters = req.input.as_str().chars().count() as u64;
    let mut result = serve(call, &req, characters, &mut out).await;
    if let Err(Failure::Answer(e)) = &result {
        if super::handed_to_successor(&s.catalog, &req.model, e) {
            result = by_successor(call, body, characters, &mut out).await;
        }
    }
    if result.is_ok() {
        out.usage.characters = characters;
    }
    out.result = result;
    out
}

/// Serve `body` again by the model's successor: every target of the model asked for turned out
/// retired by its provider, before any byte reached the caller. Validated against the successor
/// (its capabilities apply); the request's limits were met once already, and the response cache
/// is not consulted for this second try.
async fn by_successor(
    call: &mut Call<'_>,
    body: &[u8],
    characters: u64,
    out: &mut Outcome,
) -> Result<(), Failure> {
    let s = call.settings;
    let req = speech::parse(body, &s.catalog, s.retry.max_retries).map_err(Failure::Answer)?;
    out.model = Some(req.model.clone());
    provide(call, &req, characters, out, None).await
}

/// Send `req` and relay its audio; the answer's status and first byte are noted in `out` as its
/// head goes out, so an answer abandoned later still reports them.
async fn serve(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    characters: u64,
    out: &mut Outcome,
) -> Result<(), Failure> {
    let planned = crate::cost::Planned::Speech {
        characters,
        text_tokens: 0,
    };
    // Speech is charged its real cost when its stream ends.
    limited::cost(call, Operation::Speech, characters, &req.model, &planned).await?;
    let Some(plan) = Plan::of(call, &req.model, "speech", |b| key_fields(b, req)) else {
        return provide(call, req, characters, out, None).await;
    };
    super::speech_cached::cached_speech(call, req, characters, out, plan).await
}

/// The fields that change a speech answer, as the provider is sent them (the voice after the
/// operator's `voice_map`, the format and speed with their defaults filled in); never `retries`,
/// and `stream_format` only as the form (which requests in flight collapse onto one another).
fn key_fields(b: &mut KeyBuilder, req: &SpeechRequest<'_>) {
    b.field("input", req.input.as_str().as_bytes())
        .field("voice", req.voice.as_str().as_bytes())
        .field("custom_voice", &[u8::from(req.custom_voice)])
        .field("response_format", req.response_format.as_bytes())
        // Not where the answer is stored: raw audio and SSE share one entry.
        .form(if req.sse { "sse" } else { "audio" })
        .field("speed", &req.speed.to_bits().to_le_bytes())
        .optional(
            "instructions",
            req.instructions.as_ref().map(|i| i.as_str().as_bytes()),
        );
    let mut extra: Vec<_> = req.passthrough.iter().collect();
    extra.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    for (name, value) in extra {
        b.field(name.as_str(), value.get().as_bytes());
    }
}
