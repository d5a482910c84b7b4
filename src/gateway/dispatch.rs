//! From a request head to its endpoint or operation: route, admission under the entry point's
//! caps, authentication and the caller's limits, the bounded body, then one [`Call`] to the
//! handler, whose [`Outcome`] the proxy layer records.

use std::sync::Arc;

use pingora::proxy::Session;

use super::ctx::{Ctx, GaugeSlot};
use super::outcome::{Call, Outcome};
use super::route::{self, Route};
use super::service::Gateway;
use super::{body, endpoints, limited, models, operations, usage, voices};
use crate::common::error::GatewayError;
use crate::common::Operation;
use crate::engine::trace;

impl Gateway {
    /// Serve one request to its outcome.
    pub(super) async fn dispatch(&self, session: &mut Session, ctx: &mut Ctx) -> Outcome {
        let started = trace::now();
        let admitted = self.admit(session, ctx).await;
        trace::step("auth_and_limits", started, admitted.as_ref().err());
        let route = match admitted {
            Ok(route) => route,
            Err(e) => return Outcome::failed(e),
        };
        let body = match route.operation() {
            Some(op) => match self.body(session, ctx, op, route).await {
                Ok(body) => body,
                Err(e) => return Outcome::failed(e),
            },
            None => bytes::Bytes::new(),
        };
        let settings = Arc::clone(&ctx.settings);
        let mut call = Call {
            state: &self.state,
            settings: &settings,
            region: &self.region,
            session,
            mount: &self.mount,
            prefix: ctx.prefix.as_deref(),
            principal: ctx.principal.as_ref(),
            limits: &mut ctx.limits,
            surface: ctx.surface,
            start: ctx.start,
        };
        match route {
            Route::Health => endpoints::health(&mut call).await,
            Route::OpenApi => endpoints::openapi(&mut call).await,
            Route::File => endpoints::file(&mut call).await,
            Route::Task => endpoints::task(&mut call).await,
            Route::Models | Route::Model => models::serve(route, &mut call).await,
            Route::Voices => voices::serve(&mut call).await,
            Route::Usage => usage::serve(&mut call).await,
            Route::Operation(Operation::Speech) => operations::speech(&mut call, &body).await,
            Route::Operation(Operation::Images) | Route::ImageEdit => {
                operations::images(&mut call, body).await
            }
            Route::Operation(Operation::Rerank) | Route::Compat(_) => {
                operations::rerank(&mut call, &body).await
            }
        }
    }

    /// Route the request, admit it under the entry point's caps and authenticate its caller
    /// (with an operation, under the caller's limits too).
    async fn admit(&self, session: &mut Session, ctx: &mut Ctx) -> Result<Route, GatewayError> {
        let route = route::route(&session.req_header().method, ctx.routed(session))?;
        if let Route::Compat(surface) = route {
            // From here on, errors are answered in the surface's shape too.
            ctx.surface = surface;
        }
        // A load balancer's health check is answered even at capacity: the gateway is alive.
        if route != Route::Health {
            let admitted = self
                .admission
                .admit(|| session.client_addr().and_then(|a| a.as_inet().copied()));
            ctx.in_flight = Some(admitted.inspect_err(|e| self.count_shed(e))?);
            ctx.gauge = GaugeSlot::new(&self.in_flight);
        }
        ctx.operation = route.operation();
        if route.authenticated() {
            let principal = ctx
                .settings
                .auth
                .authenticate(&session.req_header().headers)
                .map_err(GatewayError::Unauthorized)?;
            ctx.principal = Some(principal);
        }
        if let Some(op) = ctx.operation {
            limited::admit(&self.state, ctx, op).await?;
        }
        Ok(route)
    }

    /// The operation's body, read within its limit (an image edit's form turned into a
    /// generation's JSON).
    async fn body(
        &self,
        session: &mut Session,
        ctx: &Ctx,
        op: Operation,
        route: Route,
    ) -> Result<bytes::Bytes, GatewayError> {
        let s = &ctx.settings;
        let body = body::read(session, s.limits.body_limit(op), &s.clients).await?;
        if route != Route::ImageEdit {
            return Ok(body);
        }
        let content_type = session
            .req_header()
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        crate::api::image_edit::generation_body(content_type, body).await
    }
}
