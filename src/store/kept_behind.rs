//! Synchronous image answers written to Redis behind the requests that made them, in batches.
//!
//! Every synchronous link answer is kept for reading back (`TaskStore::keep_answer`), so with
//! Redis each image request cost a `SET` round trip on its path: its command built and sent,
//! the connection's task woken, the reply read (about a quarter of an image request's CPU as
//! operators run it). Reading an answer back is rare and only best effort (docs/guide/
//! image-tasks.md), so the answer is queued here instead and one task writes what gathered every
//! [`GATHER`], all of it in one pipeline: one round trip for many answers.
//!
//! What is queued (or being sent) is read from here by this instance, so its own reads never miss.
//! Another instance reading within a few milliseconds of the answer can miss; the Redis store
//! reads a miss again a little later ([`READ_AGAIN`]). A batch that fails is logged and dropped,
//! as a failed `SET` was: the answers were given, and only their reading back is lost. At most
//! [`MAX_QUEUED`] answers wait; past that (Redis far behind) new ones are not kept.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::store::redis_conn::RedisConn;

/// How long the writer lets answers gather after the first one before sending them.
pub(crate) const GATHER: Duration = Duration::from_millis(2);

/// When a read of Redis misses, how long after it to read again (each in turn): an answer
/// another instance has just given reaches Redis within [`GATHER`] and a round trip.
pub(crate) const READ_AGAIN: [Duration; 3] = [
    Duration::from_millis(5),
    Duration::from_millis(20),
    Duration::from_millis(100),
];

/// The most answers that wait for the writer.
const MAX_QUEUED: usize = 20_000;

/// One answer to write: the task's id, its key, its record's JSON and its time to live.
struct Kept {
    id: String,
    key: String,
    json: String,
    ttl_ms: u64,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Kept>,
    /// The batch being sent: still read from here until Redis has it.
    sending: Arc<Vec<Kept>>,
    writer_started: bool,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Notify,
}

/// The queue of answers and its writer (started on the first answer, on the runtime that
/// made it); the writer stops when this is dropped, after sending what was queued.
pub(crate) struct KeptBehind {
    conn: RedisConn,
    shared: Arc<Shared>,
}

impl KeptBehind {
    pub(crate) fn new(conn: RedisConn) -> KeptBehind {
        KeptBehind {
            conn,
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                wake: Notify::new(),
            }),
        }
    }

    /// Queue `json` for `key` (task `id`) with its time to live.
    pub(crate) fn keep(&self, id: &str, key: String, json: String, ttl_ms: u64) {
        let mut queue = self.shared.lock();
        if queue.waiting.len() >= MAX_QUEUED {
            drop(queue);
            log::warn!(
                "a synchronous answer was not recorded for reading back: {MAX_QUEUED} answers \
                 already wait for the task store"
            );
            return;
        }
        let first = queue.waiting.is_empty();
        queue.waiting.push(Kept {
            id: id.to_string(),
            key,
            json,
            ttl_ms,
        });
        if !queue.writer_started {
            // `keep_answer` is polled by a request on the gateway's runtime; anywhere else
            // nothing could run the writer, and the answer is not kept.
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                queue.waiting.clear();
                return;
            };
            queue.writer_started = true;
            runtime.spawn(write_behind(self.conn.clone(), Arc::clone(&self.shared)));
        }
        drop(queue);
        if first {
            // One wake-up per batch: the writer takes everything that gathered.
            self.shared.wake.notify_one();
        }
    }

    /// The JSON of task `id` if it is still waiting to be written (or being written).
    pub(crate) fn find(&self, id: &str) -> Option<String> {
        let queue = self.shared.lock();
        queue
            .waiting
            .iter()
            .chain(queue.sending.iter())
            .find(|k| k.id == id)
            .map(|k| k.json.clone())
    }
}

impl Drop for KeptBehind {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writer: waits for a first answer, lets more gather, sends them all in one pipeline.
async fn write_behind(conn: RedisConn, shared: Arc<Shared>) {
    loop {
        shared.wake.notified().await;
        if !shared.lock().closed {
            tokio::time::sleep(GATHER).await;
        }
        let (batch, closed) = {
            let mut queue = shared.lock();
            let batch = Arc::new(std::mem::take(&mut queue.waiting));
            queue.sending = Arc::clone(&batch);
            (batch, queue.closed)
        };
        if !batch.is_empty() {
            if let Err(e) = send(&conn, &batch).await {
                log::warn!(
                    "{} synchronous answers were not recorded for reading back: {e}",
                    batch.len()
                );
            }
            shared.lock().sending = Arc::default();
        }
        if closed {
            return;
        }
    }
}

/// One pipeline of `SET key json PX ttl`. The keys share the tasks' hash tag, so in a Redis
/// Cluster the pipeline goes to one node.
async fn send(conn: &RedisConn, batch: &[Kept]) -> Result<(), crate::store::files::StoreError> {
    let mut pipe = redis::pipe();
    for k in batch {
        pipe.cmd("SET")
            .arg(&k.key)
            .arg(&k.json)
            .arg("PX")
            .arg(k.ttl_ms)
            .ignore();
    }
    let pipe = &pipe;
    // Durable, as the single `SET` was: the replicas asked for must have the batch.
    conn.run_durable(|mut c| async move { pipe.exec_async(&mut c).await })
        .await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::KeptBehind;
    use crate::store::redis_conn::{RedisConn, RedisSettings};

    /// A Redis nobody listens on (port 1), answering every call with an error at once.
    fn unreachable() -> RedisConn {
        let mut settings = RedisSettings::new("redis://127.0.0.1:1");
        settings.timeout = Duration::from_millis(200);
        RedisConn::new(&settings).unwrap()
    }

    #[tokio::test]
    async fn an_answer_reads_from_the_queue_until_its_batch_is_done() {
        let behind = KeptBehind::new(unreachable());
        behind.keep("id-1", "k:id-1".into(), "{\"a\":1}".into(), 60_000);
        behind.keep("id-2", "k:id-2".into(), "{\"a\":2}".into(), 60_000);
        // Readable at once, before any batch has left.
        assert_eq!(behind.find("id-1").as_deref(), Some("{\"a\":1}"));
        assert_eq!(behind.find("id-2").as_deref(), Some("{\"a\":2}"));
        assert_eq!(behind.find("id-3"), None);
        // The batch fails (nothing listens) and is dropped, as a failed `SET` was: the answers
        // were given, their reading back is lost. Waited for as a condition, not a time.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while behind.find("id-1").is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the batch never ended"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(behind.find("id-2"), None);
    }

    #[test]
    fn outside_a_runtime_nothing_is_queued_and_nothing_panics() {
        let behind = KeptBehind::new(unreachable());
        behind.keep("id-1", "k:id-1".into(), "{}".into(), 60_000);
        assert_eq!(behind.find("id-1"), None);
    }
}
