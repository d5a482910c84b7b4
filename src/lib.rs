//! Switchyard: one stable HTTP API in front of many AI model providers, for text to speech, image
//! generation and reranking, built on Pingora. It runs as the `switchyard` binary, or inside your
//! own Pingora server.
//!
//! # Embedding it in your Pingora server
//!
//! Switchyard is a Pingora application that answers its requests itself, in `request_filter`,
//! with its own exchange with the providers (Pingora's proxy path re-sends at most 64 KiB of a
//! request body on a retry; rerank and image bodies are larger). So a host does not proxy to it:
//! it *delegates* to it, and keeps Pingora's proxy path for its own routes.
//!
//! - **Beside your routes, on your listener**: [`Embedded`] (module [`embed`]). Load the
//!   configuration with [`config::load_hosted_file`] (no `listeners:` needed: your server owns
//!   the sockets), build it with [`Embedded::builder`] (`.prefix("/ai")` mounts every route,
//!   hosted-image link and the OpenAPI document's server under `/ai`), and call its hooks from
//!   your `ProxyHttp`: [`Embedded::request_filter`] first in yours (`Ok(true)`: Switchyard
//!   answered; `Ok(false)`: not its request, go on), [`Embedded::logging`],
//!   [`Embedded::fail_to_proxy`] and [`Embedded::suppress_error_log`]. Its per-request state is
//!   an `Option<`[`RequestCtx`]`>` in your `CTX`; its metrics and access lines count only its own
//!   requests. Add [`Embedded::background_services`] to your server, and wrap your proxy in
//!   [`Embedded::edge`] for its client deadlines and connection cap.
//! - **Its filters on your routes**: [`embed::AuthModule`], Switchyard's authentication and
//!   per-caller limits as a Pingora `HttpModule`; [`embed::Validator`], its request validation
//!   against a catalog built from a `providers:` and `models:` document alone.
//! - **As its own server**: [`server::add_services`] adds the gateway's listeners and services
//!   to a Pingora `Server`, as the binary does (`examples/gateway.rs`).
//! - **With your own providers**: a host registers its own provider kinds (an in-house TTS or
//!   rerank server) without changing the crate: see [`provider_api`], and load the configuration
//!   with [`config::Loader`]'s `kinds` (`examples/in_house_provider.rs`).
//!
//! Install the gateway's logger ([`logging::init`], which keeps credentials out of every log
//! record, Pingora's included; [`logging::install`] wraps a logger of your own). To change the
//! configuration while serving, load new settings and call [`GatewayState::reload`] (requests in
//! flight finish on the settings they started with), or [`embed::Builder::reload_from`] a file
//! on `SIGHUP`.
//!
//! The examples (`cargo run --example NAME`): `host_delegation` (below: a host proxy that serves
//! its own upstream and delegates `/ai/...` to Switchyard on one listener), `mount_prefix` (a
//! host answering its own paths, Switchyard under `/ai` with the root-level routes kept),
//! `auth_module` (the module guarding a host route), `gateway` (the binary's set-up),
//! `in_house_provider` (a provider kind registered from outside the crate).
//!
//! ```no_run
#![doc = include_str!("../examples/host_delegation.rs")]
//! ```
//!
//! # Inside
//!
//! A request goes through these phases, all inside the gateway's `ProxyHttp::request_filter`:
//!
//! ```text
//! route ─► authenticate ─► read body (bounded) ─► validate against the model's capabilities
//!       ─► resolve targets ─► translate (pure) ─► exchange with retries ─► translate back / stream
//! ```
//!
//! `docs/architecture.md` describes the layers and a request's path through the files.

#![warn(unreachable_pub, missing_docs)]

mod api;
mod auth;
mod cache;
mod caps;
mod catalog;
mod check;
mod civil;
mod common;
pub mod config;
pub(crate) mod cost;
pub mod embed;
mod engine;
mod gateway;
#[cfg(feature = "ledger")]
mod ledger;
mod limits;
pub mod logging;
mod metrics;
mod money;
pub mod provider_api;
mod providers;
pub mod server;
mod store;
mod stream;
mod telemetry;
#[cfg(feature = "ledger")]
mod tenants;
mod tokens;
mod upstream;

pub use embed::{Embedded, RequestCtx};
pub use gateway::GatewayState;

#[doc(hidden)]
pub mod internals;
