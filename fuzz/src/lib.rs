//! What the fuzz targets share: the gateway's settings built from its default config (plus the
//! provider kinds that config leaves out), one validated request per model and provider, the
//! checks every error answer must pass, and fuzzed chunking.
//!
//! Everything is built once per process and leaked, so the targets get `'static` references and
//! each run only pays for the parsing under test.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard::internals::api::adapter::{ImageAdapter, RerankAdapter, SpeechAdapter};
use switchyard::internals::api::images::ImageRequest;
use switchyard::internals::api::rerank::RerankRequest;
use switchyard::internals::api::speech::SpeechRequest;
use switchyard::internals::common::error::GatewayError;
use switchyard::internals::common::Operation;
use switchyard::config::{self, GatewaySettings};
use switchyard::internals::upstream::provider::Provider;

/// Retries a parsed request may ask for.
pub const MAX_RETRIES: u32 = 5;

/// Providers and models the default config does not declare, so every adapter is reachable.
const EXTRA_PROVIDERS: &str = r#"
azure: {kind: azure-openai, api_key: "fuzz-key", base_url: "https://azure.example", api_version: "2025-03-01-preview"}
azure-v1: {kind: azure-openai, api_key: "fuzz-key", base_url: "https://azure-v1.example"}
cohere-v1: {kind: cohere-v1, api_key: "fuzz-key", base_url: "https://cohere.example"}
tei: {kind: tei, base_url: "https://tei.example"}
"#;
const EXTRA_MODELS: &str = r#"
fuzz-azure-tts: {family: openai-tts-instruct, targets: [{provider: azure, model: tts}]}
fuzz-azure-tts-v1: {family: openai-tts, targets: [{provider: azure-v1, model: tts}]}
fuzz-azure-image: {family: gpt-image-2, targets: [{provider: azure, model: gpt-image-2}]}
fuzz-azure-image-v1: {family: gpt-image, targets: [{provider: azure-v1, model: gpt-image}]}
fuzz-cohere-v1: {family: cohere-v1-rerank, targets: [{provider: cohere-v1, model: rerank-english-v3.0}]}
fuzz-tei: {family: tei-rerank, targets: [{provider: tei, model: bge-reranker-base}]}
"#;

/// A 1×1 PNG, for image models that need a reference image.
pub const PNG_DATA_URL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// The JWT secret and API key of [`world`]'s authenticator.
pub const JWT_SECRET: &str = "fuzz-secret";
pub const API_KEY: &str = "fuzz-api-key";

pub struct SpeechCase {
    pub label: String,
    pub provider: Arc<Provider>,
    pub adapter: &'static dyn SpeechAdapter,
    pub req: SpeechRequest<'static>,
}

pub struct ImageCase {
    pub label: String,
    pub provider: Arc<Provider>,
    pub adapter: &'static dyn ImageAdapter,
    pub req: ImageRequest<'static>,
}

pub struct RerankCase {
    pub label: String,
    pub provider: Arc<Provider>,
    pub adapter: &'static dyn RerankAdapter,
    pub req: RerankRequest<'static>,
}

/// The gateway's settings and one case per (model, target).
pub struct World {
    pub gateway: &'static GatewaySettings,
    pub speech: Vec<SpeechCase>,
    pub images: Vec<ImageCase>,
    pub rerank: Vec<RerankCase>,
    /// Every provider account, once.
    pub providers: Vec<Arc<Provider>>,
}

thread_local! {
    static WORLD: &'static World = Box::leak(Box::new(build_world()));
}

/// The shared world (built on first use).
pub fn world() -> &'static World {
    WORLD.with(|w| *w)
}

/// The default config with every provider key set, the extra providers and models added, and the
/// authenticator set to [`API_KEY`] and [`JWT_SECRET`].
pub fn config_text() -> String {
    let mut doc: serde_yaml::Value =
        serde_yaml::from_str(config::DEFAULT_CONFIG).expect("default config is YAML");
    let sy = doc.get_mut("switchyard").expect("switchyard section");
    let add = |section: &mut serde_yaml::Value, extra: &str| {
        let extra: serde_yaml::Mapping = serde_yaml::from_str(extra).expect("extra YAML");
        let map = section.as_mapping_mut().expect("a mapping");
        for (k, v) in extra {
            map.insert(k, v);
        }
    };
    add(sy.get_mut("providers").expect("providers"), EXTRA_PROVIDERS);
    add(sy.get_mut("models").expect("models"), EXTRA_MODELS);
    serde_yaml::to_string(&doc).expect("serializable")
}

/// Variables for the config: every key and secret set, everything else unset.
pub fn lookup(name: &str) -> Option<String> {
    match name {
        "SWITCHYARD_API_KEY" => Some(API_KEY.into()),
        "SWITCHYARD_JWT_SECRET" => Some(JWT_SECRET.into()),
        n if n.ends_with("_KEY") || n.ends_with("_TOKEN") || n.ends_with("_ID") => {
            Some("fuzz-key".into())
        }
        _ => None,
    }
}

fn leak(s: String) -> &'static [u8] {
    Box::leak(s.into_boxed_str()).as_bytes()
}

