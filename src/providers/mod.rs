//! Provider adapters and their dispatch.
//!
//! Each provider lives in its own file with the same section order (constants, wire types, translation
//! to native, translation back, error mapping, tests). Translation is a pure function of the validated
//! request and the target, so the attempt loop can rebuild the native request on every retry without
//! touching the caller's bytes. Dispatch is a closed enum ([`ProviderKind`]) with one `match` arm per
//! provider, so adding a provider makes the compiler list every place that must handle it.

pub mod ark;
pub mod azure;
pub mod bfl;
pub mod cohere;
pub mod cohere_v1;
pub mod dashscope;
pub mod elevenlabs;
pub mod formats;
pub mod google;
pub mod jina;
pub mod kling;
pub mod local;
pub mod minimax;
pub mod mixedbread;
pub mod openai;
pub mod siliconflow;
pub mod stability;
pub mod tei;
#[cfg(test)]
pub(crate) mod test_support;
pub mod volcengine;
pub mod voyage;
pub mod zhipu;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::api::error::{GatewayError, UpstreamError};
use crate::api::images::ImageRequest;
use crate::api::json::Str;
use crate::api::rerank::{RerankRequest, RerankResult};
use crate::api::speech::SpeechRequest;
use crate::catalog::{Operation, Target};
use crate::images::native::{ImageAnswer, NativeTask, Poll};
use crate::images::NativeImages;
use crate::stream::audio::SpeechDecoding;
use crate::upstream::endpoint::Endpoint;

/// The providers Switchyard can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Cohere,
    CohereV1,
    Jina,
    Voyage,
    DashScope,
    SiliconFlow,
    Zhipu,
    Mixedbread,
    Tei,
    /// The built-in lexical reranker: no network, no key.
    Local,
    AzureOpenAi,
    ElevenLabs,
    MiniMax,
    Volcengine,
    Google,
    /// Volcengine Ark (Seedream / SeedEdit images), Bearer-keyed unlike Volcengine speech.
    Ark,
    Stability,
    /// Black Forest Labs (FLUX): natively asynchronous, polled at the URL it returns.
    Bfl,
    /// Kling (可灵): natively asynchronous, JWT-signed requests.
    Kling,
}

