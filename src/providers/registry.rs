//! The registry: each provider kind's typed config, and the one exhaustive match that turns a
//! provider's config into its credentials, error classification and adapters.
//!
//! Adding a provider is a variant in [`ProviderConfig`] and an arm in [`build`]; everything else
//! the provider needs lives in its own module. A key a kind does not take (`app_id` on OpenAI,
//! `secret_key` on Cohere) is refused by name when the config is loaded.

use std::sync::Arc;

use http::HeaderMap;
use serde::Deserialize;

// Every provider module: the registry is where they are all named.
use super::*;
use crate::api::adapter::{Adapters, ImageAdapter, RerankAdapter, SpeechAdapter, TaskAdapter};
use crate::api::discovery::Discovery;
use crate::api::images::ImageRequest;
use crate::api::rerank::{RerankRequest, RerankResult};
use crate::api::speech::SpeechRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::images::{ImageAnswer, NativeImages, NativeTask, Poll};
use crate::common::native::{NativeRequest, PollRequest, Prepared};
use crate::stream::audio::SpeechDecoding;
use crate::upstream::provider::{Auth, ErrorMap, Provider};

/// A provider's kind and the settings only that kind takes (`kind:` in the config; the settings
/// every kind shares — key, URLs, timeouts, limits — are read by the config itself).
#[derive(Debug, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum ProviderConfig {
    #[serde(rename = "openai")]
    OpenAi(NoSettings),
    #[serde(rename = "azure-openai")]
    AzureOpenAi(azure::Settings),
    #[serde(rename = "cohere")]
    Cohere(NoSettings),
    #[serde(rename = "cohere-v1")]
    CohereV1(NoSettings),
    #[serde(rename = "jina")]
    Jina(NoSettings),
    #[serde(rename = "voyage")]
    Voyage(NoSettings),
    #[serde(rename = "dashscope")]
    DashScope(NoSettings),
    #[serde(rename = "siliconflow")]
    SiliconFlow(NoSettings),
    #[serde(rename = "zhipu")]
    Zhipu(NoSettings),
    #[serde(rename = "mixedbread")]
    Mixedbread(NoSettings),
    #[serde(rename = "tei")]
    Tei(NoSettings),
    #[serde(rename = "local")]
    Local(NoSettings),
    #[serde(rename = "elevenlabs")]
    ElevenLabs(NoSettings),
    #[serde(rename = "minimax")]
    MiniMax(NoSettings),
    #[serde(rename = "volcengine")]
    Volcengine(volcengine::Settings),
    #[serde(rename = "google")]
    Google(NoSettings),
    #[serde(rename = "gemini")]
    Gemini(NoSettings),
    #[serde(rename = "ark")]
    Ark(NoSettings),
    #[serde(rename = "stability")]
    Stability(NoSettings),
    #[serde(rename = "bfl")]
    Bfl(NoSettings),
    #[serde(rename = "kling")]
    Kling(kling::Settings),
    // ---- rerank: NVIDIA NIM, vLLM, Infinity, Bedrock (issue 30) ----
    #[serde(rename = "nvidia-nim")]
    NvidiaNim(nim::Settings),
    #[serde(rename = "vllm")]
    Vllm(NoSettings),
    #[serde(rename = "infinity")]
    Infinity(NoSettings),
    #[serde(rename = "bedrock")]
    Bedrock(formats::aws::Settings),
    // Image providers of issue 30.
    #[serde(rename = "recraft")]
    Recraft(NoSettings),
    #[serde(rename = "together")]
    Together(NoSettings),
    #[serde(rename = "ideogram")]
    Ideogram(NoSettings),
    #[serde(rename = "replicate")]
    Replicate(NoSettings),
    // ---- speech: voice-agent vendors (issue 30)
    #[serde(rename = "cartesia")]
    Cartesia(NoSettings),
    #[serde(rename = "deepgram")]
    Deepgram(NoSettings),
    #[serde(rename = "fish-audio")]
    FishAudio(NoSettings),
    #[serde(rename = "azure-speech")]
    AzureSpeech(NoSettings),
    // Amazon Polly (SigV4, the same AWS settings as Bedrock).
    #[serde(rename = "polly")]
    Polly(formats::aws::Settings),
    // Amazon Bedrock image generation (InvokeModel; SigV4, the same AWS settings).
    #[serde(rename = "bedrock-image")]
    BedrockImage(formats::aws::Settings),
    #[serde(rename = "mistral")]
    Mistral(NoSettings),
    #[serde(rename = "stepfun")]
    StepFun(NoSettings),
    // Vertex AI (Gemini image models; Google service-account credentials).
    #[serde(rename = "vertex")]
    Vertex(vertex::Settings),
    // Tencent Cloud (TC3-signed; issue 30).
    #[serde(rename = "tencent-hunyuan")]
    TencentHunyuan(formats::tencent::Settings),
    #[serde(rename = "tencent-tts")]
    TencentTts(formats::tencent::Settings),
    // Vertex AI ranking API (Discovery Engine; the same Google credentials).
    #[serde(rename = "vertex-ranking")]
    VertexRanking(vertex::Settings),
    // xAI (text to speech).
    #[serde(rename = "xai")]
    Xai(NoSettings),
    // Pinecone Inference (rerank).
    #[serde(rename = "pinecone")]
    Pinecone(NoSettings),
}

