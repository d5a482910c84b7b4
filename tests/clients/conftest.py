"""Harness of the client suite: a programmable fake provider and the real gateway binary.

`fake` is an HTTP/1.1 server on 127.0.0.1 whose answers a test sets per (method, path) and which
records every request it receives. `gateway(providers=..., models=...)` writes a configuration whose
providers point at the fake (``{fake}`` in a provider's text is replaced by the fake's URL), starts
`switchyard -c` on a free port, waits for `/healthz`, and stops it when the test ends.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Iterable

import pytest

API_KEY = "client-suite-key"
PROVIDER_KEY = "sk-fake-provider-key"
BIN = os.environ.get("SWITCHYARD_BIN", "target/debug/switchyard")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Reply:
    """A fake answer: status, headers, and a body (bytes, or an iterable of chunks sent as they come)."""

    status: int = 200
    body: bytes | Iterable[bytes] = b""
    headers: dict = field(default_factory=dict)

    @staticmethod
    def json(value, status: int = 200) -> "Reply":
        return Reply(status, json.dumps(value).encode(), {"Content-Type": "application/json"})


Handler = Callable[[Recorded], Reply]


class FakeProvider:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[Recorded] = []
        fake = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                fake.requests.append(rec)
                handler = fake.routes.get((self.command, path))
                reply = handler(rec) if handler else Reply.json({"error": f"no route {path}"}, 404)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if isinstance(reply.body, (bytes, bytearray)):
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in reply.body:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def route(self, method: str, path: str, handler: Handler | Reply) -> None:
        self.routes[(method, path)] = handler if callable(handler) else (lambda _r, h=handler: h)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    def __init__(self, tmp_path, fake: FakeProvider | None, providers: str, models: str, extra: str = ""):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base = self.url + "/api/v1"
        config = f"""version: 1
threads: 2
pid_file: {tmp_path}/switchyard.pid
upgrade_sock: {tmp_path}/switchyard.sock
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: main, address: "127.0.0.1:{self.port}"}}
  retries: {{max: 3, initial_backoff_ms: 1, max_backoff_ms: 5}}
  images: {{allow_private_urls: true, poll_interval_ms: 20}}
  auth:
    api_keys:
      - {{name: client-suite, key: "{API_KEY}"}}
{extra}  providers:
    builtin: {{kind: local}}
{providers}  models:
    local-bm25: {{family: local-rerank, targets: [{{provider: builtin, model: bm25}}]}}
{models}"""
        if fake is not None:
            config = config.replace("{fake}", fake.url)
        path = tmp_path / "switchyard.yaml"
        path.write_text(config)
        self.log = open(tmp_path / "gateway.log", "wb")
        self.proc = subprocess.Popen([BIN, "-c", str(path)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {(tmp_path / 'gateway.log').read_text()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway did not answer /healthz within 20 s")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture
def fake():
    f = FakeProvider()
    yield f
    f.stop()


@pytest.fixture
def gateway(tmp_path, request):
    """A factory: `gateway(fake, providers="...", models="...")`; stopped when the test ends."""
    started: list[Gateway] = []

    def start(fake: FakeProvider | None = None, providers: str = "", models: str = "", extra: str = "") -> Gateway:
        gw = Gateway(tmp_path, fake, providers, models, extra)
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()
