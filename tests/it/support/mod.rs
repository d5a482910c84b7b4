//! Shared integration-test support: the gateway harness (a real Pingora server on free loopback
//! ports, in a background thread), fake providers and a raw HTTP client.

pub mod client;
pub mod costs;
pub mod fake;
pub mod google_token;
pub mod image_conformance;
#[cfg(feature = "ledger")]
pub mod postgres;
pub mod realtime_fake;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
pub mod redis_gate;
#[cfg(feature = "redis")]
pub mod redis_procs;
pub mod rerank_conformance;
pub mod speech_conformance;
pub mod tasks;
pub mod tls_front;
pub mod wan;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};
use switchyard::internals::caps::lifecycle::Clock;
use switchyard::provider_api::ProviderKinds;

/// The API key every test config accepts.
pub const KEY: &str = "test-key";
/// The HS256 secret of the test config.
pub const JWT_SECRET: &str = "test-secret-that-is-at-least-32-bytes!";
/// The key the gateway must send to providers (never the caller's).
pub const PROVIDER_KEY: &str = "sk-provider-secret-0001";
/// The test's AWS credentials (issue 30: SigV4-signed providers); the fake recomputes signatures
/// with them.
pub const AWS_ACCESS_KEY_ID: &str = "AKIATESTEXAMPLE0001";
pub const AWS_SECRET: &str = "aws-secret-wJalrXUtnFEMI-K7MDENG-0001";
pub const AWS_SESSION_TOKEN: &str = "aws-session-token-0001";
/// Kling signs its own tokens: the access key (the JWT's `iss`) and the secret key.
pub const KLING_ACCESS_KEY: &str = "kling-access-key-0001";
pub const KLING_SECRET_KEY: &str = "kling-secret-key-0001";
/// The test's Tencent Cloud credentials (issue 30: TC3-signed providers); the fakes recompute
/// signatures with them.
pub const TENCENT_SECRET_ID: &str = "AKIDtencentTEST0001";
pub const TENCENT_SECRET_KEY: &str = "tencent-secret-key-0001";
pub const TENCENT_REGION: &str = "ap-guangzhou";

pub fn fixture(path: &str) -> String {
    format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// Ports [`free_port`] handed out in this process.
static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// A free loopback port for a server that binds it moments later (a gateway, a `redis-server`),
/// or binds it again after a restart. Never the same port twice in one test process, and never
/// one from the kernel's ephemeral range: every test shares this process, and the kernel hands
/// ephemeral ports to any socket that asks (another test's fake provider binding port 0, an
/// outgoing connection), so a port released by a bind-and-close could be taken before the
/// server binds it, and the test would then talk to another test's server. Ports below the range
/// are only ever given to whoever names them.
pub fn free_port() -> u16 {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    loop {
        let port = if low >= 4096 {
            rand::Rng::gen_range(&mut rand::thread_rng(), low / 2..low)
        } else {
            // Next to no ports below the range: any free one, as the kernel picks it.
            TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() && take(port) {
            return port;
        }
    }
}

/// Record `port` as handed out; false if it already was.
fn take(port: u16) -> bool {
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    if given.contains(&port) {
        return false;
    }
    given.push(port);
    true
}

/// A loopback port nothing listens on, reserved while the returned socket lives: it is bound but
/// not listening, so connections to it are refused, and no other socket (another test's fake
/// provider or gateway, in this shared process) can be given the port meanwhile.
pub fn refused_port() -> (u16, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (port, socket)
}

/// Shared while a gateway starts (its most CPU-hungry moment: a gateway state and its
/// connectors are built), exclusive for the tests that time events to a few milliseconds or load
/// the machine for a while. See [`timing_lock`].
static QUIET: RwLock<()> = RwLock::new(());

/// Held by the tests that time events to a few milliseconds and by the ones that load the machine
/// for a while (100 MiB streams): while one holds it, no other of them runs and no other test's
/// gateway starts. All tests share one process and its parallel test threads, where before each
/// file had a process of its own. Take it after starting the test's own gateway, which would
/// otherwise wait for it forever.
pub fn timing_lock() -> RwLockWriteGuard<'static, ()> {
    QUIET.write().unwrap_or_else(PoisonError::into_inner)
}

/// Held while a gateway starts, until it listens ([`TestGateway::start_with`] takes it; so must
/// a test starting the gateway binary as a process): a gateway start waits while a
/// [`timing_lock`] is held.
pub fn gateway_starting() -> RwLockReadGuard<'static, ()> {
    QUIET.read().unwrap_or_else(PoisonError::into_inner)
}

