//! Asynchronous image generation as the caller sees it: `async: true` answers at once with a task
//! id, the generation runs in the background (see `task_job`) with the same translation, retries
//! and conversions as a synchronous call, and `GET /api/v1/images/{task_id}` reads the task back.
//!
//! Tasks live in the task store (memory for one instance, Redis for several), so a task created
//! through one instance is readable through any other. Only its creator (same API key name or JWT
//! subject) can read it; anyone else gets the same 404 as for an unknown id.
//!
//! No task stays `running` forever. A task whose instance went silent for
//! `images.task_lost_after` is taken over ([`take_over`]) by whichever instance notices first —
//! the one reading it, or any instance's supervisor sweep: provider tasks already submitted are
//! polled again from where they are; a task that had not yet sent anything to a provider is run
//! again from its request; a task whose call may have reached a provider that answers directly
//! cannot be recovered and fails with code `instance_lost`.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use super::task_job::{self, now_ms, Work};
use super::GatewayState;
use crate::api::images::{self, ImageItem, ImageResult, TaskFailure};
use crate::common::error::GatewayError;
use crate::config::GatewaySettings;
use crate::engine::trace::RequestContext;
use crate::store::answers::KeptAnswer;
use crate::store::files::StoreError;
use crate::store::tasks::TaskError;
use crate::store::tasks::TaskRecord;
use crate::store::tasks::TaskStatus;
use crate::telemetry::{Link, Status};

/// Record a new task for `owner` and start generating in the background; the answer is the
/// task in its `running` state.
pub(crate) async fn start(
    state: &Arc<GatewayState>,
    settings: &Arc<GatewaySettings>,
    region: &str,
    owner: String,
    model: String,
    body: Bytes,
    base: String,
) -> Result<ImageResult, GatewayError> {
    let id = uuid::Uuid::new_v4().to_string();
    let created = images::now();
    let request = String::from_utf8(body.to_vec())
        .map_err(|_| GatewayError::Internal("validated body is not UTF-8".into()))?;
    let record = TaskRecord {
        // Kept until a native call is about to be sent, so a takeover before then can re-run it.
        request: Some(request),
        region: region.to_string(),
        base,
        // The request's server span, when recorded: the task's work links to it.
        trace: crate::engine::trace::link().map(|l| l.traceparent()),
        ..TaskRecord::started(owner, model, state.instance.clone(), created, now_ms())
    };
    // Written before anything runs: if the store is down the caller gets a 503 now, never a task
    // id that nobody can read.
    state
        .tasks
        .put(&id, &record, settings.images.task_ttl)
        .await?;
    state.metrics.with(|f| {
        crate::metrics::inc(&f.image_tasks, &[record.model.as_str(), "accepted"], 1);
    });
    task_job::spawn(state, settings, &id, record, Work::Generate(body), None);
    Ok(ImageResult {
        created,
        data: Vec::new(),
        task_id: id,
        task_status: TaskStatus::Running.as_str(),
        error: None,
        facts: None,
        served: Vec::new(),
    })
}

/// How long a synchronous answer waits for its record: the gateway's stores take it at once (the
/// Redis store queues it for a batch: `store::kept_behind`), and a slow store of an embedder's
/// must not hold every image answer for its full timeout.
const KEEP_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Record a synchronous call's answer under its `task_id`, so the caller can read it back like a
/// finished task for as long as its links last (`images.file_ttl`, capped by `images.task_ttl`).
///
/// Only answers made of links are kept: they are a few hundred bytes. An answer with inline
/// images (`b64_json`) is not, because holding every such answer's images for an hour would make
/// the store grow with traffic; its `task_id` is informational (reading it is a 404). Best effort,
/// bounded by `KEEP_WAIT`: the answer is already made, and a store that cannot take it in time
/// must not fail or delay a synchronous call (those keep working while Redis is away; the Redis
/// store's batch then fails and is logged).
pub(crate) async fn keep_finished(
    state: &GatewayState,
    settings: &GatewaySettings,
    owner: &str,
    model: &str,
    result: &ImageResult,
) {
    if result.data.iter().any(|item| item.b64_json.is_some()) {
        return;
    }
    let data = match serde_json::to_vec(&result.data) {
        Ok(d) => d,
        Err(e) => {
            log::warn!("a synchronous answer could not be recorded: {e}");
            return;
        }
    };
    let settings = &settings.images;
    let answer = KeptAnswer {
        owner,
        model,
        instance: &state.instance,
        created: result.created,
        updated_ms: now_ms(),
        data: &data,
    };
    let ttl = settings.file_ttl.min(settings.task_ttl);
    let keep = state.tasks.keep_answer(&result.task_id, &answer, ttl);
    match tokio::time::timeout(KEEP_WAIT, keep).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => log::warn!("a synchronous answer could not be recorded for reading back: {e}"),
        Err(_) => log::warn!(
            "a synchronous answer was not recorded for reading back: the task store took over {} ms",
            KEEP_WAIT.as_millis()
        ),
    }
}

