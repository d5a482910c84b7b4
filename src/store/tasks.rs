//! Where asynchronous image tasks live between the request that starts one and the polls that
//! read its result.
//!
//! [`TaskStore`] is the seam: [`MemoryTaskStore`] is the embedded default for a single instance;
//! `RedisTaskStore` (the `redis` feature) is shared by every instance on one Redis, so a task
//! started on one instance can be polled on any, and a task whose instance died can be taken over
//! by another.
//!
//! Liveness is a heartbeat: the instance running a task rewrites it (moving `updated_ms`) while
//! it works. A task not finished whose `updated_ms` is older than some threshold is *stale*: its
//! instance has probably gone. [`TaskStore::stale`] lists such tasks, and [`TaskStore::claim`]
//! hands one to exactly one instance, as a compare-and-set on the `updated_ms` the claimer saw:
//! whoever writes the task first (its old instance's heartbeat, or another claimer) makes every
//! other claim on that `updated_ms` lose.
//!
//! [`TaskStore::put`] is unconditional (it creates tasks); [`TaskStore::update`] writes only while
//! the writer still owns the task, so an instance that was merely slow (not dead) and lost its
//! task to a claim cannot overwrite the new owner's progress.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::common::images::AnswerFacts;
use crate::common::images::Delivery;
use crate::common::images::NativeTask;
use crate::store::answers::{Answers, KeptAnswer};
use crate::store::files::StoreError;
#[cfg(feature = "redis")]
use crate::store::redis_conn::InvalidRedisSettings;
#[cfg(feature = "redis")]
use crate::store::redis_conn::RedisConn;
#[cfg(feature = "redis")]
use crate::store::redis_conn::RedisSettings;

/// Public task states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Queued: the provider reports it has not started yet.
    Pending,
    /// Under way: the state a task is created in, and while the provider works on it.
    Running,
    /// Finished with images (`data`).
    Succeed,
    /// Finished without images (`error` says why).
    Failed,
}

impl TaskStatus {
    /// The state as the API and the stored JSON spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Succeed => "succeed",
            TaskStatus::Failed => "failed",
        }
    }

    /// Whether the task is over (it will not change again, and nobody needs to run it).
    pub fn finished(self) -> bool {
        matches!(self, TaskStatus::Succeed | TaskStatus::Failed)
    }
}

/// Why a task failed, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    /// The error code, as in the API's Error object (e.g. `upstream_timeout`).
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
    /// Per-field problems of a `validation_error` found only while the task ran (a reference
    /// image or mask fetched from a URL that the provider cannot take).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, String>,
}

/// One task as stored (serialized as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The caller's principal id (API key name or JWT subject): only they may read it.
    pub owner: String,
    /// The public model the task was asked of.
    pub model: String,
    /// Where the task stands.
    pub status: TaskStatus,
    /// Unix seconds.
    pub created: i64,
    /// Unix milliseconds of the last write: the heartbeat that says the task is being run.
    pub updated_ms: i64,
    /// Id of the gateway instance running it.
    pub instance: String,
    /// The public `data[]` items, once it succeeded.
    // `default` on the optional parts, so records written by an older gateway still read.
    #[serde(default)]
    pub data: Vec<serde_json::Value>,
    /// What went wrong, once it failed.
    #[serde(default)]
    pub error: Option<TaskError>,
    /// What the provider reported about the result (usage, output format, ...), once it
    /// succeeded; left out of the record when there is nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Box<AnswerFacts>>,
    /// The original public request body, kept until the first native call is sent: a task
    /// taken over before then is run again from it. Dropped afterwards (bodies can carry
    /// megabytes of images, and nothing re-runs a call that may have reached the provider).
    #[serde(default)]
    pub request: Option<String>,
    /// Whether a native call may have reached a provider (set before the first one is sent).
    #[serde(default)]
    pub sent: bool,
    /// The natively asynchronous provider's tasks, one slot per native call of the fan-out
    /// (empty for providers that answer directly): what another instance resumes polling.
    #[serde(default)]
    pub native: Vec<Option<NativeTask>>,
    /// How the result is to be delivered (set with `native`).
    #[serde(default)]
    pub delivery: Option<Delivery>,
    /// The entry point's region the task was started through (selects provider endpoints).
    #[serde(default)]
    pub region: String,
    /// Where links to hosted images point (the original request's public base URL).
    #[serde(default)]
    pub base: String,
    /// What the request asked that its cost needs where the answer does not say (set before the
    /// first native call, so an instance that resumes the task can price it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<Asked>,
    /// The request that created the task, as a W3C `traceparent` naming its server span, when
    /// that request's spans were recorded: the task's later work, on whichever instance runs it
    /// (a takeover included), is a trace of its own linked to that span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// What an image request asked, for its cost: the size and quality, and its input images'
/// pixels (those whose header gives them; `unmeasured_inputs` more, given by URL, do not).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    /// The size asked (`WxH`).
    pub size: String,
    /// The quality asked, when the family has one.
    #[serde(default)]
    pub quality: Option<String>,
    /// Each measured input image's pixels.
    #[serde(default)]
    pub input_pixels: Vec<u64>,
    /// Input images not measured.
    #[serde(default)]
    pub unmeasured_inputs: u64,
}

