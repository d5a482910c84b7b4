//! Fixtures shared by the provider adapters' unit tests.
//!
//! Every adapter test needs a provider account, a target, and a validated request to translate.
//! Requests come two ways: parsed from a public body against a one-model [`catalog`] (the adapter
//! then sees exactly what the gateway would hand it), or built straight from a catalog family with
//! [`rerank_request`] when a test wants to set `top_n` and pass-through fields directly. The
//! per-adapter values (names, keys, native models, limits) stay in each adapter's own tests.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;

use crate::common::native::NativeRequest;

use crate::upstream::provider::Provider;

use crate::api::rerank::RerankRequest;
use crate::caps::Caps;
use crate::catalog::{Catalog, Model, Target};
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::json::JsonStr;
use crate::common::json::Str;
use crate::upstream::endpoint::{Endpoint, Timeouts};
use crate::upstream::provider::{Account, Auth};

/// Largest answer a fixture provider accepts.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Retries a parsed request allows (the adapters under test never look at it).
const MAX_RETRIES: u32 = 3;

/// An adapter's `rerank_request`.
pub(crate) type BuildRerank =
    fn(&Target, &RerankRequest<'_>) -> Result<NativeRequest, GatewayError>;

/// A provider account with no endpoint: enough for translation and error mapping, which never
/// connect.
pub(crate) fn provider(name: &str, key: &str) -> Arc<Provider> {
    Arc::new(new_provider(name, key, None))
}

/// A provider account whose default endpoint is `base_url` (1 s timeouts; nothing is ever sent).
pub(crate) fn provider_at(name: &str, key: &str, base_url: &str) -> Arc<Provider> {
    let t = Duration::from_secs(1);
    let endpoint = Endpoint::parse(
        base_url,
        Timeouts {
            connect: t,
            total_connect: t,
            read: t,
            write: t,
            idle: t,
        },
    )
    .unwrap();
    Arc::new(new_provider(name, key, Some(endpoint)))
}

/// A Bearer-keyed account; its error map is the generic status mapping (adapter tests call their
/// own error mapping directly).
fn new_provider(name: &str, key: &str, endpoint: Option<Endpoint>) -> Provider {
    let account = Account {
        name: name.into(),
        kind: name.into(),
        key: key.into(),
        default_endpoint: endpoint,
        region_endpoints: Default::default(),
        max_response_bytes: MAX_RESPONSE_BYTES,
        result_hosts: Vec::new(),
    };
    let auth = crate::providers::registry::keyed(key, Auth::bearer).unwrap();
    Provider::new(account, 0, auth, |p, status, _| {
        UpstreamError::from_status(&p.name, status, "test provider")
    })
}

pub(crate) fn target(provider: Arc<Provider>, native_model: &str) -> Target {
    Target::new(provider, native_model, 1)
}

/// A catalog holding one model, `public_model` of `family`, served by `target`. Non-zero
/// `max_input_chars` (speech input, rerank query) and `max_documents` (rerank) override the
/// family's, as the config's keys of those names do.
pub(crate) fn catalog(
    public_model: &str,
    family: &str,
    target: Target,
    max_input_chars: usize,
    max_documents: usize,
) -> Catalog {
    let base = family_caps(family);
    let mut overrides = serde_yaml::Mapping::new();
    let limit = |n: usize| {
        let mut m = serde_yaml::Mapping::new();
        m.insert("max".into(), serde_yaml::Value::Number((n as u64).into()));
        m.insert("unit".into(), "characters".into());
        serde_yaml::Value::Mapping(m)
    };
    match base {
        Caps::Speech(c) => {
            if max_input_chars > 0 {
                overrides.insert("input_limit".into(), limit(max_input_chars));
            }
            // A family with no default voice (ElevenLabs') needs the configuration's, as a
            // configured model must name one: George, the voice these tests' accounts have.
            if c.default_voice.is_none() {
                overrides.insert("default_voice".into(), "JBFqnCBsd6RMkjVDRZzb".into());
            }
        }
        Caps::Rerank(_) => {
            if max_input_chars > 0 {
                overrides.insert("query_limit".into(), limit(max_input_chars));
            }
            if max_documents > 0 {
                overrides.insert(
                    "max_documents".into(),
                    serde_yaml::Value::Number((max_documents as u64).into()),
                );
            }
        }
        _ => {}
    }
    let caps = crate::caps::builtin()
        .unwrap()
        .with_overrides(family, &serde_yaml::Value::Mapping(overrides), "test")
        .unwrap_or_else(|e| panic!("{e:?}"));
    let mut catalog = Catalog::default();
    catalog.insert(Model::new(public_model, caps, vec![target]));
    catalog
}

/// A public rerank body parsed and validated against `catalog`.
pub(crate) fn parse<'a>(catalog: &Catalog, body: &'a [u8]) -> RerankRequest<'a> {
    crate::api::rerank::parse(body, catalog, MAX_RETRIES).unwrap()
}

