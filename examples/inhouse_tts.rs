//! An in-house TTS server whose answer is JSON with base64 audio, as a Switchyard provider
//! added from outside the crate: its adapter, speech decoding and error classification written
//! against `switchyard::provider_api`, registered as the kind `inhouse-tts`, bound to the public
//! model `inhouse-voice`, and the gateway run with it.
//!
//! ```text
//! cargo run --example inhouse_tts
//! curl -s 127.0.0.1:8080/api/v1/audio/speech -H 'Service-API-Key: example-key' -o hello.mp3 \
//!   -d '{"model":"inhouse-voice","input":"Hello there","voice":"alloy"}'
//! curl -sN 127.0.0.1:8080/api/v1/audio/speech -H 'Service-API-Key: example-key' \
//!   -d '{"model":"inhouse-voice","input":"Hello there","voice":"alloy","stream_format":"sse"}'
//! ```
//!
//! The in-house server's API: `POST /v1/synthesize` with `{"model", "voice", "text", "format",
//! "speed", "stream"}` and the key as a Bearer token. Without `stream` it answers one JSON
//! document, `{"audio": "<base64>", "characters": n}`; with `stream: true`, server-sent events
//! whose data is `{"audio": "<base64>"}` for each piece and `{"done": true, "characters": n}`
//! at the end. Either may carry `{"error": {"code", "message"}}` instead, with status 200 too.
//! The caller gets the audio itself (or, with `stream_format: sse`, Switchyard's own speech
//! events), whatever the server's framing: the decoding below does the translation.
//! `docs/guide/own-provider.md` walks through it. Set `INHOUSE_TTS_URL` to a real server;
//! without it the example starts a stand-in on a free loopback port.

use std::sync::Arc;

use switchyard::provider_api::*;

/// The gateway's configuration: one entry point, one key, the in-house account and its model.
/// The model's `family` says what callers may ask of the server (OpenAI's speech parameters:
/// formats, speeds), and `capabilities` that it also streams (`stream_format: sse`) in two of
/// them.
pub const CONFIG: &str = r#"
version: 1
switchyard:
  listeners:
    - {name: main, address: "127.0.0.1:8080"}
  auth:
    api_keys:
      - {name: example, key: example-key}
  providers:
    studio:
      kind: inhouse-tts
      api_key: "${INHOUSE_TTS_KEY:-dev-key}"
      base_url: "${INHOUSE_TTS_URL}"
      timeouts: {read_ms: 20000}
  models:
    inhouse-voice:
      family: openai-tts
      capabilities: {sse_formats: [mp3, pcm]}
      targets: [{provider: studio, model: studio-v2}]
"#;

// ---- the adapter: the public request to the native one ------------------------------------------

#[derive(serde::Serialize)]
struct Synthesize<'a> {
    model: &'a str,
    voice: &'a str,
    text: &'a str,
    format: &'a str,
    speed: f64,
    /// The server's own streaming, asked for when the caller wants events: audio then reaches
    /// the caller piece by piece instead of after the whole document.
    stream: bool,
}

fn synthesize(target: &Target, req: &SpeechRequest<'_>) -> Result<NativeRequest, GatewayError> {
    let body = Synthesize {
        model: &target.native_model,
        voice: req.voice.as_str(),
        text: req.input.as_str(),
        format: req.response_format,
        speed: req.speed,
        stream: req.sse,
    };
    // Native fields the model's family lets callers send travel after the known ones.
    Ok(NativeRequest::post_json(
        "/v1/synthesize",
        json_with_extra(&body, &req.passthrough)?,
    ))
}

// ---- the decoding: the native 2xx body to audio -------------------------------------------------

/// What the server puts in its document, and in each event's data.
#[derive(serde::Deserialize)]
struct Piece {
    #[serde(default)]
    audio: Option<String>,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    error: Option<ServerError>,
}

#[derive(serde::Deserialize)]
struct ServerError {
    code: String,
    message: String,
}

/// A piece's JSON, its error refused (a 200 that carries an error is a bad answer, retried).
fn piece(provider: &Provider, json: &[u8]) -> Result<Piece, UpstreamError> {
    let piece: Piece = serde_json::from_slice(json)
        .map_err(|e| bad_answer(provider, format!("not the synthesis answer: {e}")))?;
    match &piece.error {
        Some(e) => Err(bad_answer(provider, format!("{}: {}", e.code, e.message))),
        None => Ok(piece),
    }
}

/// The events of a streamed answer: each piece's audio out as it comes, the end marker
/// required (a stream cut before it is an error, never a short success).
#[derive(Default)]
struct Events {
    done: bool,
}