impl TaskRecord {
    /// A task that has just started on `instance`.
    pub fn started(
        owner: String,
        model: String,
        instance: String,
        created: i64,
        now_ms: i64,
    ) -> TaskRecord {
        TaskRecord {
            owner,
            model,
            status: TaskStatus::Running,
            created,
            updated_ms: now_ms,
            instance,
            data: Vec::new(),
            error: None,
            facts: None,
            request: None,
            sent: false,
            native: Vec::new(),
            delivery: None,
            region: String::new(),
            base: String::new(),
            asked: None,
            trace: None,
        }
    }

    /// A kept synchronous answer as the succeeded task it reads back as.
    pub fn answered(answer: &KeptAnswer<'_>) -> Result<TaskRecord, StoreError> {
        let data = serde_json::from_slice(answer.data).map_err(|e| {
            StoreError::Unavailable(format!("a kept answer does not read back: {e}"))
        })?;
        Ok(TaskRecord {
            status: TaskStatus::Succeed,
            data,
            ..TaskRecord::started(
                answer.owner.to_string(),
                answer.model.to_string(),
                answer.instance.to_string(),
                answer.created,
                answer.updated_ms,
            )
        })
    }

    /// Every native call was submitted as a provider task, so polling can resume anywhere.
    pub fn resumable(&self) -> bool {
        self.delivery.is_some()
            && !self.native.is_empty()
            && self.native.iter().all(Option::is_some)
    }
}

/// Tasks by id, each kept for a limited time.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Write `task` under `id` (replacing any), kept for `ttl` from now.
    async fn put(&self, id: &str, task: &TaskRecord, ttl: Duration) -> Result<(), StoreError>;
    /// Keep a finished synchronous answer under `id` for `ttl`: `get` reads it as a succeeded
    /// task. By default it is written as one ([`TaskRecord::answered`]).
    async fn keep_answer(
        &self,
        id: &str,
        answer: &KeptAnswer<'_>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.put(id, &TaskRecord::answered(answer)?, ttl).await
    }
    /// The task, if it exists and has not expired.
    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError>;
    /// Write `task` only if the stored task is still owned by `task.instance` and not finished
    /// (a heartbeat, progress, the result): false when another instance has claimed it, or it is
    /// gone or over.
    async fn update(&self, id: &str, task: &TaskRecord, ttl: Duration) -> Result<bool, StoreError>;
    /// Ids of tasks not finished whose `updated_ms` is older than `stale_before_ms` (for takeover
    /// by another instance), oldest first. At most `limit`; an implementation may return fewer
    /// per call.
    async fn stale(&self, stale_before_ms: i64, limit: usize) -> Result<Vec<String>, StoreError>;
    /// Atomically claim a stale task for `instance` (compare-and-set on `updated_ms`): true if
    /// this caller won. The winner's task then has `instance`, `updated_ms = now_ms`, and is kept
    /// for `ttl` from now. A task gone, finished, or written since the caller read
    /// `expected_updated_ms` is not claimed.
    async fn claim(
        &self,
        id: &str,
        expected_updated_ms: i64,
        instance: &str,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<bool, StoreError>;
}

struct Entry {
    task: TaskRecord,
    expires: Instant,
    /// About what the entry holds in memory ([`approx_size`]), counted in `Inner::bytes`.
    size: usize,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    /// Every entry's expiry and id, soonest first: what goes when its time is up. Kept exactly
    /// in step with `tasks`.
    expiries: BTreeSet<(Instant, String)>,
    /// Synchronous answers, kept lean (`store::answers`).
    answers: Answers,
    /// The sum of the entries' and the answers' sizes.
    bytes: usize,
}

