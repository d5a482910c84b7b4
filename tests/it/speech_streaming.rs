//! Translated speech streams are flushed event by event: each event reaches the client within a
//! few milliseconds of the provider sending it, for a provider whose raw audio becomes SSE
//! (ElevenLabs) and one whose own SSE (hex audio) is translated (MiniMax).

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::speech_conformance::{decoded_audio, public_events};
use support::{client, post, TestGateway};

const GAP: Duration = Duration::from_millis(120);
/// How far the time between two events may drift from the provider's `GAP` (scheduler noise
/// on a small shared machine included). Half the gap: a gateway that held an event back until
/// the next one (or the end) delivers the two together, a drift of the whole gap.
const SLACK: Duration = Duration::from_millis(60);

/// Each chunk after the first must arrive `GAP` after its predecessor, within `SLACK`: nothing
/// was held back and nothing was batched. Measured between neighbours rather than from the
/// first chunk, so one late wake-up of the test's reader is not counted against every event after.
fn assert_paced(resp: &client::Response, events: usize) {
    assert!(
        resp.chunks.len() >= events,
        "{} chunks for {events} events: batched",
        resp.chunks.len()
    );
    for (i, pair) in resp.chunks.windows(2).enumerate().take(events - 1) {
        let actual = pair[1].0 - pair[0].0;
        let drift = actual.abs_diff(GAP);
        assert!(
            drift <= SLACK,
            "event {} arrived {actual:?} after event {i}, expected {GAP:?}",
            i + 1
        );
    }
}

#[test]
fn raw_audio_becomes_sse_event_by_event() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Event timing is measured to the millisecond: nothing heavy may run beside what follows.
    let _alone = support::timing_lock();
    let pieces: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 2000]).collect();
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (if i == 0 { Duration::ZERO } else { GAP }, p.clone()))
            .collect(),
        false,
    ));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "eleven-multilingual-v2", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(events.len(), 6, "{events:?}");
    assert_eq!(decoded_audio(&events), pieces.concat());
    assert_paced(&resp, 5);
}

#[test]
fn provider_sse_is_translated_event_by_event() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Event timing is measured to the millisecond: nothing heavy may run beside what follows.
    let _alone = support::timing_lock();
    let pieces: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i + 1; 1000]).collect();
    let mut events: Vec<(Duration, String)> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ev = json!({"data": {"audio": hex::encode(p), "status": 1}, "base_resp": {"status_code": 0, "status_msg": ""}});
            (
                if i == 0 { Duration::ZERO } else { GAP },
                format!("data: {ev}\n\n"),
            )
        })
        .collect();
    let last = json!({"data": {"audio": hex::encode(pieces.concat()), "status": 2}, "extra_info": {"audio_format": "mp3"}, "base_resp": {"status_code": 0, "status_msg": "success"}});
    events.push((GAP, format!("data: {last}\n\n")));
    fake.push(Reply::sse(events));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "speech-2.8-hd", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    // The final event's aggregate copy of the audio is not sent twice.
    assert_eq!(decoded_audio(&public_events(&resp)), pieces.concat());
    assert_paced(&resp, 4);
}

/// A `tts-1` speech request sent on a raw socket, to read the answer's bytes as they come.
fn raw_speech_request(gw: &TestGateway) -> std::net::TcpStream {
    use std::io::Write;
    let body = json!({"model": "tts-1", "input": "hi"}).to_string();
    let mut s = std::net::TcpStream::connect(gw.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: gw\r\nService-API-Key: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        support::KEY,
        body.len()
    )
    .unwrap();
    s
}

/// Raw audio the provider sends with a `Content-Length` is passed through with that length (no
/// chunked framing), and still piece by piece: the first piece reaches the client when the
/// provider sends it, not when the body is complete (Pingora buffers a body of known length;
/// the gateway flushes each piece).
#[test]
fn raw_audio_with_a_length_keeps_it_and_streams() {
    use std::io::Read;
    use std::time::Instant;

    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let _alone = support::timing_lock();
    let pieces: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i + 1; 2000]).collect();
    fake.push(Reply::paced(
        200,
        "audio/mpeg",
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (if i == 0 { Duration::ZERO } else { GAP }, p.clone()))
            .collect(),
    ));
    let mut s = raw_speech_request(&gw);
    // Everything received, with when the first piece and the whole body were in.
    let mut got = Vec::new();
    let mut head_len = None;
    let mut first_piece_at = None;
    let total: usize = pieces.iter().map(Vec::len).sum();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        if head_len.is_none() {
            head_len = got.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
        }
        let Some(h) = head_len else { continue };
        let have = got.len() - h;
        if first_piece_at.is_none() && have >= pieces[0].len() {
            first_piece_at = Some(Instant::now());
        }
        if have >= total {
            break;
        }
    }
    let done_at = Instant::now();
    let h = head_len.unwrap();
    let head = String::from_utf8_lossy(&got[..h]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("content-length: {total}\r\n")),
        "{head}"
    );
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert_eq!(
        &got[h..],
        &pieces.concat()[..],
        "the audio as sent, no framing"
    );
    let spread = done_at - first_piece_at.unwrap();
    assert!(
        spread + SLACK >= GAP * 4,
        "the first piece was held back: it arrived {spread:?} before the end"
    );
}

/// Chunked raw audio that the provider sends whole (20 KB, more than the 4 KiB Pingora reads an
/// answer's head with) reaches the client whole: one chunk, the audio as sent, not re-cut at the
/// provider connection's read size.
#[test]
fn chunked_audio_that_arrived_whole_goes_out_as_one_chunk() {
    use std::io::Read;

    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let audio: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        vec![(Duration::ZERO, audio.clone())],
        false,
    ));
    let mut s = raw_speech_request(&gw);
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while !got.ends_with(b"\r\n0\r\n\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let h = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&got[..h]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    // One chunk: its size line, the audio as sent, the terminator.
    let body = &got[h..];
    let line = body.windows(2).position(|w| w == b"\r\n").unwrap();
    let size = usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap(), 16).unwrap();
    assert_eq!(size, audio.len(), "the first chunk is not the whole audio");
    assert!(
        body[line + 2..] == [&audio[..], b"\r\n0\r\n\r\n"].concat()[..],
        "the audio as sent, then the terminator"
    );
}
