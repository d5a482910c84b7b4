//! Waiting for a natively asynchronous provider's task: poll its state every
//! `images.poll_interval` until it finishes, fails, or the deadline passes.
//!
//! A poll that fails in a way that may pass (connection trouble, a timeout, 429, 5xx) is not the
//! task failing: the next poll tries again, up to [`MAX_POLL_FAILURES`] in a row. The provider's
//! own verdict, read from a successful poll (moderated, failed, expired), ends the wait at once,
//! whatever its kind: the task is over, and asking about it again changes nothing.

use std::time::Duration;

use tokio::time::Instant;

use crate::common::error::GatewayError;

use crate::common::error::UpstreamError;

use crate::api::adapter::TaskAdapter;
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::images::NativeImages;
use crate::common::images::NativeTask;
use crate::common::images::Poll;
use crate::engine::trace;
use crate::telemetry::{Kind, Status};
use crate::upstream::exchange::Upstream;

/// Failed polls in a row (each one that may pass) after which the wait gives up.
pub(crate) const MAX_POLL_FAILURES: u32 = 5;

/// Largest error body read from a poll that failed.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Told what each poll saw, so an asynchronous task can show `pending` or `running`.
pub(crate) trait Watch: Sync {
    fn state(&self, queued: bool);
}

/// Poll `task` on `target` until it ends, or until `deadline` (then a timeout error). When the
/// request's (or the task job's) spans are recorded, the wait is a `task_poll` span: the
/// provider, how many polls and how many of them failed, how it ended.
pub(crate) async fn wait(
    upstream: &Upstream,
    (tasks, target): (&dyn TaskAdapter, &Target),
    region: &str,
    task: &NativeTask,
    interval: Duration,
    deadline: Instant,
    watch: &dyn Watch,
) -> Result<NativeImages, GatewayError> {
    let start = trace::now();
    let mut count = Polls::default();
    let out = wait_counted(
        upstream,
        (tasks, target),
        region,
        task,
        (interval, deadline),
        watch,
        &mut count,
    )
    .await;
    trace::span(None, "task_poll", Kind::Internal, start, |s| {
        let provider = &target.provider;
        s.set("gen_ai.provider.name", provider.kind.clone());
        s.set("switchyard.provider.account", provider.name.clone());
        s.set("gen_ai.request.model", target.native_model.clone());
        s.set("switchyard.poll.count", u64::from(count.polls));
        s.set("switchyard.poll.failures", u64::from(count.failures));
        if let Err(e) = &out {
            s.set("error.type", e.code());
            s.status = Status::Error(e.code().to_string());
        }
    });
    out
}

/// What a wait did, for its span.
#[derive(Default)]
struct Polls {
    polls: u32,
    failures: u32,
}

async fn wait_counted(
    upstream: &Upstream,
    (tasks, target): (&dyn TaskAdapter, &Target),
    region: &str,
    task: &NativeTask,
    (interval, deadline): (Duration, Instant),
    watch: &dyn Watch,
    count: &mut Polls,
) -> Result<NativeImages, GatewayError> {
    let provider = &target.provider;
    let mut failures = 0u32;
    loop {
        count.polls += 1;
        let polled = poll_once(upstream, tasks, target, region, task).await;
        if polled.is_err() {
            count.failures += 1;
        }
        match polled {
            Ok(Ok(Poll::Done(images))) => return Ok(images),
            Ok(Ok(Poll::Queued)) => {
                failures = 0;
                watch.state(true);
            }
            Ok(Ok(Poll::Running)) => {
                failures = 0;
                watch.state(false);
            }
            Ok(Err(verdict)) => return Err(GatewayError::Upstream(verdict)),
            Err(e) if e.retryable() && failures + 1 < MAX_POLL_FAILURES => {
                failures += 1;
                log::warn!(
                    "provider {}: poll {failures} of a task failed: {e}",
                    provider.name
                );
            }
            Err(e) => return Err(GatewayError::Upstream(e)),
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(GatewayError::Upstream(UpstreamError::new(
                UpstreamErrorKind::Timeout,
                &provider.name,
                "the provider's task did not finish in the time allowed",
            )));
        }
        tokio::time::sleep_until((now + interval).min(deadline)).await;
    }
}

/// One poll: `Ok` with the provider's reading of the task (its state, or its failure), or `Err`
/// when the poll itself failed.
async fn poll_once(
    upstream: &Upstream,
    tasks: &dyn TaskAdapter,
    target: &Target,
    region: &str,
    task: &NativeTask,
) -> Result<Result<Poll, UpstreamError>, UpstreamError> {
    let provider = &target.provider;
    let request = tasks.poll_request(provider, task)?;
    let resp = upstream.poll(provider, region, &request).await?;
    let status = resp.status;
    let headers = resp.headers().cloned().unwrap_or_default();
    if !(200..300).contains(&status) {
        let body = resp.read_all(ERROR_BODY_LIMIT).await.unwrap_or_default();
        return Err(provider.error_response(status, &headers, &body));
    }
    let body = resp.read_all(provider.max_response_bytes).await?;
    Ok(tasks.poll_response(provider, &headers, &body))
}
