//! Speech through the response cache: a hit streams the stored answer with the head a miss has
//! (plus `Switchyard-Cache: hit` and `Age`); a request identical to one in flight follows it,
//! writing each piece of the leader's answer as it arrives; otherwise the request leads (asks the
//! provider, `speech_provide.rs`) and its complete answer is stored.

use bytes::Bytes;

use super::super::cached::{lookup_span, CacheUse, Plan, Status};
use super::super::outcome::{Call, Failure, Outcome};
use super::super::{lifecycle, mount, respond};
use super::speech_provide::provide;
use crate::api::speech::{self, SpeechRequest};
use crate::cache::{Entry, Follow, Joined, Reader};
use crate::cost::Planned;
use crate::engine::passthrough;
use crate::engine::trace;

/// How following a leader went.
enum Followed {
    /// The leader failed before any audio: try again (lead, or follow the next leader).
    Again,
    /// The answer is over (well or not).
    Ended(Result<(), Failure>),
}

/// `req` to a cache-enabled model, as `plan` says.
pub(super) async fn cached_speech(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    characters: u64,
    out: &mut Outcome,
    plan: Plan,
) -> Result<(), Failure> {
    let start = trace::now();
    if !plan.lookup {
        lookup_span(start, Status::Bypass);
        let solo = plan.cache.solo(&plan.key);
        return provide(
            call,
            req,
            characters,
            out,
            Some((&plan, solo, Status::Bypass)),
        )
        .await;
    }
    loop {
        let found = plan.cache.get(&plan.key).await;
        // An entry is served in the request's form (re-framed when made by the other form).
        if let Some((entry, pieces)) = found.and_then(|e| {
            let pieces = super::speech_forms::pieces(&e, req.sse, req.input.as_str())?;
            Some((e, pieces))
        }) {
            lookup_span(start, Status::Hit);
            return hit(call, req, characters, out, &plan, entry, pieces).await;
        }
        match plan.cache.join(&plan.key) {
            Joined::Lead(leader) => {
                lookup_span(start, Status::Miss);
                return provide(
                    call,
                    req,
                    characters,
                    out,
                    Some((&plan, leader, Status::Miss)),
                )
                .await;
            }
            Joined::Follow(reader) => {
                // A follower whose leader fails tries again: each try is a span of its own.
                lookup_span(start, Status::Collapsed);
                match follow(call, req, characters, out, &plan, reader).await {
                    Followed::Again => continue,
                    Followed::Ended(result) => return result,
                }
            }
        }
    }
}

/// The head every speech answer has, with what the cache did.
async fn head(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    plan: &Plan,
    status: Status,
    age: Option<u64>,
    length: Option<u64>,
    cost: &super::super::costing::RequestCost,
) -> Result<(), Failure> {
    let content_type = if req.sse {
        "text/event-stream"
    } else {
        speech::content_type(req.response_format)
    };
    let mut headers = mount::link_headers(lifecycle::headers(&req.model), call.prefix);
    headers.push(cost.header());
    headers.extend(plan.headers(status, age).into_iter().flatten());
    respond::stream_head(call.session, content_type, length, &headers)
        .await
        .map_err(|e| Failure::written("writing response head", e))
}

/// Served from the cache: the stored body, exactly as the miss wrote it (`pieces`; re-framed
/// when the miss was of the other `stream_format`).
async fn hit(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    characters: u64,
    out: &mut Outcome,
    plan: &Plan,
    entry: Entry,
    pieces: Vec<Bytes>,
) -> Result<(), Failure> {
    let planned = Planned::Speech {
        characters,
        text_tokens: 0,
    };
    let cost = plan.served_cost(&req.model, entry.meta.cost, Some(&planned));
    served(out, plan, Status::Hit, entry.meta.cost);
    // Framed as a miss of the same request is (chunked): a hit's head is a miss's.
    head(call, req, plan, Status::Hit, Some(entry.age()), None, &cost).await?;
    out.status = 200;
    out.first_byte = Some(call.start.elapsed());
    out.cost = Some(cost);
    let last = pieces.len().saturating_sub(1);
    for (i, piece) in pieces.into_iter().enumerate() {
        write(call, piece, i == last).await?;
    }
    Ok(())
}

/// Served by the request in flight: its pieces as they arrive.
async fn follow(
    call: &mut Call<'_>,
    req: &SpeechRequest<'_>,
    characters: u64,
    out: &mut Outcome,
    plan: &Plan,
    mut reader: Reader,
) -> Followed {
    let first = match reader.next().await {
        Follow::Piece(p) => p,
        // A finished flight with no audio cannot be (a speech answer has some); and a failed
        // leader's followers try again.
        Follow::Done(_) | Follow::Failed => return Followed::Again,
    };
    let planned = Planned::Speech {
        characters,
        text_tokens: 0,
    };
    let cost = plan.served_cost(&req.model, None, Some(&planned));
    served(out, plan, Status::Collapsed, None);
    if let Err(e) = head(call, req, plan, Status::Collapsed, None, None, &cost).await {
        return Followed::Ended(Err(e));
    }
    out.status = 200;
    out.first_byte = Some(call.start.elapsed());
    out.cost = Some(cost);
    // Each piece goes out as soon as the leader has it.
    let mut piece = first;
    loop {
        let error_event = req.sse && piece.starts_with(b"data: \x7b\"type\":\"error\"");
        if let Err(e) = write(call, piece, false).await {
            return Followed::Ended(Err(e));
        }
        piece = match reader.next().await {
            Follow::Piece(p) => p,
            Follow::Done(meta) => {
                out.cost = Some(plan.served_cost(&req.model, meta.cost, Some(&planned)));
                served(out, plan, Status::Collapsed, meta.cost);
                return Followed::Ended(end(call).await);
            }
            // The leader's stream failed after its first audio: an SSE client gets the error
            // event (the leader's, when it wrote one), raw audio is cut as the leader's was.
            // Either way the answer was cut short, and is recorded so.
            Follow::Failed if req.sse => {
                if !error_event {
                    let e = crate::common::error::GatewayError::Internal(
                        "the answer this request waited for failed".into(),
                    );
                    if let Err(e) = write(call, passthrough::error_event(&e), false).await {
                        return Followed::Ended(Err(e));
                    }
                }
                if let Err(e) = end(call).await {
                    return Followed::Ended(Err(e));
                }
                return Followed::Ended(Err(Failure::Abort(
                    "the answer this request waited for failed mid-stream".into(),
                )));
            }
            Follow::Failed => {
                return Followed::Ended(Err(Failure::Abort(
                    "the answer this request waited for failed mid-stream".into(),
                )))
            }
        };
    }
}

/// Note in `out` what the cache did, and what a served answer saved; a hit is not charged to
/// the caller unless the operator counts hits.
fn served(
    out: &mut Outcome,
    plan: &Plan,
    status: Status,
    saved: Option<(crate::money::Amount, crate::money::Currency)>,
) {
    out.cache = Some(CacheUse { status, saved });
    if !plan.hits_count {
        out.charge = Some(Default::default());
    }
}

async fn write(call: &mut Call<'_>, piece: Bytes, last: bool) -> Result<(), Failure> {
    if !piece.is_empty() {
        call.session
            .write_response_body(Some(piece), false)
            .await
            .map_err(|e| Failure::written("writing cached audio", e))?;
    }
    if last {
        end(call).await?;
    }
    Ok(())
}

async fn end(call: &mut Call<'_>) -> Result<(), Failure> {
    call.session
        .write_response_body(None, true)
        .await
        .map_err(|e| Failure::written("ending cached audio", e))
}
