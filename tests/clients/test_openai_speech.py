"""OpenAI's Python SDK, speech, against the gateway with only its base URL and key changed:
`audio.speech.create` to a file, `with_streaming_response`, and `stream_format="sse"` events."""

import base64
import json

from openai_fake import AUDIO, openai_gateway


def test_speech_to_a_file(gateway, fake, tmp_path):
    gw, client = openai_gateway(gateway, fake)
    out = tmp_path / "hello.mp3"
    resp = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello from Switchyard")
    resp.write_to_file(out)
    assert out.read_bytes() == AUDIO
    assert resp.response.headers["content-type"] == "audio/mpeg"
    (sent,) = fake.requests
    assert sent.path == "/v1/audio/speech"
    assert sent.headers["authorization"] == "Bearer sk-x", "the provider's key, not the caller's"
    body = sent.json()
    assert (body["model"], body["voice"], body["input"]) == ("tts-1", "alloy", "Hello from Switchyard")
    assert body.get("response_format", "mp3") == "mp3"


def test_speech_streamed_with_streaming_response(gateway, fake, tmp_path):
    gw, client = openai_gateway(gateway, fake)
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="coral", input="Hello", instructions="Speak warmly", speed=2,
    ) as resp:
        assert resp.headers["content-type"] == "audio/mpeg"
        got = b"".join(resp.iter_bytes(1024))
    assert got == AUDIO
    body = fake.requests[0].json()
    assert (body["instructions"], body["speed"]) == ("Speak warmly", 2)


def test_speech_as_server_sent_events(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input="Hello", stream_format="sse",
    ) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data:"):]) for line in resp.iter_lines() if line.startswith("data:")]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) > 1
    assert b"".join(base64.b64decode(e["audio"]) for e in deltas) == AUDIO
    assert events[-1] == {"type": "speech.audio.done",
                          "usage": {"input_tokens": 5, "output_tokens": 80, "total_tokens": 85}}
    assert fake.requests[0].json()["stream_format"] == "sse"
