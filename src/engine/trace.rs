//! What the attempt loop learned about the request being served — how many attempts, which target
//! answered (or failed last) — for its access line, without threading a parameter through every
//! function between the gateway and the loop: the gateway runs the request inside [`traced`], and
//! the loop notes into it. Outside [`traced`] (background tasks) noting does nothing.

use std::cell::Cell;
use std::future::Future;

use crate::catalog::{Model, Target};

tokio::task_local! {
    static TRACE: Cell<Trace>;
}

/// A request's attempts, as its access line reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trace {
    /// Attempts sent (to providers, or to an in-process one), over all native calls.
    pub attempts: u32,
    /// The last target tried, as its position in the model's `targets`.
    pub target: Option<usize>,
}

impl Trace {
    /// The target this trace names, in `model`.
    pub fn target<'m>(&self, model: Option<&'m Model>) -> Option<&'m Target> {
        model?.targets.get(self.target?)
    }
}

/// Run `fut` with a fresh trace, and give back what was noted into it.
pub async fn traced<F: Future>(fut: F) -> (F::Output, Trace) {
    TRACE
        .scope(Cell::new(Trace::default()), async move {
            let out = fut.await;
            (out, TRACE.with(Cell::get))
        })
        .await
}

/// Note one attempt at `target` of `model`.
pub fn attempt(model: &Model, target: &Target) {
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
        let ((), t) = traced(async {}).await;
        assert_eq!(t, Trace::default());
        assert!(t.target(None).is_none());
    }
}
