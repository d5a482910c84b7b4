//! Speech: validated, sent with retries until a provider's first audio is in hand, then relayed
//! to the client as it arrives (raw audio, or SSE).

use pingora::proxy::Session;

use super::super::costing::RequestCost;
use super::super::limited;
use super::super::outcome::{Call, Failure, Outcome};
use super::super::{lifecycle, mount, respond};
use crate::api::adapter::Registry;
use crate::api::speech::{self, SpeechRequest};
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::Operation;
use crate::cost::{Metered, Planned, SpeechMetered};
use crate::engine::attempts::{self, AcceptFuture, Reply};
use crate::engine::passthrough::StreamError;
use crate::engine::speech::{self as stream_speech, Primed};
use crate::stream::audio::SpeechUsage;
use crate::upstream::exchange::{Response, Upstream};

/// `POST /api/v1/audio/speech`.
pub(crate) async fn speech(call: &mut Call<'_>, body: &[u8]) -> Outcome {
    let s = call.settings;
    let req = match speech::parse(body, &s.catalog, s.retry.max_retries) {
        Ok(req) => req,
        Err(e) => return Outcome::failed(e),
    };
    let mut out = Outcome::new();
    out.model = Some(req.model.clone());
    let characters = req.input.as_str().chars().count() as u64;
    let result = serve(call, &req, characters, &mut out).await;
    if result.is_ok() {
        out.usage.characters = characters;
    }
    out.result = result;
    out
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
    limited::cost(call, Operation::Speech, characters, &req.model, &planned).await?;
    let upstream = &call.state.upstream;
    let adapters = &call.settings.adapters;
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
    respond::stream_head(call.session, content_type, primed.known_length(), &headers)
        .await
        .map_err(|e| Failure::written("writing response head", e))?;
    out.status = 200;
    // The head goes out only once the first audio is in hand (priming), so this is the time to
    // the first byte of audio too.
    out.first_byte = Some(call.start.elapsed());
    out.cost = Some(at_head);
    let reported = relay(call.session, primed, req).await?;
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
    Ok(())
}

/// Relay the primed answer to its end; the usage the provider reported comes back.
async fn relay(
    session: &mut Session,
    primed: Primed<'_>,
    req: &SpeechRequest<'_>,
) -> Result<SpeechUsage, Failure> {
    match stream_speech::relay(session, primed, req.sse, req.input.as_str()).await {
        Ok(usage) => Ok(usage),
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
