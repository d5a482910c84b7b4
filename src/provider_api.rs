//! Adding your own provider from outside the crate: everything an adapter for an in-house TTS
//! or rerank server needs, in one place, and the registry a host fills with its kinds.
//!
//! Built-in providers are written against these items, and nothing else of the gateway is needed
//! to write a speech or rerank one. Two things stay the built-in kinds' own, so that they can
//! change without breaking a host: image generation (its requests, task polling and result
//! files) and credentials signed per request (AWS Signature Version 4, expiring tokens). The steps (`examples/in_house_provider.rs` is a whole, runnable one):
//!
//! 1. **The adapter.** Implement the trait of each operation the server offers:
//!    [`RerankAdapter`] or [`SpeechAdapter`]. Each is a pure translation: the validated public
//!    request ([`RerankRequest`], [`SpeechRequest`]: already checked against the model's
//!    capabilities) and the [`Target`] (its `native_model`) in, a [`NativeRequest`]
//!    (method, path relative to the account's `base_url`, headers, body) out as
//!    [`Prepared::Http`]; the server's 2xx answer in, the public result out. The gateway sends
//!    it, with the account's credentials, timeouts, retries and fallbacks, and rebuilds it for
//!    every attempt. An answer that does not read is an [`UpstreamError`] of kind
//!    [`UpstreamErrorKind::BadResponse`] ([`bad_answer`] makes one with the text redacted).
//!    When the adapter is stateless, [`RerankFns`] and [`SpeechFns`] turn plain functions into
//!    one.
//!    A speech adapter also says how its 2xx body becomes audio ([`SpeechDecoding`]): the
//!    audio itself, copied on; or audio inside JSON, as many TTS servers send it — base64 or
//!    hex in one JSON document ([`SpeechDecoding::json_document`]) or in server-sent events
//!    ([`SpeechDecoding::sse`] with an [`SseSpeech`]); or a decoder of your own
//!    ([`AudioDecoder`]). `examples/inhouse_tts.rs` is a whole one, and
//!    `docs/guide/own-speech-provider.md` walks through it.
//! 2. **The error classification** ([`ErrorMap`]): a non-2xx answer's status and body to an
//!    [`UpstreamError`]. Its [`UpstreamErrorKind`] decides everything that follows: `RateLimited`,
//!    `Failure`, `Timeout`, `Connect` and `WrongAnswer` are retried (and count against the
//!    target's health); `InvalidRequest` and `ContentPolicy` reach the caller as a 400 with the
//!    message; `AuthRejected` skips the account; `UnknownModel` retires the target (held out for
//!    hours; the request moves to the model's next target or successor, else `503
//!    model_unavailable`). [`UpstreamError::from_status`] classifies by status alone (429 rate
//!    limited, 5xx failure, 401/403 credentials refused, other 4xx invalid request); refine `kind`
//!    from the body's own codes (a 403 that refuses one model, not the key, is `UnknownModel`). Put only a human-readable reason in `message`, through [`Provider::redact`].
//! 3. **The kind** ([`Kind`]): credentials ([`Auth::bearer`], [`Auth::header`],
//!    [`Auth::headers`], [`Auth::None`]; [`keyed`] leaves the account disabled when no key is configured), the error
//!    map, whether it is reached over HTTP (`remote`: then its accounts need a `base_url`), the
//!    hosts its answers' result files may come from, and the adapters ([`Adapters`]).
//! 4. **Registration.** [`ProviderKinds::register`] names the kind and the function that builds
//!    it for each account ([`KindConfig`]: the account's key, and its own settings read into a
//!    type of yours). Load the configuration with `config::load_str_with` or
//!    `config::load_file_with`; a `providers:` account with that `kind:` takes every shared key
//!    (`api_key`, `base_url`, `region_base_urls`, `timeouts`, `tls.ca_file`, `result_hosts`,
//!    `max_response_bytes`), and models bind to it through `targets:` with a capability
//!    `family` (and `capabilities:` overrides) that says what the server accepts.
//!
//! ```
//! use switchyard::provider_api::*;
//!
//! // `{"model", "query", "candidates"}` in, `{"scores": [..]}` (one per candidate) out.
//! #[derive(serde::Serialize)]
//! struct Score<'a> {
//!     model: &'a str,
//!     query: &'a str,
//!     // The caller's own JSON literals, copied as they came.
//!     candidates: &'a [JsonStr<'a>],
//! }
//!
//! fn request(target: &Target, req: &RerankRequest<'_>) -> Result<NativeRequest, GatewayError> {
//!     let body = Score {
//!         model: &target.native_model,
//!         query: req.query.as_str(),
//!         candidates: &req.documents,
//!     };
//!     // The family's native fields the caller sent travel after the known ones.
//!     Ok(NativeRequest::post_json("/v1/score", json_with_extra(&body, &req.passthrough)?))
//! }
//!
//! fn response<'r>(
//!     provider: &Provider,
//!     req: &'r RerankRequest<'r>,
//!     _headers: &HeaderMap,
//!     body: &[u8],
//! ) -> Result<RerankResult<'r>, UpstreamError> {
//!     #[derive(serde::Deserialize)]
//!     struct Scores {
//!         scores: Vec<f64>,
//!     }
//!     let answer: Scores = serde_json::from_slice(body)
//!         .map_err(|e| bad_answer(provider, format!("not the scores answer: {e}")))?;
//!     let scores = answer.scores.into_iter().enumerate();
//!     req.build(scores, None, QueryCounting::Once, Default::default())
//!         .map_err(|m| bad_answer(provider, m))
//! }
//!
//! fn errors(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
//!     let text = String::from_utf8_lossy(body);
//!     let mut err = UpstreamError::from_status(&provider.name, status, provider.redact(&text));
//!     if text.contains("model not loaded") {
//!         err.kind = UpstreamErrorKind::UnknownModel;
//!     }
//!     err
//! }
//!
//! let mut kinds = ProviderKinds::new();
//! kinds
//!     .register("inhouse-rerank", |account| {
//!         Ok(Kind {
//!             auth: keyed(account.key(), |key| Auth::header("x-inhouse-token", key))?,
//!             errors,
//!             remote: true,
//!             result_hosts: &[],
//!             adapters: Adapters {
//!                 rerank: Some(Box::new(RerankFns { request, response })),
//!                 ..Adapters::default()
//!             },
//!         })
//!     })
//!     .expect("a new kind's name");
//! ```
//!
//! The items are re-exported from the modules that define them; this module is the supported
//! path to them.

pub use crate::api::adapter::{Adapters, RerankAdapter, SpeechAdapter};
pub use crate::api::rerank::{QueryCounting, RerankItem, RerankRequest, RerankResult, Usage};
pub use crate::api::speech::SpeechRequest;
pub use crate::catalog::Target;
pub use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind, ValidationErrors};
pub use crate::common::json::{JsonStr, Str};
pub use crate::common::native::{json_with_extra, NativeRequest, Prepared};
pub use crate::providers::external::{KindConfig, ProviderKinds};
pub use crate::providers::registry::{keyed, Kind, RerankFns, SpeechFns};
pub use crate::stream::audio::{AudioDecoder, Finished, SpeechDecoding, SpeechUsage};
pub use crate::stream::expect::Native;
pub use crate::stream::sse_audio::SseSpeech;
pub use crate::upstream::provider::{bad_answer, Auth, ErrorMap, Provider};
// The `bytes` and `http` types adapters exchange, re-exported so that a host's adapter uses the
// versions the gateway does; documented by their own crates.
#[doc(no_inline)]
pub use bytes::Bytes;
#[doc(no_inline)]
pub use http::{HeaderMap, HeaderName, HeaderValue, Method};
