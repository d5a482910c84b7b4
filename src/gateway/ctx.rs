//! The proxy layer's per-request state ([`Ctx`]): what the request runs under, what it holds
//! until its answer is out (admission, gauge and concurrent slots), and the [`Outcome`] of its
//! endpoint or operation as recorded for its charge, metrics and access line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::proxy::Session;

use super::access_log::Usage;
use super::admission::InFlight;
use super::costing::RequestCost;
use super::mount;
use super::outcome::{Failure, Outcome, Standing};
use crate::api::compat::Surface;
use crate::auth::Principal;
use crate::catalog::Model;
use crate::common::Operation;
use crate::config::GatewaySettings;
use crate::cost;
use crate::engine::trace::{RequestContext, Trace};
use crate::metrics;
use crate::money::{Amount, Currency};

/// Per-request state of the gateway's `ProxyHttp` service.
pub(crate) struct Ctx {
    /// The configuration this request runs under from start to end, whatever a reload does.
    pub(crate) settings: Arc<GatewaySettings>,
    pub(crate) start: Instant,
    /// The mount prefix the request came under (`None`: at the root); its route is the path
    /// after it, and its links carry it.
    pub(crate) prefix: Option<Arc<str>>,
    /// The API shape the request speaks, and so its answers and errors.
    pub(crate) surface: Surface,
    /// The operation, once routed.
    pub(crate) operation: Option<Operation>,
    /// The authenticated caller.
    pub(crate) principal: Option<Principal>,
    /// This request's slot under the entry point's in-flight cap, given back as the context drops.
    pub(crate) in_flight: Option<InFlight>,
    /// This request in the entry point's in-flight gauge, taken out when it is logged.
    pub(crate) gauge: Option<GaugeSlot>,
    /// Where it stands with its caller's limits: its concurrent slot (given back when its usage
    /// is charged, after the answer), and whether its admission is still to come.
    pub(crate) limits: Standing,
    /// What the attempt loop noted: attempts, and the target that answered or failed last.
    pub(crate) trace: Trace,
    /// The request's id and trace, taken from its head (`service.rs`).
    pub(crate) request: RequestContext,
    /// What its endpoint or operation did (below), as recorded by [`Ctx::record`].
    pub(crate) model: Option<Arc<Model>>,
    pub(crate) status: u16,
    pub(crate) code: Option<&'static str>,
    /// When the answer's first bytes went out.
    pub(crate) ttfb: Option<Duration>,
    /// What the answer delivered.
    pub(crate) usage: Usage,
    /// The breakdown of its tokens, for the ledger (`Outcome::usage_detail`).
    pub(crate) usage_detail: Option<serde_json::Value>,
    /// What the caller's limits are charged.
    pub(crate) charge: Usage,
    /// What it cost, or why that is not known (`None`: no answer got far enough to ask).
    pub(crate) cost: Option<RequestCost>,
    /// What the caller's money budget is charged: the request's cost and its currency (`None`:
    /// not known, nothing charged). [`Ctx::record`] notes it from the outcome; the limits
    /// convert it into the budget's currency.
    pub(crate) cost_charge: Option<(Amount, Currency)>,
    /// What the response cache did (`None`: the model is not cached).
    pub(crate) cache: Option<super::cached::CacheUse>,
    /// Set when an answer had begun and had to be abandoned.
    pub(crate) aborted: Option<String>,
    /// The client went away before its answer was complete: said once, in the access log.
    pub(crate) client_gone: bool,
}

impl Ctx {
    /// A request's state under `settings`, starting now.
    pub(crate) fn new(settings: Arc<GatewaySettings>, prefix: Option<Arc<str>>) -> Ctx {
        Ctx {
            settings,
            start: Instant::now(),
            prefix,
            surface: Surface::Native,
            operation: None,
            principal: None,
            in_flight: None,
            gauge: None,
            limits: Standing::default(),
            trace: Trace::default(),
            request: RequestContext::default(),
            model: None,
            status: 0,
            code: None,
            ttfb: None,
            usage: Usage::default(),
            usage_detail: None,
            charge: Usage::default(),
            cost: None,
            cost_charge: None,
            cache: None,
            aborted: None,
            client_gone: false,
        }
    }

    /// The answer's `X-Request-Id` header (none before the request's head was read).
    pub(crate) fn id_header(&self) -> Option<(&'static str, String)> {
        (!self.request.id.is_empty()).then(|| self.request.id.header())
    }

    /// The mount prefix the request came under (`None`: at the root).
    pub(crate) fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The request's path as the router sees it (its mount prefix taken off).
    pub(crate) fn routed<'a>(&self, session: &'a Session) -> &'a str {
        mount::routed(session.req_header().uri.path(), self.prefix())
    }

    /// Record what the endpoint or operation did; its failure is handed back to be answered.
    pub(crate) fn record(&mut self, outcome: Outcome) -> Result<(), Failure> {
        self.charge = outcome.charged();
        if let Some(model) = outcome.model {
            self.model = Some(model);
        }
        // The money budget is charged what the request cost, when its usage is charged at all
        // (a speech stream cut short charges neither). The outcome's own cost counts the
        // provider's reported usage; without one (an accepted image task, whose images are
        // charged as asked, and its known cost when it had one) the served target's price at the
        // gateway's counts stands in.
        let charged = self.charge;
        let used = charged.tokens + charged.characters + charged.images > 0;
        let computed = outcome.cost.as_ref().and_then(|c| c.cost());
        self.cost_charge = match outcome
            .cost_charge
            .or(computed.map(|c| (c.amount, c.currency)))
        {
            Some(c) if used => Some(c),
            Some(_) => None,
            None if used => self
                .operation
                .and_then(|op| estimated_cost(self.model.as_deref(), &self.trace, op, &charged)),
            None => None,
        };
        self.status = outcome.status;
        self.ttfb = outcome.first_byte;
        self.usage = outcome.usage;
        self.usage_detail = outcome.usage_detail;
        self.cost = outcome.cost;
        self.cache = outcome.cache;
        outcome.result
    }
}

/// A request counted in an in-flight gauge until dropped.
pub(crate) struct GaugeSlot(metrics::IntGauge);

impl GaugeSlot {
    pub(crate) fn new(gauge: &metrics::Gauge) -> Option<GaugeSlot> {
        let gauge = gauge.as_ref()?;
        gauge.inc();
        Some(GaugeSlot(gauge.clone()))
    }
}

impl Drop for GaugeSlot {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// What a finished request cost at the price of the target that served it (`trace`), from the
/// gateway's own counts of what it is charged (`used`): characters spoken, images delivered.
/// [`Ctx::record`] notes this for the budget only when the outcome has no computed cost of its
/// own (an accepted image task, charged its images as asked). Rerank is not estimated here (its
/// price may bill search units, which the charged tokens do not give).
fn estimated_cost(
    model: Option<&Model>,
    trace: &Trace,
    op: Operation,
    used: &Usage,
) -> Option<(Amount, Currency)> {
    let price = trace.target(model)?.price.as_deref()?;
    let metered = match op {
        Operation::Speech if used.characters > 0 => cost::Metered::Speech(cost::SpeechMetered {
            characters: used.characters,
            ..Default::default()
        }),
        Operation::Images if used.images > 0 => cost::Metered::Images(cost::ImagesMetered {
            images: used.images,
            ..Default::default()
        }),
        _ => return None,
    };
    let c = cost::of(price, &metered).ok()?;
    Some((c.amount, c.currency))
}
