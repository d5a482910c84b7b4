//! Rerank, in the gateway's own shape or a compatibility surface's (translated into the
//! gateway's first, so validation, dispatch and usage are the one rerank pipeline's).

use bytes::Bytes;

use super::super::cached::{Looked, Plan};
use super::super::costing::RequestCost;
use super::super::outcome::{Call, Outcome};
use super::super::{lifecycle, mount};
use crate::api::compat::{Surface, Translated};
use crate::api::rerank::{self, RerankRequest, RerankResult};
use crate::cache::KeyBuilder;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::cost::{Metered, RerankMetered};
use crate::engine::{attempts, trace};

/// `POST /api/v1/rerank` (and the compatibility surfaces' rerank paths).
pub(crate) async fn rerank(call: &mut Call<'_>, body: &[u8]) -> Outcome {
    let mut out = Outcome::new();
    let mut cached = Vec::new();
    match answer(call, body, &mut out, &mut cached).await {
        Ok(json) => {
            let mut headers = out
                .model
                .as_deref()
                .map(|m| mount::link_headers(lifecycle::headers(m), call.prefix))
                .unwrap_or_default();
            headers.extend(out.cost.as_ref().map(RequestCost::header));
            headers.append(&mut cached);
            call.json(out, json, &headers).await
        }
        Err(e) => {
            out.result = Err(e.into());
            out
        }
    }
}