impl Inner {
    /// Forget the tasks whose time is up, so an instance running for months does not keep them.
    fn purge(&mut self, now: Instant) {
        self.bytes = self.bytes.saturating_sub(self.answers.purge(now));
        while let Some((expires, _)) = self.expiries.first() {
            if *expires > now {
                break;
            }
            if let Some((_, id)) = self.expiries.pop_first() {
                self.remove(&id);
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<Entry> {
        let old = self.tasks.remove(id)?;
        self.bytes = self.bytes.saturating_sub(old.size);
        Some(old)
    }

    fn insert(&mut self, id: &str, task: TaskRecord, expires: Instant) {
        if let Some(old) = self.remove(id) {
            self.expiries.remove(&(old.expires, id.to_string()));
        }
        let size = approx_size(id, &task);
        self.bytes += size;
        self.expiries.insert((expires, id.to_string()));
        self.tasks.insert(
            id.to_string(),
            Entry {
                task,
                expires,
                size,
            },
        );
    }

    /// While over `budget`, forget finished tasks (results, synchronous answers), those whose
    /// time ends soonest first — the oldest, as they share a TTL. Running tasks are never
    /// dropped: their jobs still write to them.
    fn shrink_to(&mut self, budget: usize) {
        // Synchronous answers first, oldest first: each is finished, and in number they are most
        // of what is kept.
        while self.bytes > budget {
            let Some(freed) = self.answers.forget_oldest() else {
                break;
            };
            self.bytes = self.bytes.saturating_sub(freed);
        }
        if self.bytes <= budget {
            return;
        }
        let finished: Vec<(Instant, String)> = self
            .expiries
            .iter()
            .filter(|(_, id)| {
                self.tasks
                    .get(id.as_str())
                    .is_some_and(|e| e.task.status.finished())
            })
            .take_while({
                let mut over = self.bytes - budget;
                let tasks = &self.tasks;
                move |(_, id)| {
                    let before = over;
                    over = over.saturating_sub(tasks.get(id.as_str()).map_or(0, |e| e.size));
                    before > 0
                }
            })
            .cloned()
            .collect();
        for key in finished {
            self.expiries.remove(&key);
            self.remove(&key.1);
        }
    }

    /// The entry for `id`, unless its time is up.
    fn live(&self, id: &str, now: Instant) -> Option<&Entry> {
        self.tasks.get(id).filter(|e| e.expires > now)
    }
}

/// About how many bytes `task` under `id` holds in memory: its strings and JSON, and a fixed
/// part for the record, its map entries and the allocator. An estimate, walked rather than
/// serialized, since every synchronous image answer is kept; the fixed part is set so that the
/// process's RSS grows by about the budget (measured: a one-image link answer took about 2.4 KB
/// of RSS, 60k of them in the throughput benchmark).
fn approx_size(id: &str, task: &TaskRecord) -> usize {
    const FIXED: usize = 2048;
    FIXED
        + 2 * id.len()
        + task.owner.len()
        + task.model.len()
        + task.instance.len()
        + task.region.len()
        + task.base.len()
        + task.request.as_ref().map_or(0, String::len)
        + task.trace.as_ref().map_or(0, String::len)
        + task.data.iter().map(json_size).sum::<usize>()
        + task.native.len() * 128
}

/// About what a JSON value holds: its strings and a node's worth per value.
fn json_size(v: &serde_json::Value) -> usize {
    const NODE: usize = 48;
    NODE + match v {
        serde_json::Value::String(s) => s.len(),
        serde_json::Value::Array(items) => items.iter().map(json_size).sum(),
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| k.len() + json_size(v)).sum(),
        _ => 0,
    }
}

/// The single-instance store: tasks in process memory, each until its expiry, and at most
/// about `budget` bytes of them (finished ones are forgotten oldest first past it).
pub struct MemoryTaskStore {
    inner: Mutex<Inner>,
    budget: usize,
}

impl Default for MemoryTaskStore {
    fn default() -> MemoryTaskStore {
        MemoryTaskStore::new(MemoryTaskStore::DEFAULT_BUDGET)
    }
}

impl MemoryTaskStore {
    /// The default budget: `images.task_store_bytes`' default.
    pub const DEFAULT_BUDGET: usize = 8 << 20;

    /// A store that keeps at most about `budget` bytes of tasks.
    pub fn new(budget: usize) -> MemoryTaskStore {
        MemoryTaskStore {
            inner: Mutex::default(),
            budget,
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>, StoreError> {
        self.inner
            .lock()
            .map_err(|_| StoreError::Unavailable("memory task store lock poisoned".into()))
    }
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn put(&self, id: &str, task: &TaskRecord, ttl: Duration) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut inner = self.lock()?;
        inner.purge(now);
        inner.insert(id, task.clone(), now + ttl);
        inner.shrink_to(self.budget);
        Ok(())
    }

    async fn keep_answer(
        &self,
        id: &str,
        answer: &KeptAnswer<'_>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut inner = self.lock()?;
        inner.purge(now);
        let (size, replaced) = inner.answers.insert(id, answer, now + ttl);
        inner.bytes = (inner.bytes + size).saturating_sub(replaced);
        inner.shrink_to(self.budget);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let now = Instant::now();
        let inner = self.lock()?;
        if let Some(entry) = inner.live(id, now) {
            return Ok(Some(entry.task.clone()));
        }
        inner
            .answers
            .get(id, now)
            .map(|answer| TaskRecord::answered(&answer))
            .transpose()
    }

    async fn update(&self, id: &str, task: &TaskRecord, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut inner = self.lock()?;
        let owned = inner
            .live(id, now)
            .is_some_and(|e| e.task.instance == task.instance && !e.task.status.finished());
        if owned {
            inner.insert(id, task.clone(), now + ttl);
            inner.shrink_to(self.budget);
        }
        Ok(owned)
    }

    async fn stale(&self, stale_before_ms: i64, limit: usize) -> Result<Vec<String>, StoreError> {
        let now = Instant::now();
        let inner = self.lock()?;
        let mut found: Vec<(i64, &str)> = inner
            .tasks
            .iter()
            .filter(|(_, e)| {
                e.expires > now && !e.task.status.finished() && e.task.updated_ms < stale_before_ms
            })
            .map(|(id, e)| (e.task.updated_ms, id.as_str()))
            .collect();
        // The same order as the Redis sorted set: by time, then by id.
        found.sort_unstable();
        Ok(found
            .into_iter()
            .take(limit)
            .map(|(_, id)| id.to_string())
            .collect())
    }

    async fn claim(
        &self,
        id: &str,
        expected_updated_ms: i64,
        instance: &str,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut inner = self.lock()?;
        let task = match inner.live(id, now) {
            Some(e) if !e.task.status.finished() && e.task.updated_ms == expected_updated_ms => {
                let mut task = e.task.clone();
                task.instance = instance.to_string();
                task.updated_ms = now_ms;
                task
            }
            _ => return Ok(false),
        };
        inner.insert(id, task, now + ttl);
        Ok(true)
    }
}

/// Longest expiry sent to Redis: about a thousand years, far beyond any task, and small enough
/// to stay exact in the scripts' Lua numbers (doubles) and not to overflow Redis's clock.
#[cfg(feature = "redis")]
const MAX_TTL_MS: u128 = 1000 * 366 * 24 * 3600 * 1000;
/// Most ids one [`TaskStore::stale`] call returns from Redis: a script runs alone in Redis, so
/// its work per call is bounded.
#[cfg(feature = "redis")]
const MAX_STALE: usize = 1000;
/// Most dangling ids (of tasks that expired while not finished) one `stale` call cleans out of
/// the active set beyond the ones it returns, for the same reason.
#[cfg(feature = "redis")]
const MAX_STALE_CLEANUP: usize = 1000;
/// The hash-tag scope of every task key and the active set.
#[cfg(feature = "redis")]
const TASKS: &str = "tasks";

/// Write a task and keep the active set in step, atomically; with an owner (ARGV[6] not empty),
/// only while the stored task is that instance's and not finished (0 otherwise).
/// KEYS: task key, active set. ARGV: JSON, ttl ms, id, updated_ms, "1" if finished, owner or "".
/// The active set expires no sooner than its longest-lived member, so it too goes by itself when
/// the gateway stops using the prefix.
#[cfg(feature = "redis")]
const WRITE_SCRIPT: &str = r"
if ARGV[6] ~= '' then
  local cur = redis.call('GET', KEYS[1])
  if not cur then return 0 end
  local ok, t = pcall(cjson.decode, cur)
  if not ok or type(t) ~= 'table' or t.instance ~= ARGV[6] then return 0 end
  if t.status == 'succeed' or t.status == 'failed' then return 0 end
end
local ttl = tonumber(ARGV[2])
if ttl <= 0 then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[3])
  return 1
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
if ARGV[5] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[3])
else
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
  if redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
return 1
";

/// The active ids scored below a time, oldest first, dropping the ones whose task has expired.
/// KEYS: active set. ARGV: stale_before_ms, limit, task key prefix, cleanup budget.
/// The task keys are built here from the prefix, not passed in KEYS: their ids are only known
/// inside the script. In a Redis Cluster that works because they share the active set's hash
/// tag, so its slot and node: a script may touch undeclared keys that live on its node, and a key
/// of another slot fails it (Redis 7 checks both declared and used keys; redis/redis#10615,
/// #12906). `tests/it/redis_ha.rs` runs the sweep on a real cluster.
#[cfg(feature = "redis")]
const STALE_SCRIPT: &str = r"
local limit = tonumber(ARGV[2])
local budget = tonumber(ARGV[4])
local out = {}
local offset = 0
while #out < limit do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', offset, limit - #out)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    if redis.call('EXISTS', ARGV[3] .. id) == 1 then
      out[#out + 1] = id
      offset = offset + 1
    elseif budget > 0 then
      redis.call('ZREM', KEYS[1], id)
      budget = budget - 1
    else
      offset = offset + 1
    end
  end
  if budget <= 0 and #ids > 0 and #out < limit then
    -- Out of cleanup budget: what is left waits for the next call.
    break
  end
end
return out
";

/// Replace a task only if it is still exactly what the claimer read: the compare-and-set of a
/// claim. Comparing the whole stored JSON (not a field decoded in Lua) keeps the record byte for
/// byte as serde wrote it, and catches any write since the read. Seeing its own new value means
/// this claim already won (a retry after a lost reply), so it says so again.
/// KEYS: task key, active set. ARGV: old JSON, new JSON, ttl ms, id, now_ms.
#[cfg(feature = "redis")]
const CLAIM_SCRIPT: &str = r"
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[2] then return 1 end
if cur ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[3])
if ttl <= 0 then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[4])
  return 1
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
if redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
";