/// The time test gateways start at: 2026-11-27 12:00 UTC (the lifecycle data's date), so that no
/// test depends on what the wall clock says of a model's shutdown.
pub const TEST_NOW: i64 = 1_795_780_800;

/// `config` run on one worker thread (see [`TestGateway::start_one_worker`]).
pub fn one_worker(config: &str) -> String {
    assert!(
        config.contains("\nthreads: 2\n"),
        "no `threads: 2` to replace"
    );
    config.replacen("\nthreads: 2\n", "\nthreads: 1\n", 1)
}

/// The standard test configuration: two entry points, every test provider pointing at `fake_url`,
/// tiny backoff so retry tests are fast, and `extra_models` appended to the model table.
pub fn config(fake_url: &str, ports: (u16, u16)) -> String {
    format!(
        r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: domestic, region: cn, address: "127.0.0.1:{p0}"}}
    - {{name: overseas, region: global, address: "127.0.0.1:{p1}"}}
  limits:
    speech_body_bytes: 65536
    images_body_bytes: 4194304
    rerank_body_bytes: 4194304
  retries: {{max: 3, initial_backoff_ms: 1, max_backoff_ms: 5, max_retry_after_ms: 50}}
  images: {{allow_private_urls: true, download_timeout_ms: 2000, poll_interval_ms: 20}}
  auth:
    api_keys:
      - {{name: tester, key: "{KEY}"}}
      - {{name: hashed, sha256: "{hashed}"}}
    jwt:
      hs256_secret: "{JWT_SECRET}"
      rs256_public_key_file: "{rsa}"
      es256_public_key_file: "{ec}"
      issuer: switchyard-tests
      leeway_seconds: 5
  providers:
    openai:
      kind: openai
      api_key: "{PROVIDER_KEY}"
      base_url: "{fake_url}/v1"
      timeouts: {{connect_ms: 500, total_connect_ms: 1000, read_ms: 1500, write_ms: 1500, idle_ms: 5000}}
    cohere:
      kind: cohere
      api_key: "{PROVIDER_KEY}"
      base_url: "{fake_url}"
      timeouts: {{connect_ms: 500, total_connect_ms: 1000, read_ms: 1500, write_ms: 1500, idle_ms: 5000}}
    disabled:
      kind: openai
      api_key: ""
      base_url: "{fake_url}/v1"
    cohere-v1: {{kind: cohere-v1, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    jina: {{kind: jina, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    voyage: {{kind: voyage, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    dashscope: {{kind: dashscope, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    azure: {{kind: azure-openai, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", api_version: "2025-03-01-preview", timeouts: {{read_ms: 1500}}}}
    azure-v1: {{kind: azure-openai, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    elevenlabs: {{kind: elevenlabs, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    minimax: {{kind: minimax, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    volcengine: {{kind: volcengine, api_key: "{PROVIDER_KEY}", app_id: "test-app-id", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    google: {{kind: google, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    siliconflow: {{kind: siliconflow, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    zhipu: {{kind: zhipu, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    mixedbread: {{kind: mixedbread, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    tei: {{kind: tei, base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    builtin: {{kind: local}}
    ark: {{kind: ark, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}/api/v3", timeouts: {{read_ms: 1500}}}}
    stability: {{kind: stability, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    bfl: {{kind: bfl, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    kling: {{kind: kling, api_key: "{KLING_ACCESS_KEY}", secret_key: "{KLING_SECRET_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    gemini: {{kind: gemini, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    # ---- rerank: NVIDIA NIM, vLLM, Infinity, Bedrock (issue 30) ----
    nim: {{kind: nvidia-nim, base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    nim-hosted: {{kind: nvidia-nim, hosted: true, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    vllm: {{kind: vllm, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    infinity: {{kind: infinity, base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    bedrock: {{kind: bedrock, api_key: "{AWS_ACCESS_KEY_ID}", secret_key: "{AWS_SECRET}", session_token: "{AWS_SESSION_TOKEN}", region: us-west-2, base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    # ---- end rerank (issue 30) ----
    # Image providers of issue 30.
    recraft: {{kind: recraft, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    together: {{kind: together, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    ideogram: {{kind: ideogram, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    replicate: {{kind: replicate, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    cartesia: {{kind: cartesia, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    deepgram: {{kind: deepgram, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    fish-audio: {{kind: fish-audio, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    mistral: {{kind: mistral, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    stepfun: {{kind: stepfun, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    azure-speech: {{kind: azure-speech, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    polly: {{kind: polly, api_key: "{AWS_ACCESS_KEY_ID}", secret_key: "{AWS_SECRET}", region: eu-west-1, base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    bedrock-image: {{kind: bedrock-image, api_key: "{AWS_ACCESS_KEY_ID}", secret_key: "{AWS_SECRET}", session_token: "{AWS_SESSION_TOKEN}", region: us-west-2, base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    vertex: {{kind: vertex, credentials_file: "{vertex_key}", token_url: "{vertex_token}", location: us-central1, base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    tencent-tts: {{kind: tencent-tts, api_key: "{TENCENT_SECRET_ID}", secret_key: "{TENCENT_SECRET_KEY}", region: "{TENCENT_REGION}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    tencent-hunyuan: {{kind: tencent-hunyuan, api_key: "{TENCENT_SECRET_ID}", secret_key: "{TENCENT_SECRET_KEY}", region: "{TENCENT_REGION}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    vertex-ranking: {{kind: vertex-ranking, credentials_file: "{vertex_key}", token_url: "{vertex_token}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    xai: {{kind: xai, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
    pinecone: {{kind: pinecone, api_key: "{PROVIDER_KEY}", base_url: "{fake_url}", timeouts: {{read_ms: 1500}}}}
  models:
    tts-1: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}
    gpt-4o-mini-tts: {{family: openai-tts-instruct, targets: [{{provider: openai, model: gpt-4o-mini-tts}}]}}
    gpt-image-2: {{family: gpt-image-2, targets: [{{provider: openai, model: gpt-image-2}}]}}
    rerank-v3.5: {{family: cohere-rerank, targets: [{{provider: cohere, model: rerank-v3.5}}]}}
    tts-off: {{family: openai-tts, targets: [{{provider: disabled, model: tts-1}}]}}
    rerank-english-v3.0: {{family: cohere-v1-rerank, targets: [{{provider: cohere-v1, model: rerank-english-v3.0}}]}}
    jina-reranker-v2: {{family: jina-rerank, targets: [{{provider: jina, model: jina-reranker-v2-base-multilingual}}]}}
    voyage-rerank-2.5: {{family: voyage-rerank, targets: [{{provider: voyage, model: rerank-2.5}}]}}
    gte-rerank-v2: {{family: dashscope-rerank, targets: [{{provider: dashscope, model: gte-rerank-v2}}]}}
    bge-reranker-v2-m3: {{family: siliconflow-rerank, targets: [{{provider: siliconflow, model: BAAI/bge-reranker-v2-m3}}]}}
    zhipu-rerank: {{family: zhipu-rerank, targets: [{{provider: zhipu, model: rerank}}]}}
    mxbai-rerank-large-v2: {{family: mixedbread-rerank, targets: [{{provider: mixedbread, model: mixedbread-ai/mxbai-rerank-large-v2}}]}}
    tei-reranker: {{family: tei-rerank, targets: [{{provider: tei, model: bge-reranker-base}}]}}
    local-bm25: {{family: local-rerank, targets: [{{provider: builtin, model: bm25}}]}}
    azure-tts: {{family: openai-tts-instruct, targets: [{{provider: azure, model: tts-deployment}}]}}
    azure-tts-v1: {{family: openai-tts, targets: [{{provider: azure-v1, model: tts-v1-deployment}}]}}
    eleven-multilingual-v2: {{family: elevenlabs-tts, default_voice: JBFqnCBsd6RMkjVDRZzb, targets: [{{provider: elevenlabs, model: eleven_multilingual_v2}}]}}
    speech-2.8-hd: {{family: minimax-tts, targets: [{{provider: minimax, model: speech-2.8-hd}}]}}
    doubao-tts: {{family: doubao-tts, targets: [{{provider: volcengine, model: seed-tts-1.0}}]}}
    qwen3-tts-flash: {{family: qwen-tts, targets: [{{provider: dashscope, model: qwen3-tts-flash}}]}}
    google-tts: {{family: google-tts, targets: [{{provider: google, model: default}}]}}
    gpt-image-1: {{family: gpt-image, targets: [{{provider: openai, model: gpt-image-1, lifecycle: {{still_available: true}}}}]}}
    azure-gpt-image-2: {{family: gpt-image-2, targets: [{{provider: azure, model: gpt-image-2-deployment}}]}}
    azure-gpt-image: {{family: gpt-image, targets: [{{provider: azure-v1, model: gpt-image-deployment}}]}}
    cogview-4: {{family: cogview, targets: [{{provider: zhipu, model: cogview-4-250304}}]}}
    seedream-4: {{family: seedream, targets: [{{provider: ark, model: doubao-seedream-4-0-250828, lifecycle: {{still_available: true}}}}]}}
    seededit-3: {{family: seededit, targets: [{{provider: ark, model: doubao-seededit-3-0-i2i-250628}}]}}
    stable-image-ultra: {{family: stable-image, targets: [{{provider: stability, model: ultra}}]}}
    sd3.5-large: {{family: stability-sd3, targets: [{{provider: stability, model: sd3.5-large}}]}}
    kolors: {{family: kolors, targets: [{{provider: siliconflow, model: Kwai-Kolors/Kolors}}]}}
    qwen-image: {{family: qwen-image, targets: [{{provider: siliconflow, model: Qwen/Qwen-Image}}]}}
    wanx2.1-t2i-turbo: {{family: wan, targets: [{{provider: dashscope, model: wanx2.1-t2i-turbo}}]}}
    flux-pro-1.1: {{family: flux, targets: [{{provider: bfl, model: flux-pro-1.1}}]}}
    flux-kontext-pro: {{family: flux-kontext, targets: [{{provider: bfl, model: flux-kontext-pro}}]}}
    kling-v2-1: {{family: kling, targets: [{{provider: kling, model: kling-v2-1}}]}}
    gemini-3-pro-image: {{family: gemini-image, targets: [{{provider: gemini, model: gemini-3-pro-image}}]}}
    gemini-3.1-flash-image: {{family: gemini-flash-image, targets: [{{provider: gemini, model: gemini-3.1-flash-image}}]}}
    gemini-2.5-flash-image: {{family: gemini-2.5-flash-image, targets: [{{provider: gemini, model: gemini-2.5-flash-image, lifecycle: {{still_available: true}}}}]}}
    gemini-3.8-flash-tts: {{family: gemini-3.8-tts, targets: [{{provider: gemini, model: gemini-3.8-flash-tts}}]}}
    gemini-3.8-flash-lite-tts: {{family: gemini-3.8-tts, targets: [{{provider: gemini, model: gemini-3.8-flash-lite-tts}}]}}
    # ---- rerank: NVIDIA NIM, vLLM, Infinity, Bedrock (issue 30) ----
    nim-reranker: {{family: nim-rerank, targets: [{{provider: nim, model: nvidia/llama-nemotron-rerank-1b-v2}}]}}
    nim-hosted-reranker: {{family: nim-rerank, targets: [{{provider: nim-hosted, model: nvidia/llama-3.2-nv-rerankqa-1b-v2}}]}}
    vllm-reranker: {{family: vllm-rerank, targets: [{{provider: vllm, model: Qwen/Qwen3-Reranker-0.6B}}]}}
    infinity-reranker: {{family: infinity-rerank, targets: [{{provider: infinity, model: BAAI/bge-reranker-v2-m3}}]}}
    bedrock-cohere-rerank: {{family: bedrock-rerank, targets: [{{provider: bedrock, model: cohere.rerank-v3-5:0}}]}}
    # ---- end rerank (issue 30) ----
    # Image providers of issue 30 (MiniMax images, Recraft, Together, Ideogram).
    image-01: {{family: minimax-image, targets: [{{provider: minimax, model: image-01}}]}}
    recraft-v4.1: {{family: recraft-v4, targets: [{{provider: recraft, model: recraftv4_1}}]}}
    recraft-v4.1-pro: {{family: recraft-v4-pro, targets: [{{provider: recraft, model: recraftv4_1_pro}}]}}
    recraft-v4.1-vector: {{family: recraft-v4-vector, targets: [{{provider: recraft, model: recraftv4_1_vector}}]}}
    recraft-v3: {{family: recraft-v3, targets: [{{provider: recraft, model: recraftv3}}]}}
    flux.1-schnell: {{family: together-flux, targets: [{{provider: together, model: black-forest-labs/FLUX.1-schnell}}]}}
    flux.1-kontext-pro: {{family: together-flux-kontext, targets: [{{provider: together, model: black-forest-labs/FLUX.1-kontext-pro}}]}}
    ideogram-v3: {{family: ideogram-v3, targets: [{{provider: ideogram, model: ideogram-v3}}]}}
    replicate-flux-schnell: {{family: replicate-flux-schnell, targets: [{{provider: replicate, model: black-forest-labs/flux-schnell}}]}}
    replicate-flux-1.1-pro: {{family: replicate-flux-pro, targets: [{{provider: replicate, model: black-forest-labs/flux-1.1-pro}}]}}
    sonic-3: {{family: cartesia-sonic, targets: [{{provider: cartesia, model: sonic-3}}]}}
    aura-2: {{family: deepgram-aura-2, targets: [{{provider: deepgram, model: aura-2}}]}}
    fish-s2.1-pro: {{family: fish-audio-tts, targets: [{{provider: fish-audio, model: s2.1-pro}}]}}
    voxtral-mini-tts: {{family: voxtral-tts, targets: [{{provider: mistral, model: voxtral-mini-tts-2603}}]}}
    step-tts-2: {{family: stepfun-tts, targets: [{{provider: stepfun, model: step-tts-2}}]}}
    stepaudio-2.5-tts: {{family: stepfun-tts-instruct, targets: [{{provider: stepfun, model: stepaudio-2.5-tts}}]}}
    cosyvoice-v3-flash: {{family: cosyvoice, targets: [{{provider: dashscope, model: cosyvoice-v3-flash}}]}}
    azure-neural: {{family: azure-speech, targets: [{{provider: azure-speech, model: neural}}]}}
    polly-neural: {{family: polly-neural, targets: [{{provider: polly, model: neural}}]}}
    polly-generative: {{family: polly-generative, targets: [{{provider: polly, model: generative}}]}}
    bedrock-stable-image-ultra: {{family: bedrock-stability, targets: [{{provider: bedrock-image, model: "stability.stable-image-ultra-v1:1"}}]}}
    vertex-gemini-3-pro-image: {{family: gemini-image, targets: [{{provider: vertex, model: gemini-3-pro-image}}]}}
    vertex-gemini-3.1-flash-image: {{family: gemini-flash-image, targets: [{{provider: vertex, model: gemini-3.1-flash-image}}]}}
    tencent-tts: {{family: tencent-tts, targets: [{{provider: tencent-tts, model: tts}}]}}
    hunyuan-image-3: {{family: hunyuan-image-3, targets: [{{provider: tencent-hunyuan, model: HY-Image-V3.0}}]}}
    vertex-semantic-ranker: {{family: vertex-ranking, targets: [{{provider: vertex-ranking, model: semantic-ranker-default-004}}]}}
    grok-tts: {{family: xai-tts, targets: [{{provider: xai, model: default}}]}}
    pinecone-bge-reranker: {{family: pinecone-rerank, targets: [{{provider: pinecone, model: bge-reranker-v2-m3}}]}}
"#,
        p0 = ports.0,
        p1 = ports.1,
        hashed = sha256_hex("hashed-secret-key"),
        rsa = fixture("jwt/rsa_public.pem"),
        ec = fixture("jwt/ec_public.pem"),
        vertex_key = google_token::key_file(),
        vertex_token = google_token::shared_url(),
    )
}

pub fn sha256_hex(s: &str) -> String {
    switchyard::internals::auth::sha256_hex(s)
}

/// Shuts the server down when the test drops its harness (the sender).
struct ChannelSignal(tokio::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>);

#[async_trait]
impl ShutdownSignalWatch for ChannelSignal {
    async fn recv(&self) -> ShutdownSignal {
        if let Some(rx) = self.0.lock().await.take() {
            let _ = rx.await;
        }
        ShutdownSignal::FastShutdown
    }
}

/// A running gateway.
pub struct TestGateway {
    /// The domestic entry point.
    pub addr: SocketAddr,
    /// The overseas entry point.
    pub overseas: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestGateway {
    /// Start with the standard config pointing at `fake`.
    pub fn start(fake: &fake::FakeProvider) -> TestGateway {
        Self::start_with(|ports| config(&fake.base_url(), ports))
    }

    /// [`TestGateway::start`] with one worker thread, for tests that count pooled connections
    /// being reused. With two, Pingora 0.9.1's pool can lose an idle connection it is handing
    /// out: `reused_stream` takes it with `Arc::try_unwrap` as soon as its idle watcher's lock is
    /// released, which may run on the other worker before the watcher dropped its own reference
    /// (cloudflare/pingora#998, open as of 2026-11-29); the gateway then connects afresh, correct
    /// but one connection more than such a test expects.
    pub fn start_one_worker(fake: &fake::FakeProvider) -> TestGateway {
        Self::start_with(|ports| one_worker(&config(&fake.base_url(), ports)))
    }

    /// Start with a config built from the two listener ports, on a clock standing at
    /// [`TEST_NOW`] (models' shutdown dates are judged by it, never by the wall clock).
    pub fn start_with(make: impl FnOnce((u16, u16)) -> String) -> TestGateway {
        Self::start_at(make, Clock::manual(TEST_NOW))
    }

    /// Start with a config built from the two listener ports, models' lifecycles judged by
    /// `clock` (which the test may move).
    pub fn start_at(make: impl FnOnce((u16, u16)) -> String, clock: Clock) -> TestGateway {
        Self::start_at_with(make, clock, &ProviderKinds::new())
    }

    /// Start with a config built from the two listener ports, the per-caller limits' windows
    /// (minutes, days, months) counted by `limits`, which the test may move.
    pub fn start_with_limits_clock(
        make: impl FnOnce((u16, u16)) -> String,
        limits: &Clock,
    ) -> TestGateway {
        Self::start_inner(
            make,
            Clock::manual(TEST_NOW),
            &ProviderKinds::new(),
            Some(limits),
        )
    }

    /// [`TestGateway::start_with`], the config loaded knowing the provider `kinds` a host
    /// registered besides the built-in ones.
    pub fn start_with_kinds(
        make: impl FnOnce((u16, u16)) -> String,
        kinds: &ProviderKinds,
    ) -> TestGateway {
        Self::start_at_with(make, Clock::manual(TEST_NOW), kinds)
    }

    fn start_at_with(
        make: impl FnOnce((u16, u16)) -> String,
        clock: Clock,
        kinds: &ProviderKinds,
    ) -> TestGateway {
        Self::start_inner(make, clock, kinds, None)
    }

    fn start_inner(
        make: impl FnOnce((u16, u16)) -> String,
        clock: Clock,
        kinds: &ProviderKinds,
        limits: Option<&Clock>,
    ) -> TestGateway {
        let _starting = gateway_starting();
        let ports = (free_port(), free_port());
        let yaml = make(ports);
        let mut loader = switchyard::config::Loader::new().clock(&clock).kinds(kinds);
        if let Some(limits) = limits {
            loader = loader.limits_clock(limits);
        }
        let settings = loader
            .text(&yaml, &|_| None)
            .unwrap_or_else(|e| panic!("test config invalid: {e:#?}"));
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut server = Server::new_with_opt_and_conf(None, settings.server);
            server.bootstrap();
            let state = switchyard::GatewayState::new(settings.gateway);
            switchyard::server::add_services(&mut server, &state);
            server.run(RunArgs {
                shutdown_signal: Box::new(ChannelSignal(tokio::sync::Mutex::new(Some(rx)))),
            });
        });
        let addr: SocketAddr = format!("127.0.0.1:{}", ports.0).parse().unwrap();
        let overseas: SocketAddr = format!("127.0.0.1:{}", ports.1).parse().unwrap();
        wait_listening(addr);
        wait_listening(overseas);
        TestGateway {
            addr,
            overseas,
            stop: Some(tx),
        }
    }
}

impl TestGateway {
    /// A handle on a gateway running elsewhere (another process) at `addr`; dropping it stops
    /// nothing.
    pub fn attach(addr: SocketAddr) -> TestGateway {
        TestGateway {
            addr,
            overseas: addr,
            stop: None,
        }
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// Wait until `addr` accepts connections (a condition, not a fixed delay), at most 10 s.
pub fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        assert!(
            Instant::now() < deadline,
            "gateway did not start listening on {addr}"
        );
        std::thread::park_timeout(Duration::from_millis(5));
    }
}

/// `Service-API-Key` header for the standard key.
pub fn auth() -> [(&'static str, &'static str); 1] {
    [("Service-API-Key", KEY)]
}

/// POST JSON to the gateway with the standard key.
pub fn post(gw: &TestGateway, path: &str, body: &serde_json::Value) -> client::Response {
    client::post_json(gw.addr, path, &auth(), body)
}
