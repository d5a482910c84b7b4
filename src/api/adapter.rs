//! What a provider must implement to serve an operation: one trait per operation, each a pure
//! translation between the validated public request and the provider's wire format.
//!
//! The engine calls these and nothing else of a provider; which adapters a provider account has
//! is decided once, when the providers' registry builds them from its typed
//! config, so no code anywhere branches on a provider kind.

use std::sync::Arc;

use http::HeaderMap;

use super::discovery::Discovery;
use super::images::ImageRequest;
use super::rerank::{RerankRequest, RerankResult};
use super::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::images::{ImageAnswer, NativeTask, Poll};
use crate::common::native::{PollRequest, Prepared};
use crate::common::Operation;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::Provider;

/// Text to speech.
pub trait SpeechAdapter: Send + Sync {
    /// The native request for `target`.
    fn request(&self, target: &Target, req: &SpeechRequest<'_>) -> Result<Prepared, GatewayError>;

    /// How a 2xx speech body becomes the public answer.
    fn decoding(&self, provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding;
}

/// Image generation.
pub trait ImageAdapter: Send + Sync {
    /// The native request for `target`, asking for `n` images (the engine fans out when the
    /// family's `per_call_n` is smaller than the caller's `n`).
    fn request(
        &self,
        target: &Target,
        req: &ImageRequest<'_>,
        n: u64,
    ) -> Result<Prepared, GatewayError>;

    /// Refuse (400, naming the field) a request this provider cannot honour for `target`, for
    /// reasons the family's capabilities cannot express (combinations of fields, input types,
    /// `extra_body` values). The one place for those rules: run for every enabled target before
    /// anything is started — before a synchronous request's first attempt and before an
    /// asynchronous task is accepted — and by `request` itself, which sees references the gateway
    /// has downloaded (a rule on a URL reference's bytes can only run then).
    fn validate(&self, _target: &Target, _req: &ImageRequest<'_>) -> Result<(), GatewayError> {
        Ok(())
    }

    /// A 2xx answer: the images, or (natively asynchronous providers) the task to poll. An error
    /// the provider reports inside it is an `Err`, so the attempt loop classifies it.
    fn response(
        &self,
        provider: &Provider,
        req: &ImageRequest<'_>,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<ImageAnswer, UpstreamError>;

    /// Whether reference images travel as bytes (multipart forms), so a URL the caller gave must
    /// be downloaded by the gateway first.
    fn input_as_bytes(&self) -> bool {
        false
    }

    /// For natively asynchronous providers, how their tasks are polled.
    fn tasks(&self) -> Option<&dyn TaskAdapter> {
        None
    }
}

/// Polling a natively asynchronous provider's image task.
pub trait TaskAdapter: Send + Sync {
    /// The request that reads `task`'s state.
    fn poll_request(
        &self,
        provider: &Provider,
        task: &NativeTask,
    ) -> Result<PollRequest, UpstreamError>;

    /// One poll's 2xx answer: still waiting, or the images; a task that failed is an `Err`.
    fn poll_response(
        &self,
        provider: &Provider,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Poll, UpstreamError>;
}

/// Rerank.
pub trait RerankAdapter: Send + Sync {
    /// The native request for `target` (or, for an in-process reranker, its answer).
    fn request(&self, target: &Target, req: &RerankRequest<'_>) -> Result<Prepared, GatewayError>;

    /// A successful native answer (`headers` matter to providers that report usage there).
    fn response<'r>(
        &self,
        provider: &Provider,
        req: &'r RerankRequest<'r>,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<RerankResult<'r>, UpstreamError>;
}

/// The adapters of one provider account: one per operation it serves.
#[derive(Default)]
pub struct Adapters {
    /// Text to speech, when the kind serves it.
    pub speech: Option<Box<dyn SpeechAdapter>>,
    /// Image generation (and edits), when the kind serves it: the built-in kinds' only (the
    /// image adapter API is not part of `provider_api`), hidden so that a host's
    /// `..Adapters::default()` still fills it.
    #[doc(hidden)]
    pub images: Option<Box<dyn ImageAdapter>>,
    /// Rerank, when the kind serves it.
    pub rerank: Option<Box<dyn RerankAdapter>>,
}

impl Adapters {
    /// Whether the account serves `op`.
    #[doc(hidden)]
    pub fn serves(&self, op: Operation) -> bool {
        match op {
            Operation::Speech => self.speech.is_some(),
            Operation::Images => self.images.is_some(),
            Operation::Rerank => self.rerank.is_some(),
        }
    }
}

/// Every account's adapters, indexed by [`Provider::id`].
#[derive(Default)]
pub struct Registry {
    accounts: Vec<Adapters>,
    /// Each account's list endpoints (`api::discovery`), by the same index.
    discovery: Vec<Discovery>,
}

impl Registry {
    /// Add an account's adapters; the returned index is the account's [`Provider::id`].
    pub fn push(&mut self, adapters: Adapters) -> usize {
        self.accounts.push(adapters);
        self.accounts.len() - 1
    }

    /// The adapters of `provider`'s account (`None`: not registered).
    pub fn get(&self, provider: &Provider) -> Option<&Adapters> {
        self.accounts.get(provider.id)
    }

    /// Record the list endpoints of the account `push` numbered `id`.
    pub fn discover(&mut self, id: usize, discovery: Discovery) {
        if self.discovery.len() <= id {
            self.discovery.resize(id + 1, Discovery::default());
        }
        self.discovery[id] = discovery;
    }

    /// The account's list endpoints (none when its kind has none).
    pub fn discovery(&self, provider: &Provider) -> Discovery {
        self.discovery.get(provider.id).copied().unwrap_or_default()
    }

    /// The account's speech adapter; an internal error if it has none (the config refuses a model
    /// that would need it).
    pub fn speech(&self, provider: &Provider) -> Result<&dyn SpeechAdapter, GatewayError> {
        self.get(provider)
            .and_then(|a| a.speech.as_deref())
            .ok_or_else(|| not_served(provider, "speech"))
    }

    /// The account's image adapter; an internal error if it has none (the config refuses a model
    /// that would need it).
    pub fn images(&self, provider: &Provider) -> Result<&dyn ImageAdapter, GatewayError> {
        self.get(provider)
            .and_then(|a| a.images.as_deref())
            .ok_or_else(|| not_served(provider, "images"))
    }

    /// The account's rerank adapter; an internal error if it has none (the config refuses a model
    /// that would need it).
    pub fn rerank(&self, provider: &Provider) -> Result<&dyn RerankAdapter, GatewayError> {
        self.get(provider)
            .and_then(|a| a.rerank.as_deref())
            .ok_or_else(|| not_served(provider, "rerank"))
    }
}

// The config refuses a model whose target's provider does not serve its operation, so this is a
// defect if it is ever reached, answered as an internal error rather than a panic.
fn not_served(provider: &Provider, op: &str) -> GatewayError {
    GatewayError::Internal(format!("provider {} does not serve {op}", provider.name))
}
