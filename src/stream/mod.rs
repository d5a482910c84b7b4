//! Streaming answers: SSE framing and the pass-through of audio and event streams.

pub mod passthrough;
pub mod sse;