/// A kind with no settings of its own: any extra key is an error naming it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoSettings {}

/// What a provider kind contributes to an account: what each built-in provider's `kind()` returns,
/// and what a kind registered from outside the crate (`external::ProviderKinds`) builds.
pub struct Kind {
    /// Credentials built from the account's key.
    pub auth: Auth,
    /// How its non-2xx answers are classified.
    pub errors: ErrorMap,
    /// Reached over HTTP (and so needs a `base_url`).
    pub remote: bool,
    /// Where its answers put result files when the config names no `result_hosts`.
    pub result_hosts: &'static [&'static str],
    /// One adapter per operation the kind serves.
    pub adapters: Adapters,
}

/// Build a provider kind from its config and the account's key (empty: none configured).
pub(crate) fn build(config: &ProviderConfig, key: &str) -> Result<Kind, String> {
    match config {
        ProviderConfig::OpenAi(_) => openai::kind(key),
        ProviderConfig::AzureOpenAi(s) => azure::kind(s, key),
        ProviderConfig::Cohere(_) => cohere::kind(key),
        ProviderConfig::CohereV1(_) => cohere_v1::kind(key),
        ProviderConfig::Jina(_) => jina::kind(key),
        ProviderConfig::Voyage(_) => voyage::kind(key),
        ProviderConfig::DashScope(_) => dashscope::kind(key),
        ProviderConfig::SiliconFlow(_) => siliconflow::kind(key),
        ProviderConfig::Zhipu(_) => zhipu::kind(key),
        ProviderConfig::Mixedbread(_) => mixedbread::kind(key),
        ProviderConfig::Tei(_) => tei::kind(key),
        ProviderConfig::Local(_) => local::kind(),
        ProviderConfig::ElevenLabs(_) => elevenlabs::kind(key),
        ProviderConfig::MiniMax(_) => minimax::kind(key),
        ProviderConfig::Volcengine(s) => volcengine::kind(s, key),
        ProviderConfig::Google(_) => google::kind(key),
        ProviderConfig::Gemini(_) => gemini::kind(key),
        ProviderConfig::Ark(_) => ark::kind(key),
        ProviderConfig::Stability(_) => stability::kind(key),
        ProviderConfig::Bfl(_) => bfl::kind(key),
        ProviderConfig::Kling(s) => kling::kind(s, key),
        // ---- rerank: NVIDIA NIM, vLLM, Infinity, Bedrock (issue 30) ----
        ProviderConfig::NvidiaNim(s) => nim::kind(s, key),
        ProviderConfig::Vllm(_) => vllm::kind(key),
        ProviderConfig::Infinity(_) => infinity::kind(key),
        ProviderConfig::Bedrock(s) => bedrock::kind(s, key),
        // Image providers of issue 30.
        ProviderConfig::Recraft(_) => recraft::kind(key),
        ProviderConfig::Together(_) => together::kind(key),
        ProviderConfig::Ideogram(_) => ideogram::kind(key),
        ProviderConfig::Replicate(_) => replicate::kind(key),
        // ---- speech: voice-agent vendors (issue 30)
        ProviderConfig::Cartesia(_) => cartesia::kind(key),
        ProviderConfig::Deepgram(_) => deepgram::kind(key),
        ProviderConfig::FishAudio(_) => fish_audio::kind(key),
        ProviderConfig::AzureSpeech(_) => azure_speech::kind(key),
        ProviderConfig::Polly(s) => polly::kind(s, key),
        ProviderConfig::BedrockImage(s) => bedrock_image::kind(s, key),
        ProviderConfig::Mistral(_) => mistral::kind(key),
        ProviderConfig::StepFun(_) => stepfun::kind(key),
        ProviderConfig::Vertex(s) => vertex::kind(s, key),
        ProviderConfig::TencentHunyuan(s) => tencent_hunyuan::kind(s, key),
        ProviderConfig::TencentTts(s) => tencent_tts::kind(s, key),
        ProviderConfig::VertexRanking(s) => vertex_ranking::kind(s, key),
        ProviderConfig::Xai(_) => xai::kind(key),
        ProviderConfig::Pinecone(_) => pinecone::kind(key),
    }
}