/// Tasks in a Redis shared by the gateway's instances.
///
/// Each task is the JSON of its [`TaskRecord`] at `{<key_prefix>tasks}:task:{id}`, with its
/// expiry. The ids of tasks not finished are in the sorted set `{<key_prefix>tasks}:active`,
/// scored by `updated_ms`. All share one hash tag, so in a Redis Cluster they live in one slot:
/// the scripts touch a task and the set together, and the sweep walks the set's tasks (one slot
/// takes every task's traffic; tasks are few and small beside hosted images). Every write goes
/// through a Lua script that updates both at once, every write goes through a Lua script that updates both at once, so the set
/// never disagrees with the tasks (except for tasks that expired unfinished, which
/// [`TaskStore::stale`] drops as it meets them).
#[cfg(feature = "redis")]
pub struct RedisTaskStore {
    conn: RedisConn,
    /// `{<key_prefix>tasks}:task:`, made once: every key is it and an id.
    task_prefix: String,
    /// Synchronous answers on their way to Redis (`kept_behind`).
    behind: crate::store::kept_behind::KeptBehind,
}

#[cfg(feature = "redis")]
impl RedisTaskStore {
    /// A store for `settings`. No I/O: only the URL is checked here, and Redis need not be up.
    pub fn new(settings: RedisSettings) -> Result<RedisTaskStore, InvalidRedisSettings> {
        Ok(RedisTaskStore::with_conn(RedisConn::new(&settings)?))
    }

