//! The three operations, from a read body to a written answer.

use pingora::proxy::Session;

use super::respond;
use super::{Ctx, GatewayState};
use crate::api::error::GatewayError;
use crate::api::{images, rerank, speech};
use crate::providers;
use crate::stream::passthrough::{self, StreamError};
use crate::upstream::attempts::{self, Answer, Mode};

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
    Failure::Answer(GatewayError::Internal("unexpected answer mode".into()))
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
    let (answer, _target) = attempts::run(
        &state.upstream,
        &req.model,
        region,
        req.retries,
        Mode::Streaming,
        |t| providers::speech_request(t, &req),
    )
    .await?;
    let Answer::Streaming(resp) = answer else {
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
    let copied = if req.sse {
        passthrough::events(session, *resp).await
    } else {
        passthrough::bytes(session, *resp).await
    };
    match copied {
        Ok(()) => Ok(()),
        Err(StreamError::Client) => Err(Failure::Abort("client went away".into())),
        Err(StreamError::Upstream(e)) => Err(Failure::Abort(format!(
            "provider failed mid-stream: {}",
            e.message()
        ))),
    }
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
    let (answer, target) = attempts::run(
        &state.upstream,
        &req.model,
        region,
        req.retries,
        Mode::Buffered,
        |t| providers::image_request(t, &req),
    )
    .await?;
    let Answer::Buffered(_, native) = answer else {
        return Err(unexpected());
    };
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
    let (answer, target) = attempts::run(
        &state.upstream,
        &req.model,
        region,
        req.retries,
        Mode::Buffered,
        |t| providers::rerank_request(t, &req),
    )
    .await?;
    let Answer::Buffered(headers, native) = answer else {
        return Err(unexpected());
    };
    let result = providers::rerank_response(target, &req, &headers, &native)
        .map_err(GatewayError::Upstream)?;
    let out = serde_json::to_vec(&result)
        .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))?;
    ctx.status = 200;
    respond::json(session, 200, out.into(), &[])
        .await
        .map_err(|e| Failure::Abort(format!("writing answer: {e}")))
}