fn build_world() -> World {
    let settings = match config::load_str(&config_text(), &lookup) {
        Ok(s) => s,
        Err(e) => panic!("fuzz config invalid: {e:?}"),
    };
    let gateway: &'static GatewaySettings = Box::leak(Box::new(settings.gateway));
    let catalog = &gateway.catalog();
    let mut w = World {
        gateway,
        speech: Vec::new(),
        images: Vec::new(),
        rerank: Vec::new(),
        providers: Vec::new(),
    };
    let mut skipped = Vec::new();
    for op in [Operation::Speech, Operation::Images, Operation::Rerank] {
        for name in catalog.names_for(op) {
            let model = catalog.get(name).expect("listed model");
            for target in &model.targets {
                let provider = target.provider.clone();
                if !w.providers.iter().any(|p| p.id == provider.id) {
                    w.providers.push(provider.clone());
                }
                let label = format!("{name}@{}", provider.name);
                match op {
                    Operation::Speech => {
                        let Ok(adapter) = gateway.adapters().speech(&provider) else {
                            continue;
                        };
                        for extra in ["", r#","stream_format":"sse""#] {
                            let body = leak(format!(
                                r#"{{"model":"{name}","input":"Hello there, how are you?"{extra}}}"#
                            ));
                            match switchyard::internals::api::speech::parse(body, catalog, MAX_RETRIES) {
                                Ok(req) => w.speech.push(SpeechCase {
                                    label: format!("{label}{extra}"),
                                    provider: provider.clone(),
                                    adapter,
                                    req,
                                }),
                                Err(e) => skipped.push(format!("{label}{extra}: {e}")),
                            }
                        }
                    }
                    Operation::Images => {
                        let Ok(adapter) = gateway.adapters().images(&provider) else {
                            continue;
                        };
                        let plain = format!(r#"{{"model":"{name}","prompt":"a red fox"}}"#);
                        let with_image = format!(
                            r#"{{"model":"{name}","prompt":"a red fox","image":"{PNG_DATA_URL}"}}"#
                        );
                        let req = switchyard::internals::api::images::parse(leak(plain), catalog, MAX_RETRIES)
                            .or_else(|_| {
                                switchyard::internals::api::images::parse(
                                    leak(with_image),
                                    catalog,
                                    MAX_RETRIES,
                                )
                            });
                        match req {
                            Ok(req) => w.images.push(ImageCase {
                                label,
                                provider,
                                adapter,
                                req,
                            }),
                            Err(e) => skipped.push(format!("{label}: {e}")),
                        }
                    }
                    Operation::Rerank => {
                        let Ok(adapter) = gateway.adapters().rerank(&provider) else {
                            continue;
                        };
                        let body = leak(format!(
                            r#"{{"model":"{name}","query":"what is rust","documents":["rust is a language","a fox","iron oxide"],"top_n":2,"return_documents":true}}"#
                        ));
                        match switchyard::internals::api::rerank::parse(body, catalog, MAX_RETRIES) {
                            Ok(req) => w.rerank.push(RerankCase {
                                label,
                                provider,
                                adapter,
                                req,
                            }),
                            Err(e) => skipped.push(format!("{label}: {e}")),
                        }
                    }
                }
            }
        }
    }
    if std::env::var_os("FUZZ_WORLD_VERBOSE").is_some() {
        for c in &w.speech {
            eprintln!("speech case: {}", c.label);
        }
        for c in &w.images {
            eprintln!("image case: {}", c.label);
        }
        for c in &w.rerank {
            eprintln!("rerank case: {}", c.label);
        }
        for s in &skipped {
            eprintln!("skipped: {s}");
        }
    }
    w
}

/// An error answered to a client for a bad request: a 4xx (or 503 for a model whose providers
/// are all disabled) whose body is the spec's `{"code","message"}`, with non-empty `details` on
/// a 400 validation error.
pub fn check_client_error(e: &GatewayError) {
    let status = e.status();
    assert!(
        (400..500).contains(&status) || matches!(e, GatewayError::ModelUnavailable { .. }),
        "a bad request answered {status}: {e:?}"
    );
    let body: serde_json::Value = serde_json::from_slice(&e.body()).expect("error body is JSON");
    assert!(body["code"].is_string() && body["message"].is_string());
    if let GatewayError::Validation(_) = e {
        let details = body["details"].as_object().expect("a 400 has details");
        assert!(!details.is_empty(), "a 400 with empty details: {e:?}");
    }
}

/// `data` cut into pieces whose sizes come from `sizes` (cycled; a size byte `s` is `s % 64`
/// bytes, so empty pieces happen too). No `sizes`: one piece.
pub fn chunks<'a>(data: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    if sizes.is_empty() {
        return vec![data];
    }
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let n = (sizes[i % sizes.len()] % 64) as usize;
        let end = (at + n).min(data.len());
        out.push(&data[at..end]);
        at = end;
        i += 1;
        // Empty pieces only while sizes still make progress somewhere.
        if i > data.len() * 2 + sizes.len() {
            out.push(&data[at..]);
            break;
        }
    }
    out
}

/// A byte cursor over the fuzz input.
pub struct Input<'a> {
    pub data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from(self.byte()) << 8 | u16::from(self.byte())
    }

    /// The next `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.data.split_at(n.min(self.data.len()));
        self.data = b;
        a
    }

    /// A piece whose length is the next byte.
    pub fn short(&mut self) -> &'a [u8] {
        let n = self.byte() as usize;
        self.take(n)
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// Headers from `name: value` lines; lines that are not a valid header are skipped.
pub fn headers(block: &[u8]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for line in block.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            map.append(n, v);
        }
    }
    map
}
