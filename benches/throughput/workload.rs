//! What each scenario sends and gets: the public request to the gateway, the native request the
//! gateway would send for it (which goes to the fake directly and through the plain proxy), and
//! the fake provider's canned answers. `hot_paths.rs` uses the same bodies.

/// The gateway's API key in the benchmark config.
pub const KEY: &str = "bench-key";
/// The provider key the gateway sends (and the native requests carry).
pub const PROVIDER_KEY: &str = "sk-bench-provider-key";

/// A load scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Rerank10,
    Rerank100,
    Speech,
    /// Speech whose provider states the audio's length (`Content-Length`, as a file server such
    /// as the peer benchmark's nginx sends it) instead of streaming it chunked.
    SpeechLength,
    Image,
    /// Speech to a model with a response cache: after the first request, every one is a hit
    /// (no upstream exchange at all), against the proxy fetching the same bytes.
    SpeechHit,
    /// Rerank (10 documents) to a cached model: hits.
    Rerank10Hit,
    /// `rerank-10` with HTTPS to the provider (the fake's TLS listener, pooled connections).
    Rerank10Https,
    /// `speech` with HTTPS to the provider.
    SpeechHttps,
    /// `image` with HTTPS to the provider.
    ImageHttps,
    /// A GPT image answer carrying its image inline: `b64_json` of [`BIG_IMAGE_BYTES`] (about
    /// 1.5 MB of base64), asked for with `response_format: b64_json` (a big body out).
    ImageB64Big,
    /// Speech through OpenAI's Realtime API (a WebSocket to the fake's Realtime listener),
    /// `response_format: pcm`: the PCM as it comes, no encoding. Its direct and baseline runs
    /// are the HTTP `speech` request (the plain proxy cannot turn a WebSocket into HTTP).
    SpeechRealtime,
    /// The same, encoded by the gateway into mp3 (LAME).
    SpeechRealtimeMp3,
    /// … into Ogg Opus (libopus).
    SpeechRealtimeOpus,
    /// … into ADTS AAC (FDK AAC).
    SpeechRealtimeAac,
    /// … into FLAC (flacenc).
    SpeechRealtimeFlac,
}

