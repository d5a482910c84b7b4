//! What passes between the proxy layer and an endpoint or operation: one request context in
//! ([`Call`]), one [`Outcome`] back. The proxy layer (`service.rs`) records the outcome in
//! the request's context, charges its usage to the caller once, counts it and writes its
//! access line; an operation never touches the proxy's context.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pingora::proxy::Session;

use super::access_log::Usage;
use super::costing::RequestCost;
use super::mount::{self, Mount};
use super::GatewayState;
use crate::api::compat::Surface;
use crate::auth::Principal;
use crate::catalog::Model;
use crate::common::error::GatewayError;
use crate::common::images::ImageUsage;
use crate::config::GatewaySettings;
use crate::limits::Lease;
use crate::money::{Amount, Currency};
use crate::stream::audio::SpeechUsage;

/// One request as an endpoint or operation sees it: what it runs under and where its answer goes.
pub(crate) struct Call<'a> {
    /// What every entry point shares (upstream pool, stores, limits, metrics).
    pub(crate) state: &'a Arc<GatewayState>,
    /// The configuration snapshot the request runs under, start to end.
    pub(crate) settings: &'a Arc<GatewaySettings>,
    /// The entry point's region (providers' regional base URLs).
    pub(crate) region: &'a str,
    /// The client's session: the request's head and body, and where the answer is written.
    pub(crate) session: &'a mut Session,
    /// Where the entry point's routes sit (its OpenAPI document carries the prefix).
    pub(crate) mount: &'a Mount,
    /// The prefix this request came under (`None`: at the root); its links carry it.
    pub(crate) prefix: Option<&'a str>,
    /// The authenticated caller (`None` on the routes that need no credentials).
    pub(crate) principal: Option<&'a Principal>,
    /// Where the request stands with the caller's limits: a speech or image request is admitted
    /// with its known cost (`limited::cost`), which keeps its slot here.
    pub(crate) limits: &'a mut Standing,
    /// The API shape the request speaks (its answer's and errors' shape).
    pub(crate) surface: Surface,
    /// When the request started (time to first byte).
    pub(crate) start: Instant,
}

