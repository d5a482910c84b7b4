//! The three operations, from a read body to a written answer.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::proxy::Session;
use tokio::time::Instant;

use super::{image_tasks, respond};
use super::{Ctx, GatewayState};
use crate::api::adapter::{Registry, TaskAdapter};
use crate::api::{images, rerank, speech};
use crate::catalog::{Model, Target};
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::image_input::ImageInput;
use crate::common::images::Delivery;
use crate::common::images::ImageAnswer;
use crate::common::images::NativeImages;
use crate::common::images::NativeTask;
use crate::engine::attempts;
use crate::engine::attempts::AcceptFuture;
use crate::engine::attempts::Reply;
use crate::engine::passthrough::StreamError;
use crate::engine::poll;
use crate::engine::poll::Watch;
use crate::engine::speech as stream_speech;
use crate::engine::speech::Primed;
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
    ))
}

pub async fn images(
    state: &Arc<GatewayState>,
    region: &str,
    session: &mut Session,
    ctx: &mut Ctx,
    body: Bytes,
) -> Result<(), Failure> {
    let s = &state.settings;
    let req = images::parse(&body, &s.catalog, s.retry.max_retries)?;
    ctx.model = Some(req.model.clone());
    let base = public_base(state, session);
    let result = if req.is_async {
        let owner = ctx
            .principal
            .as_ref()
            .map(|p| p.id.clone())
            .unwrap_or_default();
        let model = req.model.name.clone();
        drop(req);
        image_tasks::start(state, region, owner, model, body, base).await?
    } else {
        let progress = Synchronous::new(state);
        generate(state, region, req, &base, &progress).await?
    };
    let out = serde_json::to_vec(&result)
        .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))?;
    ctx.status = 200;
    respond::json(session, 200, out.into(), &[])
        .await
        .map_err(|e| Failure::Abort(format!("writing answer: {e}")))
}

/// What a background task learns as its generation goes (a synchronous request ignores it).
#[async_trait]
pub trait Progress: Watch + Send + Sync {
    /// Called once, before anything is sent to a provider, with the number of native calls and
    /// how the result is to be delivered; an error stops the generation with nothing sent.
    async fn sending(&self, calls: usize, delivery: &Delivery) -> Result<(), GatewayError>;
    /// A natively asynchronous provider accepted native call `slot` as `task`.
    async fn submitted(&self, slot: usize, task: &NativeTask);
    /// Until when the provider's tasks may be waited for.
    fn deadline(&self) -> Instant;
}

/// A synchronous request: nothing to record; natively asynchronous providers are waited for
/// until `images.sync_wait_seconds` from now.
pub struct Synchronous {
    deadline: Instant,
}

impl Synchronous {
    pub fn new(state: &GatewayState) -> Synchronous {
        Synchronous {
            deadline: Instant::now() + state.settings.images.sync_wait,
        }
    }
}

impl Watch for Synchronous {
    fn state(&self, _queued: bool) {}
}

