//! The limits script's calls of one caller, sent together: the calls made while the worker runs
//! the tasks that are ready (the admissions of the requests that arrived together, and what the
//! requests that finished together owe) go to Redis in one pipeline, one write and one read,
//! instead of a write and a read each. On loopback every write wakes Redis, and that wake-up is
//! paid in the writer's system call: the most expensive part of a call (issue 32).
//!
//! One caller's calls only: they share the caller's hash tag, so the pipeline goes to one node
//! of a Redis Cluster as each call would. The calls stay separate commands in the order made
//! (not one atomic script): each is applied as if sent alone.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use redis::RedisResult;
use tokio::sync::oneshot;

use crate::store::files::StoreError;
use crate::store::redis_conn::{connection_fault, RedisConn};

/// A call waiting for its pipeline: the script's `EVALSHA`, and where its reply goes.
struct Waiting {
    cmd: redis::Cmd,
    reply: oneshot::Sender<Result<Vec<u64>, String>>,
}

/// The calls waiting, by the caller's key tag.
#[derive(Default)]
pub(crate) struct Batches {
    by_tag: Mutex<HashMap<String, Vec<Waiting>>>,
    /// Pipelines sent, for the tests of what costs a round trip.
    #[cfg(test)]
    pub(crate) sent: std::sync::atomic::AtomicUsize,
}

/// What a call is answered: the script's reply, or why there is none.
pub(crate) type Reply = Result<Vec<u64>, StoreError>;

impl Batches {
    /// Queue `cmd` (an `EVALSHA` of `script`) for the caller `tag`. Returns where its reply will
    /// come, and whether it is the first queued for `tag` — then the caller must see the batch
    /// sent ([`Batches::send`]) once the ready tasks have run.
    pub(crate) fn queue(
        &self,
        tag: &str,
        cmd: redis::Cmd,
    ) -> (oneshot::Receiver<Result<Vec<u64>, String>>, bool) {
        let (reply, answer) = oneshot::channel();
        let mut by_tag = self.by_tag.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting = Waiting { cmd, reply };
        let first = match by_tag.get_mut(tag) {
            Some(queued) => {
                queued.push(waiting);
                false
            }
            None => {
                by_tag.insert(tag.to_string(), vec![waiting]);
                true
            }
        };
        (answer, first)
    }

    /// Send what is queued for `tag`, in one pipeline, and hand each call its reply. A call
    /// Redis answers `NOSCRIPT` (it does not know the script: restarted, flushed, a Cluster node
    /// that never ran it) is sent again with the script's text (`EVAL`).
    pub(crate) async fn send(&self, tag: &str, conn: &RedisConn, script: &str) {
        let waiting = self
            .by_tag
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tag)
            .unwrap_or_default();
        if waiting.is_empty() {
            return;
        }
        #[cfg(test)]
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for w in &waiting {
            pipe.add_command(w.cmd.clone());
        }
        let (pipe, waiting_cmds) = (&pipe, &waiting);
        let replies = conn
            .run(|mut c| async move {
                let mut replies: Vec<RedisResult<Vec<u64>>> = pipe.query_async(&mut c).await?;
                // A reply that says the connection is at fault (a primary demoted to a replica)
                // fails the pipeline, so that `run` tries it once more on a fresh connection, as
                // it would a call sent alone.
                if let Some(at) = replies
                    .iter()
                    .position(|r| matches!(r, Err(e) if connection_fault(e)))
                {
                    if let Some(Err(e)) = replies.into_iter().nth(at) {
                        return Err(e);
                    }
                    return Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "limits pipeline",
                    )));
                }
                for (reply, w) in replies.iter_mut().zip(waiting_cmds) {
                    if matches!(reply, Err(e) if no_script(e)) {
                        *reply = with_text(&w.cmd, script).query_async(&mut c).await;
                    }
                }
                Ok(replies)
            })
            .await;
        match replies {
            Ok(replies) => {
                for (w, reply) in waiting.into_iter().zip(replies) {
                    let _ = w.reply.send(reply.map_err(|e| format!("redis: {e}")));
                }
            }
            Err(e) => {
                let e = e.to_string();
                for w in waiting {
                    let _ = w.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

impl Batches {
    /// The sending of `tag`'s batch will not happen (its task was dropped unrun: the runtime
    /// stopped): its calls are answered that they were not sent, and the next call for `tag`
    /// starts a batch with a sending of its own.
    pub(crate) fn abandon(&self, tag: &str) {
        self.by_tag
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tag);
    }
}

/// Wait for a queued call's reply, at most `wait` (the sending has its own deadline, the
/// store's timeout; this one only keeps a request from waiting forever on a sending lost).
pub(crate) async fn reply(
    answer: oneshot::Receiver<Result<Vec<u64>, String>>,
    wait: std::time::Duration,
) -> Reply {
    match tokio::time::timeout(wait, answer).await {
        Ok(Ok(Ok(reply))) => Ok(reply),
        Ok(Ok(Err(e))) => Err(StoreError::Unavailable(e)),
        Ok(Err(_)) => Err(StoreError::Unavailable(
            "limits: the call was dropped unsent".into(),
        )),
        Err(_) => Err(StoreError::Unavailable(format!(
            "limits: no reply within {wait:?}"
        ))),
    }
}

fn no_script(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// `cmd` (`EVALSHA <sha> <keys and args>`) as `EVAL <script> <keys and args>`.
fn with_text(cmd: &redis::Cmd, script: &str) -> redis::Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(script);
    for arg in cmd.args_iter().skip(2) {
        if let redis::Arg::Simple(bytes) = arg {
            eval.arg(bytes);
        }
    }
    eval
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_abandoned_batch_answers_its_calls_and_the_next_call_starts_anew() {
        let batches = Batches::default();
        let (a, first) = batches.queue("{a}", redis::cmd("PING"));
        assert!(first);
        let (b, first) = batches.queue("{a}", redis::cmd("PING"));
        assert!(!first);
        // Another caller's batch is its own.
        let (_c, first) = batches.queue("{b}", redis::cmd("PING"));
        assert!(first);
        batches.abandon("{a}");
        let wait = std::time::Duration::from_secs(5);
        for answer in [a, b] {
            let unsent = reply(answer, wait).await;
            assert!(
                matches!(&unsent, Err(StoreError::Unavailable(e)) if e.contains("unsent")),
                "{unsent:?}"
            );
        }
        // Not held behind the lost sending: the next call asks for one of its own.
        assert!(batches.queue("{a}", redis::cmd("PING")).1);
        assert!(!batches.queue("{b}", redis::cmd("PING")).1);
    }

    #[tokio::test]
    async fn a_reply_that_never_comes_is_an_error_not_a_hang() {
        let batches = Batches::default();
        let (answer, _) = batches.queue("{a}", redis::cmd("PING"));
        let late = reply(answer, std::time::Duration::from_millis(20)).await;
        assert!(
            matches!(&late, Err(StoreError::Unavailable(e)) if e.contains("no reply")),
            "{late:?}"
        );
    }
}
