//! An in-house rerank server as a Switchyard provider, added from outside the crate: its adapter
//! and error classification written against `switchyard::provider_api`, registered as the kind
//! `inhouse-rerank`, bound to the public model `inhouse-ranker` in the YAML, and the gateway run
//! with it.
//!
//! ```text
//! cargo run --example in_house_provider
//! curl -s 127.0.0.1:8080/api/v1/rerank -H 'Service-API-Key: example-key' \
//!   -d '{"model":"inhouse-ranker","query":"a fruit","documents":["a car","an apple","a pear"]}'
//! ```
//!
//! The in-house server's API: `POST /v1/score` with `{"model", "query", "candidates"}` and the
//! token in `x-inhouse-token`; it answers `{"scores": [...]}`, one per candidate in order, or
//! `{"error": {"code", "message"}}`. Set `INHOUSE_RERANK_URL` to a real one; without it the
//! example starts a stand-in on a free loopback port (it scores by shared words).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use switchyard::provider_api::*;

/// The gateway's configuration: one entry point, one key, the in-house account and its model.
/// The account takes every key any provider account takes (`timeouts`, `region_base_urls`,
/// `tls.ca_file`, ...); the model's `family` says what the server accepts (a rerank family with
/// no native fields), narrowed by `capabilities`.
const CONFIG: &str = r#"
version: 1
switchyard:
  listeners:
    - {name: main, address: "127.0.0.1:8080"}
  auth:
    api_keys:
      - {name: example, key: example-key}
  providers:
    inhouse:
      kind: inhouse-rerank
      api_key: "${INHOUSE_RERANK_TOKEN:-dev-token}"
      base_url: "${INHOUSE_RERANK_URL}"
      timeouts: {read_ms: 5000}
  models:
    inhouse-ranker:
      family: jina-rerank
      capabilities: {max_documents: 256}
      targets: [{provider: inhouse, model: ranker-v3}]
"#;

// ---- the adapter: public request to native request, native answer to public result -------------

#[derive(serde::Serialize)]
struct Score<'a> {
    model: &'a str,
    query: &'a str,
    /// The caller's documents as the JSON literals they sent, copied without re-escaping.
    candidates: &'a [JsonStr<'a>],
}

fn score_request(target: &Target, req: &RerankRequest<'_>) -> Result<NativeRequest, GatewayError> {
    let body = Score {
        model: &target.native_model,
        query: req.query.as_str(),
        candidates: &req.documents,
    };
    // Native fields the model's family lets callers send travel after the known ones.
    Ok(NativeRequest::post_json(
        "/v1/score",
        json_with_extra(&body, &req.passthrough)?,
    ))
}

fn score_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    _headers: &HeaderMap,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    #[derive(serde::Deserialize)]
    struct Scores {
        scores: Vec<f64>,
    }
    let answer: Scores = serde_json::from_slice(body)
        .map_err(|e| bad_answer(provider, format!("not a scores answer: {e}")))?;
    if answer.scores.len() != req.documents.len() {
        return Err(bad_answer(provider, "not one score per candidate"));
    }
    // Sorting, `top_n`, the documents and usage (the gateway's own token count) are built here.
    req.build(
        answer.scores.into_iter().enumerate(),
        None,
        QueryCounting::Once,
        Default::default(),
    )
    .map_err(|m| bad_answer(provider, m))
}

// ---- the error classification: what a non-2xx answer means for the caller and for retries -----

fn classify(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: Detail,
    }
    #[derive(serde::Deserialize)]
    struct Detail {
        code: String,
        message: String,
    }
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    // Only the server's reason reaches the caller, with the key redacted should it be quoted.
    let message = match &parsed {
        Some(b) => provider.redact(&b.error.message),
        None => format!("HTTP {status}"),
    };
    // By status first (429 rate limited, 5xx failure, 401/403 key refused, other 4xx the
    // caller's), then the server's own codes.
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    match parsed.as_ref().map(|b| b.error.code.as_str()) {
        Some("busy") => err.kind = UpstreamErrorKind::RateLimited, // retried
        Some("model_not_loaded") => err.kind = UpstreamErrorKind::UnknownModel, // 503 to the caller
        Some("bad_input") => err.kind = UpstreamErrorKind::InvalidRequest, // 400 to the caller
        _ => {}
    }
    err
}

// ---- the kind, registered ------------------------------------------------------------------------

fn inhouse_rerank(account: &KindConfig<'_>) -> Result<Kind, String> {
    Ok(Kind {
        // The account's `api_key` in the server's own header; no key: the account is disabled.
        auth: keyed(account.key(), |key| Auth::header("x-inhouse-token", key))?,
        errors: classify,
        remote: true,
        result_hosts: &[],
        adapters: Adapters {
            rerank: Some(Box::new(RerankFns {
                request: score_request,
                response: score_response,
            })),
            ..Adapters::default()
        },
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    switchyard::logging::init()?;
    let base_url = match std::env::var("INHOUSE_RERANK_URL") {
        Ok(url) => url,
        Err(_) => stand_in()?,
    };

    let mut kinds = ProviderKinds::new();
    kinds.register("inhouse-rerank", inhouse_rerank)?;

    let lookup = |name: &str| match name {
        "INHOUSE_RERANK_URL" => Some(base_url.clone()),
        _ => std::env::var(name).ok(),
    };
    let settings = switchyard::config::load_str_with(CONFIG, &lookup, &kinds)
        .map_err(|problems| problems.join("\n"))?;
    log::info!("in-house ranker at {base_url}; gateway on 127.0.0.1:8080");

    // The server the `switchyard` binary builds, with this configuration.
    switchyard::server::build(None, settings).run_forever()
}

// ---- a stand-in for the in-house server (not part of the integration) ----------------------

/// Serve the in-house API on a free loopback port, on a thread; its base URL.
fn stand_in() -> std::io::Result<String> {
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
    let (status, reply) = match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(req) => {
            let words = |s: &str| {
                s.split_whitespace()
                    .map(str::to_lowercase)
                    .collect::<Vec<_>>()
            };
            let query = words(req["query"].as_str().unwrap_or_default());
            let scores: Vec<f64> = req["candidates"]
                .as_array()
                .map(|docs| {
                    docs.iter()
                        .map(|d| {
                            let doc = words(d.as_str().unwrap_or_default());
                            let shared = doc.iter().filter(|w| query.contains(w)).count();
                            shared as f64 / (doc.len().max(1) as f64)
                        })
                        .collect()
                })
                .unwrap_or_default();
            ("200 OK", serde_json::json!({ "scores": scores }))
        }
        Err(e) => (
            "400 Bad Request",
            serde_json::json!({"error": {"code": "bad_input", "message": e.to_string()}}),
        ),
    };
    let reply = reply.to_string();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{reply}",
        reply.len()
    )
}
