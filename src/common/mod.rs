//! The bottom layer: types every other layer shares and that depend on nothing above them — the
//! error model (with each error's retry class and its one mapping to HTTP), JSON helpers that
//! borrow the caller's bytes, native requests and image answers as adapters produce them, and the
//! public operations.

pub(crate) mod authority;
pub(crate) mod base64_text;
pub mod error;
pub mod image_input;
pub mod images;
pub(crate) mod io_wrap;
pub(crate) mod json;
pub mod native;
pub(crate) mod request_id;
pub(crate) mod trace_context;

/// The three public operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Text to speech (`POST /api/v1/audio/speech`).
    Speech,
    /// Image generation (`POST /api/v1/images/generations`, and image edits).
    Images,
    /// Reranking documents against a query (`POST /api/v1/rerank`, and the compatible surfaces).
    Rerank,
}

impl Operation {
    /// The operation's name as metrics, access lines and messages spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Speech => "speech",
            Operation::Images => "images",
            Operation::Rerank => "rerank",
        }
    }
}