impl Workload {
    pub const ALL: [Workload; 16] = [
        Workload::Rerank10,
        Workload::Rerank100,
        Workload::Speech,
        Workload::SpeechLength,
        Workload::Image,
        Workload::SpeechHit,
        Workload::Rerank10Hit,
        Workload::Rerank10Https,
        Workload::SpeechHttps,
        Workload::ImageHttps,
        Workload::ImageB64Big,
        Workload::SpeechRealtime,
        Workload::SpeechRealtimeMp3,
        Workload::SpeechRealtimeOpus,
        Workload::SpeechRealtimeAac,
        Workload::SpeechRealtimeFlac,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Rerank10 => "rerank-10",
            Workload::Rerank100 => "rerank-100",
            Workload::Speech => "speech",
            Workload::SpeechLength => "speech-length",
            Workload::Image => "image",
            Workload::SpeechHit => "speech-hit",
            Workload::Rerank10Hit => "rerank-10-hit",
            Workload::Rerank10Https => "rerank-10-https",
            Workload::SpeechHttps => "speech-https",
            Workload::ImageHttps => "image-https",
            Workload::ImageB64Big => "image-b64-big",
            Workload::SpeechRealtime => "speech-realtime",
            Workload::SpeechRealtimeMp3 => "speech-realtime-mp3",
            Workload::SpeechRealtimeOpus => "speech-realtime-opus",
            Workload::SpeechRealtimeAac => "speech-realtime-aac",
            Workload::SpeechRealtimeFlac => "speech-realtime-flac",
        }
    }

    /// The `response_format` of a Realtime workload (`None`: not one).
    pub fn realtime_format(self) -> Option<&'static str> {
        match self {
            Workload::SpeechRealtime => Some("pcm"),
            Workload::SpeechRealtimeMp3 => Some("mp3"),
            Workload::SpeechRealtimeOpus => Some("opus"),
            Workload::SpeechRealtimeAac => Some("aac"),
            Workload::SpeechRealtimeFlac => Some("flac"),
            _ => None,
        }
    }

    /// Whether the proxies reach the fake over TLS.
    pub fn https(self) -> bool {
        matches!(
            self,
            Workload::Rerank10Https | Workload::SpeechHttps | Workload::ImageHttps
        )
    }

    /// `(path, body)` for the gateway.
    pub fn public(self) -> (&'static str, String) {
        match self {
            Workload::Rerank10 => ("/api/v1/rerank", rerank_body("rerank-v3.5", 10)),
            Workload::Rerank100 => ("/api/v1/rerank", rerank_body("rerank-v3.5-d100", 100)),
            Workload::Speech => ("/api/v1/audio/speech", speech_body("tts-1")),
            Workload::SpeechHit => ("/api/v1/audio/speech", speech_body("tts-1-cached")),
            Workload::Rerank10Hit => ("/api/v1/rerank", rerank_body("rerank-v3.5-cached", 10)),
            Workload::SpeechLength => ("/api/v1/audio/speech", speech_body("tts-1-length")),
            Workload::Image => ("/api/v1/images/generations", image_body("seedream-4.0")),
            Workload::Rerank10Https => ("/api/v1/rerank", rerank_body("rerank-v3.5-https", 10)),
            Workload::SpeechHttps => ("/api/v1/audio/speech", speech_body("tts-1-https")),
            Workload::ImageHttps => (
                "/api/v1/images/generations",
                image_body("seedream-4.0-https"),
            ),
            Workload::ImageB64Big => ("/api/v1/images/generations", image_b64_body()),
            Workload::SpeechRealtime
            | Workload::SpeechRealtimeMp3
            | Workload::SpeechRealtimeOpus
            | Workload::SpeechRealtimeAac
            | Workload::SpeechRealtimeFlac => (
                "/api/v1/audio/speech",
                realtime_body(self.realtime_format().unwrap_or("pcm")),
            ),
        }
    }

    /// `(path, body)` of the native request, as the gateway sends it to the fake provider. The
    /// HTTPS workloads' paths start with `/tls`, which sends them to the fake's TLS listener
    /// through the baseline proxy (the fake ignores it; the gateway's HTTPS providers add it).
    pub fn native(self) -> (&'static str, String) {
        match self {
            Workload::Rerank10Https => ("/tls/v2/rerank", rerank_body("rerank-v3.5", 10)),
            Workload::SpeechHttps => ("/tls/v1/audio/speech", native_speech()),
            Workload::ImageHttps => ("/tls/v1/images/generations", native_image()),
            Workload::Rerank10 | Workload::Rerank10Hit => {
                ("/v2/rerank", rerank_body("rerank-v3.5", 10))
            }
            Workload::Rerank100 => ("/d100/v2/rerank", rerank_body("rerank-v3.5", 100)),
            // The Realtime workloads' baseline is the HTTP speech path.
            Workload::Speech
            | Workload::SpeechHit
            | Workload::SpeechRealtime
            | Workload::SpeechRealtimeMp3
            | Workload::SpeechRealtimeOpus
            | Workload::SpeechRealtimeAac
            | Workload::SpeechRealtimeFlac => ("/v1/audio/speech", native_speech()),
            Workload::SpeechLength => ("/length/v1/audio/speech", native_speech()),
            Workload::Image => ("/v1/images/generations", native_image()),
            Workload::ImageB64Big => ("/b64/v1/images/generations", native_gpt_image()),
        }
    }
}

