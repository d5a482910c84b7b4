"""A fake of OpenAI's Realtime API for the SDK speech tests: a WebSocket server on 127.0.0.1 (the
`websockets` package) speaking the documented sequence — `session.created` on open,
`session.updated` for a `session.update`, and for a `response.create` `response.created`,
`response.output_audio.delta`s of base64 24 kHz PCM, `response.output_audio.done`, `response.done`
with `usage` — and recording each session's path, headers and the client events it received.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading

from websockets.asyncio.server import serve

# Three deltas of 16-bit PCM (0.1 s each at 24 kHz).
PIECES = [bytes((i * 7 + k) % 256 for i in range(4800)) for k in range(3)]
PCM = b"".join(PIECES)


class RealtimeFake:
    def __init__(self) -> None:
        self.sessions: list[dict] = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def main():
            self.server = await serve(self._session, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            await self.server.serve_forever()

        try:
            self.loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _session(self, ws) -> None:
        record = {"path": ws.request.path, "headers": dict(ws.request.headers.raw_items()), "events": []}
        record["headers"] = {k.lower(): v for k, v in record["headers"].items()}
        self.sessions.append(record)
        await ws.send(json.dumps({"type": "session.created", "event_id": "e1", "session": {"type": "realtime"}}))
        async for text in ws:
            event = json.loads(text)
            record["events"].append(event)
            if event["type"] == "session.update":
                await ws.send(json.dumps({"type": "session.updated", "event_id": "e2", "session": event["session"]}))
            elif event["type"] == "response.create":
                await ws.send(json.dumps({"type": "response.created", "event_id": "e3",
                                          "response": {"id": "resp_1", "status": "in_progress"}}))
                for piece in PIECES:
                    await ws.send(json.dumps({"type": "response.output_audio.delta", "event_id": "e4",
                                              "response_id": "resp_1", "item_id": "item_1", "output_index": 0,
                                              "content_index": 0, "delta": base64.b64encode(piece).decode()}))
                await ws.send(json.dumps({"type": "response.output_audio.done", "event_id": "e5",
                                          "response_id": "resp_1", "item_id": "item_1", "output_index": 0,
                                          "content_index": 0}))
                await ws.send(json.dumps({"type": "response.done", "event_id": "e6", "response": {
                    "id": "resp_1", "status": "completed", "output_modalities": ["audio"],
                    "usage": {"input_tokens": 7, "output_tokens": 60, "total_tokens": 67,
                              "input_token_details": {"text_tokens": 7, "audio_tokens": 0},
                              "output_token_details": {"text_tokens": 10, "audio_tokens": 50}}}}))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
