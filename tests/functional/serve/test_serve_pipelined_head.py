"""The 64 KiB head bound holds for a request pipelined behind one that runs, under either
parser: uvicorn's httptools protocol hands llhttp every byte it reads and keeps each header
it parses, so a second request fed endless header lines while the first computes would
otherwise grow the server without bound (825 MiB measured on 0.x)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from siglip_text.assembly import Platform, build_app
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.connections import MAX_HEADER_BYTES, guarded_protocol
from siglip_text.settings import Settings

from devkit.guarded_server import PARSERS, parse_answers, uvicorn_running

MIB = 1024 * 1024
#: What the flood may send at most: far past the bound, a second or so on loopback.
FLOOD_BYTES = 64 * MIB
#: The kernel's buffers on both sides, which hold what the server has not read: small, as
#: set on the sockets here, so that what the client could send measures what was read.
BUFFER_BYTES = 16 * 1024
TEXTS = 2048


@contextmanager
def server_with_small_buffers(app: Any, parser: str) -> Iterator[int]:
    """``app`` under uvicorn with `serve`'s guarded protocol, on a listening socket whose
    receive buffer (inherited by its connections) is `BUFFER_BYTES`."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app,
        log_level="warning",
        http=guarded_protocol(header_timeout=30, max_connections=8, parser=parser),  # type: ignore[arg-type]
        ws="none",
        lifespan="off",
    )
    try:
        with uvicorn_running(config, sockets=[sock]):
            yield port
    finally:
        sock.close()


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise LookupError("VmHWM")


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError("VmRSS")


def flood(sock: socket.socket, stalled_after: float = 2.0) -> int:
    """Header lines of a second request, as fast as the server takes them, until it stops
    reading (nothing accepted for ``stalled_after`` seconds), closes, or `FLOOD_BYTES`; the
    bytes the kernel accepted."""
    block = b"".join(b"X-Flood-%06d: %s\r\n" % (i, b"a" * 80) for i in range(600))
    sent, last_progress = 0, time.monotonic()
    sock.setblocking(False)
    try:
        while sent < FLOOD_BYTES and time.monotonic() - last_progress < stalled_after:
            try:
                n = sock.send(block)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            except OSError:  # closed by the server
                break
            sent += n
            last_progress = time.monotonic()
    finally:
        sock.setblocking(True)
    return sent


@pytest.mark.slow
@pytest.mark.parametrize("parser", PARSERS)
def test_a_pipelined_head_fed_endless_lines_is_read_to_64_kib_only(
    parser: str, service: EmbeddingService, settings: Settings
) -> None:
    app = build_app(service, settings, Platform.SERVE, host="127.0.0.1")
    texts = [f"a photo of a red cat on a wooden table, number {i}" * 4 for i in range(TEXTS)]
    body = json.dumps({"input": texts}).encode()
    first = (
        b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body
    second = b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    with server_with_small_buffers(app, parser) as port:
        Path("/proc/self/clear_refs").write_text("5")
        before = rss()
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
            # GIVEN a 2048-text request, then a second one pipelined behind it whose head
            # never ends
            sock.sendall(first + second)
            sent = flood(sock)
            # WHEN the server has answered what it answers
            received = b""
            try:
                while chunk := sock.recv(1 << 20):
                    received += chunk
            except (TimeoutError, ConnectionResetError):
                pass
        growth = peak_rss() - before
    # THEN the first request is answered, the second gets a 431 (or the close), the server
    # read about 64 KiB of it (what the client could send, less the kernel's buffers), and
    # its memory grew by less than 100 MiB
    print(f"{parser}: the client could send {sent:,} bytes; peak RSS +{growth / MIB:.1f} MiB")
    statuses = [a.status for a in parse_answers(received)]
    assert statuses[:1] == [200], received[:300]
    assert statuses[1:] in ([], [431]), statuses
    assert sent < MAX_HEADER_BYTES + 8 * BUFFER_BYTES + 256 * 1024, f"{sent / MIB:.1f} MiB"
    assert growth < 100 * MIB, f"{growth / MIB:.0f} MiB"
