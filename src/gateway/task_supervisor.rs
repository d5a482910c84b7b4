//! The instance's caretaker of asynchronous tasks, run as a Pingora background service.
//!
//! While the server runs, it sweeps the task store every heartbeat for tasks whose instance went
//! silent (crashed, killed, cut off) and takes them over (see `image_tasks::take_over`), so a
//! task is finished by another instance even if nobody is reading it.
//!
//! On graceful shutdown (SIGTERM), the jobs running here get Pingora's grace period to finish.
//! Just before it ends, the ones still running are stopped and handed over: their heartbeat is
//! set to "long ago", so another instance's next sweep (or the next read) takes them over at
//! once instead of after `images.task_lost_after`. A fast shutdown (SIGINT) or a crash leaves
//! them to be noticed by their silence.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::time::Instant;

use super::image_tasks::{is_stale, take_over};
use super::task_job::now_ms;
use super::GatewayState;

/// Most stale tasks looked at per sweep.
const SWEEP_LIMIT: usize = 100;
/// Pingora's grace period when the configuration sets none (its `EXIT_TIMEOUT`).
pub(crate) const PINGORA_DEFAULT_GRACE: Duration = Duration::from_secs(300);
/// Time kept at the end of the grace period to hand the unfinished jobs over.
const HANDOVER_TIME: Duration = Duration::from_secs(1);

/// The background service; `grace` is the server's `grace_period_seconds`.
pub(crate) struct TaskSupervisor {
    pub state: Arc<GatewayState>,
    pub grace: Duration,
}

#[async_trait]
impl BackgroundService for TaskSupervisor {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(self.state.settings().images.task_heartbeat);
        loop {
            tokio::select! {
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
                _ = tick.tick() => sweep(&self.state).await,
            }
        }
        let margin = HANDOVER_TIME.min(self.grace / 2);
        let deadline = Instant::now() + self.grace.saturating_sub(margin);
        self.state.jobs.drained(deadline).await;
        hand_over(&self.state).await;
    }
}

/// Take over the tasks whose instance went silent.
pub(crate) async fn sweep(state: &Arc<GatewayState>) {
    let silent_since = now_ms() - state.settings().images.task_lost_after.as_millis() as i64;
    let ids = match state.tasks.stale(silent_since, SWEEP_LIMIT).await {
        Ok(ids) => ids,
        Err(e) => {
            state.metrics.store_error("sweep");
            log::debug!("task sweep skipped: {e}");
            return;
        }
    };
    for id in ids {
        let record = match state.tasks.get(&id).await {
            Ok(Some(r)) if is_stale(state, &r) => r,
            Ok(_) => continue,
            Err(e) => {
                state.metrics.store_error("sweep");
                log::debug!("task sweep stopped: {e}");
                return;
            }
        };
        if let Err(e) = take_over(state, &id, record).await {
            state.metrics.store_error("sweep");
            log::warn!("task {id}: takeover failed: {e}");
        }
    }
}

/// Stop the jobs still running here and mark their tasks for immediate takeover.
pub(crate) async fn hand_over(state: &GatewayState) {
    for id in state.jobs.ids() {
        state.jobs.abort(&id);
        let mut record = match state.tasks.get(&id).await {
            Ok(Some(r)) if r.instance == state.instance && !r.status.finished() => r,
            Ok(_) => continue,
            Err(e) => {
                log::warn!("task {id}: not handed over ({e}); it will be taken over once silent");
                continue;
            }
        };
        record.updated_ms = 0;
        match state
            .tasks
            .update(&id, &record, state.settings().images.task_ttl)
            .await
        {
            Ok(true) => log::info!("task {id}: handed over to the other instances"),
            Ok(false) => {}
            Err(e) => {
                log::warn!("task {id}: not handed over ({e}); it will be taken over once silent")
            }
        }
    }
}
