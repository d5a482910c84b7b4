//! One asynchronous task's background work, on the instance that owns it: a generation from the
//! request body, or the resumption of provider tasks another instance submitted.
//!
//! While it works, the job proves it is alive (a heartbeat every `images.task_heartbeat`) and
//! records what another instance would need to continue: that a native call is about to be sent
//! (from then on the task is never re-run, only resumed or failed), each provider task it
//! submitted, and whether the provider has the task queued or running. Every write is an
//! [`TaskStore::update`](crate::store::tasks::TaskStore::update): once another instance has taken
//! the task over, this job's writes are refused and it stops without touching the task again.
//!
//! Jobs are listed in [`Jobs`], so a shutting-down instance can give them the grace period and
//! then hand the unfinished ones over (see `task_supervisor`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::costing::{ImagesAsked, RequestCost};
use super::GatewayState;
use crate::api::images::{self, ImageResult};
use crate::common::error::GatewayError;
use crate::common::images::Delivery;
use crate::common::images::NativeTask;
use crate::config::GatewaySettings;
use crate::engine::images::{self as engine, Progress};
use crate::engine::poll::Watch;
use crate::engine::trace;
use crate::store::tasks::TaskError;
use crate::store::tasks::TaskStatus;
use crate::store::tasks::{Asked, TaskRecord};
use crate::telemetry::{Link, Span, Status};

/// What a job does.
pub(crate) enum Work {
    /// Run the generation from the original request body.
    Generate(Bytes),
    /// Wait for the provider tasks already in the record, then deliver.
    Resume,
}

/// The jobs running on this instance, by task id (`None`: a takeover of that task is being
/// decided here, so no second one starts).
#[derive(Default)]
pub(crate) struct Jobs {
    running: Mutex<HashMap<String, Option<tokio::task::AbortHandle>>>,
    /// Woken whenever a job ends.
    ended: Notify,
}

