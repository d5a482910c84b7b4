//! The operation engines: the attempt loop with retries across targets, the speech relay that
//! streams audio or SSE to the client, and image delivery and task polling.

pub mod attempts;
pub mod deliver;
pub mod discovery;
pub mod images;
pub mod passthrough;
pub mod poll;
pub mod speech;
pub mod trace;
