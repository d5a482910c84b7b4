//! Asking a provider for speech and relaying its audio as it arrives: what an uncached request
//! and the leader of a response-cache flight share (`speech.rs` sends the one,
//! `speech_cached.rs` the other); a leader's followers get every piece too, and its complete
//! answer is stored.

use pingora::proxy::Session;

use super::super::cached::{CacheUse, Plan, Status};
use super::super::client_conn::Clocked;
use super::super::costing::RequestCost;
use super::super::outcome::{Call, Failure, Outcome};
use super::super::{lifecycle, mount, respond};
use crate::api::adapter::Registry;
use crate::api::speech::{self, SpeechRequest};
use crate::cache::{Form, Leader};
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::cost::{Metered, Planned, SpeechMetered};
use crate::engine::attempts::{self, AcceptFuture, Reply};
use crate::engine::client::{Client, LastFollows, Relayed, StreamError};
use crate::engine::speech::{self as stream_speech, Primed};
use crate::engine::trace;
use crate::upstream::exchange::{Response, Upstream};

/// Ask a provider and relay its audio; when `lead` is given, the followers get it too and the
/// complete answer is stored when the plan allows.
pub(super) async fn provide(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    characters: u64,
    out: &mut Outcome,
    lead: Option<(&Plan, Leader, Status)>,
) -> Result<(), Failure> {
    let (state, settings) = (call.state, call.settings);
    // Noted before the provider is asked, so an error answer says what the cache did too.
    if let Some((_, _, status)) = &lead {
        out.cache = Some(CacheUse {
            status: *status,
            saved: None,
        });
    }
    let (primed, target) = ask(&state.upstream, &settings.adapters, call.region, req).await?;
    let counted = Counted::of(target, req, characters);
    // The head goes out before the audio ends: it carries the cost known now — exact for a
    // character-priced model, an estimate (marked so) where audio tokens are billed too.
    let at_head = RequestCost::known(target, &counted.planned());
    let relay_start = trace::now();
    // A request that leads a cache flight ends its answer only once the answer is stored (so the
    // caller's next identical request finds it): with a length, the last bytes would end it first.
    let length = if lead.is_some() {
        None
    } else {
        primed.known_length()
    };
    let plan = lead.as_ref().map(|(plan, _, status)| (*plan, *status));
    write_head(call, req, plan, &at_head, length).await?;
    out.status = 200;
    // The head goes out only once the first audio is in hand (priming), so this is the time to
    // the first byte of audio too.
    out.first_byte = Some(call.start.elapsed());
    out.cost = Some(at_head);
    let leader = lead.as_ref().map(|(_, l, _)| l);
    let relayed = relay_to_client(call.session, primed, req, leader, length).await;
    relay_span(relay_start, call.session, &relayed);
    finish(call.session, req, out, lead, relayed?, target, counted).await
}

/// What the gateway counts of a speech request's input for its cost: its characters, and its
/// tokens only for a token-priced model (a tokenizer pass is not free).
#[derive(Clone, Copy)]
struct Counted {
    characters: u64,
    by_tokens: bool,
    text_tokens: u64,
}

impl Counted {
    fn of(target: &Target, req: &SpeechRequest<'_>, characters: u64) -> Counted {
        let by_tokens = target.price.as_ref().is_some_and(|p| p.tokens.is_some());
        let text_tokens = if by_tokens {
            crate::tokens::count(req.input.as_str()) as u64
        } else {
            0
        };
        Counted {
            characters,
            by_tokens,
            text_tokens,
        }
    }

    fn planned(&self) -> Planned<'static> {
        Planned::Speech {
            characters: self.characters,
            text_tokens: self.text_tokens,
        }
    }
}

/// Send `req` with retries until a provider's first audio is in hand: priming (reading up to the
/// first audio) runs inside the attempt loop, so errors a provider reports inside a 200 answer
/// are retried like any other until the first byte goes out. The primed answer and its target.
async fn ask<'a>(
    upstream: &'a Upstream,
    adapters: &'a Registry,
    region: &'a str,
    req: &'a SpeechRequest<'_>,
) -> Result<(Primed<'a>, &'a Target), Failure> {
    let (reply, target) = attempts::run_with(
        upstream,
        &req.model,
        region,
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
    Ok((primed, target))
}

/// Write the answer's head: its type, the model's lifecycle links, the cost known now (`at_head`)
/// and, for a cache flight's leader, what the cache did; `length` when it is known.
async fn write_head(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    plan: Option<(&Plan, Status)>,
    at_head: &RequestCost,
    length: Option<u64>,
) -> Result<(), Failure> {
    let content_type = if req.sse {
        "text/event-stream"
    } else {
        speech::content_type(req.response_format)
    };
    let mut headers = mount::link_headers(lifecycle::headers(&req.model), call.prefix);
    headers.push(at_head.header());
    if let Some((plan, status)) = plan {
        headers.extend(plan.headers(status, None).into_iter().flatten());
    }
    respond::stream_head(call.session, content_type, length, &headers)
        .await
        .map_err(|e| Failure::written("writing response head", e))
}

/// Relay the primed audio to the client (and to the followers of `leader`) to its end.
async fn relay_to_client(
    session: &mut Session,
    primed: Primed<'_>,
    req: &SpeechRequest<'_>,
    leader: Option<&Leader>,
    length: Option<u64>,
) -> Result<Relayed, Failure> {
    // An answer without a length in hand goes out with its end (the chunked terminator) in one
    // send (`ConnClock::last_follows`); one with a length already goes out with its head.
    let clock = match length {
        None => session.stream().and_then(Clocked::clock_of).cloned(),
        Some(_) => None,
    };
    let last_follows = clock.as_ref().map(|c| move |len| c.last_follows(len));
    let mut client = Client::new(session, leader)
        .with_last_follows(last_follows.as_ref().map(|f| f as LastFollows<'_>));
    relay(&mut client, primed, req).await
}

/// After a relay that reached its end: the final cost of a token-priced model, the answer stored
/// for a flight's leader, the body's end when it is still owed, and the tokens counted.
async fn finish(
    session: &mut Session,
    req: &SpeechRequest<'_>,
    out: &mut Outcome,
    lead: Option<(&Plan, Leader, Status)>,
    relayed: Relayed,
    target: &Target,
    counted: Counted,
) -> Result<(), Failure> {
    let reported = relayed.usage;
    if counted.by_tokens {
        // The final figure, with the tokens the provider reported at the stream's end.
        out.cost = Some(RequestCost::of(
            target,
            &Metered::Speech(SpeechMetered {
                characters: counted.characters,
                text_tokens: counted.text_tokens,
                reported: Some(reported),
            }),
        ));
    }
    if let Some((plan, leader, _)) = lead {
        if relayed.complete {
            let mut meta = plan.meta(counted.characters, out.cost.as_ref());
            meta.form = if req.sse { Form::Events } else { Form::Body };
            meta.tokens = (reported.input_tokens, reported.output_tokens);
            leader.finish(meta, plan.store).await;
        }
    }
    if relayed.client_gone {
        return Err(Failure::ClientGone);
    }
    if relayed.end_pending {
        session
            .write_response_body(None, true)
            .await
            .map_err(|e| Failure::written("ending the audio", e))?;
    }
    // The tokens the cost counted, for the access line and the ledger: the provider's, else
    // (a token-priced model's raw audio) the gateway's count of the input.
    out.speech_tokens(reported, counted.by_tokens.then_some(counted.text_tokens));
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