impl Call<'_> {
    /// The request's path as the router sees it (its mount prefix taken off).
    pub(crate) fn routed(&self) -> &str {
        mount::routed(self.session.req_header().uri.path(), self.prefix)
    }

    /// The caller's id (`""` without one), as task records name their owner.
    pub(crate) fn owner(&self) -> &str {
        self.principal.map_or("", |p| p.id.as_str())
    }

    /// Answer `200` with the JSON `body` (and `headers`): `out` committed to that answer, which
    /// the proxy layer writes once it has charged the request to its caller (so a caller's next
    /// request, sent the moment it has this answer, meets its limits with this one counted).
    pub(crate) async fn json(
        &mut self,
        mut out: Outcome,
        body: Bytes,
        headers: &[(&'static str, String)],
    ) -> Outcome {
        out.status = 200;
        out.answer = Some(Answer {
            body,
            headers: headers.to_vec(),
        });
        out
    }
}

/// Where a request stands with its caller's limits (`limited.rs` keeps it), held in its context
/// from its admission to its charge and lent to its handler in the [`Call`].
#[derive(Default)]
pub(crate) struct Standing {
    /// The caller's concurrent slot, given back when the usage is charged (after the answer).
    pub(crate) lease: Option<Lease>,
    /// The concurrent slot of the caller's tenant (a database key's), likewise.
    pub(crate) tenant_lease: Option<Lease>,
    /// Its admission waits for its body: it comes with the check of its known cost
    /// (`limited::cost`). Still set at the charge: the request ended before it (its body
    /// refused).
    pub(crate) pending: bool,
}

/// What an endpoint or operation did, for the proxy layer to record: the model it served, the
/// answer's status, its first byte, what it used, what it cost and what the caller is charged,
/// and how it ended.
pub(crate) struct Outcome {
    /// The model the request named, once known (also when it failed after: its access line
    /// names the model, and an error about a deprecated model carries the lifecycle headers).
    pub(crate) model: Option<Arc<Model>>,
    /// The status of the answer it committed to (0: none yet; an error's is the error's).
    pub(crate) status: u16,
    /// When the answer's head went out with its first bytes (speech: with the first audio).
    pub(crate) first_byte: Option<Duration>,
    /// What the answer delivered (access line, metrics, ledger).
    pub(crate) usage: Usage,
    /// The breakdown of `usage.tokens` of a token-billed answer (the provider's token counts
    /// by kind, as the cost was computed from them), for the ledger's `usage_detail`; `None`:
    /// none.
    pub(crate) usage_detail: Option<serde_json::Value>,
    /// What the caller's limits are charged, when it differs from `usage`: an asynchronous image
    /// task is charged its images as asked when it is accepted, since it outlives its request.
    pub(crate) charge: Option<Usage>,
    /// What it cost at the answering target's price, or why that is not known (`None`: no answer
    /// got far enough to ask, e.g. a refused request). Computed once per operation, from what
    /// the answer used (`gateway/costing.rs`).
    pub(crate) cost: Option<RequestCost>,
    /// What the caller's money budget is charged, when it is not `cost`: an asynchronous image
    /// task, whose images are made after its request, is charged the cost it was checked
    /// against when it is accepted (in the budget's currency).
    pub(crate) cost_charge: Option<(Amount, Currency)>,
    /// A complete JSON answer (status 200) still to be written: the proxy layer writes it after
    /// the charge. `None`: the handler wrote its answer itself (a stream, a file) or failed.
    pub(crate) answer: Option<Answer>,
    /// What the response cache did (`None`: the model is not cached).
    pub(crate) cache: Option<CacheUse>,
    /// How it ended.
    pub(crate) result: Result<(), Failure>,
}

/// What the response cache did for a request (`gateway/cached.rs`; its `Switchyard-Cache`
/// header's values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Hit,
    Collapsed,
    Miss,
    Bypass,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Hit => "hit",
            Status::Collapsed => "collapsed",
            Status::Miss => "miss",
            Status::Bypass => "bypass",
        }
    }

    /// Served without the provider (a hit or a collapsed request).
    pub(crate) fn served(self) -> bool {
        matches!(self, Status::Hit | Status::Collapsed)
    }
}

/// What the cache did for a request, for its access line, ledger record and metrics.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheUse {
    pub(crate) status: Status,
    /// Served without the provider: what the answer cost when it was made (the money saved).
    pub(crate) saved: Option<(Amount, Currency)>,
}

/// A complete JSON answer, written by the proxy layer.
pub(crate) struct Answer {
    /// The body.
    pub(crate) body: Bytes,
    /// Headers besides `Content-Type` and `Content-Length`.
    pub(crate) headers: Vec<(&'static str, String)>,
}

impl Outcome {
    /// An outcome not yet decided: no model, no status, nothing used.
    pub(crate) fn new() -> Outcome {
        Outcome {
            model: None,
            status: 0,
            first_byte: None,
            usage: Usage::default(),
            usage_detail: None,
            charge: None,
            cost: None,
            cost_charge: None,
            answer: None,
            cache: None,
            result: Ok(()),
        }
    }

    /// Refused before anything was known about the request.
    pub(crate) fn failed(failure: impl Into<Failure>) -> Outcome {
        Outcome {
            result: Err(failure.into()),
            ..Outcome::new()
        }
    }

    /// What the caller's limits are charged.
    pub(crate) fn charged(&self) -> Usage {
        self.charge.unwrap_or(self.usage)
    }

    /// Note an image answer's token usage as its provider reported it (GPT image models'
    /// `usage`, summed over a fan-out's calls), which its cost was computed from: the total in
    /// `usage.tokens` (the provider's `total_tokens`, else input and output together), the
    /// counts by kind in `usage_detail` as the answer's `usage` has them.
    pub(crate) fn image_tokens(&mut self, u: &ImageUsage) {
        self.usage.tokens = if u.total_tokens > 0 {
            u.total_tokens
        } else {
            u.input_tokens.saturating_add(u.output_tokens)
        };
        self.usage_detail = serde_json::to_value(u).ok();
    }

