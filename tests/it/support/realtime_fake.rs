//! A fake of OpenAI's Realtime API: a WebSocket server on 127.0.0.1 speaking the documented event
//! sequence (`session.created` on open; `session.updated` for a `session.update`; for a
//! `response.create`: `response.created`, `response.output_audio.delta`s of base64 PCM,
//! `response.output_audio.done`, `response.done` with `usage`), recording each session's handshake
//! and the client events it received. Each connection takes the next [`Script`] (or the default):
//! it can refuse the handshake with an HTTP error, send an `error` event, stall, cut the socket
//! mid-stream, or hold its audio after the first delta until the test releases it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// What one connection does.
#[derive(Clone)]
pub enum Script {
    /// Speak `pieces` (PCM, one delta each), then `response.done` with `usage` (text tokens in,
    /// audio tokens out). With `hold`, everything after the first delta waits for it.
    Speak {
        pieces: Vec<Vec<u8>>,
        usage: (u64, u64),
        hold: Option<Arc<Notify>>,
    },
    /// Refuse the handshake with this HTTP status and JSON body.
    Refuse(u16, Value),
    /// Answer `response.create` with an `error` event (`type`, `code`).
    Error(&'static str, &'static str),
    /// Answer `response.create` with nothing.
    Stall,
    /// Send this many deltas of the default audio, then drop the connection.
    Cut(usize),
    /// `response.done` with this status (and `status_details`), with no audio before it.
    Ends(&'static str, Value),
}

/// The default audio: 3 deltas of 4,800 samples (0.2 s each at 24 kHz).
pub fn pcm_pieces() -> Vec<Vec<u8>> {
    (0..3u8)
        .map(|k| {
            (0..4800u32)
                .flat_map(|i| (((i * 7 + u32::from(k)) % 2000) as i16 - 1000).to_le_bytes())
                .collect()
        })
        .collect()
}

/// One session as the fake saw it.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The handshake's path with its query.
    pub path: String,
    /// The handshake's headers (names lowercase).
    pub headers: Vec<(String, String)>,
    /// The client events received, in order.
    pub events: Vec<Value>,
}

impl Session {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The received event of type `kind`.
    pub fn event(&self, kind: &str) -> &Value {
        self.events
            .iter()
            .find(|e| e["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} event in {:?}", self.events))
    }
}

#[derive(Default)]
struct Shared {
    scripts: Mutex<Vec<Script>>,
    sessions: Mutex<Vec<Session>>,
}

/// The fake; it stops with the test process (its thread serves until then).
pub struct RealtimeFake {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl RealtimeFake {
    pub fn start() -> RealtimeFake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let inner = Arc::clone(&shared);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((stream, _)) = listener.accept().await {
                    let script = {
                        let mut s = inner.scripts.lock().unwrap();
                        (!s.is_empty()).then(|| s.remove(0))
                    };
                    let script = script.unwrap_or_else(default_script);
                    tokio::spawn(serve(stream, script, Arc::clone(&inner)));
                }
            });
        });
        RealtimeFake { addr, shared }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The next connection follows `script`.
    pub fn push(&self, script: Script) {
        self.shared.scripts.lock().unwrap().push(script);
    }

    pub fn sessions(&self) -> Vec<Session> {
        self.shared.sessions.lock().unwrap().clone()
    }
}

fn default_script() -> Script {
    Script::Speak {
        pieces: pcm_pieces(),
        usage: (20, 90),
        hold: None,
    }
}

