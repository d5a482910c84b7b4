//! The three operations, from a read body to a written answer.

use pingora::proxy::Session;

use super::respond;
use super::{Ctx, GatewayState};
use crate::api::error::GatewayError;
use crate::api::{images, rerank, speech};
use crate::catalog::Target;
use crate::providers;
use crate::stream::passthrough::StreamError;
use crate::stream::speech::{self as stream_speech, Primed};
use crate::upstream::attempts::{self, AcceptFuture, Reply};
use crate::upstream::exchange::{Response, Upstream};

/// Why an operation stopped.
pub enum Failure {
    /// Nothing was sent yet: answer with this error.
    Answer(GatewayError),
    /// The answer had started; the connection must be dropped unfinished (raw audio) or is gone.
    Abort(String),
}

impl From<GatewayError> for Failure {
    fn from(e: GatewayError) -> Self {
        Failure::Answer(e)
    }
}

fn unexpected() -> Failure {
    Failure::Answer(GatewayError::Internal(
        "an in-process provider answered speech".into(),
    ))
}

pub async fn speech(
    state: &GatewayState,
    region: &str,
    session: &mut Session,
    ctx: &mut Ctx,
    body: &[u8],
) -> Result<(), Failure> {
    let s = &state.settings;
    let req = speech::parse(body, &s.catalog, s.retry.max_retries)?;
    ctx.model = Some(req.model.clone());
    let upstream = &state.upstream;
    // Priming (reading up to the first audio) runs inside the attempt loop, so errors a provider
    // reports inside a 200 answer are retried like any other until the first byte goes out.
    let (reply, _target) = attempts::run_with(
        upstream,
        &req.model,
        region,
        req.retries,
        |t| providers::speech_request(t, &req),
        |t, resp| prime_speech(upstream, t, &req, resp),
    )
    .await?;
    let Reply::Remote(primed) = reply else {
        return Err(unexpected());
    };
    let content_type = if req.sse {
        "text/event-stream"
    } else {
        speech::content_type(req.response_format)
    };
    respond::stream_head(session, content_type)
        .await
        .map_err(|e| Failure::Abort(format!("writing response head: {e}")))?;
    ctx.status = 200;
    match stream_speech::relay(session, primed, req.sse, req.input.as_str()).await {
        Ok(()) => Ok(()),
        Err(StreamError::Client) => Err(Failure::Abort("client went away".into())),
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
    target: &Target,
    req: &speech::SpeechRequest<'_>,
    resp: Response<'u>,
) -> AcceptFuture<'u, Primed<'u>> {
    let decoding = providers::speech_decoding(target, req);
    Box::pin(stream_speech::prime(
        upstream,
        target.provider.clone(),
        resp,
        decoding,
    ))
}

pub async fn images(
    state: &GatewayState,
    region: &str,
    session: &mut Session,
    ctx: &mut Ctx,
    body: &[u8],
) -> Result<(), Failure> {
    let s = &state.settings;
    let req = images::parse(body, &s.catalog, s.retry.max_retries)?;
    ctx.model = Some(req.model.clone());
    let ((_, native), target) =
        attempts::run(&state.upstream, &req.model, region, req.retries, |t| {
            providers::image_request(t, &req)
        })
        .await?;
    let result =
        providers::image_response(target, &req, &native).map_err(GatewayError::Upstream)?;
    let out = serde_json::to_vec(&result)
        .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))?;
    ctx.status = 200;
    respond::json(session, 200, out.into(), &[])
        .await
        .map_err(|e| Failure::Abort(format!("writing answer: {e}")))
}

pub async fn rerank(
    state: &GatewayState,
    region: &str,
    session: &mut Session,
    ctx: &mut Ctx,
    body: &[u8],
) -> Result<(), Failure> {
    let s = &state.settings;
    let req = rerank::parse(body, &s.catalog, s.retry.max_retries)?;
    ctx.model = Some(req.model.clone());
    let ((headers, native), target) =
        attempts::run(&state.upstream, &req.model, region, req.retries, |t| {
            providers::rerank_request(t, &req)
        })
        .await?;
    let result = providers::rerank_response(target, &req, &headers, &native)
        .map_err(GatewayError::Upstream)?;
    let out = serde_json::to_vec(&result)
        .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))?;
    ctx.status = 200;
    respond::json(session, 200, out.into(), &[])
        .await
        .map_err(|e| Failure::Abort(format!("writing answer: {e}")))
}
