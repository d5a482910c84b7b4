//! The operation engines: the attempt loop with retries across targets, the speech relay that
//! streams audio or SSE to the client, and image delivery and task polling.

pub(crate) mod attempts;
pub(crate) mod client;
pub(crate) mod deliver;
pub(crate) mod discovery;
pub(crate) mod images;
pub(crate) mod passthrough;
pub(crate) mod poll;
pub(crate) mod speech;
pub(crate) mod trace;
