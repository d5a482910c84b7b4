//! What a provider account can say about itself: the models and the voices it serves, read from
//! the provider's own list endpoints. `switchyard check-providers` compares them with the
//! configuration; `GET /api/v1/audio/voices` adds a provider's voices to a model's list.
//!
//! A provider without such an endpoint has `None` here: nothing is guessed. Each provider's list
//! requests and answers live in its own module; which kind has which is decided in the providers'
//! registry (`providers::registry::discovery`), like its adapters.

use crate::caps::lifecycle::Date;
use crate::common::native::NativeRequest;

/// One entry of a provider's list: its id (what a configuration or a request names) and, when the
/// provider gives them, a display name and the day it shuts the entry down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// What a configuration or a request names it by.
    pub id: String,
    /// Its display name, when the provider gives one.
    pub name: Option<String>,
    /// The day (UTC) the provider says it stops serving it, when its list says so (OpenAI's
    /// `shutdown_date`); `None` when none is announced or the list has no such field.
    pub shutdown: Option<Date>,
}

impl Listed {
    /// An entry named `id`, with its display name if the provider gave one.
    pub fn new(id: impl Into<String>, name: Option<String>) -> Listed {
        Listed {
            id: id.into(),
            name,
            shutdown: None,
        }
    }

    /// The same entry, with the shutdown day its provider announced.
    pub(crate) fn with_shutdown(mut self, shutdown: Option<Date>) -> Listed {
        self.shutdown = shutdown;
        self
    }
}

/// One page of a list, and the token that asks for the next one (`None`: the last page).
#[derive(Debug, Default)]
pub struct Page {
    /// This page's entries.
    pub items: Vec<Listed>,
    /// The token that asks for the next page (`None`: this is the last).
    pub next: Option<String>,
}

/// A list endpoint: its request (given the token the previous page's answer named, `None` for the
/// first page) and how a 2xx answer reads. An answer that does not read is a message saying why.
#[derive(Clone, Copy)]
pub struct ListFns {
    /// Builds the request for a page, given the previous page's token (`None`: the first page).
    pub request: fn(Option<&str>) -> NativeRequest,
    /// Reads a 2xx answer into a page.
    pub response: ReadList,
}

/// Reads a 2xx list answer.
pub type ReadList = fn(&[u8]) -> Result<Page, String>;

/// The list endpoints of one provider kind.
#[derive(Clone, Copy, Default)]
pub struct Discovery {
    /// The models the account may use.
    pub models: Option<ListFns>,
    /// The voices the account may use (speech providers with a voice library).
    pub voices: Option<ListFns>,
}