    /// Note a speech answer's tokens: those its provider reported (the SSE stream's closing
    /// event), and, for a token-priced model whose provider reported no input tokens, the
    /// gateway's count of the input (`counted`), which its cost used instead (and which
    /// `usage_detail` marks as the gateway's). Nothing when no count is known.
    pub(crate) fn speech_tokens(&mut self, reported: SpeechUsage, counted: Option<u64>) {
        let input = reported.input_tokens.or(counted);
        let output = reported.output_tokens;
        if input.is_none() && output.is_none() {
            return;
        }
        let mut detail = serde_json::Map::new();
        if let Some(n) = input {
            detail.insert("input_tokens".into(), n.into());
        }
        if let Some(n) = output {
            detail.insert("output_tokens".into(), n.into());
        }
        if reported.input_tokens.is_none() {
            detail.insert("input_tokens_counted_by".into(), "gateway".into());
        }
        self.usage.tokens = input.unwrap_or(0).saturating_add(output.unwrap_or(0));
        self.usage_detail = Some(serde_json::Value::Object(detail));
    }
}

/// Why an operation stopped.
pub(crate) enum Failure {
    /// Nothing was sent yet: answer with this error.
    Answer(GatewayError),
    /// The answer had started and cannot be finished: the connection is dropped unfinished (raw
    /// audio), which the client sees as a truncated answer.
    Abort(String),
    /// The client went away (or stopped reading until a write timed out): nothing more can be
    /// sent, and nothing is wrong with the gateway or the provider.
    ClientGone,
}

impl Failure {
    /// A write of the answer (`what`) failed: the client is gone when its connection said so
    /// (over HTTP/2, a stream the client reset is an `H2Error` from downstream), else the answer
    /// is abandoned for the reason given.
    pub(crate) fn written(what: &str, e: Box<pingora::Error>) -> Failure {
        use pingora::ErrorType::{ConnectionClosed, H2Error, WriteError, WriteTimedout};
        match e.etype() {
            WriteError | ConnectionClosed | WriteTimedout => Failure::ClientGone,
            H2Error if *e.esource() == pingora::ErrorSource::Downstream => Failure::ClientGone,
            _ => Failure::Abort(format!("{what}: {e}")),
        }
    }
}

impl From<GatewayError> for Failure {
    fn from(e: GatewayError) -> Self {
        Failure::Answer(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_tokens_are_the_providers_else_the_gateways_count_marked_so() {
        let mut out = Outcome::new();
        let reported = SpeechUsage {
            input_tokens: Some(10),
            output_tokens: Some(40),
        };
        out.speech_tokens(reported, Some(3));
        assert_eq!(out.usage.tokens, 50);
        assert_eq!(
            out.usage_detail,
            Some(serde_json::json!({"input_tokens": 10, "output_tokens": 40}))
        );
        // Raw audio of a token-priced model: nothing reported, the gateway's input count.
        let mut out = Outcome::new();
        out.speech_tokens(SpeechUsage::default(), Some(3));
        assert_eq!(out.usage.tokens, 3);
        assert_eq!(
            out.usage_detail,
            Some(serde_json::json!({"input_tokens": 3, "input_tokens_counted_by": "gateway"}))
        );
        // A character-priced model that reported nothing: no tokens at all.
        let mut out = Outcome::new();
        out.speech_tokens(SpeechUsage::default(), None);
        assert_eq!((out.usage.tokens, out.usage_detail), (0, None));
    }

    #[test]
    fn image_tokens_are_the_providers_total_with_its_breakdown() {
        let mut out = Outcome::new();
        let u = ImageUsage {
            input_tokens: 50,
            output_tokens: 2100,
            total_tokens: 0,
            ..Default::default()
        };
        out.image_tokens(&u);
        assert_eq!(out.usage.tokens, 2150, "no total: input and output");
        out.image_tokens(&ImageUsage {
            total_tokens: 2200,
            ..u
        });
        assert_eq!(out.usage.tokens, 2200);
        assert_eq!(
            out.usage_detail,
            Some(
                serde_json::json!({"input_tokens": 50, "output_tokens": 2100, "total_tokens": 2200})
            )
        );
    }
}