    /// A store on `conn`, which other stores may share.
    pub fn with_conn(conn: RedisConn) -> RedisTaskStore {
        RedisTaskStore {
            task_prefix: format!("{}:task:", conn.tag(TASKS)),
            behind: crate::store::kept_behind::KeptBehind::new(conn.clone()),
            conn,
        }
    }

    /// The Redis key of task `id`.
    pub fn key(&self, id: &str) -> String {
        let mut key = String::with_capacity(self.task_prefix.len() + id.len());
        key.push_str(&self.task_prefix);
        key.push_str(id);
        key
    }

    /// The Redis key of the set of tasks not finished.
    pub fn active_key(&self) -> String {
        format!("{}:active", self.conn.tag(TASKS))
    }

    /// Where gateways before hash-tagged keys kept task `id` (`{key_prefix}task:{id}`): still
    /// read, so a task that such a gateway ran (or finished) during a rolling upgrade can be
    /// polled on this one. It is never written, claimed or swept here.
    fn legacy_key(&self, id: &str) -> String {
        format!("{}task:{id}", self.conn.key_prefix())
    }

    /// Whether Redis answers `PING` in time.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.conn.ping().await
    }

    /// The raw stored JSON of task `id`, under its current key.
    async fn get_raw(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.get_at(&self.key(id)).await
    }

    /// The raw stored JSON of task `id`, under its current key or else its legacy one.
    async fn read(&self, id: &str) -> Result<Option<String>, StoreError> {
        match self.get_raw(id).await? {
            Some(raw) => Ok(Some(raw)),
            // Only a miss pays the second read.
            None => self.get_at(&self.legacy_key(id)).await,
        }
    }

    /// The raw stored JSON at `key`.
    async fn get_at(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .run(|mut conn| async move {
                redis::cmd("GET")
                    .arg(key)
                    .query_async::<Option<String>>(&mut conn)
                    .await
            })
            .await
    }
}

#[cfg(feature = "redis")]
impl RedisTaskStore {
    /// [`WRITE_SCRIPT`]: write `task` (only while `owner` owns it, unless `owner` is empty);
    /// whether it was written.
    async fn write(
        &self,
        id: &str,
        task: &TaskRecord,
        ttl: Duration,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let json = encode(task)?;
        let (key, active) = (self.key(id), self.active_key());
        let (key, active, json) = (&key, &active, &json);
        let ttl = ttl_ms(ttl);
        let finished = if task.status.finished() { "1" } else { "0" };
        let updated_ms = task.updated_ms;
        // Durable: a task acknowledged to its caller must survive a failover.
        let written = self
            .conn
            .run_durable(|mut conn| async move {
                redis::cmd("EVAL")
                    .arg(WRITE_SCRIPT)
                    .arg(2)
                    .arg(key)
                    .arg(active)
                    .arg(json)
                    .arg(ttl)
                    .arg(id)
                    .arg(updated_ms)
                    .arg(finished)
                    .arg(owner)
                    .query_async::<i64>(&mut conn)
                    .await
            })
            .await?;
        Ok(written == 1)
    }
}

#[cfg(feature = "redis")]
fn ttl_ms(ttl: Duration) -> u64 {
    ttl.as_millis().min(MAX_TTL_MS) as u64
}

/// `raw` as a task, or nothing (with a warning) if it is not one: a key this store did not write
/// (another program, or a far newer gateway) must not make the task's polls fail forever.
#[cfg(feature = "redis")]
fn decode(raw: &str) -> Option<TaskRecord> {
    match serde_json::from_str(raw) {
        Ok(task) => Some(task),
        Err(e) => {
            // Not the id: task ids are the callers' handles, and logs are read widely.
            log::warn!("redis task store: a task key does not hold a task ({e}); ignoring it");
            None
        }
    }
}