/// The answer's JSON in the request's surface; the model and the tokens used are noted in `out`,
/// and what the response cache did in `cached` (its headers), for a cache-enabled model.
async fn answer(
    call: &Call<'_>,
    body: &[u8],
    out: &mut Outcome,
    cached: &mut Vec<(&'static str, String)>,
) -> Result<Bytes, GatewayError> {
    let (s, surface) = (call.settings, call.surface);
    let started = trace::now();
    let failed = |e: &GatewayError| trace::step("validate", started, Some(e));
    let translated = surface.translate(body).inspect_err(failed)?;
    let own = translated.as_ref().map_or(body, |t| t.body.as_slice());
    let req = rerank::parse(own, &s.catalog, s.retry.max_retries).inspect_err(failed)?;
    trace::step("validate", started, None);
    out.model = Some(req.model.clone());
    super::super::limited::allowed(call, &req.model)?;
    let Some(plan) = Plan::of(call, &req.model, "rerank", |b| key_fields(b, &req, surface)) else {
        return provide(call, own, &req, translated.as_ref(), out).await;
    };
    let (leader, status) = match plan.look().await {
        Looked::Served(body, meta, status, age) => {
            plan.served(out, cached, status, age, &meta);
            out.usage.tokens = meta.usage;
            return Ok(body);
        }
        Looked::Lead(leader, status) => (leader, status),
    };
    plan.leads(out, cached, status);
    let json = provide(call, own, &req, translated.as_ref(), out).await?;
    leader.push(&json);
    let meta = plan.meta(out.usage.tokens, out.cost.as_ref());
    leader.finish(meta, plan.store).await;
    Ok(json)
}

/// The fields that change a rerank answer: the surface it is rendered in, the query, each
/// document's literal (the answer echoes it), `top_n` as applied, `return_documents` and the
/// native fields; never `retries`.
fn key_fields(b: &mut KeyBuilder, req: &RerankRequest<'_>, surface: Surface) {
    b.field("surface", &[surface as u8])
        .field("query", req.query.as_str().as_bytes())
        .field("top_n", &(req.top_n as u64).to_le_bytes())
        .field("return_documents", &[u8::from(req.return_documents)]);
    for d in &req.documents {
        b.field("document", d.raw().get().as_bytes());
    }
    let mut extra: Vec<_> = req.passthrough.iter().collect();
    extra.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    for (name, value) in extra {
        b.field(name.as_str(), value.get().as_bytes());
    }
}

/// Ask a provider: the answer's JSON in the request's surface. When every target of the model
/// turns out retired by its provider and the model names a successor, the same body (`own`, in
/// the gateway's shape) is validated against the successor and served by it, in this request.
async fn provide(
    call: &Call<'_>,
    own: &[u8],
    req: &RerankRequest<'_>,
    translated: Option<&Translated<'_>>,
    out: &mut Outcome,
) -> Result<Bytes, GatewayError> {
    let s = call.settings;
    match ask(call, req, translated, out).await {
        Err(e) if super::handed_to_successor(&s.catalog, &req.model, &e) => {
            let req = rerank::parse(own, &s.catalog, s.retry.max_retries)?;
            out.model = Some(req.model.clone());
            ask(call, &req, translated, out).await
        }
        answered => answered,
    }
}

/// Ask a provider once through the attempt loop: the answer's JSON in the request's surface.
async fn ask(
    call: &Call<'_>,
    req: &RerankRequest<'_>,
    translated: Option<&Translated<'_>>,
    out: &mut Outcome,
) -> Result<Bytes, GatewayError> {
    let (s, surface) = (call.settings, call.surface);
    let ((headers, native), target) = attempts::run(
        &call.state.upstream,
        &req.model,
        call.region,
        req.retries,
        |t| s.adapters.rerank(&t.provider)?.request(t, req),
    )
    .await?;
    let mut result = s
        .adapters
        .rerank(&target.provider)?
        .response(&target.provider, req, &headers, &native)
        .map_err(GatewayError::Upstream)?;
    let cost = cost(target, req, &result);
    // The spec's rerank answer has a `metadata` object: the cost goes there too, when known.
    if let Some(c) = cost.cost() {
        if let Ok(v) = serde_json::to_value(c) {
            result.metadata.insert("cost".into(), v);
        }
    }
    out.cost = Some(cost);
    let json = match translated {
        Some(t) => surface.answer(&result, t),
        None => {
            let mut json = Vec::with_capacity(answer_size(&result));
            serde_json::to_writer(&mut json, &result)
                .map(|()| json)
                .map_err(|e| format!("serializing result: {e}"))
        }
    }
    .map_err(GatewayError::Internal)?;
    out.usage.tokens = result.usage.total_tokens;
    Ok(json.into())
}

/// About the public answer's length (its documents' literals and room for each result's index
/// and score, and for usage and metadata), so that it is written into one buffer: 100 documents
/// are tens of kilobytes, which a buffer grown from nothing copies again at every doubling.
fn answer_size(result: &RerankResult<'_>) -> usize {
    let documents: usize = result
        .results
        .iter()
        .filter(|r| r.with_document)
        .map(|r| r.document.raw().get().len() + 16)
        .sum();
    documents + result.results.len() * 48 + 512
}

/// What the answer cost at `target`'s price: the provider's billed search units (Cohere's, which
/// its adapter puts in `metadata.search_units`) or billed tokens when it gave them, else the
/// gateway's own count (the query and each document, by its tokenizer, as validation counts
/// them; counted only for a price in search units or queries, which chunk by document).
fn cost(target: &Target, req: &RerankRequest<'_>, result: &RerankResult<'_>) -> RequestCost {
    let Some(price) = &target.price else {
        return RequestCost::Unpriced;
    };
    let search_units = result
        .metadata
        .get("search_units")
        .and_then(serde_json::Value::as_f64);
    let billed = result
        .metadata
        .get("total_tokens_source")
        .and_then(|v| v.as_str())
        == Some("provider");
    let chunked = price.search_units.is_some() || price.queries.is_some();
    let (query_tokens, document_tokens) = if chunked && search_units.is_none() {
        let count = |s: &str| crate::tokens::count(s) as u64;
        (
            count(req.query.as_str()),
            req.documents.iter().map(|d| count(d.as_str())).collect(),
        )
    } else {
        (0, Vec::new())
    };
    RequestCost::of(
        target,
        &Metered::Rerank(RerankMetered {
            usage: &result.usage,
            billed,
            query_tokens,
            document_tokens: &document_tokens,
            search_units,
        }),
    )
}
