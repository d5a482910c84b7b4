//! One cached speech answer, two forms: an entry made by a raw-audio request serves an SSE
//! request with the same fields and the other way round (`stream_format` variants of one request
//! share one entry: the audio is the same). An entry of the request's own form is served byte for
//! byte; the other form is re-framed here: SSE events become the audio their deltas carry, and
//! audio becomes the gateway's delta events and closing event, as a miss writes them.

use base64::Engine;
use bytes::{Bytes, BytesMut};

use crate::cache::{Entry, Form};
use crate::engine::speech::{delta_event, done_event};
use crate::stream::audio::SpeechUsage;
use crate::stream::sse::{data_of, EventSplitter};

/// Audio per re-framed delta event: a few network writes' worth, so a client playing an SSE
/// hit gets its first audio at once rather than after the whole file is encoded.
const DELTA_BYTES: usize = 16 << 10;

/// `entry`'s body in the form a request with `sse` is answered in, as pieces to write; `None`
/// when an entry of the other form cannot be read as one (served as a miss instead).
pub(super) fn pieces(entry: &Entry, sse: bool, input: &str) -> Option<Vec<Bytes>> {
    match (entry.meta.form, sse) {
        (Form::Events, true) | (Form::Body, false) => Some(vec![entry.body.clone()]),
        (Form::Events, false) => audio_of_events(&entry.body).map(|a| vec![a]),
        (Form::Body, true) => {
            let mut out: Vec<Bytes> = entry.body.chunks(DELTA_BYTES).map(delta_event).collect();
            let (input_tokens, output_tokens) = entry.meta.tokens;
            out.push(done_event(
                SpeechUsage {
                    input_tokens,
                    output_tokens,
                },
                input,
            ));
            Some(out)
        }
    }
}

/// The audio an SSE answer's delta events carry, in order; `None` unless the events are the
/// gateway's (deltas, then the closing event) and every delta decodes.
fn audio_of_events(body: &Bytes) -> Option<Bytes> {
    let mut events = EventSplitter::new();
    events.push(body);
    let mut audio = BytesMut::new();
    let mut done = false;
    let mut next = events.next_event();
    while let Some(event) = next {
        let data = data_of(&event)?;
        let v: serde_json::Value = serde_json::from_str(&data).ok()?;
        match v.get("type").and_then(serde_json::Value::as_str)? {
            "speech.audio.delta" if !done => {
                let b64 = v.get("audio").and_then(serde_json::Value::as_str)?;
                let piece = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
                audio.extend_from_slice(&piece);
            }
            "speech.audio.done" => done = true,
            _ => return None,
        }
        next = events.next_event().or_else(|| events.remainder());
    }
    (done && !audio.is_empty()).then(|| audio.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Meta;

    fn entry(body: Bytes, form: Form, tokens: (Option<u64>, Option<u64>)) -> Entry {
        Entry {
            body,
            meta: Meta {
                form,
                tokens,
                ..Meta::default()
            },
        }
    }

    fn audio(n: usize) -> Bytes {
        (0..n)
            .map(|i| (i * 31 % 251) as u8)
            .collect::<Vec<_>>()
            .into()
    }

    #[test]
    fn an_entry_of_the_requests_form_is_served_as_it_is() {
        let raw = entry(audio(100), Form::Body, (None, None));
        assert_eq!(pieces(&raw, false, "hi"), Some(vec![raw.body.clone()]));
        let sse = entry(
            Bytes::from_static(b"data: x\n\n"),
            Form::Events,
            (None, None),
        );
        assert_eq!(pieces(&sse, true, "hi"), Some(vec![sse.body.clone()]));
    }

    #[test]
    fn audio_becomes_events_and_back() {
        let sound = audio(40_000);
        let raw = entry(sound.clone(), Form::Body, (Some(5), Some(60)));
        let events: Vec<u8> = pieces(&raw, true, "hello there").unwrap().concat();
        // Three deltas of at most 16 KiB and the closing event with the reported usage.
        let text = String::from_utf8(events.clone()).unwrap();
        assert_eq!(text.matches("speech.audio.delta").count(), 3);
        let last = text.trim_end().rsplit("\n\n").next().unwrap();
        let done: serde_json::Value =
            serde_json::from_str(&data_of(last.as_bytes()).unwrap()).unwrap();
        assert_eq!(done["type"], "speech.audio.done");
        assert_eq!(
            done["usage"],
            serde_json::json!({"input_tokens": 5, "output_tokens": 60, "total_tokens": 65})
        );
        let back = entry(events.into(), Form::Events, (None, None));
        assert_eq!(pieces(&back, false, "hello there"), Some(vec![sound]));
    }

    #[test]
    fn events_that_are_not_a_whole_answer_are_not_audio() {
        let delta = delta_event(b"abc");
        // No closing event: a cut stream (never stored, but never trusted either).
        let cut = entry(delta.clone(), Form::Events, (None, None));
        assert_eq!(pieces(&cut, false, ""), None);
        let error = [
            delta.as_ref(),
            b"data: {\"type\":\"error\",\"error\":{}}\n\n".as_ref(),
        ]
        .concat();
        assert_eq!(
            pieces(&entry(error.into(), Form::Events, (None, None)), false, ""),
            None
        );
        let whole = [
            delta.as_ref(),
            done_event(SpeechUsage::default(), "x").as_ref(),
        ]
        .concat();
        assert_eq!(
            pieces(&entry(whole.into(), Form::Events, (None, None)), false, ""),
            Some(vec![Bytes::from_static(b"abc")])
        );
    }
}
