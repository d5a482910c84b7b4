"""A fake OpenAI for the OpenAI SDK tests (test_openai_*.py): OpenAI's own wire format on the
shared fake provider, and the gateway configured to call it.

What the fake answers is OpenAI's documented shape: speech is the audio itself (`audio/mpeg`), or
with `stream_format: "sse"` events `{"type": "speech.audio.delta", "audio": <base64>}` closed by
`{"type": "speech.audio.done", "usage": {...}}`; images (generations and edits) are an
`ImagesResponse` with base64 images (GPT image models answer base64 only); errors are
`{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import struct
import zlib

from openai import OpenAI

from conftest import API_KEY, Reply

PROVIDERS = (
    '    openai: {kind: openai, api_key: "sk-x", base_url: "{fake}/v1"}\n'
    '    zhipu: {kind: zhipu, api_key: "zk-x", base_url: "{fake}"}\n'
    '    ark: {kind: ark, api_key: "ak-x", base_url: "{fake}/api/v3"}\n'
)
MODELS = (
    "    tts-1: {family: openai-tts, targets: [{provider: openai, model: tts-1}]}\n"
    "    gpt-4o-mini-tts: {family: openai-tts-instruct, targets: [{provider: openai, model: gpt-4o-mini-tts}]}\n"
    "    gpt-image-2: {family: gpt-image-2, targets: [{provider: openai, model: gpt-image-2}]}\n"
    "    cogview-4: {family: cogview, targets: [{provider: zhipu, model: cogview-4-250304}]}\n"
    "    seedream-4: {family: seedream, targets: [{provider: ark, model: doubao-seedream-4-0-250828, lifecycle: {still_available: true}}]}\n"
    "    seededit-3: {family: seededit, targets: [{provider: ark, model: doubao-seededit-3-0-i2i-250628}]}\n"
)

AUDIO = bytes(range(256)) * 40  # stands for MP3 frames: the gateway passes bytes through


def png(seed: int, side: int = 4) -> bytes:
    """A real, small PNG (distinct per seed)."""
    raw = b"".join(b"\x00" + bytes([(seed * 31 + x + y) % 256 for x in range(side * 3)]) for y in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def images_response(images: list[bytes], output_format: str = "png") -> Reply:
    return Reply.json({
        "created": 1713833628,
        "background": "opaque",
        "output_format": output_format,
        "quality": "high",
        "size": "1024x1024",
        "data": [{"b64_json": base64.b64encode(i).decode()} for i in images],
        "usage": {"input_tokens": 50, "output_tokens": 50, "total_tokens": 100,
                  "input_tokens_details": {"image_tokens": 40, "text_tokens": 10}},
    })


def openai_error(status: int, kind: str, code: str | None, message: str, headers: dict | None = None) -> Reply:
    r = Reply.json({"error": {"message": message, "type": kind, "param": None, "code": code}}, status)
    r.headers.update(headers or {})
    return r


def speech(rec) -> Reply:
    """OpenAI's speech: the audio, chunked; or SSE events when asked."""
    body = rec.json()
    if body.get("stream_format") == "sse":
        pieces = [AUDIO[i:i + 4000] for i in range(0, len(AUDIO), 4000)]
        events = [json.dumps({"type": "speech.audio.delta", "audio": base64.b64encode(p).decode()}) for p in pieces]
        events.append(json.dumps({"type": "speech.audio.done",
                                  "usage": {"input_tokens": 5, "output_tokens": 80, "total_tokens": 85}}))
        return Reply(200, [f"data: {e}\n\n".encode() for e in events], {"Content-Type": "text/event-stream"})
    return Reply(200, [AUDIO[i:i + 3000] for i in range(0, len(AUDIO), 3000)], {"Content-Type": "audio/mpeg"})


def openai_gateway(gateway, fake):
    """The gateway in front of the fake OpenAI, and an SDK client for it (no SDK retries, so each
    call is one request and errors surface as they are)."""
    fake.route("POST", "/v1/audio/speech", speech)
    gw = gateway(fake, providers=PROVIDERS, models=MODELS)
    client = OpenAI(base_url=gw.base, api_key=API_KEY, max_retries=0, timeout=20)
    return gw, client


def form_parts(rec) -> list[tuple[str, str | None, str | None, bytes]]:
    """A recorded multipart/form-data request's parts: (name, filename, content type, bytes)."""
    head = f"Content-Type: {rec.headers['content-type']}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + rec.body)
    assert msg.is_multipart(), rec.headers["content-type"]
    out = []
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        ctype = part.get_content_type() if filename else None
        out.append((name, filename, ctype, part.get_payload(decode=True)))
    return out