impl ProviderKind {
    pub const ALL: &'static [(&'static str, ProviderKind)] = &[
        ("openai", ProviderKind::OpenAi),
        ("cohere", ProviderKind::Cohere),
        ("cohere-v1", ProviderKind::CohereV1),
        ("jina", ProviderKind::Jina),
        ("voyage", ProviderKind::Voyage),
        ("dashscope", ProviderKind::DashScope),
        ("siliconflow", ProviderKind::SiliconFlow),
        ("zhipu", ProviderKind::Zhipu),
        ("mixedbread", ProviderKind::Mixedbread),
        ("tei", ProviderKind::Tei),
        ("local", ProviderKind::Local),
        ("azure-openai", ProviderKind::AzureOpenAi),
        ("elevenlabs", ProviderKind::ElevenLabs),
        ("minimax", ProviderKind::MiniMax),
        ("volcengine", ProviderKind::Volcengine),
        ("google", ProviderKind::Google),
        ("ark", ProviderKind::Ark),
        ("stability", ProviderKind::Stability),
        ("bfl", ProviderKind::Bfl),
        ("kling", ProviderKind::Kling),
    ];

    pub fn parse(name: &str) -> Option<ProviderKind> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
    }

    /// Operations this provider's adapter implements.
    pub fn serves(self, op: Operation) -> bool {
        match self {
            ProviderKind::OpenAi | ProviderKind::AzureOpenAi => {
                matches!(op, Operation::Speech | Operation::Images)
            }
            ProviderKind::DashScope | ProviderKind::SiliconFlow | ProviderKind::Zhipu => true,
            ProviderKind::Ark
            | ProviderKind::Stability
            | ProviderKind::Bfl
            | ProviderKind::Kling => op == Operation::Images,
            ProviderKind::ElevenLabs
            | ProviderKind::MiniMax
            | ProviderKind::Volcengine
            | ProviderKind::Google => op == Operation::Speech,
            ProviderKind::Cohere
            | ProviderKind::CohereV1
            | ProviderKind::Jina
            | ProviderKind::Voyage
            | ProviderKind::Mixedbread
            | ProviderKind::Tei
            | ProviderKind::Local => op == Operation::Rerank,
        }
    }

    /// Whether this provider's image requests carry reference images as bytes (multipart forms),
    /// so a URL the caller gave must be downloaded by the gateway first.
    pub fn image_input_as_bytes(self) -> bool {
        matches!(
            self,
            ProviderKind::OpenAi | ProviderKind::AzureOpenAi | ProviderKind::Stability
        )
    }

    /// Whether the provider runs image generations as tasks that must be polled (so a synchronous
    /// request waits for it, bounded by `images.sync_wait_seconds`).
    pub fn async_images(self) -> bool {
        matches!(
            self,
            ProviderKind::DashScope | ProviderKind::Bfl | ProviderKind::Kling
        )
    }

    /// Whether the provider is unusable without a key (a self-hosted TEI server usually has none;
    /// the local reranker never does).
    pub fn requires_key(self) -> bool {
        !matches!(self, ProviderKind::Tei | ProviderKind::Local)
    }

    /// Whether the provider is reached over HTTP (and so needs a `base_url`).
    pub fn remote(self) -> bool {
        self != ProviderKind::Local
    }

    /// Where this kind's answers put result files when the config names no `result_hosts`.
    pub fn default_result_hosts(self) -> Vec<String> {
        match self {
            // Qwen-TTS answers with an OSS URL (`dashscope-result-*.oss-*.aliyuncs.com`).
            ProviderKind::DashScope => vec!["*.aliyuncs.com".to_string()],
            // DALL·E answers link to Azure blob storage (`oaidalleapiprodscus.blob.core.windows.net`).
            ProviderKind::OpenAi | ProviderKind::AzureOpenAi => {
                vec!["*.blob.core.windows.net".to_string()]
            }
            // CogView links to `aigc-files.bigmodel.cn` / `*.z.ai` storage.
            ProviderKind::Zhipu => vec!["*.bigmodel.cn".to_string(), "*.z.ai".to_string()],
            // Seedream links to TOS buckets (`ark-content-generation-*.tos-cn-beijing.volces.com`;
            // BytePlus: `*.bytepluses.com`).
            ProviderKind::Ark => vec!["*.volces.com".to_string(), "*.bytepluses.com".to_string()],
            // SiliconFlow links to its OSS buckets (`sc-maas.oss-cn-shanghai.aliyuncs.com`).
            ProviderKind::SiliconFlow => {
                vec!["*.aliyuncs.com".to_string(), "*.siliconflow.cn".to_string()]
            }
            // FLUX samples are signed links on BFL's delivery hosts (`delivery-*.bfl.ai`).
            ProviderKind::Bfl => vec!["*.bfl.ai".to_string()],
            // Kling's image links are on its CDN (`cdn.klingai.com`, `*-kling.klingai.com`).
            ProviderKind::Kling => vec!["*.klingai.com".to_string()],
            _ => Vec::new(),
        }
    }

    /// The headers that carry the provider's credentials, and how their values are formed.
    fn auth_headers(self, key: &str, options: &ProviderOptions) -> Vec<(HeaderName, String)> {
        let h = HeaderName::from_static;
        match self {
            ProviderKind::AzureOpenAi => vec![(h("api-key"), key.to_string())],
            ProviderKind::ElevenLabs => vec![(h("xi-api-key"), key.to_string())],
            ProviderKind::Bfl => vec![(h("x-key"), key.to_string())],
            // Signed per token from the access and secret keys (see `kling_auth`), not static.
            ProviderKind::Kling => Vec::new(),
            // An API key (Google's OAuth tokens expire hourly, so a static config cannot hold one).
            ProviderKind::Google => vec![(h("x-goog-api-key"), key.to_string())],
            // The console's app id + access token pair, or the newer single API key.
            ProviderKind::Volcengine => match &options.app_id {
                Some(app) => vec![
                    (h("x-api-app-id"), app.clone()),
                    (h("x-api-access-key"), key.to_string()),
                ],
                None => vec![(h("x-api-key"), key.to_string())],
            },
            _ => vec![(http::header::AUTHORIZATION, format!("Bearer {key}"))],
        }
    }
}

