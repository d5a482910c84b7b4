//! Asynchronous image generation: `async: true` answers at once with a task id, the generation
//! runs in the background with the same translation, retries and conversions as a synchronous
//! call, and `GET /api/v1/images/{task_id}` reads the task back.
//!
//! Tasks live in the task store (memory for one instance, Redis for several), so a task created
//! through one instance is readable through any other. Only its creator (same API key name or JWT
//! subject) can read it; anyone else gets the same 404 as for an unknown id. While a task runs,
//! its instance refreshes `updated_ms` every [`HEARTBEAT`]; a running task whose heartbeat stopped
//! for [`LOST_AFTER`] (its instance died) is reported `failed` with code `instance_lost`, so no
//! task stays `running` forever.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::operations;
use super::GatewayState;
use crate::api::error::GatewayError;
use crate::api::images::{self, ImageItem, ImageResult, TaskFailure};
use crate::images::tasks::{TaskError, TaskRecord, TaskStatus};

/// How often a running task's instance proves it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// Silence after which a running task's instance is taken for dead.
pub const LOST_AFTER: Duration = Duration::from_secs(45);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn store_error(e: crate::images::store::StoreError) -> GatewayError {
    GatewayError::Store(e.to_string())
}

/// Record a new task for `owner` and start generating in the background; the answer is the
/// task in its `running` state.
pub async fn start(
    state: &Arc<GatewayState>,
    region: &str,
    owner: String,
    model: String,
    body: Bytes,
    base: String,
) -> Result<ImageResult, GatewayError> {
    let id = uuid::Uuid::new_v4().to_string();
    let created = images::now();
    let record = TaskRecord {
        owner,
        model,
        status: TaskStatus::Running,
        created,
        updated_ms: now_ms(),
        instance: state.instance.clone(),
        data: Vec::new(),
        error: None,
        // Not kept: nothing re-runs a lost task yet, and bodies can carry megabytes of images.
        request: None,
        native: None,
    };
    // Written before anything runs: if the store is down the caller gets a 503 now, never a task
    // id that nobody can read.
    state
        .tasks
        .put(&id, &record, state.settings.images.task_ttl)
        .await
        .map_err(store_error)?;
    let job = Job {
        state: state.clone(),
        region: region.to_string(),
        id: id.clone(),
        record,
        body,
        base,
    };
    tokio::spawn(job.run());
    Ok(ImageResult {
        created,
        data: Vec::new(),
        task_id: id,
        task_status: TaskStatus::Running.as_str(),
        error: None,
    })
}

/// One background generation.
struct Job {
    state: Arc<GatewayState>,
    region: String,
    id: String,
    record: TaskRecord,
    body: Bytes,
    base: String,
}

impl Job {
    async fn run(self) {
        let Job {
            state,
            region,
            id,
            mut record,
            body,
            base,
        } = self;
        let ttl = state.settings.images.task_ttl;
        let outcome = {
            let generation = generate(&state, &region, &body, &base);
            tokio::pin!(generation);
            let mut beat = tokio::time::interval(HEARTBEAT);
            beat.tick().await;
            loop {
                tokio::select! {
                    outcome = &mut generation => break outcome,
                    _ = beat.tick() => {
                        record.updated_ms = now_ms();
                        if let Err(e) = state.tasks.put(&id, &record, ttl).await {
                            log::warn!("task {id}: heartbeat not stored: {e}");
                        }
                    }
                }
            }
        };
        match outcome {
            Ok(data) => {
                record.status = TaskStatus::Succeed;
                record.data = data;
            }
            Err(e) => {
                record.status = TaskStatus::Failed;
                record.error = Some(TaskError {
                    code: e.code().to_string(),
                    message: e.message(),
                });
            }
        }
        record.updated_ms = now_ms();
        if let Err(e) = state.tasks.put(&id, &record, ttl).await {
            // The result is lost; once the heartbeat is stale the reader sees an instance loss
            // rather than `running` forever.
            log::error!("task {id}: could not store its result: {e}");
        }
    }
}

/// The generation itself: the request is parsed again from its own bytes (it was validated when
/// the task was created), then runs exactly as a synchronous call.
async fn generate(
    state: &GatewayState,
    region: &str,
    body: &[u8],
    base: &str,
) -> Result<Vec<serde_json::Value>, GatewayError> {
    let s = &state.settings;
    let req = images::parse(body, &s.catalog, s.retry.max_retries)?;
    let result = operations::generate(state, region, req, base, &operations::Synchronous::new(state)).await?;
    result
        .data
        .iter()
        .map(|item| {
            serde_json::to_value(item)
                .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))
        })
        .collect()
}

/// The task `id` as its creator `owner` sees it.
pub async fn get(state: &GatewayState, owner: &str, id: &str) -> Result<ImageResult, GatewayError> {
    let found = if uuid::Uuid::parse_str(id).is_ok() {
        state.tasks.get(id).await.map_err(store_error)?
    } else {
        None
    };
    // Someone else's task is indistinguishable from no task.
    let Some(mut record) = found.filter(|r| r.owner == owner) else {
        return Err(GatewayError::TaskNotFound);
    };
    let silent_for = now_ms().saturating_sub(record.updated_ms);
    if !record.status.finished() && silent_for > LOST_AFTER.as_millis() as i64 {
        record.status = TaskStatus::Failed;
        record.error = Some(TaskError {
            code: "instance_lost".into(),
            message: format!(
                "the gateway instance running this task stopped (no sign of life for {} s)",
                silent_for / 1000
            ),
        });
        record.updated_ms = now_ms();
        if let Err(e) = state
            .tasks
            .put(id, &record, state.settings.images.task_ttl)
            .await
        {
            log::warn!("task {id}: could not record the instance loss: {e}");
        }
    }
    let data = record
        .data
        .into_iter()
        .map(serde_json::from_value::<ImageItem>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| GatewayError::Internal(format!("stored task {id} is unreadable: {e}")))?;
    Ok(ImageResult {
        created: record.created,
        data,
        task_id: id.to_string(),
        task_status: record.status.as_str(),
        error: record.error.map(|e| TaskFailure {
            code: e.code,
            message: e.message,
        }),
    })
}