/// The native request `build` (an adapter's `rerank_request`) makes for a public body, sent to the
/// first target of the model it names.
pub(crate) fn native_request(catalog: &Catalog, body: &[u8], build: BuildRerank) -> NativeRequest {
    let req = parse(catalog, body);
    build(&req.model.targets[0], &req).unwrap()
}

/// A validated rerank request for `public_model` of `family`, built without the parser. The model
/// has no targets (the test hands the adapter its own) and the family's limits, which adapters do
/// not check. `top_n: None` is a
/// caller who sent none: every document, and `top_n_given` false. A [`JsonStr`] borrows its
/// literal and there is no body to borrow from, so each document's literal is made here and leaked
/// (a few bytes per test).
pub(crate) fn rerank_request<'a>(
    family: &str,
    public_model: &str,
    query: &'a str,
    docs: &[&'a str],
    top_n: Option<usize>,
    passthrough: Vec<(Str<'a>, &'a RawValue)>,
) -> RerankRequest<'a> {
    let caps = family_caps(family);
    let Caps::Rerank(rerank_caps) = caps else {
        panic!("{family} is not a rerank family");
    };
    let model = Model::new(public_model, caps, Vec::new());
    RerankRequest {
        model: Arc::new(model),
        caps: rerank_caps,
        query: Str(Cow::Borrowed(query)),
        documents: docs.iter().map(|d| json_str(d)).collect(),
        top_n: top_n.unwrap_or(docs.len()),
        top_n_given: top_n.is_some(),
        return_documents: true,
        retries: 0,
        passthrough,
    }
}

/// `text` as a [`JsonStr`] whose literal is serde_json's own escaping of it.
fn json_str(text: &str) -> JsonStr<'static> {
    let literal = serde_json::to_string(text).unwrap();
    let raw: &'static RawValue = Box::leak(RawValue::from_string(literal).unwrap());
    JsonStr::from_raw(raw).unwrap()
}

fn family_caps(family: &str) -> Caps {
    crate::caps::family(family).unwrap_or_else(|| panic!("{family} family missing"))
}

/// A public image body parsed and validated against a one-model catalog (`public_model` of
/// `family`, served by `target`); panics with the validation details when the body is refused.
pub(crate) fn image_request<'a>(
    public_model: &str,
    family: &str,
    target: Target,
    body: &'a [u8],
) -> crate::api::images::ImageRequest<'a> {
    let catalog = catalog(public_model, family, target, 0, 0);
    crate::api::images::parse(body, &catalog, MAX_RETRIES)
        .unwrap_or_else(|e| panic!("refused: {}", String::from_utf8_lossy(&e.body())))
}

/// The validation `details` a public image body gets (empty map when it is accepted).
pub(crate) fn image_refusal(
    public_model: &str,
    family: &str,
    target: Target,
    body: &[u8],
) -> serde_json::Value {
    let catalog = catalog(public_model, family, target, 0, 0);
    match crate::api::images::parse(body, &catalog, MAX_RETRIES) {
        Ok(_) => serde_json::json!({}),
        Err(e) => {
            serde_json::from_slice::<serde_json::Value>(&e.body()).unwrap()["details"].clone()
        }
    }
}