/// Per-provider settings beyond key and URL that some adapters need.
#[derive(Clone, Default)]
pub struct ProviderOptions {
    /// Azure OpenAI: `api-version` for deployment URLs; without it the v1 URL is used.
    pub api_version: Option<String>,
    /// Volcengine speech: the console app id sent with the access token.
    pub app_id: Option<String>,
    /// Hosts the gateway may download provider results from (audio or image URLs in answers):
    /// exact names, or `*.suffix`. The provider's own base URL host is always allowed.
    pub result_hosts: Vec<String>,
    /// Kling: the secret key that signs its tokens (the access key is `api_key`).
    pub secret_key: Option<String>,
}

impl fmt::Debug for ProviderOptions {
    // The secret key must never reach a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderOptions")
            .field("api_version", &self.api_version)
            .field("app_id", &self.app_id)
            .field("result_hosts", &self.result_hosts)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

/// A configured provider account: credentials and where to reach it.
pub struct Provider {
    pub name: String,
    pub kind: ProviderKind,
    /// Built once at start and marked sensitive; empty when the key is empty.
    auth: Vec<(HeaderName, HeaderValue)>,
    /// Kling: signs a short-lived token instead of a static header.
    signer: Option<kling::auth::Signer>,
    pub options: ProviderOptions,
    /// The key itself, kept only to redact it should a provider ever echo it back.
    key: String,
    /// `None` only for in-process providers.
    default_endpoint: Option<Endpoint>,
    region_endpoints: HashMap<String, Endpoint>,
    /// Largest non-streamed answer accepted from this provider.
    pub max_response_bytes: usize,
}

impl fmt::Debug for Provider {
    // The key must never reach a log line, so Debug is written by hand.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("enabled", &self.enabled())
            .finish()
    }
}

impl Provider {
    pub fn new(
        name: String,
        kind: ProviderKind,
        api_key: &str,
        default_endpoint: Option<Endpoint>,
        region_endpoints: HashMap<String, Endpoint>,
        max_response_bytes: usize,
        options: ProviderOptions,
    ) -> Result<Provider, String> {
        let mut auth = Vec::new();
        if !api_key.is_empty() {
            for (name, value) in kind.auth_headers(api_key, &options) {
                let mut value = HeaderValue::from_str(&value).map_err(|_| {
                    "api_key contains characters not allowed in a header".to_string()
                })?;
                value.set_sensitive(true);
                auth.push((name, value));
            }
        }
        let signer = match (kind, api_key.is_empty(), options.secret_key.as_deref()) {
            (ProviderKind::Kling, false, Some(secret)) if !secret.is_empty() => {
                Some(kling::auth::Signer::new(api_key, secret))
            }
            (ProviderKind::Kling, false, _) => {
                return Err(
                    "kling signs its tokens with a secret key: set secret_key as well".to_string(),
                )
            }
            _ => None,
        };
        Ok(Provider {
            name,
            kind,
            auth,
            signer,
            options,
            key: api_key.to_string(),
            default_endpoint,
            region_endpoints,
            max_response_bytes,
        })
    }

    /// Usable: has its key, or needs none.
    pub fn enabled(&self) -> bool {
        !self.auth.is_empty() || self.signer.is_some() || !self.kind.requires_key()
    }

