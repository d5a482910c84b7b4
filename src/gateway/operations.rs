//! The three operations, from a read body to a written answer.

use std::sync::Arc;

use bytes::Bytes;
use pingora::proxy::Session;

use super::{image_tasks, lifecycle, mount, respond};
use super::{Ctx, GatewayState};
use crate::api::adapter::Registry;
use crate::api::compat::Surface;
use crate::api::{images, rerank, speech};
use crate::catalog::Target;
use crate::common::authority;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::Operation;
use crate::config::GatewaySettings;
use crate::engine::attempts;
use crate::engine::attempts::AcceptFuture;
use crate::engine::attempts::Reply;
use crate::engine::images::{generate, Synchronous};
use crate::engine::passthrough::StreamError;
use crate::engine::speech as stream_speech;
use crate::engine::speech::Primed;
use crate::upstream::exchange::{Response, Upstream};

/// Why an operation stopped.
pub enum Failure {
    /// Nothing was sent yet: answer with this error.
    Answer(GatewayError),
    /// The answer had started and cannot be finished: the connection is dropped unfinished (raw
    /// audio), which the client sees as a truncated answer.
    Abort(String),
    /// The client went away (or stopped reading until a write timed out): nothing more can be
    /// sent, and nothing is wrong with the gateway or the provider.
    ClientGone,
}

impl Failure {
    /// A write of the answer (`what`) failed: the client is gone when its connection said so
    /// (over HTTP/2, a stream the client reset is an `H2Error` from downstream), else the answer
    /// is abandoned for the reason given.
    pub fn written(what: &str, e: Box<pingora::Error>) -> Failure {
        use pingora::ErrorType::{ConnectionClosed, H2Error, WriteError, WriteTimedout};
        match e.etype() {
            WriteError | ConnectionClosed | WriteTimedout => Failure::ClientGone,
            H2Error if *e.esource() == pingora::ErrorSource::Downstream => Failure::ClientGone,
            _ => Failure::Abort(format!("{what}: {e}")),
        }
    }
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
    s: &GatewaySettings,
    region: &str,
    session: &mut Session,
    ctx: &mut Ctx,
    body: &[u8],
) -> Result<(), Failure> {
    let req = speech::parse(body, &s.catalog, s.retry.max_retries)?;
    ctx.model = Some(req.model.clone());
    let characters = req.input.as_str().chars().count() as u64;
    super::limited::cost(state, ctx, Operation::Speech, characters).await?;
    let upstream = &state.upstream;
    let adapters = &s.adapters;
    // Priming (reading up to the first audio) runs inside the attempt loop, so errors a provider
    // reports inside a 200 answer are retried like any other until the first byte goes out.
    let (reply, _target) = attempts::run_with(
        upstream,
        &req.model,
        region,
        req.retries,
        |t| adapters.speech(&t.provider)?.request(t, &req),
        |t, resp| prime_speech(upstream, adapters, t, &req, resp),
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
        return Err(unexpected());
    };
    let content_type = if req.sse {
        "text/event-stream"
    } else {
        speech::content_type(req.response_format)
    };
    let headers = mount::link_headers(lifecycle::headers(&req.model), ctx.prefix());
    respond::stream_head(session, content_type, &headers)
        .await
        .map_err(|e| Failure::written("writing response head", e))?;
    ctx.status = 200;
    // The head goes out only once the first audio is in hand (priming), so this is the time to
    // the first byte of audio too.
    ctx.ttfb = Some(ctx.start.elapsed());
    match stream_speech::relay(session, primed, req.sse, req.input.as_str()).await {
        Ok(()) => {
            ctx.usage.characters = characters;
            Ok(())
        }
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
    req: &speech::SpeechRequest<'_>,
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

pub async fn images(
    state: &Arc<GatewayState>,
    s: &Arc<GatewaySettings>,
    region: &str,
    session: &mut Session,
    ctx: &mut Ctx,
    body: Bytes,
) -> Result<(), Failure> {
    let req = images::parse(&body, &s.catalog, s.retry.max_retries)?;
    ctx.model = Some(req.model.clone());
    // The provider's own refusals, before a task is accepted or a call is sent.
    crate::engine::images::validate(&s.adapters, &req)?;
    let headers = mount::link_headers(lifecycle::headers(&req.model), ctx.prefix());
    super::limited::cost(state, ctx, Operation::Images, req.n).await?;
    let mut base = public_base(s, session, req.response_format == "url")?;
    // Under a mount, the links (hosted files) are the mount's paths too.
    if let Some(prefix) = ctx.prefix() {
        base.push_str(prefix);
    }
    let owner = ctx.principal.as_ref().map_or("", |p| p.id.as_str());
    let result = if req.is_async {
        let asked = req.n;
        let (owner, model) = (owner.to_string(), req.model.name.clone());
        drop(req);
        let accepted = image_tasks::start(state, s, region, owner, model, body, base).await?;
        // A task runs past this request: its images are charged as asked when it is accepted.
        super::limited::charge_now(state, ctx, Operation::Images, asked).await;
        accepted
    } else {
        let engine = state.images(s);
        let progress = Synchronous::new(&engine);
        let model = req.model.clone();
        let result = generate(&engine, region, req, &base, &progress).await?;
        image_tasks::keep_finished(state, s, owner, &model.name, &result).await;
        ctx.usage.images = result.data.len() as u64;
        result
    };
    let out = serde_json::to_vec(&result)
        .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))?;
    ctx.status = 200;
    respond::json(session, 200, out.into(), &headers)
        .await
        .map_err(|e| Failure::written("writing answer", e))
}

