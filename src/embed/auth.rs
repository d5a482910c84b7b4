//! Switchyard's client authentication and per-caller limits as a Pingora `HttpModule`, for a
//! host's own routes: the same API keys and JWTs (`auth:`), and the same `requests_per_minute`
//! and `concurrent` limits, counted in the same store, as Switchyard's own requests.
//!
//! Add [`AuthModule`] in your `ProxyHttp::init_downstream_modules`, naming the path prefixes it
//! guards; Pingora runs it on every request before your `request_filter`. A request it refuses
//! never reaches `request_filter`: Pingora calls your `fail_to_proxy` with an
//! `HTTPStatus(401 | 429 | 503)` error, where [`AuthModule::answer_refusal`] writes the answer in
//! Switchyard's error shape (`{"code","message"}`, `Retry-After` for limits). A request it admits
//! carries its caller: [`Authenticated::of`], [`Authenticated::caller`]. Its concurrent slot is held until the request ends
//! (the module's per-request state is dropped with the session).
//!
//! Switchyard's own routes authenticate themselves: do not guard the mount prefix, or its
//! callers would be counted twice.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use pingora::http::RequestHeader;
use pingora::modules::http::{HttpModule, HttpModuleBuilder, Module};
use pingora::proxy::{FailToProxy, Session};
use pingora::{Error as PError, ErrorType};

use crate::auth::limits::Meter;
use crate::auth::Principal;
use crate::common::error::GatewayError;
use crate::gateway::{respond, GatewayState};
use crate::limits::Lease;

use super::Embedded;

/// The module's builder, added once to a proxy's `HttpModules`.
pub struct AuthModule {
    state: Arc<GatewayState>,
    guarded: Arc<[String]>,
}

/// The module's per-request state: the caller it admitted (or the refusal it made).
pub struct Authenticated {
    state: Arc<GatewayState>,
    guarded: Arc<[String]>,
    principal: Option<Principal>,
    refusal: Option<GatewayError>,
    refused: bool,
    /// The caller's concurrent slot, given back when the request ends.
    _lease: Option<Lease>,
    /// Its tenant's (a database key's), likewise.
    _tenant_lease: Option<Lease>,
}

impl AuthModule {
    /// A module checking callers against `embedded`'s configuration (its `auth:` section, and
    /// limits in its store), guarding no path until [`AuthModule::guard`] names some.
    pub fn new(embedded: &Embedded) -> AuthModule {
        AuthModule::with_state(embedded.state().clone())
    }

    /// [`AuthModule::new`] from a gateway state.
    pub fn with_state(state: Arc<GatewayState>) -> AuthModule {
        AuthModule {
            state,
            guarded: Arc::from(Vec::new()),
        }
    }

    /// Guard the requests whose path is `prefix` or under it (`/private` guards `/private` and
    /// `/private/x`, not `/privateer`; `/` guards every path).
    pub fn guard(self, prefix: &str) -> AuthModule {
        let mut guarded = self.guarded.to_vec();
        guarded.push(prefix.trim_end_matches('/').to_string());
        AuthModule {
            state: self.state,
            guarded: Arc::from(guarded),
        }
    }

    /// Call from your `ProxyHttp::fail_to_proxy`: when the module refused the request, write its
    /// answer (status, Switchyard's error body, `Retry-After` where it applies) and return what
    /// to tell Pingora; `None` when the error is not the module's.
    pub async fn answer_refusal(session: &mut Session) -> Option<FailToProxy> {
        let err = session
            .downstream_modules_ctx
            .get_mut::<Authenticated>()?
            .refusal
            .take()?;
        // `respond::error` keeps the connection when the request's body is done (a request
        // without one, as a refused GET is) and closes it, saying `Connection: close`, when an
        // unread body would be taken for the next request; Pingora then reuses the connection
        // only if the answer left it reusable.
        let written = respond::error(session, &err).await;
        if let Err(e) = &written {
            log::debug!("could not write the refusal: {e}");
        }
        Some(FailToProxy {
            error_code: err.status(),
            can_reuse_downstream: written.is_ok(),
        })
    }
}

impl HttpModuleBuilder for AuthModule {
    fn init(&self) -> Module {
        Box::new(Authenticated {
            state: self.state.clone(),
            guarded: self.guarded.clone(),
            principal: None,
            refusal: None,
            refused: false,
            _lease: None,
            _tenant_lease: None,
        })
    }
}

impl Authenticated {
    /// The module's state for `session`'s request (`None` when the module is not installed).
    pub fn of(session: &Session) -> Option<&Authenticated> {
        session.downstream_modules_ctx.get::<Authenticated>()
    }

    /// The caller, on a guarded path the module admitted (`None` on a path it does not guard):
    /// stable per caller, `key:<name>` for an API key (its `name` in `auth.api_keys`),
    /// `jwt:<sub>` for a token; the id its limits and budget are counted under.
    pub fn caller(&self) -> Option<&str> {
        self.principal.as_ref().map(|p| p.id.as_str())
    }

    /// Whether the module refused the request (a client's fault, which a host's
    /// `suppress_error_log` may keep out of Pingora's error log).
    pub fn refused(&self) -> bool {
        self.refused
    }

    fn guards(&self, path: &str) -> bool {
        self.guarded.iter().any(|p| {
            p.is_empty()
                || path
                    .strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// Refuse with `err`: kept for [`AuthModule::answer_refusal`], and the error Pingora hands
    /// to `fail_to_proxy`.
    fn refuse(&mut self, err: GatewayError) -> pingora::Result<()> {
        let status = err.status();
        let why = err.message();
        self.refusal = Some(err);
        self.refused = true;
        Err(PError::explain(ErrorType::HTTPStatus(status), why))
    }
}

#[async_trait]
impl HttpModule for Authenticated {
    async fn request_header_filter(&mut self, req: &mut RequestHeader) -> pingora::Result<()> {
        if !self.guards(req.uri.path()) {
            return Ok(());
        }
        let settings = self.state.settings();
        let principal = match settings.auth.authenticate(&req.headers) {
            Ok(p) => p,
            Err(e) => return self.refuse(GatewayError::Unauthorized(e)),
        };
        if let Some(set) = &principal.limits {
            let on_error = settings.auth.on_store_error();
            let admitted = self
                .state
                .limits
                .admit(&principal.id, set, Meter::Requests, None, on_error)
                .await;
            match admitted {
                Ok(lease) => self._lease = lease,
                Err(e) => return self.refuse(e),
            }
        }
        // A database key's tenant: its limits counted under `tenant:<name>` too.
        if let Some((scope, set)) = principal
            .tenant
            .as_ref()
            .and_then(|t| Some((t.id.as_str(), t.limits.as_deref()?)))
        {
            let on_error = settings.auth.on_store_error();
            let admitted = self
                .state
                .limits
                .admit(scope, set, Meter::Requests, None, on_error)
                .await;
            match admitted {
                Ok(lease) => self._tenant_lease = lease,
                Err(e) => return self.refuse(e),
            }
        }
        self.principal = Some(principal);
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