impl Jobs {
    /// Ids of the jobs still running.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.running
            .lock()
            .map(|m| {
                m.iter()
                    .filter(|(_, h)| h.is_some())
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Reserve task `id` for a takeover decided here: false when a job already runs it, or
    /// another takeover of it is under way on this instance. (Claims in the store separate
    /// instances; this separates a read and a sweep of the same instance, whose claims could
    /// otherwise both succeed.)
    pub(crate) fn reserve(&self, id: &str) -> bool {
        match self.running.lock() {
            Ok(mut m) if !m.contains_key(id) => {
                m.insert(id.to_string(), None);
                true
            }
            _ => false,
        }
    }

    /// Drop a reservation that did not become a job.
    pub(crate) fn unreserve(&self, id: &str) {
        if let Ok(mut m) = self.running.lock() {
            if m.get(id).is_some_and(Option::is_none) {
                m.remove(id);
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.running.lock().map(|m| m.is_empty()).unwrap_or(true)
    }

    /// Wait until no job runs, or until `deadline`.
    pub(crate) async fn drained(&self, deadline: Instant) {
        loop {
            let ended = self.ended.notified();
            if self.is_empty() {
                return;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return;
            }
        }
    }

    /// Stop job `id` (its future is dropped at its next await).
    pub(crate) fn abort(&self, id: &str) {
        if let Some(handle) = self
            .running
            .lock()
            .ok()
            .and_then(|mut m| m.remove(id))
            .flatten()
        {
            handle.abort();
        }
        self.ended.notify_waiters();
    }

    fn insert(&self, id: &str, handle: tokio::task::AbortHandle) {
        if let Ok(mut m) = self.running.lock() {
            m.insert(id.to_string(), Some(handle));
        }
    }

    fn remove(&self, id: &str) {
        if let Ok(mut m) = self.running.lock() {
            m.remove(id);
        }
        self.ended.notify_waiters();
    }
}

/// Removes the job from [`Jobs`] however its future ends (finished, or dropped by an abort).
struct Listed {
    state: Arc<GatewayState>,
    id: String,
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.state.jobs.remove(&self.id);
    }
}

/// Start `work` for task `id`, whose stored record (owned by this instance) is `record`. The job
/// runs to its end under `settings`, the snapshot it started with, whatever a reload does.
/// `taken_over_from`: the instance this one took the task over from (its span says so).
pub(crate) fn spawn(
    state: &Arc<GatewayState>,
    settings: &Arc<GatewaySettings>,
    id: &str,
    record: TaskRecord,
    work: Work,
    taken_over_from: Option<&str>,
) {
    // The job's work is a trace of its own, linked to the request that created the task (its
    // server span, kept in the record so that an instance taking the task over links to it
    // too); its attempts and polls are the job span's children.
    let link = record.trace.as_deref().and_then(Link::parse);
    let context = trace::RequestContext::background(&state.tracer, link);
    let span = context.recording.is_some().then(|| TaskSpan {
        context: context.clone(),
        start: SystemTime::now(),
        link,
        task: id.to_string(),
        model: record.model.clone(),
        resumed: matches!(work, Work::Resume),
        taken_over_from: taken_over_from.map(str::to_string),
        ended: None,
    });
    let job = Job::new(state.clone(), settings.clone(), id.to_string(), record);
    let listed = Listed {
        state: state.clone(),
        id: id.to_string(),
    };
    // Listed before it can possibly end, so its removal always follows its insertion.
    let jobs = &state.jobs;
    let gate = Arc::new(Notify::new());
    let opened = gate.clone();
    let handle = tokio::spawn(async move {
        opened.notified().await;
        let _listed = listed;
        // Recorded when dropped: at the job's end, or where an abort drops it.
        let mut span = span;
        let ended = trace::traced(context, job.run(work)).await;
        if let Some(s) = &mut span {
            s.ended = Some(ended);
        }
    });
    jobs.insert(id, handle.abort_handle());
    gate.notify_one();
}

/// How a job ended, for its span: the task's state (`succeed`, `failed`), or `taken_over` when
/// another instance took the task from it.
pub(crate) struct Ended {
    status: &'static str,
    /// The task's error code, when it failed.
    error: Option<String>,
}

/// A task job's `image_task` span (only while its trace is recorded), recorded when dropped:
/// when the job ends, and also when it is stopped mid-way (handed over at a shutdown), then as
/// `abandoned`.
struct TaskSpan {
    context: trace::RequestContext,
    start: SystemTime,
    link: Option<Link>,
    task: String,
    model: String,
    resumed: bool,
    taken_over_from: Option<String>,
    ended: Option<Ended>,
}

impl Drop for TaskSpan {
    fn drop(&mut self) {
        let ended = self.ended.take();
        self.context
            .root_span("image_task", self.start, self.link, |s| {
                fill_task_span(s, &self.task, &self.model, self.taken_over_from.as_deref());
                s.set("switchyard.task.resumed", self.resumed);
                let (status, error) = match ended {
                    Some(e) => (e.status, e.error),
                    None => ("abandoned", None),
                };
                s.set("switchyard.task.status", status);
                if let Some(code) = error {
                    s.set("error.type", code.clone());
                    s.status = Status::Error(code);
                }
            });
    }
}

/// What every `image_task` span says: the task, its model, and the instance it was taken over
/// from (when it was).
pub(crate) fn fill_task_span(s: &mut Span, task: &str, model: &str, taken_over_from: Option<&str>) {
    s.set("switchyard.task_id", task.to_string());
    s.set("gen_ai.operation.name", "images");
    s.set("gen_ai.request.model", model.to_string());
    s.set("switchyard.task.takeover", taken_over_from.is_some());
    if let Some(from) = taken_over_from {
        s.set("switchyard.task.taken_over_from", from.to_string());
    }
}

/// The ledger's entry point and path for a task's images, made after its request ended.
#[cfg(feature = "ledger")]
const TASK_ENTRY_POINT: &str = "(task)";
#[cfg(feature = "ledger")]
const TASK_PATH: &str = "/api/v1/images/generations";

const QUEUED: u8 = 1;
const RUNNING: u8 = 2;

struct Job {
    state: Arc<GatewayState>,
    /// The configuration the job started with.
    settings: Arc<GatewaySettings>,
    id: String,
    record: tokio::sync::Mutex<TaskRecord>,
    /// The provider's latest reading (`QUEUED` or `RUNNING`; 0 before any).
    seen: AtomicU8,
    /// Woken when `seen` changes, so the caller sees `pending` → `running` without waiting for
    /// the next heartbeat.
    changed: Notify,
    /// Another instance took the task over: write nothing more.
    lost: AtomicBool,
    deadline: Instant,
}

impl Job {
    fn new(
        state: Arc<GatewayState>,
        settings: Arc<GatewaySettings>,
        id: String,
        record: TaskRecord,
    ) -> Job {
        let images = &settings.images;
        // The task's time runs from its creation, wherever it runs now.
        let age = Duration::from_secs(images::now().saturating_sub(record.created).max(0) as u64);
        let deadline = Instant::now() + images.task_wait.saturating_sub(age);
        Job {
            state,
            settings,
            id,
            record: tokio::sync::Mutex::new(record),
            seen: AtomicU8::new(0),
            changed: Notify::new(),
            lost: AtomicBool::new(false),
            deadline,
        }
    }

    async fn run(self, work: Work) -> Ended {
        let outcome = {
            let work = self.work(work);
            tokio::pin!(work);
            let mut beat = tokio::time::interval(self.settings.images.task_heartbeat);
            beat.tick().await;
            loop {
                tokio::select! {
                    outcome = &mut work => break Some(outcome),
                    _ = beat.tick() => {}
                    _ = self.changed.notified() => {}
                }
                if !self.beat().await {
                    break None;
                }
            }
        };
        let Some(outcome) = outcome else {
            log::info!(
                "task {}: taken over by another instance; stopping here",
                self.id
            );
            return Ended {
                status: "taken_over",
                error: None,
            };
        };
        let mut record = self.record.lock().await;
        self.count(&record, &outcome);
        if let Ok(result) = &outcome {
            self.cost(&record, result);
        }
        match outcome {
            Ok(result) => match result
                .data
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(data) => {
                    record.status = TaskStatus::Succeed;
                    record.data = data;
                    record.facts = result.facts;
                }
                Err(e) => fail(&mut record, &GatewayError::Internal(format!("result: {e}"))),
            },
            Err(e) => fail(&mut record, &e),
        }
        record.request = None;
        record.updated_ms = now_ms();
        match self.write(&record).await {
            Ok(true) => {}
            Ok(false) => log::info!("task {}: taken over before its result was stored", self.id),
            // The result is lost; once the heartbeat is stale, another instance takes the task
            // over and reports what can be known.
            Err(e) => log::error!("task {}: could not store its result: {e}", self.id),
        }
        Ended {
            status: record.status.as_str(),
            error: record.error.as_ref().map(|e| e.code.clone()),
        }
    }

    async fn work(&self, work: Work) -> Result<ImageResult, GatewayError> {
        let s = &self.settings;
        let (region, base) = {
            let r = self.record.lock().await;
            (r.region.clone(), r.base.clone())
        };
        match work {
            Work::Generate(body) => {
                let req = images::parse(&body, &s.catalog, s.retry.max_retries)?;
                // Written with the record before the first native call (`sending`).
                let (input_pixels, unmeasured_inputs) =
                    ImagesAsked::measure(req.image.iter().chain(&req.more_images));
                self.record.lock().await.asked = Some(Asked {
                    size: req.size.to_string(),
                    quality: req.quality.map(str::to_string),
                    input_pixels,
                    unmeasured_inputs,
                });
                engine::generate(&self.state.images(s), &region, req, &base, self).await
            }
            Work::Resume => {
                let (model, tasks, delivery) = {
                    let r = self.record.lock().await;
                    let tasks: Vec<NativeTask> = r.native.iter().flatten().cloned().collect();
                    (r.model.clone(), tasks, r.delivery.clone())
                };
                let model = s.catalog.get(&model).ok_or_else(|| {
                    GatewayError::Internal(format!("model {model} is no longer configured"))
                })?;
                let delivery = delivery.ok_or_else(|| {
                    GatewayError::Internal("the task has no delivery settings".into())
                })?;
                engine::resume(
                    &self.state.images(s),
                    &region,
                    model,
                    &tasks,
                    &delivery,
                    &base,
                    self,
                )
                .await
            }
        }
    }

    /// The heartbeat: record that this instance is alive, and the provider's latest reading.
    /// False once the task belongs to another instance.
    async fn beat(&self) -> bool {
        let mut record = self.record.lock().await;
        match self.seen.load(Ordering::Relaxed) {
            QUEUED => record.status = TaskStatus::Pending,
            RUNNING => record.status = TaskStatus::Running,
            _ => {}
        }
        record.updated_ms = now_ms();
        match self.write(&record).await {
            Ok(owned) => owned,
            Err(e) => {
                log::warn!("task {}: heartbeat not stored: {e}", self.id);
                true
            }
        }
    }

    /// Count the task's end: its state, and the images it delivered to its owner.
    fn count(&self, record: &TaskRecord, outcome: &Result<ImageResult, GatewayError>) {
        self.state.metrics.with(|f| {
            let model = record.model.as_str();
            let state = match outcome {
                Ok(result) => {
                    let key = crate::metrics::key_label(&record.owner);
                    let n = result.data.len() as u64;
                    crate::metrics::inc(&f.images_generated, &[model, key], n);
                    "succeeded"
                }
                Err(_) => "failed",
            };
            crate::metrics::inc(&f.image_tasks, &[model, state], 1);
        });
    }

    /// What the task's images cost, each native call at the price of the target that served it:
    /// counted where a synchronous request's cost is (the cost metric, and the usage ledger,
    /// where the request that accepted the task has no cost of its own).
    fn cost(&self, record: &TaskRecord, result: &ImageResult) {
        let Some(model) = self.settings.catalog.get(&record.model) else {
            return;
        };
        let asked = record.asked.clone().unwrap_or_default();
        let cost = RequestCost::of_images(
            model,
            result,
            &ImagesAsked {
                size: &asked.size,
                quality: asked.quality.as_deref(),
                input_pixels: &asked.input_pixels,
                unmeasured_inputs: asked.unmeasured_inputs,
            },
        );
        if let Some(c) = cost.cost() {
            let key = crate::metrics::key_label(&record.owner);
            let nanos = c.amount.nanos();
            self.state.metrics.with(|f| {
                if nanos > 0 {
                    let labels = [model.name.as_str(), key, c.currency.as_str()];
                    crate::metrics::inc(&f.cost_nanos, &labels, nanos);
                }
            });
        }
        #[cfg(feature = "ledger")]
        if let Some(ledger) = &self.state.ledger {
            ledger.record(self.ledger_record(record, model, result, &cost));
        }
    }

    /// The ledger's record of the task's images: a record of its own, since the request that
    /// accepted the task was over (and recorded, with no cost) before they were made.
    #[cfg(feature = "ledger")]
    fn ledger_record(
        &self,
        record: &TaskRecord,
        model: &crate::catalog::Model,
        result: &ImageResult,
        cost: &RequestCost,
    ) -> crate::ledger::Record {
        let target = result
            .served
            .first()
            .and_then(|p| model.targets.get(p.target));
        let c = cost.cost();
        let mut r = crate::ledger::Record::new(TASK_ENTRY_POINT, TASK_PATH, 200);
        r.caller = Some(record.owner.clone());
        r.tenant = tenant_of(&record.owner, &self.settings.auth);
        r.operation = Some(crate::common::Operation::Images.as_str().to_string());
        r.model = Some(model.name.clone());
        r.provider = target.map(|t| t.provider.name.clone());
        r.native_model = target.map(|t| t.native_model.clone());
        // The provider's token usage (GPT image models), which the cost was computed from,
        // beside the task's id: as a synchronous answer's record has them.
        let usage = result.facts.as_ref().and_then(|f| f.usage.as_ref());
        let mut detail = usage
            .and_then(|u| serde_json::to_value(u).ok())
            .unwrap_or_else(|| serde_json::json!({}));
        if let Some(d) = detail.as_object_mut() {
            d.insert("task_id".into(), self.id.as_str().into());
        }
        r.usage = crate::ledger::Usage {
            tokens: usage.map_or(0, |u| {
                if u.total_tokens > 0 {
                    u.total_tokens
                } else {
                    u.input_tokens.saturating_add(u.output_tokens)
                }
            }),
            images: result.data.len() as u64,
            detail: Some(detail),
            ..Default::default()
        };
        r.cost_nanos = c.and_then(|c| i64::try_from(c.amount.nanos()).ok());
        r.currency = c.map(|c| c.currency.as_str().to_string());
        r.cost_basis = match c {
            Some(c) => Some(c.basis.as_str().to_string()),
            None => cost.reason().map(str::to_string),
        };
        // The native calls that delivered (a task's retries are not traced).
        r.attempts = result.served.len() as u32;
        r
    }

    /// Write the record if this instance still owns the task.
    async fn write(&self, record: &TaskRecord) -> Result<bool, crate::store::files::StoreError> {
        if self.lost.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let owned = self
            .state
            .tasks
            .update(&self.id, record, self.settings.images.task_ttl)
            .await
            .inspect_err(|_| self.state.metrics.store_error("task"))?;
        if !owned {
            self.lost.store(true, Ordering::Relaxed);
        }
        Ok(owned)
    }
}

impl Watch for Job {
    fn state(&self, queued: bool) {
        let now = if queued { QUEUED } else { RUNNING };
        if self.seen.swap(now, Ordering::Relaxed) != now {
            self.changed.notify_one();
        }
    }
}

#[async_trait]
impl Progress for Job {
    async fn sending(&self, calls: usize, delivery: &Delivery) -> Result<(), GatewayError> {
        let mut record = self.record.lock().await;
        record.sent = true;
        // From here on the task is never run again from its body: drop it.
        record.request = None;
        record.native = vec![None; calls];
        record.delivery = Some(delivery.clone());
        record.updated_ms = now_ms();
        match self.write(&record).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(GatewayError::Store(
                "the task was taken over by another instance".into(),
            )),
            // Not sent: unless the store comes back, nobody could ever resume what is sent now.
            Err(e) => Err(e.into()),
        }
    }

    async fn submitted(&self, slot: usize, task: &NativeTask) {
        let mut record = self.record.lock().await;
        if let Some(s) = record.native.get_mut(slot) {
            *s = Some(task.clone());
        }
        record.updated_ms = now_ms();
        if let Err(e) = self.write(&record).await {
            // Polling goes on here; only a takeover would miss this task.
            log::warn!("task {}: provider task not stored: {e}", self.id);
        }
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }
}

fn fail(record: &mut TaskRecord, e: &GatewayError) {
    record.status = TaskStatus::Failed;
    record.error = Some(TaskError {
        code: e.code().to_string(),
        message: e.message(),
        // What a synchronous 400 would have listed (a URL reference refused once fetched).
        details: match e {
            GatewayError::Validation(v) => v.details().clone(),
            _ => Default::default(),
        },
    });
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The tenant of a task's owner when it is a database key's principal (`key:<tenant>/<name>`, two
/// names as the management API allows them, and no YAML key's): the task outlives the request,
/// so its record names the tenant from the principal the task keeps.
#[cfg(feature = "ledger")]
fn tenant_of(owner: &str, auth: &crate::auth::Authenticator) -> Option<String> {
    let (tenant, name) = owner.strip_prefix("key:")?.split_once('/')?;
    let name_ok = crate::tenants::input::is_name;
    (name_ok(tenant) && name_ok(name) && !auth.key_principals().contains(owner))
        .then(|| tenant.to_string())
}

#[cfg(all(test, feature = "ledger"))]
#[allow(clippy::unwrap_used)]
mod tenant_tests {
    #[test]
    fn a_tasks_tenant_is_read_from_a_database_keys_principal_only() {
        let auth = crate::auth::Authenticator::from_settings(&crate::auth::AuthSettings {
            api_keys: vec![crate::auth::ApiKeySetting {
                name: "x/y".into(),
                key: Some("k".into()),
                sha256: None,
                limits: None,
            }],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            super::tenant_of("key:team-a/ci", &auth).as_deref(),
            Some("team-a")
        );
        assert_eq!(super::tenant_of("key:x/y", &auth), None, "a YAML key's");
        assert_eq!(super::tenant_of("key:tester", &auth), None);
        assert_eq!(super::tenant_of("jwt:a/b", &auth), None);
        assert_eq!(super::tenant_of("key:A/b", &auth), None);
    }
}