impl SseSpeech for Events {
    fn data(
        &mut self,
        provider: &Provider,
        data: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<(), UpstreamError> {
        let piece = piece(provider, data.as_bytes())?;
        if let Some(audio) = piece.audio {
            out.push(SpeechDecoding::base64_audio(provider, &audio)?);
        }
        self.done |= piece.done;
        Ok(())
    }

    fn end(&mut self, provider: &Provider) -> Result<Finished, UpstreamError> {
        if !self.done {
            return Err(bad_answer(
                provider,
                "the stream ended before its done event",
            ));
        }
        Ok(Finished::Done(SpeechUsage::default()))
    }
}

fn decoding(provider: &Arc<Provider>, req: &SpeechRequest<'_>) -> SpeechDecoding {
    if req.sse {
        return SpeechDecoding::sse(provider, Events::default());
    }
    // One document: buffered whole (up to the account's `max_response_bytes`), then decoded.
    SpeechDecoding::json_document(provider, |provider, body, out| {
        let piece = piece(provider, body)?;
        let audio = piece
            .audio
            .ok_or_else(|| bad_answer(provider, "no audio in the answer"))?;
        out.push(SpeechDecoding::base64_audio(provider, &audio)?);
        Ok(Finished::Done(SpeechUsage::default()))
    })
}

// ---- the error classification: a non-2xx answer ------------------------------------------------

fn classify(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: ServerError,
    }
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    // Only the server's reason reaches the caller, with the key redacted should it be quoted.
    let message = match &parsed {
        Some(b) => provider.redact(&b.error.message),
        None => format!("HTTP {status}"),
    };
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    match parsed.as_ref().map(|b| b.error.code.as_str()) {
        Some("text_too_long") => err.kind = UpstreamErrorKind::InvalidRequest, // the caller's 400
        Some("voice_not_loaded") => err.kind = UpstreamErrorKind::UnknownModel, // next target
        _ => {}
    }
    err
}

// ---- the kind, registered -----------------------------------------------------------------------

/// The host's provider kinds: `inhouse-tts`.
pub fn kinds() -> ProviderKinds {
    let mut kinds = ProviderKinds::new();
    let registered = kinds.register("inhouse-tts", |account| {
        Ok(Kind {
            // The account's `api_key` as a Bearer token; no key: the account is disabled.
            auth: keyed(account.key(), Auth::bearer)?,
            errors: classify,
            remote: true,
            result_hosts: &[],
            adapters: Adapters {
                speech: Some(Box::new(SpeechFns {
                    request: synthesize,
                    decoding: Some(decoding),
                })),
                ..Adapters::default()
            },
        })
    });
    // A fresh registry holds no `inhouse-tts`: registering cannot collide.
    if let Err(e) = registered {
        log::error!("{e}");
    }
    kinds
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    switchyard::logging::init()?;
    let base_url = match std::env::var("INHOUSE_TTS_URL") {
        Ok(url) => url,
        Err(_) => stand_in::start()?,
    };
    let lookup = |name: &str| match name {
        "INHOUSE_TTS_URL" => Some(base_url.clone()),
        _ => std::env::var(name).ok(),
    };
    let settings = switchyard::config::load_str_with(CONFIG, &lookup, &kinds())
        .map_err(|problems| problems.join("\n"))?;
    log::info!("in-house TTS at {base_url}; gateway on 127.0.0.1:8080");
    switchyard::server::build(None, settings).run_forever()
}

/// A stand-in for the in-house server (not part of the integration): a short tone-like byte
/// pattern as "audio", in the server's JSON or event framing.
mod stand_in {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};

    use base64::Engine;

    /// Serve the in-house API on a free loopback port, on a thread; its base URL.
    pub fn start() -> std::io::Result<String> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}", listener.local_addr()?);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                // One request per connection; a broken one is dropped.
                let _ = answer(stream);
            }
        });
        Ok(url)
    }

    fn answer(stream: TcpStream) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let text = req["text"].as_str().unwrap_or_default();
        let audio: Vec<u8> = text.bytes().flat_map(|b| [b, !b]).collect();
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let mut stream = stream;
        if req["stream"].as_bool() == Some(true) {
            let mut events = String::new();
            for part in audio.chunks(8) {
                events += &format!("data: {}\n\n", serde_json::json!({"audio": b64(part)}));
            }
            events += &format!("data: {}\n\n", serde_json::json!({"done": true}));
            return write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{events}",
                events.len()
            );
        }
        let reply = serde_json::json!({"audio": b64(&audio), "characters": text.len()}).to_string();
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{reply}",
            reply.len()
        )
    }
}
