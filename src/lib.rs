//! Switchyard: one stable HTTP API in front of many AI model providers, for text to speech, image
//! generation and reranking, built on Pingora.
//!
//! A request goes through these phases, all inside [`gateway::Gateway`]'s `request_filter`:
//!
//! ```text
//! route ─► authenticate ─► read body (bounded) ─► validate against the model's capabilities
//!       ─► resolve targets ─► translate (pure) ─► exchange with retries ─► translate back / stream
//! ```
//!
//! # Embedding
//!
//! Another Pingora server can host the gateway: install the gateway's logger ([`logging::init`],
//! which keeps credentials out of every log record, Pingora's included; [`logging::install`]
//! wraps a logger of your own), load [`config::Settings`], build a [`gateway::GatewayState`],
//! and add one [`gateway::Gateway`] service per entry point (or call [`server::add_services`]).
//! To change the configuration while serving, load new settings and call
//! [`gateway::GatewayState::reload`] (requests in flight finish on the settings they started
//! with), or let [`server::reload::Reloader`] re-read a file; the binary does so on `SIGHUP`.
//!
//! ```no_run
//! use pingora::server::Server;
//! switchyard::logging::init().expect("no logger installed yet");
//! let settings = switchyard::config::load_file("conf/switchyard.yaml").expect("valid config");
//! let mut server = Server::new_with_opt_and_conf(None, settings.server);
//! server.bootstrap();
//! let state = switchyard::gateway::GatewayState::new(settings.gateway);
//! switchyard::server::add_services(&mut server, &state);
//! server.run_forever();
//! ```

pub mod api;
pub mod auth;
pub mod caps;
pub mod catalog;
pub mod check;
pub mod common;
pub mod config;
pub mod embed;
pub mod engine;
pub mod gateway;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod providers;
pub mod server;
pub mod store;
pub mod stream;
pub mod tokens;
pub mod upstream;

pub use embed::{Embedded, RequestCtx};
pub use gateway::{Gateway, GatewayState};
