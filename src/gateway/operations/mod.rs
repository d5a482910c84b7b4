//! The three operations, each from a read body to a written answer: one [`Call`] in, one
//! [`Outcome`] out (the model, the answer's status and first byte, what it used).
//!
//! [`Call`]: super::outcome::Call
//! [`Outcome`]: super::outcome::Outcome

mod images;
mod rerank;
mod speech;
mod speech_cached;
mod speech_forms;

pub(crate) use images::images;
pub(crate) use rerank::rerank;
pub(crate) use speech::speech;
