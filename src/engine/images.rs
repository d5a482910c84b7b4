//! Image generation: fan-out over native calls, the attempt loop per call, waiting for natively
//! asynchronous providers' tasks, and delivery in the caller's `response_format`. Shared by
//! synchronous requests and background tasks, which follow it through [`Progress`].

use async_trait::async_trait;
use tokio::time::Instant;

use crate::api::adapter::{Registry, TaskAdapter};
use crate::api::images;
use crate::catalog::{Model, Target};
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::image_input::ImageInput;
use crate::common::images::{Delivery, ImageAnswer, NativeImages, NativeTask};
use crate::config::ImageSettings;
use crate::engine::attempts::{self, AcceptFuture, Reply};
use crate::engine::deliver::HostedFiles;
use crate::engine::poll::{self, Watch};
use crate::upstream::exchange::Upstream;

/// What image generation uses of the gateway's state.
pub struct Images<'a> {
    pub upstream: &'a Upstream,
    pub adapters: &'a Registry,
    pub files: &'a HostedFiles,
    pub settings: &'a ImageSettings,
}

/// What a background task learns as its generation goes (a synchronous request ignores it).
#[async_trait]
pub(crate) trait Progress: Watch + Send + Sync {
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
pub(crate) struct Synchronous {
    deadline: Instant,
}

impl Synchronous {
    pub(crate) fn new(ctx: &Images<'_>) -> Synchronous {
        Synchronous {
            deadline: Instant::now() + ctx.settings.sync_wait,
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

/// Run every enabled target's provider refusals ([`crate::api::adapter::ImageAdapter::validate`])
/// on `req`: any target may serve it, so each must be able to. Called before anything is started,
/// for synchronous requests and asynchronous tasks alike, so a request the model cannot honour is
/// a 400 at once on both paths (never an accepted task that fails later).
pub(crate) fn validate(
    adapters: &Registry,
    req: &images::ImageRequest<'_>,
) -> Result<(), GatewayError> {
    for target in req.model.enabled_targets() {
        adapters.images(&target.provider)?.validate(target, req)?;
    }
    Ok(())
}

/// Generate the images `req` asks for and deliver them in its `response_format` (links under
/// `base`). Shared by synchronous calls and background tasks.
pub(crate) async fn generate(
    ctx: &Images<'_>,
    region: &str,
    mut req: images::ImageRequest<'_>,
    base: &str,
    progress: &dyn Progress,
) -> Result<images::ImageResult, GatewayError> {
    resolve_inputs(ctx, &mut req).await?;
    // A family that returns fewer images per call than asked gets concurrent calls, all or error.
    let per_call = req.caps.per_call_n.max(1);
    let calls = req.n.div_ceil(per_call);
    let delivery = crate::engine::deliver::delivery_of(&req);
    progress.sending(calls as usize, &delivery).await?;
    let batches = (0..calls).map(|i| {
        let n = per_call.min(req.n - i * per_call);
        image_call(ctx, region, &req, n, i as usize, progress)
    });
    let answers = futures_util::future::try_join_all(batches).await?;
    deliver_all(ctx, &req.model, answers, &delivery, base).await
}

/// Finish a generation whose native tasks were submitted by another instance (or before a
/// restart): wait for each, then deliver as the caller asked.
pub(crate) async fn resume(
    ctx: &Images<'_>,
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
            ctx.upstream,
            (task_adapter(ctx, target)?, target),
            region,
            task,
            ctx.settings.poll_interval,
            progress.deadline(),
            progress,
        )
        .await?;
        Ok::<_, GatewayError>((images, target))
    });
    let answers = futures_util::future::try_join_all(polls).await?;
    deliver_all(ctx, model, answers, delivery, base).await
}

/// Merge the native calls' images (in call order) and deliver them, noting what each call
/// delivered and which of `model`'s targets served it (each is priced at its own target).
async fn deliver_all(
    ctx: &Images<'_>,
    model: &Model,
    answers: Vec<(NativeImages, &Target)>,
    delivery: &Delivery,
    base: &str,
) -> Result<images::ImageResult, GatewayError> {
    let mut native = NativeImages::default();
    let mut provider = None;
    native.facts = crate::common::images::AnswerFacts::merge(
        answers.iter().filter_map(|(p, _)| p.facts.as_deref()),
    )
    .boxed();
    let mut served = Vec::with_capacity(answers.len());
    for (part, target) in answers {
        if let Some(index) = model.targets.iter().position(|t| std::ptr::eq(t, target)) {
            served.push(images::Served {
                target: index,
                images: part.images.len() as u64,
                facts: part.facts,
            });
        }
        native.created = native.created.or(part.created);
        native.images.extend(part.images);
        provider.get_or_insert(target);
    }
    let Some(target) = provider else {
        return Err(GatewayError::Internal("no image call was made".into()));
    };
    let mut result = crate::engine::deliver::deliver(
        ctx.upstream,
        ctx.files,
        &target.provider,
        delivery,
        native,
        base,
    )
    .await?;
    result.served = served;
    Ok(result)
}

/// One native image call (with its retries) asking for `n` images; an error the provider reports
/// inside a 200 answer is classified inside the attempt loop, so it is retried like any other. A
/// natively asynchronous provider answers with a task, which is then waited for.
async fn image_call<'s>(
    ctx: &'s Images<'s>,
    region: &str,
    req: &'s images::ImageRequest<'_>,
    n: u64,
    slot: usize,
    progress: &dyn Progress,
) -> Result<(NativeImages, &'s Target), GatewayError> {
    let (reply, target) = attempts::run_with(
        ctx.upstream,
        &req.model,
        region,
        req.retries,
        |t| ctx.adapters.images(&t.provider)?.request(t, req, n),
        |t, resp| -> AcceptFuture<'_, ImageAnswer> {
            let limit = t.provider.max_response_bytes;
            Box::pin(async move {
                let headers = resp.headers().cloned().unwrap_or_default();
                let body = resp.read_all(limit).await?;
                match ctx.adapters.images(&t.provider) {
                    Ok(adapter) => adapter
                        .response(&t.provider, req, &headers, &body)
                        .and_then(|answer| whole_set(answer, n, &t.provider.name)),
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
            // Boxed: polling (its waits and exchanges) is a big future, and inline it would make
            // every image call as big, for providers that answer at once too.
            let images = Box::pin(poll::wait(
                ctx.upstream,
                (task_adapter(ctx, target)?, target),
                region,
                &task,
                ctx.settings.poll_interval,
                progress.deadline(),
                progress,
            ))
            .await?;
            Ok((images, target))
        }
        Reply::Local(_) => Err(GatewayError::Internal(
            "an in-process provider answered images".into(),
        )),
    }
}

/// `answer` when it carries the `n` images its call asked for (or is a task, checked once it
/// ends, in delivery). A short set, such as a provider's filter dropping an image without saying
/// so, is a wrong answer: retried like one, and never passed on as if it were the whole.
fn whole_set(answer: ImageAnswer, n: u64, provider: &str) -> Result<ImageAnswer, UpstreamError> {
    match &answer {
        ImageAnswer::Images(got) if (got.images.len() as u64) < n => Err(UpstreamError::new(
            UpstreamErrorKind::WrongAnswer,
            provider,
            format!("returned {} of the {n} images asked for", got.images.len()),
        )),
        _ => Ok(answer),
    }
}

/// How `target`'s provider polls its image tasks.
fn task_adapter<'s>(
    ctx: &'s Images<'s>,
    target: &Target,
) -> Result<&'s dyn TaskAdapter, GatewayError> {
    ctx.adapters
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
    ctx: &Images<'_>,
    req: &mut images::ImageRequest<'_>,
) -> Result<(), GatewayError> {
    let needs_bytes = req
        .model
        .enabled_targets()
        .filter_map(|t| ctx.adapters.images(&t.provider).ok())
        .any(|a| a.input_as_bytes());
    if !needs_bytes {
        return Ok(());
    }
    let policy = &ctx.settings.download;
    for (field, input) in [("image", &mut req.image), ("mask", &mut req.mask)] {
        if let Some(ImageInput::Url(url)) = input {
            // Boxed, here and below: a download is a big future, and inline it would make every
            // generation's future as big, with no input to fetch too.
            let fetched = Box::pin(ctx.upstream.fetch_input(url, policy))
                .await
                .map_err(|m| GatewayError::field(field, m))?;
            *input = Some(fetched);
        }
    }
    for input in &mut req.more_images {
        if let ImageInput::Url(url) = input {
            *input = Box::pin(ctx.upstream.fetch_input(url, policy))
                .await
                .map_err(|m| GatewayError::field("image", m))?;
        }
    }
    Ok(())
}