#[async_trait]
impl Progress for Synchronous {
    async fn sending(&self, _calls: usize, _delivery: &Delivery) -> Result<(), GatewayError> {
        Ok(())
    }
    async fn submitted(&self, _slot: usize, _task: &NativeTask) {}
    fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// Generate the images `req` asks for and deliver them in its `response_format` (links under
/// `base`). Shared by synchronous calls and background tasks.
pub async fn generate(
    state: &GatewayState,
    region: &str,
    mut req: images::ImageRequest<'_>,
    base: &str,
    progress: &dyn Progress,
) -> Result<images::ImageResult, GatewayError> {
    resolve_inputs(state, &mut req).await?;
    // A family that returns fewer images per call than asked gets concurrent calls, all or error.
    let per_call = req.caps.per_call_n.max(1);
    let calls = req.n.div_ceil(per_call);
    let delivery = crate::engine::deliver::delivery_of(&req);
    progress.sending(calls as usize, &delivery).await?;
    let batches = (0..calls).map(|i| {
        let n = per_call.min(req.n - i * per_call);
        image_call(state, region, &req, n, i as usize, progress)
    });
    let answers = futures_util::future::try_join_all(batches).await?;
    deliver_all(state, answers, &delivery, base).await
}

/// Finish a generation whose native tasks were submitted by another instance (or before a
/// restart): wait for each, then deliver as the caller asked.
pub async fn resume(
    state: &GatewayState,
    region: &str,
    model: &Model,
    tasks: &[NativeTask],
    delivery: &Delivery,
    base: &str,
    progress: &dyn Progress,
) -> Result<images::ImageResult, GatewayError> {
    let polls = tasks.iter().map(|task| async move {
        let target = model
            .targets
            .iter()
            .find(|t| t.provider.name == task.provider)
            .ok_or_else(|| {
                GatewayError::Internal(format!(
                    "model {} no longer has provider {}",
                    model.name, task.provider
                ))
            })?;
        let images = poll::wait(
            &state.upstream,
            (task_adapter(state, target)?, target),
            region,
            task,
            state.settings.images.poll_interval,
            progress.deadline(),
            progress,
        )
        .await?;
        Ok::<_, GatewayError>((images, target))
    });
    let answers = futures_util::future::try_join_all(polls).await?;
    deliver_all(state, answers, delivery, base).await
}

/// Merge the native calls' images (in call order) and deliver them.
async fn deliver_all(
    state: &GatewayState,
    answers: Vec<(NativeImages, &Target)>,
    delivery: &Delivery,
    base: &str,
) -> Result<images::ImageResult, GatewayError> {
    let mut native = NativeImages::default();
    let mut provider = None;
    for (part, target) in answers {
        native.created = native.created.or(part.created);
        native.images.extend(part.images);
        provider.get_or_insert(target);
    }
    let Some(target) = provider else {
        return Err(GatewayError::Internal("no image call was made".into()));
    };
    crate::engine::deliver::deliver(
        &state.upstream,
        &state.files,
        &target.provider,
        delivery,
        native,
        base,
    )
    .await
}

/// One native image call (with its retries) asking for `n` images; an error the provider reports
/// inside a 200 answer is classified inside the attempt loop, so it is retried like any other. A
/// natively asynchronous provider answers with a task, which is then waited for.
async fn image_call<'s>(
    state: &'s GatewayState,
    region: &str,
    req: &'s images::ImageRequest<'_>,
    n: u64,
    slot: usize,
    progress: &dyn Progress,
) -> Result<(NativeImages, &'s Target), GatewayError> {
    let (reply, target) = attempts::run_with(
        &state.upstream,
        &req.model,
        region,
        req.retries,
        |t| {
            state
                .settings
                .adapters
                .images(&t.provider)?
                .request(t, req, n)
        },
        |t, resp| -> AcceptFuture<'_, ImageAnswer> {
            let limit = t.provider.max_response_bytes;
            Box::pin(async move {
                let headers = resp.headers().cloned().unwrap_or_default();
                let body = resp.read_all(limit).await?;
                match state.settings.adapters.images(&t.provider) {
                    Ok(adapter) => adapter.response(&t.provider, req, &headers, &body),
                    Err(e) => Err(UpstreamError::new(
                        UpstreamErrorKind::Failure,
                        &t.provider.name,
                        e.to_string(),
                    )),
                }
            })
        },
    )
    .await?;
    match reply {
        Reply::Remote(ImageAnswer::Images(images)) => Ok((images, target)),
        Reply::Remote(ImageAnswer::Task(task)) => {
            progress.submitted(slot, &task).await;
            let images = poll::wait(
                &state.upstream,
                (task_adapter(state, target)?, target),
                region,
                &task,
                state.settings.images.poll_interval,
                progress.deadline(),
                progress,
            )
            .await?;
            Ok((images, target))
        }
        Reply::Local(_) => Err(GatewayError::Internal(
            "an in-process provider answered images".into(),
        )),
    }
}

/// How `target`'s provider polls its image tasks.
fn task_adapter<'s>(
    state: &'s GatewayState,
    target: &Target,
) -> Result<&'s dyn TaskAdapter, GatewayError> {
    state
        .settings
        .adapters
        .images(&target.provider)?
        .tasks()
        .ok_or_else(|| {
            GatewayError::Internal(format!(
                "provider {} does not run image generations as tasks",
                target.provider.name
            ))
        })
}

/// Download `image`/`mask` URLs through the address guard when a provider of this model needs
/// the bytes (multipart forms); providers that take URLs get the caller's URL unchanged.
async fn resolve_inputs(
    state: &GatewayState,
    req: &mut images::ImageRequest<'_>,
) -> Result<(), GatewayError> {
    let needs_bytes = req
        .model
        .enabled_targets()
        .filter_map(|t| state.settings.adapters.images(&t.provider).ok())
        .any(|a| a.input_as_bytes());
    if !needs_bytes {
        return Ok(());
    }
    let policy = &state.settings.images.download;
    for (field, input) in [("image", &mut req.image), ("mask", &mut req.mask)] {
        if let Some(ImageInput::Url(url)) = input {
            let fetched = state
                .upstream
                .fetch_input(url, policy)
                .await
                .map_err(|m| GatewayError::field(field, m))?;
            *input = Some(fetched);
        }
    }
    Ok(())
}

/// Where links to hosted files point: the configured public URL, else this request's own host
/// (`https` when the caller came over TLS or a proxy says so).
fn public_base(state: &GatewayState, session: &Session) -> String {
    if let Some(base) = &state.settings.images.public_base_url {
        return base.clone();
    }
    let h = session.req_header();
    let host = h
        .headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| h.uri.authority().map(|a| a.as_str()))
        .unwrap_or("localhost");
    let forwarded_tls = h
        .headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let tls = forwarded_tls || session.digest().is_some_and(|d| d.ssl_digest.is_some());
    format!("{}://{host}", if tls { "https" } else { "http" })
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
            s.adapters.rerank(&t.provider)?.request(t, &req)
        })
        .await?;
    let result = s
        .adapters
        .rerank(&target.provider)?
        .response(&target.provider, &req, &headers, &native)
        .map_err(GatewayError::Upstream)?;
    let out = serde_json::to_vec(&result)
        .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))?;
    ctx.status = 200;
    respond::json(session, 200, out.into(), &[])
        .await
        .map_err(|e| Failure::Abort(format!("writing answer: {e}")))
}