    /// The credential headers for a request sent now.
    pub fn auth_headers(&self) -> Result<Cow<'_, [(HeaderName, HeaderValue)]>, String> {
        match &self.signer {
            Some(signer) => Ok(Cow::Owned(vec![(
                http::header::AUTHORIZATION,
                signer.authorization()?,
            )])),
            None => Ok(Cow::Borrowed(&self.auth)),
        }
    }

    /// Whether an answer's result URL on `host` may be downloaded: the provider's own hosts and
    /// the configured `result_hosts` (exact, or `*.suffix`).
    pub fn result_host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let own = self
            .default_endpoint
            .iter()
            .chain(self.region_endpoints.values())
            .any(|e| e.host.eq_ignore_ascii_case(&host));
        own || self.options.result_hosts.iter().any(|pattern| {
            let pattern = pattern.to_ascii_lowercase();
            match pattern.strip_prefix("*.") {
                Some(suffix) => {
                    host.len() > suffix.len() + 1
                        && host.ends_with(suffix)
                        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                }
                None => host == pattern,
            }
        })
    }

    /// The endpoint for the entry point's region, or the default one.
    pub fn endpoint(&self, region: &str) -> Option<&Endpoint> {
        self.region_endpoints
            .get(region)
            .or(self.default_endpoint.as_ref())
    }

    /// Remove the provider key from text that came from the provider before it reaches a caller.
    pub fn redact(&self, text: &str) -> String {
        let mut s = if self.key.len() >= 4 && text.contains(&self.key) {
            text.replace(&self.key, "[redacted]")
        } else {
            text.to_string()
        };
        // Providers sometimes quote a partial key ("sk-abc***xyz"); drop anything key-shaped.
        // A word counts when it starts with `sk-` once quotes and brackets are stripped, so prose
        // such as "risk-free" survives.
        let key_shaped = |w: &str| {
            w.trim_start_matches(|c: char| !c.is_alphanumeric())
                .starts_with("sk-")
        };
        if s.split(' ').any(key_shaped) {
            s = s
                .split(' ')
                .map(|w| if key_shaped(w) { "[redacted]" } else { w })
                .collect::<Vec<_>>()
                .join(" ");
        }
        const MAX: usize = 500;
        if s.len() > MAX {
            let mut cut = MAX;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
            s.push('…');
        }
        s
    }
}

