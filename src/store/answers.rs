//! Synchronous image answers kept in process memory, so that a link answer's `task_id` can be read
//! back (docs/guide/image-tasks.md, "A synchronous answer's `task_id`").
//!
//! Every synchronous link answer is kept, so this is on the image hot path and holds most of the
//! memory store's bytes. An answer is therefore kept as what reading it back needs and no more:
//! its owner, model, times and the public `data[]` as the JSON bytes it was answered with, in one
//! allocation, under its UUID's 16 bytes: about 0.25 KB for a one-image answer. A task record
//! with its JSON tree took 2.4 KB in a dozen allocations, and building and dropping those was a
//! quarter of the gateway's CPU per image request. An answer becomes a task record
//! (`TaskRecord::answered`) only when read.
//!
//! All answers share one time to live, so the oldest is first both to expire and to go when the
//! store is over its budget: a queue in insertion order serves both.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// A finished synchronous answer to keep: borrowed from the request that made it.
pub struct KeptAnswer<'a> {
    pub owner: &'a str,
    pub model: &'a str,
    /// The instance that answered (kept by the Redis store's record; one process has one).
    pub instance: &'a str,
    /// Unix seconds, as answered.
    pub created: i64,
    pub updated_ms: i64,
    /// The answer's public `data[]`, as JSON.
    pub data: &'a [u8],
}

/// One answer: its strings in one allocation (`owner`, then `model`, then `data`): blocks kept
/// for an hour and freed oldest first cost any allocator least when they are few.
struct Kept {
    bytes: Box<[u8]>,
    owner_len: u32,
    model_len: u32,
    created: i64,
    updated_ms: i64,
    expires: Instant,
}

impl Kept {
    fn size(&self) -> usize {
        FIXED + self.bytes.len()
    }

    fn answer(&self) -> Option<KeptAnswer<'_>> {
        let (owner, rest) = self.bytes.split_at_checked(self.owner_len as usize)?;
        let (model, data) = rest.split_at_checked(self.model_len as usize)?;
        Some(KeptAnswer {
            owner: std::str::from_utf8(owner).ok()?,
            model: std::str::from_utf8(model).ok()?,
            instance: "",
            created: self.created,
            updated_ms: self.updated_ms,
            data,
        })
    }
}

/// Bytes an answer holds besides its strings: its map slot and queue place (its id is the UUID's
/// 16 bytes, not its text) and the allocator's overhead, measured against RSS.
const FIXED: usize = 128;

/// The kept answers by id, and their ids oldest first.
#[derive(Default)]
pub(super) struct Answers {
    by_id: HashMap<u128, Kept>,
    oldest_first: VecDeque<(Instant, u128)>,
}

impl Answers {
    /// Keep `answer` under `id` (a UUID, as the gateway makes them; anything else is not kept)
    /// until `expires`. Returns the bytes it holds and those of an answer it replaced.
    pub(super) fn insert(
        &mut self,
        id: &str,
        answer: &KeptAnswer<'_>,
        expires: Instant,
    ) -> (usize, usize) {
        let (Ok(key), Ok(owner_len), Ok(model_len)) = (
            uuid::Uuid::parse_str(id).map(|u| u.as_u128()),
            u32::try_from(answer.owner.len()),
            u32::try_from(answer.model.len()),
        ) else {
            return (0, 0);
        };
        let bytes = [
            answer.owner.as_bytes(),
            answer.model.as_bytes(),
            answer.data,
        ]
        .concat();
        let kept = Kept {
            bytes: bytes.into_boxed_slice(),
            owner_len,
            model_len,
            created: answer.created,
            updated_ms: answer.updated_ms,
            expires,
        };
        let size = kept.size();
        let replaced = self.by_id.insert(key, kept).map_or(0, |old| old.size());
        self.oldest_first.push_back((expires, key));
        (size, replaced)
    }