/// The task `id` as its creator `owner` sees it.
pub(crate) async fn get(
    state: &Arc<GatewayState>,
    owner: &str,
    id: &str,
) -> Result<ImageResult, GatewayError> {
    let found = if uuid::Uuid::parse_str(id).is_ok() {
        state.tasks.get(id).await?
    } else {
        None
    };
    // Someone else's task is indistinguishable from no task.
    let Some(mut record) = found.filter(|r| r.owner == owner) else {
        return Err(GatewayError::TaskNotFound);
    };
    if is_stale(state, &record) {
        if let Some(now) = take_over(state, id, record.clone()).await? {
            record = now;
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
            details: e.details,
        }),
        facts: record.facts,
        served: Vec::new(),
    })
}

/// Whether `record` is unfinished and its instance has been silent too long.
pub(crate) fn is_stale(state: &GatewayState, record: &TaskRecord) -> bool {
    let lost_after = state.settings().images.task_lost_after.as_millis() as i64;
    !record.status.finished() && now_ms().saturating_sub(record.updated_ms) > lost_after
}

/// Take over task `id`, last seen as `seen` (stale): claim it for this instance, then resume,
/// re-run or fail it. `None` when another instance claimed it first (it is running again).
pub(crate) async fn take_over(
    state: &Arc<GatewayState>,
    id: &str,
    seen: TaskRecord,
) -> Result<Option<TaskRecord>, StoreError> {
    if !state.jobs.reserve(id) {
        return Ok(None);
    }
    let outcome = claim_and_continue(state, id, seen).await;
    state.jobs.unreserve(id);
    outcome
}

async fn claim_and_continue(
    state: &Arc<GatewayState>,
    id: &str,
    seen: TaskRecord,
) -> Result<Option<TaskRecord>, StoreError> {
    let ttl = state.settings().images.task_ttl;
    let now = now_ms();
    if !state
        .tasks
        .claim(id, seen.updated_ms, &state.instance, now, ttl)
        .await?
    {
        return Ok(None);
    }
    let seen_instance = seen.instance.clone();
    let mut record = TaskRecord {
        instance: state.instance.clone(),
        updated_ms: now,
        ..seen
    };
    let action = if record.resumable() {
        "resumed"
    } else if !record.sent && record.request.is_some() {
        "rerun"
    } else {
        "failed"
    };
    state
        .metrics
        .with(|f| crate::metrics::inc(&f.task_takeovers, &[action], 1));
    if record.resumable() {
        log::info!("task {id}: resuming its provider tasks after its instance was lost");
        task_job::spawn(
            state,
            &state.settings(),
            id,
            record.clone(),
            Work::Resume,
            Some(&seen_instance),
        );
    } else if let (false, Some(body)) = (record.sent, record.request.clone()) {
        log::info!("task {id}: running it again; its instance was lost before sending anything");
        task_job::spawn(
            state,
            &state.settings(),
            id,
            record.clone(),
            Work::Generate(Bytes::from(body)),
            Some(&seen_instance),
        );
    } else {
        log::warn!("task {id}: its instance was lost after calling the provider; failing it");
        record.status = TaskStatus::Failed;
        record.request = None;
        record.error = Some(TaskError {
            code: "instance_lost".into(),
            message: "the gateway instance running this task stopped after calling the \
                      provider, which does not keep results: run the request again"
                .into(),
            details: Default::default(),
        });
        state.tasks.update(id, &record, ttl).await?;
        lost_span(state, id, &record, &seen_instance);
    }
    Ok(Some(record))
}

/// The span of a takeover that could only fail the task (`instance_lost`): a root of its own,
/// linked to the request that created the task, like a job's.
fn lost_span(state: &GatewayState, id: &str, record: &TaskRecord, from: &str) {
    let link = record.trace.as_deref().and_then(Link::parse);
    let context = RequestContext::background(&state.tracer, link);
    context.root_span("image_task", SystemTime::now(), link, |s| {
        task_job::fill_task_span(s, id, &record.model, Some(from));
        s.set("switchyard.task.resumed", false);
        s.set("switchyard.task.status", TaskStatus::Failed.as_str());
        s.set("error.type", "instance_lost");
        s.status = Status::Error("instance_lost".into());
    });
}