/// The record a kept answer reads back as ([`TaskRecord::answered`]), as JSON, written by hand:
/// the answer's `data` is already JSON, and parsing it into a tree only to serialize it again
/// cost more than the rest of the record. The fields left out take their defaults when read.
#[cfg(feature = "redis")]
fn answered_json(answer: &KeptAnswer<'_>) -> String {
    let mut out = Vec::with_capacity(answer.data.len() + 160);
    let text = |out: &mut Vec<u8>, s: &str| {
        // Writing a `str` into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    };
    out.extend_from_slice(b"{\"owner\":");
    text(&mut out, answer.owner);
    out.extend_from_slice(b",\"model\":");
    text(&mut out, answer.model);
    out.extend_from_slice(b",\"status\":\"succeed\",\"created\":");
    out.extend_from_slice(answer.created.to_string().as_bytes());
    out.extend_from_slice(b",\"updated_ms\":");
    out.extend_from_slice(answer.updated_ms.to_string().as_bytes());
    out.extend_from_slice(b",\"instance\":");
    text(&mut out, answer.instance);
    out.extend_from_slice(b",\"data\":");
    out.extend_from_slice(answer.data);
    out.push(b'}');
    // Only `str`s and the answer's own JSON went in.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(feature = "redis")]
fn encode(task: &TaskRecord) -> Result<String, StoreError> {
    serde_json::to_string(task)
        .map_err(|e| StoreError::Unavailable(format!("task not serializable: {e}")))
}

#[async_trait]
#[cfg(feature = "redis")]
impl TaskStore for RedisTaskStore {
    async fn put(&self, id: &str, task: &TaskRecord, ttl: Duration) -> Result<(), StoreError> {
        self.write(id, task, ttl, "").await.map(|_| ())
    }

    /// A kept answer is a finished task under an id nobody has used (the gateway's UUID): what
    /// `write` does for it — set it with its expiry; take its id out of the active set, where it
    /// never was — is one `SET`, without sending the write script's text and running it on every
    /// synchronous image answer. It is queued, not awaited: `kept_behind` sends the queue's
    /// answers in one pipeline every few milliseconds.
    async fn keep_answer(
        &self,
        id: &str,
        answer: &KeptAnswer<'_>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let ttl = ttl_ms(ttl);
        if ttl == 0 {
            return Ok(());
        }
        self.behind
            .keep(id, self.key(id), answered_json(answer), ttl);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        if let Some(json) = self.behind.find(id) {
            return Ok(decode(&json));
        }
        let mut raw = self.read(id).await?;
        // A miss may be an answer another instance has just given, still on its way: read
        // again a little later (an unknown or expired id pays these waits, and is a 404 anyway).
        for wait in crate::store::kept_behind::READ_AGAIN {
            if raw.is_some() {
                break;
            }
            tokio::time::sleep(wait).await;
            raw = self.read(id).await?;
        }
        Ok(raw.as_deref().and_then(decode))
    }

    async fn update(&self, id: &str, task: &TaskRecord, ttl: Duration) -> Result<bool, StoreError> {
        self.write(id, task, ttl, &task.instance).await
    }

    async fn stale(&self, stale_before_ms: i64, limit: usize) -> Result<Vec<String>, StoreError> {
        let limit = limit.min(MAX_STALE);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let active = self.active_key();
        let task_prefix = format!("{}:task:", self.conn.tag(TASKS));
        let (active, task_prefix) = (&active, &task_prefix);
        self.conn
            .run(|mut conn| async move {
                redis::cmd("EVAL")
                    .arg(STALE_SCRIPT)
                    .arg(1)
                    .arg(active)
                    .arg(stale_before_ms)
                    .arg(limit)
                    .arg(task_prefix)
                    .arg(MAX_STALE_CLEANUP)
                    .query_async::<Vec<String>>(&mut conn)
                    .await
            })
            .await
    }

    async fn claim(
        &self,
        id: &str,
        expected_updated_ms: i64,
        instance: &str,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let Some(old) = self.get_raw(id).await? else {
            return Ok(false);
        };
        let Some(mut task) = decode(&old) else {
            return Ok(false);
        };
        if task.status.finished() || task.updated_ms != expected_updated_ms {
            return Ok(false);
        }
        task.instance = instance.to_string();
        task.updated_ms = now_ms;
        let new = encode(&task)?;
        let (key, active) = (self.key(id), self.active_key());
        let (key, active, old, new) = (&key, &active, &old, &new);
        let ttl = ttl_ms(ttl);
        let won = self
            .conn
            .run_durable(|mut conn| async move {
                redis::cmd("EVAL")
                    .arg(CLAIM_SCRIPT)
                    .arg(2)
                    .arg(key)
                    .arg(active)
                    .arg(old)
                    .arg(new)
                    .arg(ttl)
                    .arg(id)
                    .arg(now_ms)
                    .query_async::<i64>(&mut conn)
                    .await
            })
            .await?;
        Ok(won == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(status: TaskStatus, updated_ms: i64) -> TaskRecord {
        TaskRecord {
            status,
            request: Some(r#"{"prompt":"a fox"}"#.into()),
            ..TaskRecord::started(
                "key-a".into(),
                "img-1".into(),
                "i1".into(),
                1_700_000_000,
                updated_ms,
            )
        }
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn statuses_are_spelled_as_the_api_spells_them() {
        for s in [
            TaskStatus::Pending,
            TaskStatus::Running,
            TaskStatus::Succeed,
            TaskStatus::Failed,
        ] {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
            assert_eq!(
                s.finished(),
                matches!(s, TaskStatus::Succeed | TaskStatus::Failed)
            );
        }
        // The optional parts may be missing from a stored record.
        let t: TaskRecord = serde_json::from_str(
            r#"{"owner":"o","model":"m","status":"running","created":1,"updated_ms":2,"instance":"i"}"#,
        )
        .unwrap();
        assert_eq!(t.status, TaskStatus::Running);
        assert!(t.data.is_empty() && t.error.is_none() && t.native.is_empty());
    }

    #[tokio::test]
    async fn keeps_tasks_until_they_expire() {
        let s = MemoryTaskStore::default();
        let mut done = task(TaskStatus::Succeed, 5);
        done.data = vec![serde_json::json!({"url": "https://x/y.png"})];
        s.put("a", &done, MIN).await.unwrap();
        s.put("b", &task(TaskStatus::Pending, 5), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(s.get("a").await.unwrap(), Some(done));
        assert_eq!(s.get("b").await.unwrap(), None, "expired task served");
        assert_eq!(s.get("zzz").await.unwrap(), None);

        // A put replaces, expiry included; expired entries are forgotten, not only hidden.
        s.put("a", &task(TaskStatus::Failed, 6), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(s.get("a").await.unwrap(), None);
        s.put("c", &task(TaskStatus::Running, 6), MIN)
            .await
            .unwrap();
        let inner = s.lock().unwrap();
        assert_eq!(inner.tasks.len(), 1);
        assert_eq!(inner.expiries.len(), 1);
    }

    #[tokio::test]
    async fn past_its_budget_the_oldest_finished_tasks_go_and_running_ones_stay() {
        let one = approx_size("t0", &task(TaskStatus::Succeed, 1));
        // Room for three.
        let s = MemoryTaskStore::new(3 * one + one / 2);
        s.put("r", &task(TaskStatus::Running, 1), MIN)
            .await
            .unwrap();
        for i in 0..4u64 {
            // Later puts expire later: `t0` is the oldest.
            tokio::time::sleep(Duration::from_millis(2)).await;
            s.put(&format!("t{i}"), &task(TaskStatus::Succeed, 1), MIN)
                .await
                .unwrap();
        }
        assert!(
            s.get("r").await.unwrap().is_some(),
            "a running task is kept"
        );
        assert_eq!(s.get("t0").await.unwrap(), None);
        assert_eq!(s.get("t1").await.unwrap(), None);
        for kept in ["t2", "t3"] {
            assert!(s.get(kept).await.unwrap().is_some(), "{kept}");
        }
        let inner = s.lock().unwrap();
        assert_eq!(inner.tasks.len(), 3);
        assert_eq!(inner.expiries.len(), 3);
        assert!(inner.bytes <= 3 * one + one / 2, "{}", inner.bytes);
    }

    #[tokio::test]
    async fn a_kept_answer_reads_back_and_goes_before_finished_tasks() {
        let answer = |owner| KeptAnswer {
            owner,
            model: "gpt-image-2",
            instance: "i-1",
            created: 1_700_000_000,
            updated_ms: 5,
            data: br#"[{"url":"https://gw.example/files/a.png"}]"#,
        };
        let ids: Vec<String> = (0..3).map(|_| uuid::Uuid::new_v4().to_string()).collect();
        let task_size = approx_size("t", &task(TaskStatus::Succeed, 1));
        let s = MemoryTaskStore::new(task_size + 400);
        s.put("t", &task(TaskStatus::Succeed, 1), MIN)
            .await
            .unwrap();
        s.keep_answer(&ids[0], &answer("team-a"), MIN)
            .await
            .unwrap();
        let read = s.get(&ids[0]).await.unwrap().expect("kept");
        // The instance is not kept in memory: it is this one.
        let expected = TaskRecord {
            instance: String::new(),
            ..TaskRecord::answered(&answer("team-a")).unwrap()
        };
        assert_eq!(read, expected);
        assert_eq!(read.status, TaskStatus::Succeed);
        assert_eq!(read.data[0]["url"], "https://gw.example/files/a.png");
        // Past the budget, the oldest answers go; the finished task, older still, stays while
        // answers remain to forget.
        let per_answer = s.lock().unwrap().bytes - task_size;
        for id in &ids[1..] {
            s.keep_answer(id, &answer("team-a"), MIN).await.unwrap();
        }
        assert_eq!(
            400 / per_answer,
            2,
            "the test needs the budget to be passed ({per_answer} bytes each)"
        );
        assert_eq!(s.get(&ids[0]).await.unwrap(), None);
        assert!(s.get(&ids[2]).await.unwrap().is_some());
        assert!(s.get("t").await.unwrap().is_some());
        assert!(s.lock().unwrap().bytes <= task_size + 400);
    }

    #[tokio::test]
    async fn lists_stale_unfinished_tasks_oldest_first() {
        let s = MemoryTaskStore::default();
        s.put("old", &task(TaskStatus::Running, 100), MIN)
            .await
            .unwrap();
        s.put("older", &task(TaskStatus::Pending, 50), MIN)
            .await
            .unwrap();
        s.put("fresh", &task(TaskStatus::Running, 1000), MIN)
            .await
            .unwrap();
        s.put("done", &task(TaskStatus::Succeed, 10), MIN)
            .await
            .unwrap();
        s.put("failed", &task(TaskStatus::Failed, 10), MIN)
            .await
            .unwrap();
        s.put("gone", &task(TaskStatus::Running, 10), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(s.stale(500, 10).await.unwrap(), vec!["older", "old"]);
        assert_eq!(s.stale(500, 1).await.unwrap(), vec!["older"]);
        assert_eq!(
            s.stale(100, 10).await.unwrap(),
            vec!["older"],
            "a task exactly at the bound is not stale"
        );
        assert!(s.stale(500, 0).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn only_one_claim_on_the_same_heartbeat_wins() {
        let s = MemoryTaskStore::default();
        s.put("t", &task(TaskStatus::Running, 100), MIN)
            .await
            .unwrap();
        assert!(s.claim("t", 100, "i2", 5000, MIN).await.unwrap());
        let got = s.get("t").await.unwrap().unwrap();
        assert_eq!((got.instance.as_str(), got.updated_ms), ("i2", 5000));
        assert_eq!(got.request, task(TaskStatus::Running, 100).request);
        assert!(
            !s.claim("t", 100, "i3", 5001, MIN).await.unwrap(),
            "second claim on the old heartbeat won"
        );
        assert_eq!(s.get("t").await.unwrap().unwrap().instance, "i2");
        assert!(
            s.stale(5000, 10).await.unwrap().is_empty(),
            "claim is a heartbeat"
        );

        // Gone, finished or expired tasks are not claimed.
        assert!(!s.claim("nope", 100, "i2", 5000, MIN).await.unwrap());
        s.put("f", &task(TaskStatus::Failed, 100), MIN)
            .await
            .unwrap();
        assert!(!s.claim("f", 100, "i2", 5000, MIN).await.unwrap());
        s.put("x", &task(TaskStatus::Running, 100), Duration::ZERO)
            .await
            .unwrap();
        assert!(!s.claim("x", 100, "i2", 5000, MIN).await.unwrap());
    }

    #[tokio::test]
    async fn only_the_owner_updates_an_unfinished_task() {
        let s = MemoryTaskStore::default();
        s.put("t", &task(TaskStatus::Running, 100), MIN)
            .await
            .unwrap();
        let beat = task(TaskStatus::Pending, 200);
        assert!(s.update("t", &beat, MIN).await.unwrap());
        assert_eq!(s.get("t").await.unwrap(), Some(beat));
        // Claimed by i2: the old owner's write is refused.
        assert!(s.claim("t", 200, "i2", 300, MIN).await.unwrap());
        assert!(!s
            .update("t", &task(TaskStatus::Running, 400), MIN)
            .await
            .unwrap());
        assert_eq!(s.get("t").await.unwrap().unwrap().updated_ms, 300);
        // Finished, or gone: nothing is written.
        let done = TaskRecord {
            instance: "i2".into(),
            ..task(TaskStatus::Failed, 500)
        };
        assert!(s.update("t", &done, MIN).await.unwrap());
        let again = TaskRecord {
            instance: "i2".into(),
            ..task(TaskStatus::Running, 600)
        };
        assert!(!s.update("t", &again, MIN).await.unwrap());
        assert!(!s.update("nope", &again, MIN).await.unwrap());
        assert_eq!(s.get("nope").await.unwrap(), None);
    }

    #[test]
    #[cfg(feature = "redis")]
    fn redis_keys_follow_the_prefix_without_io() {
        let mut settings = RedisSettings::new("redis://127.0.0.1:6379");
        settings.key_prefix = "p:".into();
        let s = RedisTaskStore::new(settings).unwrap();
        assert_eq!(s.key("abc"), "{p:tasks}:task:abc");
        assert_eq!(s.active_key(), "{p:tasks}:active");
        assert_eq!(s.legacy_key("abc"), "p:task:abc");
        assert_eq!(ttl_ms(Duration::MAX), MAX_TTL_MS as u64);
    }

    #[test]
    #[cfg(feature = "redis")]
    fn a_kept_answers_json_reads_back_as_the_answered_task() {
        for (owner, model, instance) in [
            ("key:team-a", "gpt-image-2", "i-1"),
            ("jwt:a \"quoted\" \\ subject\n", "模型/x", ""),
        ] {
            let answer = KeptAnswer {
                owner,
                model,
                instance,
                created: 1_700_000_000,
                updated_ms: -5,
                data:
                    br#"[{"url":"https://gw.example/files/a.png","revised_prompt":"\u00e9 \"x\""}]"#,
            };
            let json = answered_json(&answer);
            assert_eq!(
                decode(&json),
                Some(TaskRecord::answered(&answer).unwrap()),
                "{json}"
            );
        }
    }
}
