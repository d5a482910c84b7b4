//! Where the gateway's log lines go when stderr is not a terminal: into one batch, written to
//! stderr in one `write` when it reaches [`FLUSH_BYTES`], [`FLUSH_EVERY`] after its first line,
//! at once after a warning or an error, and when the process ends ([`flush`]).
//!
//! `env_logger` writes (and flushes) stderr once per record: at `info` that is one system call per
//! request for its access line (issue 32; about a sixth of a small request's system calls). A
//! batch costs one call for many lines. Lines are never reordered (one buffer, written whole and
//! in order) and never lost at a normal exit: the binary calls [`flush`] after the server stops,
//! and [`crate::logging::Redacting`]'s `flush` (what `log::logger().flush()` reaches) does too. A
//! process killed outright (`SIGKILL`) loses at most the last [`FLUSH_EVERY`] of lines.
//!
//! A terminal gets every line at once, as before: someone is watching it.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The longest a line waits in the batch.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// A batch this large is written at once, by the thread that filled it.
pub(crate) const FLUSH_BYTES: usize = 64 * 1024;

/// The batch, and the flusher's wake-up when it gets its first line.
static BATCH: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static FIRST_LINE: Condvar = Condvar::new();
/// The process whose flusher thread is running (0: none yet). A forked child (daemonizing) has
/// none of its parent's threads, so it starts its own.
static FLUSHER_OF: AtomicU32 = AtomicU32::new(0);

fn batch() -> MutexGuard<'static, Vec<u8>> {
    BATCH.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `env_logger`'s target: each record's bytes join the batch. Its `flush`, which `env_logger`
/// calls after every record, does nothing: the batch is written on its own schedule.
pub(crate) struct Batched;

impl Write for Batched {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn append(bytes: &[u8]) {
    append_parts(&[bytes]);
}

/// Add one line made of `parts` to the batch, in one go (no other line between them).
pub(crate) fn append_parts(parts: &[&[u8]]) {
    let mut batch = batch();
    let first = batch.is_empty();
    for part in parts {
        batch.extend_from_slice(part);
    }
    if batch.len() >= FLUSH_BYTES {
        write_out(&mut batch);
        return;
    }
    drop(batch);
    if first {
        // One wake-up per batch, not per line.
        start_flusher();
        FIRST_LINE.notify_one();
    }
}

/// Write every batched line to stderr now.
pub(crate) fn flush() {
    write_out(&mut batch());
}

/// Write `batch` out (under its lock, so batches leave in order) and empty it.
fn write_out(batch: &mut Vec<u8>) {
    if batch.is_empty() {
        return;
    }
    // Nowhere to report a failed write to stderr; the lines are dropped as `eprintln!` would.
    let _ = io::stderr().lock().write_all(batch);
    batch.clear();
    if batch.capacity() > 4 * FLUSH_BYTES {
        batch.shrink_to(FLUSH_BYTES);
    }
}

fn start_flusher() {
    let me = std::process::id();
    let running = FLUSHER_OF.load(Ordering::Relaxed);
    if running == me
        || FLUSHER_OF
            .compare_exchange(running, me, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("log-flush".into())
        .spawn(run_flusher);
    if spawned.is_err() {
        // No thread: lines still go out by size, after warnings, and at exit.
        FLUSHER_OF.store(0, Ordering::Relaxed);
    }
}

/// The flusher: sleeps until a batch starts, lets it gather for [`FLUSH_EVERY`], writes it.
fn run_flusher() {
    loop {
        let mut batch = batch();
        while batch.is_empty() {
            batch = FIRST_LINE
                .wait(batch)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(batch);
        std::thread::sleep(FLUSH_EVERY);
        flush();
    }
}
