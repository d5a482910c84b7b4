//! What the attempt loop learned about the request being served — how many attempts, which target
//! answered (or failed last) — for its access line, without threading a parameter through every
//! function between the gateway and the loop: the gateway runs the request inside [`traced`], and
//! the loop notes into it. Outside [`traced`] (background tasks) noting does nothing.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;

use tokio::task::futures::TaskLocalFuture;

use crate::catalog::{Model, Target};

tokio::task_local! {
    static TRACE: Cell<Trace>;
}

/// A request's attempts, as its access line reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Trace {
    /// Attempts sent (to providers, or to an in-process one), over all native calls.
    pub attempts: u32,
    /// The last target tried, as its position in the model's `targets`.
    pub target: Option<usize>,
}

impl Trace {
    /// The target this trace names, in `model`.
    pub(crate) fn target<'m>(&self, model: Option<&'m Model>) -> Option<&'m Target> {
        model?.targets.get(self.target?)
    }
}

/// `fut` with a fresh trace: await it (pinned), then read the trace with [`noted`].
///
/// Not an `async fn` wrapping `fut`: that would hold the request's future three times over (the
/// argument, the inner block's copy and the task-local future's), 40 KB that every request
/// moved around; this holds it once.
pub(crate) fn traced<F: Future>(fut: F) -> TaskLocalFuture<Cell<Trace>, F> {
    TRACE.scope(Cell::new(Trace::default()), fut)
}

/// What was noted into a finished [`traced`] future.
pub(crate) fn noted<F: Future>(fut: Pin<&mut TaskLocalFuture<Cell<Trace>, F>>) -> Trace {
    fut.take_value().map(Cell::into_inner).unwrap_or_default()
}

/// Note one attempt at `target` of `model`.
pub(crate) fn attempt(model: &Model, target: &Target) {
    let _ = TRACE.try_with(|cell| {
        let mut t = cell.get();
        t.attempts += 1;
        t.target = model.targets.iter().position(|x| std::ptr::eq(x, target));
        cell.set(t);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_trace_starts_empty_and_comes_back() {
        let mut fut = std::pin::pin!(traced(async {}));
        fut.as_mut().await;
        let t = noted(fut);
        assert_eq!(t, Trace::default());
        assert!(t.target(None).is_none());
    }
}
