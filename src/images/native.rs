//! Natively asynchronous providers (DashScope Wan, Black Forest Labs FLUX, Kling): a submission
//! answers with the provider's own task, which the gateway then polls until it finishes.
//!
//! [`NativeTask`] is what the gateway keeps of such a task — serializable, because an
//! asynchronous public task stores it so that any instance can resume polling after the one that
//! submitted it died. [`Poll`] is one poll's reading; a task that failed (moderated, errored,
//! expired at the provider) is an `Err` from the adapter, classified like any provider error.

use serde::{Deserialize, Serialize};

use super::NativeImages;

/// A generation a provider runs asynchronously, as the gateway tracks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeTask {
    /// The configured provider's name: which of the model's targets runs the task.
    pub provider: String,
    /// The provider's task id.
    pub id: String,
    /// Where the provider said to poll, when it gives a URL rather than an id (BFL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling_url: Option<String>,
}

/// What a provider answered to an image request: the images, or its task to poll.
#[derive(Debug)]
pub enum ImageAnswer {
    Images(NativeImages),
    Task(NativeTask),
}

/// One poll's reading of a task that has not failed.
#[derive(Debug)]
pub enum Poll {
    /// Accepted, waiting for the provider's workers (public `pending`).
    Queued,
    /// Being generated (public `running`).
    Running,
    /// Finished: the images.
    Done(NativeImages),
}