/// The list endpoints (`api::discovery`) of a provider kind: what `switchyard check-providers`
/// and the voice listing may ask the account. A kind without any says so here, by name.
pub(crate) fn discovery(config: &ProviderConfig) -> Discovery {
    match config {
        ProviderConfig::OpenAi(_) => openai::discovery::DISCOVERY,
        ProviderConfig::Cohere(_) | ProviderConfig::CohereV1(_) => cohere::DISCOVERY,
        ProviderConfig::DashScope(_) => dashscope::discovery::DISCOVERY,
        ProviderConfig::ElevenLabs(_) => elevenlabs::DISCOVERY,
        ProviderConfig::Gemini(_) => gemini::discovery::DISCOVERY,
        // No list endpoint is sourced for these yet (docs/providers/*.md): the check reports
        // them as not checked rather than guessing.
        ProviderConfig::AzureOpenAi(_)
        | ProviderConfig::Jina(_)
        | ProviderConfig::Voyage(_)
        | ProviderConfig::SiliconFlow(_)
        | ProviderConfig::Zhipu(_)
        | ProviderConfig::Mixedbread(_)
        | ProviderConfig::Tei(_)
        | ProviderConfig::Local(_)
        | ProviderConfig::MiniMax(_)
        | ProviderConfig::Volcengine(_)
        | ProviderConfig::Google(_)
        | ProviderConfig::Ark(_)
        | ProviderConfig::Stability(_)
        | ProviderConfig::Bfl(_)
        | ProviderConfig::Kling(_) => Discovery::default(),
        // ---- rerank: NVIDIA NIM, vLLM, Infinity, Bedrock (issue 30) ----
        ProviderConfig::NvidiaNim(_)
        | ProviderConfig::Vllm(_)
        | ProviderConfig::Infinity(_)
        | ProviderConfig::Bedrock(_) => Discovery::default(),
        // Image providers of issue 30: no list endpoint sourced yet.
        ProviderConfig::Recraft(_)
        | ProviderConfig::Together(_)
        | ProviderConfig::Ideogram(_)
        | ProviderConfig::Replicate(_) => Discovery::default(),
        // ---- speech: voice-agent vendors (issue 30); no list endpoint sourced yet
        ProviderConfig::Cartesia(_)
        | ProviderConfig::Deepgram(_)
        | ProviderConfig::FishAudio(_)
        | ProviderConfig::Mistral(_)
        | ProviderConfig::StepFun(_) => Discovery::default(),
        ProviderConfig::AzureSpeech(_) => azure_speech::DISCOVERY,
        ProviderConfig::Polly(_) => polly::DISCOVERY,
        // Bedrock's model list (ListFoundationModels) is another service's: not read yet.
        ProviderConfig::BedrockImage(_) => Discovery::default(),
        // Vertex AI's model list is not read yet.
        ProviderConfig::Vertex(_) => Discovery::default(),
        // Tencent Cloud: no list endpoint sourced (the voice list is a documentation page).
        ProviderConfig::TencentHunyuan(_) | ProviderConfig::TencentTts(_) => Discovery::default(),
        // The ranking API has no model list.
        ProviderConfig::VertexRanking(_) => Discovery::default(),
        // xAI lists voices (`GET /v1/tts/voices`), not read yet.
        ProviderConfig::Xai(_) => Discovery::default(),
        // Pinecone lists its models (`GET /models?type=rerank`), not read yet.
        ProviderConfig::Pinecone(_) => Discovery::default(),
    }
}

