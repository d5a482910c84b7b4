//! Identical requests in flight, collapsed: the first request with a key is its [`Leader`] (it
//! asks the provider); later ones get a [`Reader`] of the leader's answer, which hands them each
//! piece as the leader writes it to its own client, so a waiting speech request receives the
//! audio as it arrives, not when it ends.
//!
//! The pieces are kept in the flight (shared `Bytes`, not copied) until it lands, so a follower
//! that joins late still gets the answer from its first byte. A leader that fails — or is
//! dropped without finishing, whatever the reason — ends its flight as failed: followers that
//! have received nothing yet try again (one becomes the next leader), and the others fail as a
//! cut answer does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use tokio::sync::watch;

use super::{Cache, Entry, Key, Meta};

/// One key's answer in flight.
pub(crate) struct Flight {
    progress: Mutex<Progress>,
    /// Bumped after every change of `progress`, to wake the readers.
    changed: watch::Sender<u64>,
    followers: AtomicUsize,
}

#[derive(Default)]
struct Progress {
    pieces: Vec<Bytes>,
    end: Option<End>,
}

#[derive(Clone, Copy)]
enum End {
    Done(Meta),
    Failed,
}

impl Flight {
    pub(super) fn new() -> Flight {
        Flight {
            progress: Mutex::default(),
            changed: watch::Sender::new(0),
            followers: AtomicUsize::new(0),
        }
    }

    fn progress(&self) -> MutexGuard<'_, Progress> {
        match self.progress.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn update(&self, change: impl FnOnce(&mut Progress)) {
        change(&mut self.progress());
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A reader of this flight from its first piece.
    pub(super) fn follow(self: &Arc<Self>) -> Option<Reader> {
        self.followers.fetch_add(1, Ordering::Relaxed);
        Some(Reader {
            flight: self.clone(),
            seen: self.changed.subscribe(),
            next: 0,
        })
    }
}

/// What a follower reads next.
pub(crate) enum Follow {
    /// The next piece of the answer.
    Piece(Bytes),
    /// The answer is complete.
    Done(Meta),
    /// The leader failed.
    Failed,
}

/// A follower's view of a flight.
pub(crate) struct Reader {
    flight: Arc<Flight>,
    seen: watch::Receiver<u64>,
    next: usize,
}

impl Reader {
    /// The next piece, or how the answer ended; waits for the leader.
    pub(crate) async fn next(&mut self) -> Follow {
        loop {
            // Marked seen before looking, so a change after the look wakes the wait below.
            self.seen.borrow_and_update();
            {
                let p = self.flight.progress();
                if let Some(piece) = p.pieces.get(self.next) {
                    self.next += 1;
                    return Follow::Piece(piece.clone());
                }
                match p.end {
                    Some(End::Done(meta)) => return Follow::Done(meta),
                    Some(End::Failed) => return Follow::Failed,
                    None => {}
                }
            }
            if self.seen.changed().await.is_err() {
                // The flight is gone without an end: its leader is gone.
                return Follow::Failed;
            }
        }
    }
}

/// The request answering a key: what it writes to its client goes to its followers too
/// ([`Leader::push`]); [`Leader::finish`] ends the flight with a complete answer (and stores
/// it). Dropped unfinished, it ends the flight as failed.
pub(crate) struct Leader {
    cache: Arc<Cache>,
    key: Key,
    flight: Arc<Flight>,
    /// Whether the flight is in the cache's table (a `no-cache` request's is not).
    listed: bool,
    finished: bool,
}

impl Leader {
    pub(super) fn new(cache: Arc<Cache>, key: Key, flight: Arc<Flight>, listed: bool) -> Leader {
        Leader {
            cache,
            key,
            flight,
            listed,
            finished: false,
        }
    }

    /// A piece of the answer, as written to the leader's own client.
    pub(crate) fn push(&self, piece: &Bytes) {
        let piece = piece.clone();
        self.flight.update(|p| p.pieces.push(piece));
    }

    /// Whether any request follows this one (its answer is read on even when its own client
    /// has gone).
    pub(crate) fn followed(&self) -> bool {
        self.flight.followers.load(Ordering::Relaxed) > 0
    }

    /// The answer ended complete: the followers get its end, and it is stored when `store`
    /// (`expires_at` in `meta` says for how long).
    pub(crate) async fn finish(mut self, meta: Meta, store: bool) {
        self.finished = true;
        let body = {
            let mut p = self.flight.progress();
            p.end = Some(End::Done(meta));
            join(&p.pieces)
        };
        self.flight.changed.send_modify(|v| *v = v.wrapping_add(1));
        if store {
            self.cache.put(&self.key, Entry { body, meta }).await;
        }
        if self.listed {
            self.cache.land(&self.key.flight, &self.flight);
        }
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.flight.update(|p| p.end = Some(End::Failed));
        if self.listed {
            self.cache.land(&self.key.flight, &self.flight);
        }
    }
}

/// The pieces as one body (a single piece is shared, not copied).
fn join(pieces: &[Bytes]) -> Bytes {
    match pieces {
        [one] => one.clone(),
        _ => {
            let mut body = BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
            for p in pieces {
                body.extend_from_slice(p);
            }
            body.freeze()
        }
    }
}
