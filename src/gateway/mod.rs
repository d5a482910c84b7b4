//! The Pingora service and what it is made of. `Gateway` implements `ProxyHttp` and answers
//! every request itself from `request_filter` (routing, authentication, bounded body,
//! validation, the upstream exchange and the translated answer), so Pingora's own proxy path is
//! never used (docs/architecture.md, "The upstream exchange").
//!
//! One [`GatewayState`] is shared by every entry point; each entry point gets its own [`Gateway`]
//! carrying its region, which picks providers' regional base URLs.
//!
//! By concern: `state` (what entry points share), `service` (the `ProxyHttp` hooks), `dispatch`
//! (route, admission, authentication, body), `outcome` (the one request context an endpoint or
//! operation takes and the one outcome it returns), `costing` (what a request cost, as its
//! outcome, header and access line carry it), `ctx` (the proxy's per-request state, where
//! an outcome is recorded), `operations` and `endpoints` (the handlers), `record` (metrics and
//! the access line), `limited` (the caller's limits, usage charged in one place), `usage` (a
//! caller's own usage, budgets and limits, read back).

pub(crate) mod access_log;
pub(crate) mod admission;
pub(crate) mod body;
mod cached;
pub(crate) mod client_conn;
pub(crate) mod costing;
mod ctx;
mod dispatch;
mod endpoints;
#[cfg(feature = "redis")]
pub(crate) mod health_sync;
pub(crate) mod image_tasks;
pub(crate) mod lifecycle;
pub(crate) mod limited;
pub(crate) mod models;
pub(crate) mod mount;
pub(crate) mod openapi;
mod operations;
mod outcome;
mod record;
pub(crate) mod reload;
pub(crate) mod respond;
pub(crate) mod route;
mod service;
mod spans;
mod state;
pub(crate) mod task_job;
pub(crate) mod task_supervisor;
mod usage;
pub(crate) mod voices;

pub(crate) use ctx::Ctx;
pub(crate) use service::Gateway;
pub(crate) use state::make_health_cells;
pub use state::GatewayState;
