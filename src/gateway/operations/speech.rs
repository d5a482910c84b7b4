//! Speech: validated, sent with retries until a provider's first audio is in hand, then relayed
//! to the client as it arrives (raw audio, or SSE).

use super::super::cached::{CacheUse, Plan, Status};
use super::super::client_conn::Clocked;
use super::super::costing::RequestCost;
use super::super::limited;
use super::super::outcome::{Call, Failure, Outcome};
use super::super::{lifecycle, mount, respond};
use crate::api::adapter::Registry;
use crate::api::speech::{self, SpeechRequest};
use crate::cache::{Form, KeyBuilder, Leader};
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::Operation;
use crate::cost::{Metered, Planned, SpeechMetered};
use crate::engine::attempts::{self, AcceptFuture, Reply};
use crate::engine::client::{Client, LastFollows, Relayed};
use crate::engine::passthrough::StreamError;
use crate::engine::speech::{self as stream_speech, Primed};
use crate::engine::trace;
use crate::upstream::exchange::{Response, Upstream};

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

/// Ask a provider and relay its audio; when `lead` is given, the followers get it too and the
/// complete answer is stored when the plan allows.
pub(super) async fn provide(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    characters: u64,
    out: &mut Outcome,
    lead: Option<(&Plan, Leader, Status)>,
) -> Result<(), Failure> {
    let upstream = &call.state.upstream;
    let adapters = &call.settings.adapters;
    // Noted before the provider is asked, so an error answer says what the cache did too.
    if let Some((_, _, status)) = &lead {
        out.cache = Some(CacheUse {
            status: *status,
            saved: None,
        });
    }
    // Priming (reading up to the first audio) runs inside the attempt loop, so errors a provider
    // reports inside a 200 answer are retried like any other until the first byte goes out.
    let (reply, target) = attempts::run_with(
        upstream,
        &req.model,
        call.region,
        req.retries,
        |t| adapters.speech(&t.provider)?.request(t, req),
        |t, resp| prime_speech(upstream, adapters, t, req, resp),
    )
    .await
    .map_err(|e| {
        if req.default_voice {
            e.default_voice_refused(&req.model.name, req.voice.as_str())
        } else {
            e
        }
    })?;
    let Reply::Remote(primed) = reply else {
        return Err(Failure::Answer(GatewayError::Internal(
            "an in-process provider answered speech".into(),
        )));
    };
    let content_type = if req.sse {
        "text/event-stream"
    } else {
        speech::content_type(req.response_format)
    };
    // The head goes out before the audio ends: it carries the cost known now — exact for a
    // character-priced model, an estimate (marked so) where audio tokens are billed too.
    // The gateway's token count only for a token-priced model (a tokenizer pass is not free).
    let by_tokens = target.price.as_ref().is_some_and(|p| p.tokens.is_some());
    let text_tokens = if by_tokens {
        crate::tokens::count(req.input.as_str()) as u64
    } else {
        0
    };
    let at_head = RequestCost::known(
        target,
        &Planned::Speech {
            characters,
            text_tokens,
        },
    );
    let mut headers = mount::link_headers(lifecycle::headers(&req.model), call.prefix);
    headers.push(at_head.header());
    if let Some((plan, _, status)) = &lead {
        headers.extend(plan.headers(*status, None).into_iter().flatten());
    }
    let relay_start = trace::now();
    // A request that leads a cache flight ends its answer only once the answer is stored (so the
    // caller's next identical request finds it): with a length, the last bytes would end it first.
    let length = if lead.is_some() {
        None
    } else {
        primed.known_length()
    };
    respond::stream_head(call.session, content_type, length, &headers)
        .await
        .map_err(|e| Failure::written("writing response head", e))?;
    out.status = 200;
    // The head goes out only once the first audio is in hand (priming), so this is the time to
    // the first byte of audio too.
    out.first_byte = Some(call.start.elapsed());
    out.cost = Some(at_head);
    let leader = lead.as_ref().map(|(_, l, _)| l);
    // An answer without a length in hand goes out with its end (the chunked terminator) in one
    // send (`ConnClock::last_follows`); one with a length already goes out with its head.
    let clock = match length {
        None => call.session.stream().and_then(Clocked::clock_of).cloned(),
        Some(_) => None,
    };
    let last_follows = clock.as_ref().map(|c| move |len| c.last_follows(len));
    let mut client = Client::new(call.session, leader)
        .with_last_follows(last_follows.as_ref().map(|f| f as LastFollows<'_>));
    let relayed = relay(&mut client, primed, req).await;
    relay_span(relay_start, call.session, &relayed);
    let relayed = relayed?;
    let reported = relayed.usage;
    if by_tokens {
        // The final figure, with the tokens the provider reported at the stream's end.
        out.cost = Some(RequestCost::of(
            target,
            &Metered::Speech(SpeechMetered {
                characters,
                text_tokens,
                reported: Some(reported),
            }),
        ));
    }
    if let Some((plan, leader, _)) = lead {
        if relayed.complete {
            let mut meta = plan.meta(characters, out.cost.as_ref());
            meta.form = if req.sse { Form::Events } else { Form::Body };
            meta.tokens = (reported.input_tokens, reported.output_tokens);
            leader.finish(meta, plan.store).await;
        }
    }
    if relayed.client_gone {
        return Err(Failure::ClientGone);
    }
    if relayed.end_pending {
        call.session
            .write_response_body(None, true)
            .await
            .map_err(|e| Failure::written("ending the audio", e))?;
    }
    // The tokens the cost counted, for the access line and the ledger: the provider's, else
    // (a token-priced model's raw audio) the gateway's count of the input.
    out.speech_tokens(reported, by_tokens.then_some(text_tokens));
    Ok(())
}

/// The speech relay's span (when the request's spans are recorded): from its head, with the
/// first audio, to its end; the bytes sent and how it ended.
fn relay_span(
    start: Option<std::time::SystemTime>,
    session: &pingora::proxy::Session,
    relayed: &Result<Relayed, Failure>,
) {
    trace::span(
        None,
        "speech_relay",
        crate::telemetry::Kind::Internal,
        start,
        |s| {
            s.events.push(crate::telemetry::Event {
                time: s.start,
                name: "first_byte",
                attributes: Vec::new(),
            });
            let bytes = session.as_downstream().body_bytes_sent() as u64;
            s.set("switchyard.relay.bytes", bytes);
            let ended = match relayed {
                Ok(_) => "complete",
                Err(Failure::ClientGone) => "client_gone",
                Err(_) => "upstream_failed",
            };
            s.set("switchyard.relay.ended", ended);
            if relayed.is_err() {
                s.status = crate::telemetry::Status::Error(ended.to_string());
            }
        },
    );
}

/// Relay the primed answer to its end; how it ended (the usage the provider reported) comes back.
async fn relay<'a>(
    client: &'a mut Client<'a>,
    primed: Primed<'a>,
    req: &'a SpeechRequest<'a>,
) -> Result<Relayed, Failure> {
    match stream_speech::relay(client, primed, req.sse, req.input.as_str()).await {
        Ok(relayed) => Ok(relayed),
        Err(StreamError::Client) => Err(Failure::ClientGone),
        Err(StreamError::Upstream(e)) => Err(Failure::Abort(format!(
            "provider failed mid-stream: {}",
            e.message()
        ))),
    }
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

/// Priming (reading up to the first audio) runs inside the attempt loop, so an error a provider
/// reports inside a 200 answer is retried like any other until the first byte goes out.
fn prime_speech<'u>(
    upstream: &'u Upstream,
    adapters: &Registry,
    target: &Target,
    req: &SpeechRequest<'_>,
    resp: Response<'u>,
) -> AcceptFuture<'u, Primed<'u>> {
    let decoding = match adapters.speech(&target.provider) {
        Ok(adapter) => adapter.decoding(&target.provider, req),
        Err(e) => {
            let e = UpstreamError::new(
                UpstreamErrorKind::Failure,
                &target.provider.name,
                e.to_string(),
            );
            return Box::pin(async move { Err(e) });
        }
    };
    Box::pin(stream_speech::prime(
        upstream,
        target.provider.clone(),
        resp,
        decoding,
        req.sse,
    ))
}
