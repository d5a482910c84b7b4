#!/usr/bin/env python3
"""Slow and idle clients against the gateway binary: how many it holds, at what memory, for how long,
and what a client past the connection cap gets.

    cargo build --release && python3 benches/slow_clients.py target/release/switchyard [N]

Starts the binary with one entry point (connection cap N + 0, default client deadlines unless
SLOW_HEAD_MS / SLOW_IDLE_MS are set), then:
  1. N/2 clients trickle a request head, one byte a second; N/2 send one request and then idle
     on the kept-alive connection. The gateway's RSS is read while they are all held and after
     the gateway has closed them (it must: head and idle deadlines); the time each was held is kept.
  2. N connections are held open (trickling) and 200 more each send a request: each of those must
     get `503 overloaded` with `Retry-After`, quickly.
Prints a Markdown table. Needs nothing but Python 3.
"""

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/switchyard"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
HEAD_MS = int(os.environ.get("SLOW_HEAD_MS", "10000"))
IDLE_MS = int(os.environ.get("SLOW_IDLE_MS", "60000"))
EXTRA = 200
ROUNDS = int(os.environ.get("SLOW_ROUNDS", "3"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


CONFIG = """
version: 1
threads: 1
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: edge, address: "127.0.0.1:{port}", max_connections: {cap}}}
  clients: {{head_timeout_ms: {head}, idle_timeout_ms: {idle}}}
  auth:
    api_keys: [{{name: bench, key: bench-key}}]
  providers:
    builtin: {{kind: local}}
  models:
    local-bm25: {{family: local-rerank, targets: [{{provider: builtin, model: bm25}}]}}
"""

RERANK = (
    b'{"model":"local-bm25","query":"edge","documents":["an edge gateway","a slow client"]}'
)


def request_bytes(host):
    return (
        b"POST /api/v1/rerank HTTP/1.1\r\nHost: " + host.encode() +
        b"\r\nService-API-Key: bench-key\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(RERANK)).encode() + b"\r\n\r\n" + RERANK
    )


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    retry_after = None
    for line in head.split(b"\r\n"):
        k, _, v = line.partition(b":")
        if k.lower() == b"content-length":
            length = int(v)
        if k.lower() == b"retry-after":
            retry_after = v.strip().decode()
    await reader.readexactly(length)
    return status, retry_after


async def until_closed(reader):
    start = time.monotonic()
    try:
        while await reader.read(4096):
            pass
    except (ConnectionError, OSError):
        pass
    return time.monotonic() - start


async def trickler(port, held, opened):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened.append(time.monotonic())
    start = time.monotonic()
    head = b"POST /api/v1/rerank HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096

    async def trickle():
        for b in head:
            writer.write(bytes([b]))
            try:
                await writer.drain()
            except (ConnectionError, OSError):
                return
            await asyncio.sleep(1)

    task = asyncio.create_task(trickle())
    await until_closed(reader)
    held.append(time.monotonic() - start)
    task.cancel()
    writer.close()


async def idler(port, held, opened):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_bytes("x"))
    await writer.drain()
    status, _ = await read_head(reader)
    assert status == 200, status
    opened.append(time.monotonic())
    held.append(await until_closed(reader))
    writer.close()


async def shed_one(port, results):
    start = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_bytes("x"))
    await writer.drain()
    try:
        status, retry_after = await asyncio.wait_for(read_head(reader), 10)
    except Exception:  # a reset or close counts as not answered
        status, retry_after = 0, None
    results.append((status, retry_after, time.monotonic() - start))
    writer.close()


async def main():
    port = free_port()
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(CONFIG.format(port=port, cap=N, head=HEAD_MS, idle=IDLE_MS))
    cfg.close()
    gw = subprocess.Popen([BIN, "-c", cfg.name], env={"RUST_LOG": "error"},
                          stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        # Warm up: one request, so allocator arenas and the model exist before the baseline.
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(request_bytes("x"))
        await w.drain()
        assert (await read_head(r))[0] == 200
        w.close()
        base = rss_kib(gw.pid)

        # The same load several times: memory held by one round must serve the next.
        rounds = []
        for _ in range(ROUNDS):
            held_t, held_i, opened = [], [], []
            tasks = [asyncio.create_task(trickler(port, held_t, opened)) for _ in range(N // 2)]
            tasks += [asyncio.create_task(idler(port, held_i, opened)) for _ in range(N - N // 2)]
            while len(opened) < N:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)
            holding = rss_kib(gw.pid)
            await asyncio.gather(*tasks)
            await asyncio.sleep(1)
            after = rss_kib(gw.pid)
            rounds.append((holding, after))

        # Past the cap.
        held2, opened2 = [], []
        hold = [asyncio.create_task(trickler(port, held2, opened2)) for _ in range(N)]
        while len(opened2) < N:
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        results = []
        await asyncio.gather(*[shed_one(port, results) for _ in range(EXTRA)])
        at_cap = rss_kib(gw.pid)
        for t in hold:
            t.cancel()
    finally:
        gw.terminate()
        gw.wait()
        os.unlink(cfg.name)

    shed = [r for r in results if r[0] == 503 and r[1] is not None]
    lat = sorted(r[2] for r in results)
    print(f"| measure | value |\n|---|---|")
    print(f"| connections held at once | {N} ({N // 2} trickling a head at 1 B/s, {N - N // 2} idle after a request) |")
    for i, (holding, after) in enumerate(rounds):
        print(f"| round {i + 1}: RSS before / while holding / after they closed | {base / 1024:.1f} / {holding / 1024:.1f} / {after / 1024:.1f} MiB |")
    holding = rounds[0][0]
    print(f"| RSS per held connection (round 1) | {(holding - base) / N:.1f} KiB |")
    print(f"| trickled heads held (min / max) | {min(held_t):.1f} / {max(held_t):.1f} s (head timeout {HEAD_MS / 1000:g} s) |")
    print(f"| idle connections held (min / max) | {min(held_i):.1f} / {max(held_i):.1f} s (idle timeout {IDLE_MS / 1000:g} s) |")
    print(f"| requests on {EXTRA} connections past the cap of {N} | {len(shed)} answered 503 overloaded with Retry-After; others: {sorted(set(r[0] for r in results if r not in shed))} |")
    print(f"| their latency (median / max) | {lat[len(lat) // 2] * 1000:.0f} / {lat[-1] * 1000:.0f} ms |")
    print(f"| RSS at the cap | {at_cap / 1024:.1f} MiB |")


if __name__ == "__main__":
    asyncio.run(main())