// The handshake callback's error type is tungstenite's own (an HTTP answer).
#[allow(clippy::result_large_err)]
async fn serve(stream: TcpStream, script: Script, shared: Arc<Shared>) {
    let index = {
        let mut sessions = shared.sessions.lock().unwrap();
        sessions.push(Session::default());
        sessions.len() - 1
    };
    let refuse = match &script {
        Script::Refuse(status, body) => Some((*status, body.to_string())),
        _ => None,
    };
    let record = Arc::clone(&shared);
    let callback = move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let mut sessions = record.sessions.lock().unwrap();
        let s = &mut sessions[index];
        s.path = req.uri().to_string();
        s.headers = req
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        match refuse {
            None => Ok(resp),
            Some((status, body)) => {
                let mut r = ErrorResponse::new(Some(body));
                *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
                r.headers_mut()
                    .insert("content-type", "application/json".parse().unwrap());
                Err(r)
            }
        }
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let created = json!({"type": "session.created", "event_id": "event_1", "session": {"type": "realtime", "object": "realtime.session", "id": "sess_1", "model": "gpt-realtime-2.1-mini"}});
    if ws.send(Message::text(created.to_string())).await.is_err() {
        return;
    }
    while let Some(Ok(message)) = ws.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let event: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
        shared.sessions.lock().unwrap()[index]
            .events
            .push(event.clone());
        match event["type"].as_str() {
            Some("session.update") => {
                let updated = json!({"type": "session.updated", "event_id": "event_2", "session": event["session"]});
                let _ = ws.send(Message::text(updated.to_string())).await;
            }
            Some("response.create") => {
                let go_on = respond(&mut ws, &script).await;
                if !go_on {
                    return;
                }
            }
            _ => {}
        }
    }
}

fn delta(pcm: &[u8]) -> String {
    json!({"type": "response.output_audio.delta", "event_id": "event_d", "response_id": "resp_1", "item_id": "item_1", "output_index": 0, "content_index": 0, "delta": base64::engine::general_purpose::STANDARD.encode(pcm)}).to_string()
}

fn done(status: &str, details: Value, usage: (u64, u64)) -> String {
    json!({"type": "response.done", "event_id": "event_9", "response": {
        "object": "realtime.response", "id": "resp_1", "status": status, "status_details": details,
        "conversation_id": null, "output_modalities": ["audio"],
        "usage": {"total_tokens": 200 + usage.1, "input_tokens": usage.0, "output_tokens": usage.1 + 12,
            "input_token_details": {"text_tokens": usage.0, "audio_tokens": 0, "cached_tokens": 0},
            "output_token_details": {"text_tokens": 12, "audio_tokens": usage.1}}}})
    .to_string()
}

/// Answer a `response.create` by the script; `false` when the connection is to end.
async fn respond(ws: &mut WebSocketStream<TcpStream>, script: &Script) -> bool {
    let created = json!({"type": "response.created", "event_id": "event_3", "response": {"object": "realtime.response", "id": "resp_1", "status": "in_progress"}});
    let _ = ws.send(Message::text(created.to_string())).await;
    match script {
        Script::Speak {
            pieces,
            usage,
            hold,
        } => {
            for (i, piece) in pieces.iter().enumerate() {
                if i == 1 {
                    if let Some(hold) = hold {
                        hold.notified().await;
                    }
                }
                let _ = ws.send(Message::text(delta(piece))).await;
            }
            let audio_done = json!({"type": "response.output_audio.done", "event_id": "event_8", "response_id": "resp_1", "item_id": "item_1", "output_index": 0, "content_index": 0});
            let _ = ws.send(Message::text(audio_done.to_string())).await;
            let _ = ws
                .send(Message::text(done("completed", Value::Null, *usage)))
                .await;
            // The session stays open, as OpenAI's does: the gateway closes it.
            true
        }
        Script::Error(kind, code) => {
            let error = json!({"type": "error", "event_id": "event_e", "error": {"type": kind, "code": code, "message": format!("fake {code}"), "param": null, "event_id": null}});
            let _ = ws.send(Message::text(error.to_string())).await;
            true
        }
        Script::Stall => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            false
        }
        Script::Cut(n) => {
            for piece in pcm_pieces().iter().take(*n) {
                let _ = ws.send(Message::text(delta(piece))).await;
            }
            let _ = ws.flush().await;
            false
        }
        Script::Ends(status, details) => {
            let _ = ws
                .send(Message::text(done(status, details.clone(), (5, 5))))
                .await;
            true
        }
        Script::Refuse(..) => false,
    }
}
