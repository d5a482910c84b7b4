//! Stream framing and decoding shared by adapters and the speech relay: SSE events, line
//! splitting, how a provider's speech body becomes audio, and the check that it is audio at all.

pub mod audio;
pub(crate) mod encode;
pub(crate) mod expect;
pub mod lines;
pub mod sse;
pub(crate) mod sse_audio;