/// `make(key)`, or [`Auth::Missing`] when no key is configured (the account is then disabled).
pub fn keyed(key: &str, make: impl FnOnce(&str) -> Result<Auth, String>) -> Result<Auth, String> {
    if key.is_empty() {
        Ok(Auth::Missing)
    } else {
        make(key)
    }
}

// ---- adapters made of an adapter module's functions ------------------------------------------
//
// Most adapters are stateless: their module's functions are the whole adapter. These tables let a
// provider's `kind()` name them instead of writing the same trait impl for every provider.

/// A speech adapter made of functions.
pub struct SpeechFns {
    /// The native request for a target.
    pub request: fn(&Target, &SpeechRequest<'_>) -> Result<NativeRequest, GatewayError>,
    /// `None`: the provider's body is the audio itself (passed through).
    pub decoding: Option<fn(&Arc<Provider>, &SpeechRequest<'_>) -> SpeechDecoding>,
}

impl SpeechAdapter for SpeechFns {
    fn request(&self, target: &Target, req: &SpeechRequest<'_>) -> Result<Prepared, GatewayError> {
        (self.request)(target, req).map(Prepared::Http)
    }

    fn decoding(&self, provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
        match self.decoding {
            Some(decoding) => decoding(provider, req),
            None => SpeechDecoding::Passthrough,
        }
    }
}

/// An image adapter made of functions.
pub(crate) struct ImageFns {
    /// The native request for a target, asking for the given number of images.
    pub(crate) request: fn(&Target, &ImageRequest<'_>, u64) -> Result<NativeRequest, GatewayError>,
    /// The provider's own refusals ([`ImageAdapter::validate`]); [`no_checks`] when it has none.
    pub(crate) validate: fn(&Target, &ImageRequest<'_>) -> Result<(), GatewayError>,
    /// A 2xx answer: the images (`images` wraps a synchronous answer), or the task to poll.
    pub(crate) response:
        fn(&Provider, &ImageRequest<'_>, &HeaderMap, &[u8]) -> Result<ImageAnswer, UpstreamError>,
    /// Whether reference images travel as bytes ([`ImageAdapter::input_as_bytes`]).
    pub(crate) input_as_bytes: bool,
    /// How tasks are polled, for a natively asynchronous provider.
    pub(crate) tasks: Option<TaskFns>,
}

impl ImageAdapter for ImageFns {
    fn request(
        &self,
        target: &Target,
        req: &ImageRequest<'_>,
        n: u64,
    ) -> Result<Prepared, GatewayError> {
        (self.request)(target, req, n).map(Prepared::Http)
    }

    fn validate(&self, target: &Target, req: &ImageRequest<'_>) -> Result<(), GatewayError> {
        (self.validate)(target, req)
    }

    fn response(
        &self,
        provider: &Provider,
        req: &ImageRequest<'_>,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<ImageAnswer, UpstreamError> {
        (self.response)(provider, req, headers, body)
    }

    fn input_as_bytes(&self) -> bool {
        self.input_as_bytes
    }

    fn tasks(&self) -> Option<&dyn TaskAdapter> {
        self.tasks.as_ref().map(|t| t as &dyn TaskAdapter)
    }
}

/// The validation step of an image adapter whose provider refuses nothing the family's
/// capabilities do not already refuse.
pub(crate) fn no_checks(_target: &Target, _req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    Ok(())
}

/// Task polling made of functions.
pub(crate) struct TaskFns {
    /// The request that reads a task's state.
    pub(crate) poll_request: fn(&Provider, &NativeTask) -> Result<PollRequest, UpstreamError>,
    /// One poll's 2xx answer: still waiting, or the images.
    pub(crate) poll_response: fn(&Provider, &HeaderMap, &[u8]) -> Result<Poll, UpstreamError>,
}

impl TaskAdapter for TaskFns {
    fn poll_request(
        &self,
        provider: &Provider,
        task: &NativeTask,
    ) -> Result<PollRequest, UpstreamError> {
        (self.poll_request)(provider, task)
    }

    fn poll_response(
        &self,
        provider: &Provider,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Poll, UpstreamError> {
        (self.poll_response)(provider, headers, body)
    }
}

/// A rerank answer reader.
pub(crate) type RerankResponseFn = for<'r> fn(
    &Provider,
    &'r RerankRequest<'r>,
    &HeaderMap,
    &[u8],
) -> Result<RerankResult<'r>, UpstreamError>;

/// An HTTP rerank adapter made of functions.
pub struct RerankFns {
    /// The native request for a target.
    pub request: fn(&Target, &RerankRequest<'_>) -> Result<NativeRequest, GatewayError>,
    /// A 2xx answer as the public result ([`RerankRequest::build`] makes one from scores).
    pub response: for<'r> fn(
        &Provider,
        &'r RerankRequest<'r>,
        &HeaderMap,
        &[u8],
    ) -> Result<RerankResult<'r>, UpstreamError>,
}

impl RerankAdapter for RerankFns {
    fn request(&self, target: &Target, req: &RerankRequest<'_>) -> Result<Prepared, GatewayError> {
        (self.request)(target, req).map(Prepared::Http)
    }

    fn response<'r>(
        &self,
        provider: &Provider,
        req: &'r RerankRequest<'r>,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<RerankResult<'r>, UpstreamError> {
        (self.response)(provider, req, headers, body)
    }
}

/// A synchronous image answer as the adapter-neutral [`ImageAnswer`].
pub(crate) fn images(r: Result<NativeImages, UpstreamError>) -> Result<ImageAnswer, UpstreamError> {
    r.map(ImageAnswer::Images)
}

/// A remote speech-only kind whose adapter is its module's functions.
pub(crate) fn speech_kind(auth: Auth, errors: ErrorMap, speech: SpeechFns) -> Kind {
    Kind {
        auth,
        errors,
        remote: true,
        result_hosts: &[],
        adapters: Adapters {
            speech: Some(Box::new(speech)),
            ..Adapters::default()
        },
    }
}

/// A remote images-only kind whose adapter is its module's functions.
pub(crate) fn images_kind(
    auth: Auth,
    errors: ErrorMap,
    result_hosts: &'static [&'static str],
    images: ImageFns,
) -> Kind {
    Kind {
        auth,
        errors,
        remote: true,
        result_hosts,
        adapters: Adapters {
            images: Some(Box::new(images)),
            ..Adapters::default()
        },
    }
}

/// A rerank-only kind whose adapter is its module's functions, keyed by Bearer token.
pub(crate) fn bearer_rerank(
    key: &str,
    errors: ErrorMap,
    request: fn(&Target, &RerankRequest<'_>) -> Result<NativeRequest, GatewayError>,
    response: RerankResponseFn,
) -> Result<Kind, String> {
    Ok(Kind {
        auth: keyed(key, Auth::bearer)?,
        errors,
        remote: true,
        result_hosts: &[],
        adapters: Adapters {
            rerank: Some(Box::new(RerankFns { request, response })),
            ..Adapters::default()
        },
    })
}
