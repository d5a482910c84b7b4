//! Stream framing and decoding shared by adapters and the speech relay: SSE events, line
//! splitting, and how a provider's speech body becomes audio.

pub mod audio;
pub mod lines;
pub mod sse;
pub mod sse_audio;
