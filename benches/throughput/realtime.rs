//! The fake provider's Realtime API (OpenAI's speech by `gpt-realtime-*` models): a WebSocket
//! listener on 127.0.0.1, plain TCP, speaking the event sequence `tests/it/support/realtime_fake.rs`
//! documents, with canned events so that the fake does the same small work for every response.
//!
//! On open: `session.created`. A `session.update` is answered `session.updated`; a
//! `response.create` with `response.created`, [`DELTAS`] `response.output_audio.delta` events of
//! [`DELTA_SAMPLES`] samples of 24 kHz 16-bit PCM each (base64; a voiced tone, so that the
//! gateway's encoders meet sound, not silence), `response.output_audio.done` and `response.done`
//! (completed, with usage). The session stays open after its response, as OpenAI's does: any
//! number of `response.create`s are answered on one socket (what `realtime-socket` measures).

use std::io;
use std::sync::Arc;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// Audio deltas per response.
pub const DELTAS: usize = 5;
/// Samples per delta: 0.2 s at 24 kHz, so a response is 1 s of audio (48,000 bytes of PCM).
pub const DELTA_SAMPLES: usize = 4_800;
/// The Realtime API's only PCM rate.
pub const RATE: u32 = 24_000;

/// The events a session sends, built once.
pub struct Events {
    created: String,
    updated: String,
    response_created: String,
    deltas: Vec<String>,
    audio_done: String,
    done: String,
}

/// 1 s of a voiced sound: 150 Hz with two overtones, its loudness moving at 4 Hz (as the
/// `encode_1s_24khz` micro-benchmark's input).
pub fn voiced_pcm(samples: usize) -> Vec<u8> {
    (0..samples)
        .flat_map(|i| {
            let t = i as f64 / f64::from(RATE);
            let tone: f64 = [(150.0, 1.0), (300.0, 0.5), (450.0, 0.25)]
                .iter()
                .map(|(hz, a)| a * (t * hz * std::f64::consts::TAU).sin())
                .sum();
            let level = 0.6 + 0.4 * (t * 4.0 * std::f64::consts::TAU).sin();
            ((tone * level * 9_000.0) as i16).to_le_bytes()
        })
        .collect()
}

impl Events {
    pub fn canned() -> Events {
        let pcm = voiced_pcm(DELTAS * DELTA_SAMPLES);
        let b64 = base64::engine::general_purpose::STANDARD;
        let deltas = pcm
            .chunks(DELTA_SAMPLES * 2)
            .enumerate()
            .map(|(i, piece)| {
                format!(
                    r#"{{"type":"response.output_audio.delta","event_id":"event_d{i}","response_id":"resp_1","item_id":"item_1","output_index":0,"content_index":0,"delta":"{}"}}"#,
                    b64.encode(piece)
                )
            })
            .collect();
        Events {
            created: r#"{"type":"session.created","event_id":"event_1","session":{"type":"realtime","object":"realtime.session","id":"sess_1","model":"gpt-realtime-2.1-mini"}}"#.into(),
            updated: r#"{"type":"session.updated","event_id":"event_2","session":{"type":"realtime"}}"#.into(),
            response_created: r#"{"type":"response.created","event_id":"event_3","response":{"object":"realtime.response","id":"resp_1","status":"in_progress"}}"#.into(),
            deltas,
            audio_done: r#"{"type":"response.output_audio.done","event_id":"event_8","response_id":"resp_1","item_id":"item_1","output_index":0,"content_index":0}"#.into(),
            done: r#"{"type":"response.done","event_id":"event_9","response":{"object":"realtime.response","id":"resp_1","status":"completed","status_details":null,"conversation_id":null,"output_modalities":["audio"],"usage":{"total_tokens":92,"input_tokens":20,"output_tokens":72,"input_token_details":{"text_tokens":20,"audio_tokens":0,"cached_tokens":0},"output_token_details":{"text_tokens":12,"audio_tokens":60}}}}"#.into(),
        }
    }
}

/// Accept WebSocket sessions on `listener` until the process ends.
pub async fn serve(listener: TcpListener, events: Arc<Events>) -> io::Result<()> {
    loop {
        let (s, _) = listener.accept().await?;
        let events = events.clone();
        tokio::spawn(async move {
            let _ = session(s, &events).await;
        });
    }
}

/// One session: the handshake, then every client event answered as the module doc says.
async fn session(s: TcpStream, e: &Events) -> Result<(), String> {
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut ws = tokio_tungstenite::accept_async(s)
        .await
        .map_err(|e| e.to_string())?;
    let send = |text: &str| Message::text(text.to_string());
    ws.send(send(&e.created)).await.map_err(|e| e.to_string())?;
    while let Some(message) = ws.next().await {
        let Ok(Message::Text(text)) = message else {
            return Ok(()); // a close (or anything but an event) ends the session
        };
        // Judged by a search: the fake's own work stays small and the same for every request.
        if text.contains(r#""session.update""#) {
            ws.send(send(&e.updated)).await.map_err(|e| e.to_string())?;
        } else if text.contains(r#""response.create""#) {
            ws.feed(send(&e.response_created))
                .await
                .map_err(|e| e.to_string())?;
            for delta in &e.deltas {
                // Each delta leaves as it is written, as a model's audio arrives in pieces.
                ws.send(send(delta)).await.map_err(|e| e.to_string())?;
            }
            ws.feed(send(&e.audio_done))
                .await
                .map_err(|e| e.to_string())?;
            ws.send(send(&e.done)).await.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