/// Where links to hosted files point (the caller appends a mount prefix): the configured public
/// URL; else, when this request's images
/// come back as links, its own host — only if that is a plain `host[:port]` authority, never
/// reflected otherwise (a 400 naming `host`). `https` when the caller came over TLS or a proxy
/// in front says so in `X-Forwarded-Proto`. A request whose images come back inline builds no
/// link, so its host is not needed.
fn public_base(
    s: &GatewaySettings,
    session: &Session,
    links: bool,
) -> Result<String, GatewayError> {
    if let Some(base) = &s.images.public_base_url {
        return Ok(base.clone());
    }
    if !links {
        return Ok(String::new());
    }
    let h = session.req_header();
    // The request target's authority (HTTP/2's `:authority`, or an absolute-form target) wins
    // over `Host`, as RFC 9112 §3.2.2 and RFC 9113 §8.3.1 say.
    let mut hosts = h.headers.get_all(http::header::HOST).iter();
    let host = match h.uri.authority() {
        Some(authority) => Some(authority.as_str()),
        None => {
            let first = hosts.next();
            // Pingora already refuses a request with two (HTTP/1 and HTTP/2 alike); checked again
            // so that this function alone never picks one of several.
            if hosts.next().is_some() {
                return Err(GatewayError::field(
                    "host",
                    "more than one Host header: links to hosted images cannot be built",
                ));
            }
            // A value that is not even UTF-8 is as unusable as a malformed one.
            first.map(|v| v.to_str().unwrap_or(""))
        }
    };
    let Some(host) = host else {
        return Err(GatewayError::field(
            "host",
            "links to hosted images are built from the request's Host header, and it has none \
             (the operator can set images.public_base_url instead)",
        ));
    };
    if !authority::is_host_port(host) {
        return Err(GatewayError::field(
            "host",
            "the Host header is not a plain host[:port] (a DNS name or IP address, optional \
             port 1-65535), so links to hosted images cannot be built from it",
        ));
    }
    let tls = session.digest().is_some_and(|d| d.ssl_digest.is_some()) || forwarded_https(h);
    Ok(format!("{}://{host}", if tls { "https" } else { "http" }))
}

/// Whether a proxy in front says the client came over HTTPS: the first (client-facing) value of
/// `X-Forwarded-Proto` is `https`. Any other value (`http`, or one that means nothing) leaves the
/// connection's own scheme.
fn forwarded_https(h: &pingora::http::RequestHeader) -> bool {
    h.headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

pub async fn rerank(
    state: &GatewayState,
    s: &GatewaySettings,
    region: &str,
    session: &mut Session,
    ctx: &mut Ctx,
    body: &[u8],
    surface: Surface,
) -> Result<(), Failure> {
    // A compatibility surface's body is translated into the gateway's own first, so validation,
    // dispatch and usage are the one rerank pipeline's.
    let translated = surface.translate(body)?;
    let own = translated.as_ref().map_or(body, |t| t.body.as_slice());
    let req = rerank::parse(own, &s.catalog, s.retry.max_retries)?;
    ctx.model = Some(req.model.clone());
    let ((headers, native), target) =
        attempts::run(&state.upstream, &req.model, region, req.retries, |t| {
            s.adapters.rerank(&t.provider)?.request(t, &req)
        })
        .await?;
    let result = s
        .adapters
        .rerank(&target.provider)?
        .response(&target.provider, &req, &headers, &native)
        .map_err(GatewayError::Upstream)?;
    let out = match &translated {
        Some(t) => surface.answer(&result, t),
        None => serde_json::to_vec(&result).map_err(|e| format!("serializing result: {e}")),
    }
    .map_err(GatewayError::Internal)?;
    ctx.usage.tokens = result.usage.total_tokens;
    ctx.status = 200;
    let headers = mount::link_headers(lifecycle::headers(&req.model), ctx.prefix());
    respond::json(session, 200, out.into(), &headers)
        .await
        .map_err(|e| Failure::written("writing answer", e))
}
