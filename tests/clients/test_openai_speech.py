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


def test_speech_past_the_shutdown_goes_through_the_realtime_api(gateway, tmp_path):
    """tts-1 past its shutdown (a lifecycle override dates it in the past) is served by its
    successor gpt-realtime-2.1-mini over the Realtime fake; the SDK call is unchanged."""
    import io
    import wave

    from openai import OpenAI

    from conftest import API_KEY
    from realtime_fake import PCM, RealtimeFake

    rt = RealtimeFake()
    try:
        providers = f'    openai: {{kind: openai, api_key: "sk-x", base_url: "{rt.base_url}"}}\n'
        models = (
            "    tts-1: {family: openai-tts, successor: gpt-realtime-2.1-mini, targets: [{provider: openai, "
            "model: tts-1, lifecycle: {deprecated: 2026-01-01, shutdown: 2026-02-01}}]}\n"
            "    gpt-realtime-2.1-mini: {family: openai-realtime, voice_map: {nova: marin}, "
            "targets: [{provider: openai, model: gpt-realtime-2.1-mini}]}\n"
        )
        gw = gateway(None, providers=providers, models=models)
        client = OpenAI(base_url=gw.base, api_key=API_KEY, max_retries=0, timeout=20)

        resp = client.audio.speech.create(model="tts-1", voice="nova", input="Read me", response_format="wav")
        assert resp.response.headers["switchyard-served-model"] == "gpt-realtime-2.1-mini"
        with wave.open(io.BytesIO(resp.content)) as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
            assert w.readframes(w.getnframes()) == PCM

        with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input="Read me too", response_format="pcm",
        ) as streamed:
            assert streamed.headers["content-type"] == "audio/pcm"
            assert b"".join(streamed.iter_bytes(1024)) == PCM

        first, second = rt.sessions
        assert first["path"] == "/v1/realtime?model=gpt-realtime-2.1-mini"
        assert first["headers"]["authorization"] == "Bearer sk-x", "the provider's key, not the caller's"
        session = first["events"][0]["session"]
        assert session["audio"]["output"]["voice"] == "marin"
        response = first["events"][1]["response"]
        assert response["conversation"] == "none"
        assert response["input"][0]["content"] == [{"type": "input_text", "text": "Read me"}]
        assert second["events"][1]["response"]["input"][0]["content"][0]["text"] == "Read me too"
    finally:
        rt.stop()
