//! Streaming answers: SSE and line framing, speech decoding, and the copy of audio and event
//! streams to the client.

pub mod audio;
pub mod lines;
pub mod passthrough;
pub mod speech;
pub mod sse;