/// A request in the provider's own wire format, ready to send.
#[derive(Debug)]
pub struct NativeRequest {
    pub method: Method,
    /// Path relative to the provider's base URL, with any query string.
    pub path: String,
    pub content_type: Cow<'static, str>,
    /// Provider-specific headers besides auth (e.g. `Accept`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

impl NativeRequest {
    /// A `GET` without a body (polling a task).
    pub fn get(path: impl Into<String>) -> NativeRequest {
        NativeRequest {
            method: Method::GET,
            path: path.into(),
            content_type: Cow::Borrowed("application/json"),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    pub fn post_json(path: impl Into<String>, body: Vec<u8>) -> NativeRequest {
        NativeRequest {
            method: Method::POST,
            path: path.into(),
            content_type: Cow::Borrowed("application/json"),
            headers: Vec::new(),
            body: Bytes::from(body),
        }
    }

    /// A `multipart/form-data` POST.
    pub fn post_form(
        path: impl Into<String>,
        form: &formats::multipart::Form<'_>,
    ) -> NativeRequest {
        let (content_type, body) = form.finish();
        NativeRequest {
            method: Method::POST,
            path: path.into(),
            content_type: Cow::Owned(content_type),
            headers: Vec::new(),
            body,
        }
    }
}

/// A provider answer the gateway cannot read.
pub(crate) fn bad_answer(provider: &Provider, message: impl Into<String>) -> UpstreamError {
    UpstreamError::new(
        crate::api::error::UpstreamErrorKind::BadResponse,
        &provider.name,
        message,
    )
}

/// Parse a provider's JSON answer into its wire type; a mismatch is a bad response.
pub(crate) fn parse_answer<T: serde::de::DeserializeOwned>(
    provider: &Provider,
    body: &[u8],
) -> Result<T, UpstreamError> {
    serde_json::from_slice(body)
        .map_err(|e| bad_answer(provider, format!("answer is not the expected JSON: {e}")))
}

/// A billed token count as a provider reported it: only a finite, non-negative number is believed.
pub(crate) fn billed_tokens(reported: Option<f64>) -> Option<u64> {
    reported
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| t as u64)
}

/// What an adapter prepared for one attempt: a request to send, or (for in-process providers) the
/// native answer itself.
#[derive(Debug)]
pub enum Prepared {
    Http(NativeRequest),
    Local(Bytes),
}

/// Serialize `known` (a struct serializing as a JSON object) followed by the caller's pass-through
/// fields, copied verbatim as raw JSON.
pub fn json_with_extra<T: Serialize>(
    known: &T,
    extra: &[(Str<'_>, &RawValue)],
) -> Result<Vec<u8>, GatewayError> {
    let mut out = serde_json::to_vec(known)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    if extra.is_empty() {
        return Ok(out);
    }
    // `known` always serializes as an object: drop its closing brace and append the extra pairs.
    if out.pop() != Some(b'}') {
        return Err(GatewayError::Internal(
            "native request is not an object".into(),
        ));
    }
    let mut first = out.len() == 1;
    for (k, v) in extra {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut out, k.as_str())
            .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
    }
    out.push(b'}');
    Ok(out)
}

/// [`json_with_extra`] as a raw JSON value, for providers whose pass-through fields live in a
/// nested object of the native body (DashScope's `parameters`, `input`).
pub fn nested_with_extra<T: Serialize>(
    known: &T,
    extra: &[(Str<'_>, &RawValue)],
) -> Result<Box<RawValue>, GatewayError> {
    let bytes = json_with_extra(known, extra)?;
    let text = String::from_utf8(bytes)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    RawValue::from_string(text)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))
}

/// Build the native speech request for `target`.
pub fn speech_request(target: &Target, req: &SpeechRequest<'_>) -> Result<Prepared, GatewayError> {
    let http = |r: Result<NativeRequest, GatewayError>| r.map(Prepared::Http);
    match target.provider.kind {
        ProviderKind::OpenAi => http(openai::speech::speech_request(target, req)),
        ProviderKind::AzureOpenAi => http(azure::speech_request(target, req)),
        ProviderKind::ElevenLabs => http(elevenlabs::speech_request(target, req)),
        ProviderKind::MiniMax => http(minimax::speech_request(target, req)),
        ProviderKind::Volcengine => http(volcengine::speech_request(target, req)),
        ProviderKind::DashScope => http(dashscope::speech::speech_request(target, req)),
        ProviderKind::Google => http(google::speech_request(target, req)),
        ProviderKind::Cohere
        | ProviderKind::CohereV1
        | ProviderKind::Jina
        | ProviderKind::Voyage
        | ProviderKind::SiliconFlow
        | ProviderKind::Zhipu
        | ProviderKind::Mixedbread
        | ProviderKind::Tei
        | ProviderKind::Local
        | ProviderKind::Ark
        | ProviderKind::Stability
        | ProviderKind::Bfl
        | ProviderKind::Kling => Err(not_served(target, Operation::Speech)),
    }
}

/// How `target`'s 2xx speech body becomes the public answer for `req`.
pub fn speech_decoding(target: &Target, req: &SpeechRequest<'_>) -> SpeechDecoding {
    let p = &target.provider;
    match p.kind {
        ProviderKind::OpenAi | ProviderKind::AzureOpenAi => SpeechDecoding::Passthrough,
        ProviderKind::ElevenLabs => elevenlabs::speech_decoding(p, req),
        ProviderKind::MiniMax => minimax::speech_decoding(p, req),
        ProviderKind::Volcengine => volcengine::speech_decoding(p, req),
        ProviderKind::DashScope => dashscope::speech::speech_decoding(p, req),
        ProviderKind::Google => google::speech_decoding(p, req),
        // Never reached: `speech_request` refused these before anything was sent.
        ProviderKind::Cohere
        | ProviderKind::CohereV1
        | ProviderKind::Jina
        | ProviderKind::Voyage
        | ProviderKind::SiliconFlow
        | ProviderKind::Zhipu
        | ProviderKind::Mixedbread
        | ProviderKind::Tei
        | ProviderKind::Local
        | ProviderKind::Ark
        | ProviderKind::Stability
        | ProviderKind::Bfl
        | ProviderKind::Kling => SpeechDecoding::Passthrough,
    }
}

/// Build the native image request for `target`, asking for `n` images (the gateway fans out when
/// the family's `per_call_n` is smaller than the caller's `n`).
pub fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<Prepared, GatewayError> {
    let http = |r: Result<NativeRequest, GatewayError>| r.map(Prepared::Http);
    match target.provider.kind {
        ProviderKind::OpenAi => http(openai::images::image_request(target, req, n)),
        ProviderKind::AzureOpenAi => http(azure::image_request(target, req, n)),
        ProviderKind::Zhipu => http(zhipu::images::image_request(target, req, n)),
        ProviderKind::Ark => http(ark::image_request(target, req, n)),
        ProviderKind::Stability => http(stability::image_request(target, req, n)),
        ProviderKind::SiliconFlow => http(siliconflow::images::image_request(target, req, n)),
        ProviderKind::DashScope => http(dashscope::images::image_request(target, req, n)),
        ProviderKind::Bfl => http(bfl::image_request(target, req, n)),
        ProviderKind::Kling => http(kling::image_request(target, req, n)),
        ProviderKind::Cohere
        | ProviderKind::CohereV1
        | ProviderKind::Jina
        | ProviderKind::Voyage
        | ProviderKind::Mixedbread
        | ProviderKind::Tei
        | ProviderKind::Local
        | ProviderKind::ElevenLabs
        | ProviderKind::MiniMax
        | ProviderKind::Volcengine
        | ProviderKind::Google => Err(not_served(target, Operation::Images)),
    }
}

/// Translate a successful (2xx) native image answer: the images, or (natively asynchronous
/// providers) the task to poll. An error the provider reports inside it (a refused image in
/// `data[]`, a filtered result) is an `Err`, so the attempt loop classifies it.
pub fn image_response(
    target: &Target,
    req: &ImageRequest<'_>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    let p = &target.provider;
    let images = |r: Result<NativeImages, UpstreamError>| r.map(ImageAnswer::Images);
    match p.kind {
        ProviderKind::OpenAi => images(openai::images::image_response(p, req, headers, body)),
        ProviderKind::AzureOpenAi => images(azure::image_response(p, req, headers, body)),
        ProviderKind::Zhipu => images(zhipu::images::image_response(p, req, headers, body)),
        ProviderKind::Ark => images(ark::image_response(p, req, headers, body)),
        ProviderKind::Stability => images(stability::image_response(p, req, headers, body)),
        ProviderKind::SiliconFlow => {
            images(siliconflow::images::image_response(p, req, headers, body))
        }
        ProviderKind::DashScope => dashscope::images::image_response(p, req, headers, body),
        ProviderKind::Bfl => bfl::image_response(p, req, headers, body),
        ProviderKind::Kling => kling::image_response(p, req, headers, body),
        ProviderKind::Cohere
        | ProviderKind::CohereV1
        | ProviderKind::Jina
        | ProviderKind::Voyage
        | ProviderKind::Mixedbread
        | ProviderKind::Tei
        | ProviderKind::Local
        | ProviderKind::ElevenLabs
        | ProviderKind::MiniMax
        | ProviderKind::Volcengine
        | ProviderKind::Google => Err(wrong_answer(target, Operation::Images)),
    }
}

/// How to read a provider task's state.
#[derive(Debug)]
pub enum PollRequest {
    /// A request to the provider's API, relative to its base URL like any other.
    Api(NativeRequest),
    /// A `GET` of a URL the provider's own answer gave (BFL's `polling_url`), sent with the
    /// provider's credentials: the adapter has checked it is on the provider's own domain.
    Url(String),
}

/// The request that reads `task`'s state from its provider.
pub fn image_poll_request(
    provider: &Provider,
    task: &NativeTask,
) -> Result<PollRequest, UpstreamError> {
    match provider.kind {
        ProviderKind::DashScope => Ok(PollRequest::Api(dashscope::images::poll_request(task))),
        ProviderKind::Bfl => bfl::poll_request(provider, task),
        ProviderKind::Kling => Ok(PollRequest::Api(kling::poll_request(task))),
        _ => Err(bad_answer(
            provider,
            "provider does not run image generations as tasks",
        )),
    }
}

/// Read one poll's 2xx answer: still waiting, or the images; a task that failed is an `Err`.
pub fn image_poll_response(
    provider: &Provider,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Poll, UpstreamError> {
    match provider.kind {
        ProviderKind::DashScope => dashscope::images::poll_response(provider, headers, body),
        ProviderKind::Bfl => bfl::poll_response(provider, headers, body),
        ProviderKind::Kling => kling::poll_response(provider, headers, body),
        _ => Err(bad_answer(
            provider,
            "provider does not run image generations as tasks",
        )),
    }
}

/// Build the native rerank request for `target` (or, for the local reranker, its answer).
pub fn rerank_request(target: &Target, req: &RerankRequest<'_>) -> Result<Prepared, GatewayError> {
    let http = |r: Result<NativeRequest, GatewayError>| r.map(Prepared::Http);
    match target.provider.kind {
        ProviderKind::Cohere => http(cohere::rerank_request(target, req)),
        ProviderKind::CohereV1 => http(cohere_v1::rerank_request(target, req)),
        ProviderKind::Jina => http(jina::rerank_request(target, req)),
        ProviderKind::Voyage => http(voyage::rerank_request(target, req)),
        ProviderKind::DashScope => http(dashscope::rerank::rerank_request(target, req)),
        ProviderKind::SiliconFlow => http(siliconflow::rerank::rerank_request(target, req)),
        ProviderKind::Zhipu => http(zhipu::rerank::rerank_request(target, req)),
        ProviderKind::Mixedbread => http(mixedbread::rerank_request(target, req)),
        ProviderKind::Tei => http(tei::rerank_request(target, req)),
        ProviderKind::Local => local::rerank(req).map(Prepared::Local),
        ProviderKind::OpenAi
        | ProviderKind::AzureOpenAi
        | ProviderKind::ElevenLabs
        | ProviderKind::MiniMax
        | ProviderKind::Volcengine
        | ProviderKind::Google
        | ProviderKind::Ark
        | ProviderKind::Stability
        | ProviderKind::Bfl
        | ProviderKind::Kling => Err(not_served(target, Operation::Rerank)),
    }
}

/// Translate a successful native rerank answer (`headers` matter to TEI, which reports usage there).
pub fn rerank_response<'r>(
    target: &Target,
    req: &'r RerankRequest<'r>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let p = &target.provider;
    match p.kind {
        ProviderKind::Cohere => cohere::rerank_response(p, req, headers, body),
        ProviderKind::CohereV1 => cohere_v1::rerank_response(p, req, headers, body),
        ProviderKind::Jina => jina::rerank_response(p, req, headers, body),
        ProviderKind::Voyage => voyage::rerank_response(p, req, headers, body),
        ProviderKind::DashScope => dashscope::rerank::rerank_response(p, req, headers, body),
        ProviderKind::SiliconFlow => siliconflow::rerank::rerank_response(p, req, headers, body),
        ProviderKind::Zhipu => zhipu::rerank::rerank_response(p, req, headers, body),
        ProviderKind::Mixedbread => mixedbread::rerank_response(p, req, headers, body),
        ProviderKind::Tei => tei::rerank_response(p, req, headers, body),
        ProviderKind::Local => local::rerank_response(p, req, body),
        ProviderKind::OpenAi
        | ProviderKind::AzureOpenAi
        | ProviderKind::ElevenLabs
        | ProviderKind::MiniMax
        | ProviderKind::Volcengine
        | ProviderKind::Google
        | ProviderKind::Ark
        | ProviderKind::Stability
        | ProviderKind::Bfl
        | ProviderKind::Kling => Err(wrong_answer(target, Operation::Rerank)),
    }
}

/// Classify a non-2xx native answer.
pub fn error_response(
    provider: &Provider,
    status: u16,
    headers: &http::HeaderMap,
    body: &[u8],
) -> UpstreamError {
    let mut err = match provider.kind {
        ProviderKind::OpenAi => openai::error_response(provider, status, body),
        ProviderKind::Cohere => cohere::error_response(provider, status, body),
        ProviderKind::CohereV1 => cohere_v1::error_response(provider, status, body),
        ProviderKind::Jina => jina::error_response(provider, status, body),
        ProviderKind::Voyage => voyage::error_response(provider, status, body),
        ProviderKind::DashScope => dashscope::error_response(provider, status, body),
        ProviderKind::SiliconFlow => siliconflow::error_response(provider, status, body),
        ProviderKind::Zhipu => zhipu::error_response(provider, status, body),
        ProviderKind::Mixedbread => mixedbread::error_response(provider, status, body),
        ProviderKind::Tei => tei::error_response(provider, status, body),
        ProviderKind::AzureOpenAi => azure::error_response(provider, status, body),
        ProviderKind::ElevenLabs => elevenlabs::error_response(provider, status, body),
        ProviderKind::MiniMax => minimax::error_response(provider, status, body),
        ProviderKind::Volcengine => volcengine::error_response(provider, status, body),
        ProviderKind::Google => google::error_response(provider, status, body),
        ProviderKind::Ark => ark::error_response(provider, status, body),
        ProviderKind::Stability => stability::error_response(provider, status, body),
        ProviderKind::Bfl => bfl::error_response(provider, status, body),
        ProviderKind::Kling => kling::error_response(provider, status, body),
        // The local reranker is never called over HTTP.
        ProviderKind::Local => UpstreamError::from_status(&provider.name, status, "local provider"),
    };
    err.retry_after = crate::upstream::retry::parse_retry_after(headers);
    err
}

fn not_served(target: &Target, op: Operation) -> GatewayError {
    GatewayError::Internal(format!(
        "provider {} does not serve {}",
        target.provider.name,
        op.as_str()
    ))
}

fn wrong_answer(target: &Target, op: Operation) -> UpstreamError {
    UpstreamError::new(
        crate::api::error::UpstreamErrorKind::BadResponse,
        &target.provider.name,
        format!("provider does not serve {}", op.as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_removes_keys_but_not_prose() {
        let p = test_support::provider("p", ProviderKind::OpenAi, "sk-live-abcdef123");
        assert_eq!(
            p.redact("Incorrect API key provided: 'sk-live-abcdef123' is risk-free"),
            "Incorrect API key provided: '[redacted]' is risk-free"
        );
        assert_eq!(
            p.redact("key \"sk-proj-xx***yy\" revoked"),
            "key [redacted] revoked"
        );
        assert_eq!(p.redact(&"x".repeat(600)).chars().count(), 501);
    }

    #[test]
    fn extra_fields_are_appended_verbatim() {
        #[derive(Serialize)]
        struct K {
            a: u8,
        }
        let raw = RawValue::from_string("{\"x\": [1, 2]}".into()).unwrap();
        let out = json_with_extra(&K { a: 1 }, &[(Str("s\"q".into()), &raw)]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":1,"s\"q":{"x": [1, 2]}}"#
        );
    }
}
