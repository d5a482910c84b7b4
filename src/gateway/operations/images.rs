//! Image generation: validated (with the provider's own refusals), then generated and answered,
//! or accepted as an asynchronous task whose id is answered at once.

use std::sync::Arc;

use bytes::Bytes;
use pingora::proxy::Session;

use super::super::cached::{Looked, Plan};
use super::super::costing::{ImagesAsked, RequestCost};
use super::super::image_tasks;
use super::super::limited;
use super::super::outcome::{Call, Outcome};
use super::super::{lifecycle, mount};
use crate::api::images;
use crate::cache::KeyBuilder;
use crate::catalog::Model;
use crate::common::authority;
use crate::common::error::GatewayError;
use crate::common::image_input::ImageInput;
use crate::common::Operation;
use crate::config::GatewaySettings;
use crate::engine::images::{generate, Images, Synchronous};
use crate::money::{Amount, Currency};

/// `POST /api/v1/images/generations` (and an image edit, turned into a generation's body).
pub(crate) async fn images(call: &mut Call<'_>, body: Bytes) -> Outcome {
    let s = call.settings;
    let req = match images::parse(&body, &s.catalog, s.retry.max_retries) {
        Ok(req) => req,
        Err(e) => return Outcome::failed(e),
    };
    let mut out = Outcome::new();
    out.model = Some(req.model.clone());
    let mut cached = Vec::new();
    match answer(call, req, &body, &mut out, &mut cached).await {
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

/// The answer's JSON: the generated images, or the accepted task. What it used (or, for a task,
/// what the caller is charged) is noted in `out`, and what the response cache did in `cached`
/// (its headers), for a model the operator opted in.
async fn answer(
    call: &mut Call<'_>,
    req: images::ImageRequest<'_>,
    body: &Bytes,
    out: &mut Outcome,
    cached: &mut Vec<(&'static str, String)>,
) -> Result<Bytes, GatewayError> {
    let s = call.settings;
    // The provider's own refusals, before a task is accepted or a call is sent.
    crate::engine::images::validate(&s.adapters, &req)?;
    // Reference images' pixels (megapixel prices bill them), read once from their headers.
    let (input_pixels, unmeasured_inputs) =
        ImagesAsked::measure(req.image.iter().chain(&req.more_images));
    let planned = crate::cost::Planned::Images {
        n: req.n,
        size: Some(&req.size),
        quality: req.quality,
        input_pixels: &input_pixels,
        unmeasured_inputs,
    };
    let checked = limited::cost(call, Operation::Images, req.n, &req.model, &planned).await?;
    let mut base = public_base(s, call.session, req.response_format == "url")?;
    // Under a mount, the links (hosted files) are the mount's paths too.
    if let Some(prefix) = call.prefix {
        base.push_str(prefix);
    }
    if req.is_async {
        return accept_task(call, req, body, base, out, checked).await;
    }
    let inputs = (&input_pixels[..], unmeasured_inputs);
    generate_now(call, req, body, &base, out, cached, inputs).await
}

/// Accept `req` as an asynchronous task: its id is answered at once, its images are charged as
/// asked (and, against a money budget, at the cost it was `checked` against).
async fn accept_task(
    call: &mut Call<'_>,
    req: images::ImageRequest<'_>,
    body: &Bytes,
    base: String,
    out: &mut Outcome,
    checked: Option<(Amount, Currency)>,
) -> Result<Bytes, GatewayError> {
    let (state, s) = (call.state, call.settings);
    let owner = call.owner().to_string();
    // What the attempt loop would refuse at once (no usable target) is refused here, before
    // a task is made: the caller gets the 503 a synchronous request gets, not a task that
    // can only fail.
    crate::engine::attempts::servable(&req.model)?;
    let asked = req.n;
    let model = req.model.name.clone();
    drop(req);
    let accepted =
        image_tasks::start(state, s, call.region, owner, model, body.clone(), base).await?;
    // A task runs past this request: its images are charged as asked when it is accepted.
    out.charge = Some(super::super::access_log::Usage {
        images: asked,
        ..Default::default()
    });
    out.cost = Some(RequestCost::Asynchronous);
    // And, against a money budget, the cost it was checked against (the dearest target's).
    out.cost_charge = checked;
    to_json(&accepted)
}

/// Generate `req` now, or serve it from the response cache (a task may not be: its id is its
/// own); a request that leads a cache flight hands its answer to the followers and the store.
async fn generate_now(
    call: &mut Call<'_>,
    req: images::ImageRequest<'_>,
    body: &Bytes,
    base: &str,
    out: &mut Outcome,
    cached: &mut Vec<(&'static str, String)>,
    (input_pixels, unmeasured_inputs): (&[u64], u64),
) -> Result<Bytes, GatewayError> {
    let (state, s) = (call.state, call.settings);
    let owner = call.owner().to_string();
    let plan = Plan::of(call, &req.model, "images", |b| key_fields(b, &req));
    let mut lead = None;
    if let Some(plan) = &plan {
        match plan.look().await {
            Looked::Served(body, meta, status, age) => {
                plan.served(out, cached, status, age, &meta);
                out.usage.images = meta.usage;
                return Ok(body);
            }
            Looked::Lead(leader, status) => {
                plan.leads(out, cached, status);
                lead = Some(leader);
            }
        }
    }
    let engine = state.images(s);
    let (result, model, size, quality) =
        generate_served(call, &engine, req, body, base, out).await?;
    image_tasks::keep_finished(state, s, &owner, &model.name, &result).await;
    out.usage.images = result.data.len() as u64;
    // The provider's token usage (GPT image models), which the cost is computed from.
    if let Some(usage) = result.facts.as_ref().and_then(|f| f.usage.as_ref()) {
        out.image_tokens(usage);
    }
    let asked = ImagesAsked {
        size: &size,
        quality,
        input_pixels,
        unmeasured_inputs,
    };
    out.cost = Some(RequestCost::of_images(&model, &result, &asked));
    let json = to_json(&result)?;
    if let (Some(plan), Some(leader)) = (&plan, lead) {
        leader.push(&json);
        // Links expire (a provider's within hours, the gateway's hosted files after
        // `images.file_ttl`): only an answer whose images are inline is kept.
        let inline = result.data.iter().all(|i| i.url.is_none());
        let meta = plan.meta(out.usage.images, out.cost.as_ref());
        leader.finish(meta, plan.store && inline).await;
    }
    Ok(json)
}

/// What [`generate_served`] gives: the result, the model that served it, and the size and
/// quality its cost is counted by.
type Served = (
    images::ImageResult,
    Arc<Model>,
    String,
    Option<&'static str>,
);

/// Generate `req`; when every target of its model turned out retired by its provider before
/// anything was answered, the same body, validated against the successor, is served by it.
async fn generate_served(
    call: &Call<'_>,
    engine: &Images<'_>,
    req: images::ImageRequest<'_>,
    body: &Bytes,
    base: &str,
    out: &mut Outcome,
) -> Result<Served, GatewayError> {
    let s = call.settings;
    let progress = Synchronous::new(engine);
    let model = req.model.clone();
    // What the cost needs of the request, which the engine takes.
    let (size, quality) = (req.size.to_string(), req.quality);
    match generate(engine, call.region, req, base, &progress).await {
        Err(e) if super::handed_to_successor(&s.catalog, &model, &e) => {
            let req = images::parse(body, &s.catalog, s.retry.max_retries)?;
            crate::engine::images::validate(&s.adapters, &req)?;
            let (model, size, quality) = (req.model.clone(), req.size.to_string(), req.quality);
            out.model = Some(model.clone());
            let result = generate(engine, call.region, req, base, &progress).await?;
            Ok((result, model, size, quality))
        }
        generated => Ok((generated?, model, size, quality)),
    }
}

fn to_json(result: &images::ImageResult) -> Result<Bytes, GatewayError> {
    // Sized for the images' text up front: an inline image is megabytes, which a growing buffer
    // would copy again at every doubling.
    let images: usize = result
        .data
        .iter()
        .map(|i| i.b64_json.as_ref().map_or(0, |b| b.as_str().len()))
        .sum();
    let mut out = Vec::with_capacity(images + 1024);
    serde_json::to_writer(&mut out, result)
        .map(|()| Bytes::from(out))
        .map_err(|e| GatewayError::Internal(format!("serializing result: {e}")))
}

/// The fields that change an image answer, as validated (the size its aspect ratio means, the
/// family's defaults filled in); never `retries` or `async`.
fn key_fields(b: &mut KeyBuilder, req: &images::ImageRequest<'_>) {
    let opt = |v: Option<&'static str>| v.map(str::as_bytes);
    b.field("prompt", req.prompt.as_str().as_bytes())
        .optional(
            "negative_prompt",
            req.negative_prompt.as_ref().map(|p| p.as_str().as_bytes()),
        )
        .field("size", req.size.as_bytes())
        .field("n", &req.n.to_le_bytes())
        .optional("quality", opt(req.quality))
        .optional("style_preset", opt(req.style_preset))
        .field("response_format", req.response_format.as_bytes())
        .field("output_format", req.output_format.as_bytes())
        .field("jpeg_spelled_jpeg", &[u8::from(req.jpeg_spelled_jpeg)])
        .field(
            "watermark",
            &[u8::from(req.watermark), u8::from(req.watermark_given)],
        )
        .optional("background", opt(req.background))
        .optional(
            "strength",
            req.strength
                .map(f64::to_bits)
                .map(u64::to_le_bytes)
                .as_ref()
                .map(|b| &b[..]),
        );
    for (name, input) in std::iter::once(("mask", req.mask.as_ref()))
        .chain(std::iter::once(("image", req.image.as_ref())))
        .chain(req.more_images.iter().map(|i| ("image", Some(i))))
    {
        match input {
            None => b.optional(name, None),
            Some(ImageInput::Url(u)) => b.field(name, u.as_bytes()),
            Some(ImageInput::Data { mime, bytes }) => {
                b.field(name, mime.as_bytes()).field(name, bytes)
            }
        };
    }
    let mut extra: Vec<_> = req.extra_body.iter().chain(&req.passthrough).collect();
    extra.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    for (name, value) in extra {
        b.field(name.as_str(), value.get().as_bytes());
    }
}

/// Where links to hosted files point (the caller appends a mount prefix): the configured public
/// URL; else, when this request's images
/// come back as links, its own host — only if that is a plain `host[:port]` authority, never
/// reflected otherwise (a 400 naming `host`). `https` when the caller came over TLS or a proxy
/// in front says so in `X-Forwarded-Proto`. A request whose images come back inline builds no
/// link, so its host is not needed.
fn public_base(
    s: &GatewaySettings,
    session: &Session,
    links: bool,
) -> Result<String, GatewayError> {
    if let Some(base) = &s.images.public_base_url {
        return Ok(base.clone());
    }
    if !links {
        return Ok(String::new());
    }
    let h = session.req_header();
    // The request target's authority (HTTP/2's `:authority`, or an absolute-form target) wins
    // over `Host`, as RFC 9112 §3.2.2 and RFC 9113 §8.3.1 say.
    let mut hosts = h.headers.get_all(http::header::HOST).iter();
    let host = match h.uri.authority() {
        Some(authority) => Some(authority.as_str()),
        None => {
            let first = hosts.next();
            // Pingora already refuses a request with two (HTTP/1 and HTTP/2 alike); checked again
            // so that this function alone never picks one of several.
            if hosts.next().is_some() {
                return Err(GatewayError::field(
                    "host",
                    "more than one Host header: links to hosted images cannot be built",
                ));
            }
            // A value that is not even UTF-8 is as unusable as a malformed one.
            first.map(|v| v.to_str().unwrap_or(""))
        }
    };
    let Some(host) = host else {
        return Err(GatewayError::field(
            "host",
            "links to hosted images are built from the request's Host header, and it has none \
             (the operator can set images.public_base_url instead)",
        ));
    };
    if !authority::is_host_port(host) {
        return Err(GatewayError::field(
            "host",
            "the Host header is not a plain host[:port] (a DNS name or IP address, optional \
             port 1-65535), so links to hosted images cannot be built from it",
        ));
    }
    let tls = session.digest().is_some_and(|d| d.ssl_digest.is_some()) || forwarded_https(h);
    Ok(format!("{}://{host}", if tls { "https" } else { "http" }))
}

/// Whether a proxy in front says the client came over HTTPS: the first (client-facing) value of
/// `X-Forwarded-Proto` is `https`. Any other value (`http`, or one that means nothing) leaves the
/// connection's own scheme.
fn forwarded_https(h: &pingora::http::RequestHeader) -> bool {
    h.headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}