/// A public image request body.
fn image_body(model: &str) -> String {
    format!(r#"{{"model":"{model}","prompt":"{PROMPT}","size":"1024x1024"}}"#)
}

/// The public request of `image-b64-big`: a GPT image model, the image inline.
fn image_b64_body() -> String {
    format!(
        r#"{{"model":"gpt-image-b64","prompt":"{PROMPT}","size":"1024x1024","response_format":"b64_json"}}"#
    )
}

/// The native GPT image request (OpenAI answers GPT image models with base64 only).
fn native_gpt_image() -> String {
    format!(
        r#"{{"model":"gpt-image-2","prompt":"{PROMPT}","n":1,"size":"1024x1024","output_format":"png"}}"#
    )
}

/// The native Seedream request.
fn native_image() -> String {
    format!(
        r#"{{"model":"doubao-seedream-4-0-250828","prompt":"{PROMPT}","size":"1024x1024","response_format":"url","watermark":false}}"#
    )
}

/// The native speech request (the same for both speech workloads: the provider's path differs).
fn native_speech() -> String {
    format!(
        r#"{{"model":"tts-1","input":"{SPEECH}","voice":"alloy","response_format":"mp3","speed":1.0}}"#
    )
}

const PROMPT: &str = "a lighthouse at dusk on a rocky shore, oil painting";
const SPEECH: &str = "Hello from Switchyard. This sentence is synthesized by the fake provider.";

const SENTENCES: &[&str] = &[
    "Carson City is the capital city of the American state of Nevada.",
    "The Commonwealth of the Northern Mariana Islands is a group of islands in the Pacific Ocean.",
    "Washington, D.C. is the capital of the United States and a federal district.",
    "Capitalization in English grammar is the use of a capital letter at the start of a word.",
    "Capital punishment has existed in the United States since before it was a country.",
    "Paris has been the capital of France since the tenth century, with brief interruptions.",
    "The Yellowstone caldera is a volcanic caldera and supervolcano in Yellowstone National Park.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The Great Barrier Reef is the world's largest coral reef system, off Queensland, Australia.",
    "Rust is a general-purpose programming language emphasizing performance and memory safety.",
    "Mount Kilimanjaro is a dormant volcano in Tanzania and the highest mountain in Africa.",
    "The Rosetta Stone is a stele inscribed with three versions of a decree issued in 196 BC.",
];

/// Document `i`: three sentences (about 230 characters, 45 tokens), different for every `i`.
pub fn document(i: usize) -> String {
    let n = SENTENCES.len();
    format!(
        "{} {} {} (Passage {i}.)",
        SENTENCES[i % n],
        SENTENCES[(i * 5 + 3) % n],
        SENTENCES[(i * 7 + 1) % n]
    )
}

/// A rerank request body for `model` with `docs` documents.
pub fn rerank_body(model: &str, docs: usize) -> String {
    let documents: Vec<String> = (0..docs).map(|i| format!("\"{}\"", document(i))).collect();
    format!(
        r#"{{"model":"{model}","query":"What is the capital of the United States?","documents":[{}]}}"#,
        documents.join(",")
    )
}

/// A public speech request body.
pub fn speech_body(model: &str) -> String {
    format!(r#"{{"model":"{model}","input":"{SPEECH}","voice":"alloy"}}"#)
}

/// A public speech request to the Realtime model in `format`.
pub fn realtime_body(format: &str) -> String {
    format!(
        r#"{{"model":"gpt-realtime-2.1-mini","input":"{SPEECH}","voice":"alloy","response_format":"{format}"}}"#
    )
}

/// A complete HTTP/1.1 POST with a JSON body. `gateway` picks the caller's key header, otherwise
/// the provider key is sent as the gateway would.
pub fn http_post(path: &str, body: &str, gateway: bool) -> Vec<u8> {
    let auth = if gateway {
        format!("Service-API-Key: {KEY}")
    } else {
        format!("Authorization: Bearer {PROVIDER_KEY}")
    };
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Cohere v2 answer with `n` results, best first.
pub fn rerank_answer(n: usize) -> String {
    let results: Vec<String> = (0..n)
        .map(|i| {
            let index = (i * 7) % n;
            format!(
                "{{\"index\":{index},\"relevance_score\":{:.6}}}",
                0.99 - i as f64 * 0.009
            )
        })
        .collect();
    format!(
        "{{\"id\":\"07734bd2-2473-4f07-94e1-0d9f0e6843cf\",\"results\":[{}],\"meta\":{{\"api_version\":{{\"version\":\"2\"}},\"billed_units\":{{\"search_units\":1}}}}}}",
        results.join(",")
    )
}

/// OpenAI image answer.
pub const IMAGE_ANSWER: &str = r#"{"created":1700000000,"data":[{"url":"https://oaidalleapiprodscus.blob.core.windows.net/private/org-bench/user-bench/img-abc123.png?st=2024-01-01T00%3A00%3A00Z&se=2024-01-01T02%3A00%3A00Z&sp=r&sig=abcdefghijklmnopqrstuvwxyz0123456789","revised_prompt":"A lighthouse standing on a rocky shore at dusk, its beam sweeping across a calm purple sea under the first stars."}]}"#;

/// Bytes of the image in the `image-b64-big` answer (its base64 is 4/3 of this: 1,572,864
/// characters).
pub const BIG_IMAGE_BYTES: usize = 1_179_648;

/// OpenAI's answer to a GPT image request: one image inline (`b64_json` of [`BIG_IMAGE_BYTES`])
/// and the token usage GPT image models report.
pub fn image_b64_answer() -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(audio(BIG_IMAGE_BYTES));
    format!(
        r#"{{"created":1700000000,"data":[{{"b64_json":"{b64}"}}],"output_format":"png","size":"1024x1024","quality":"medium","usage":{{"input_tokens":50,"input_tokens_details":{{"image_tokens":0,"text_tokens":50}},"output_tokens":1056,"total_tokens":1106}}}}"#
    )
}

/// Audio-like bytes.
pub fn audio(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 131 % 251) as u8).collect()
}