    /// The answer under `id`, unless its time is up (`instance` is not kept: it is this one).
    pub(super) fn get(&self, id: &str, now: Instant) -> Option<KeptAnswer<'_>> {
        let key = uuid::Uuid::parse_str(id).ok()?.as_u128();
        self.by_id.get(&key).filter(|k| k.expires > now)?.answer()
    }

    /// Forget the oldest answer if `and_then` says so of its expiry; returns the bytes freed, or
    /// `None` when there is no answer left to consider.
    fn pop_oldest_if(&mut self, and_then: impl Fn(Instant) -> bool) -> Option<usize> {
        loop {
            let (expires, _) = self.oldest_first.front()?;
            if !and_then(*expires) {
                return None;
            }
            let (expires, key) = self.oldest_first.pop_front()?;
            // An id kept again since has a newer place in the queue: this one is stale.
            if self.by_id.get(&key).is_some_and(|k| k.expires == expires) {
                return self.by_id.remove(&key).map(|k| k.size());
            }
        }
    }

    /// Forget the answers whose time is up; returns the bytes freed.
    pub(super) fn purge(&mut self, now: Instant) -> usize {
        let mut freed = 0;
        while let Some(size) = self.pop_oldest_if(|expires| expires <= now) {
            freed += size;
        }
        freed
    }

    /// Forget the oldest answer; returns the bytes freed (`None`: there was none).
    pub(super) fn forget_oldest(&mut self) -> Option<usize> {
        self.pop_oldest_if(|_| true)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn answer(data: &[u8]) -> KeptAnswer<'_> {
        KeptAnswer {
            owner: "team-a",
            model: "gpt-image-2",
            instance: "i-1",
            created: 1_700_000_000,
            updated_ms: 1_700_000_000_123,
            data,
        }
    }

    #[test]
    fn an_answer_reads_back_as_it_was_kept_until_its_time_is_up() {
        let mut answers = Answers::default();
        let now = Instant::now();
        let data = br#"[{"url":"https://gw.example/files/a.png","revised_prompt":"a fox"}]"#;
        let id = "0b9c2f6e-3d1a-4c55-9a57-1f2e3d4c5b6a";
        answers.insert(id, &answer(data), now + Duration::from_secs(60));
        let kept = answers.get(id, now).unwrap();
        assert_eq!((kept.owner, kept.model), ("team-a", "gpt-image-2"));
        assert_eq!(
            (kept.created, kept.updated_ms),
            (1_700_000_000, 1_700_000_000_123)
        );
        assert_eq!(kept.data, data);
        assert!(
            answers.get(id, now + Duration::from_secs(60)).is_none(),
            "expired"
        );
        assert!(answers
            .get("1b9c2f6e-3d1a-4c55-9a57-1f2e3d4c5b6a", now)
            .is_none());
        assert_eq!(answers.insert("not-a-uuid", &answer(data), now), (0, 0));
        assert!(answers.get("not-a-uuid", now).is_none());
    }

    #[test]
    fn the_oldest_go_first_and_an_id_kept_again_keeps_its_new_place() {
        let mut answers = Answers::default();
        let now = Instant::now();
        let at = |s| now + Duration::from_secs(s);
        let (a, b) = (
            "00000000-0000-4000-8000-00000000000a",
            "00000000-0000-4000-8000-00000000000b",
        );
        let (one, _) = answers.insert(a, &answer(b"[]"), at(10));
        answers.insert(b, &answer(b"[]"), at(11));
        // `a` again, later: its old place in the queue is skipped.
        assert_eq!(answers.insert(a, &answer(b"[]"), at(12)), (one, one));
        assert_eq!(answers.forget_oldest(), Some(one));
        assert!(answers.get(b, now).is_none() && answers.get(a, now).is_some());
        assert_eq!(answers.purge(at(11)), 0, "a lives until 12");
        assert_eq!(answers.purge(at(12)), one);
        assert_eq!(answers.forget_oldest(), None);
    }
}
