"""`serve`'s app and guarded protocol under uvicorn in a thread, with the HTTP parser chosen
(``h11`` or ``httptools``): raw-socket tests of the framing under each parser, in-process.

`PARSERS` lists both, httptools skipped with its reason where it is not installed.
"""

from __future__ import annotations

import importlib.util
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn
from siglip_text.http.connections import Parser, guarded_protocol
from siglip_text.http.errors import AuthenticationError

from devkit.servers import free_port


def needs_httptools(why: str) -> list[pytest.MarkDecorator]:
    """The marks of a test that needs httptools: ``httptools``, and a skip saying ``why``
    where it is not installed."""
    return [
        pytest.mark.httptools,
        pytest.mark.skipif(
            importlib.util.find_spec("httptools") is None,
            reason=f"httptools is not installed ({why}): pip install httptools",
        ),
    ]


#: uvicorn's two HTTP/1.1 parsers, each a pytest param; httptools skips where it is absent
#: (``pip install -e '.[test]'`` brings h11 only).
PARSERS = [
    pytest.param("h11", id="h11"),
    pytest.param(
        "httptools",
        id="httptools",
        marks=needs_httptools("uvicorn parses with h11 only"),
    ),
]


@contextmanager
def guarded_server(
    app: Any, parser: Parser, *, header_timeout: float = 5.0, max_connections: int = 64
) -> Iterator[int]:
    """``app`` served on loopback by uvicorn with `serve`'s guarded protocol; its port."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        http=guarded_protocol(
            header_timeout=header_timeout, max_connections=max_connections, parser=parser
        ),
        ws="none",
        lifespan="off",
    )
    with uvicorn_running(config):
        yield port


@contextmanager
def uvicorn_running(config: uvicorn.Config, **run: Any) -> Iterator[None]:
    """``uvicorn.Server(config)`` run in a daemon thread (``run``: the keyword arguments of
    its ``run``), started within 10 s; stopped after."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Exchange:
    """What the server sent on one connection, and whether it closed the connection."""

    answers: list[Answer]
    closed: bool
    raw: bytes


def exchange(port: int, *parts: bytes, pause: float = 0.0, timeout: float = 3.0) -> Exchange:
    """Send ``parts`` on one connection (``pause`` seconds apart), then read until the server
    closes it or ``timeout`` passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        for i, part in enumerate(parts):
            if i and pause:
                time.sleep(pause)
            try:
                sock.sendall(part)
            except OSError:
                break
        received, closed = b"", False
        try:
            while chunk := sock.recv(65536):
                received += chunk
            closed = True
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            pass
        return Exchange(parse_answers(received), closed, received)


def parse_answers(data: bytes) -> list[Answer]:
    """The HTTP/1.1 answers in ``data`` (each framed by its Content-Length)."""
    answers = []
    while data:
        head, separator, rest = data.partition(b"\r\n\r\n")
        if not separator:
            raise AssertionError(f"an answer cut short: {data[:200]!r}")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        status = int(status_line.split()[1])
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line, 16)
                body, rest = body + rest[:size], rest[size + 2 :]
                if not size:
                    break
            answers.append(Answer(status, headers, body))
            data = rest
            continue
        length = int(headers.get("content-length", "0"))
        answers.append(Answer(status, headers, rest[:length]))
        data = rest[length:]
    return answers


def refuse_every_key(authorization: str | None) -> None:
    """An authenticator that refuses every request: a 401 that closes the connection."""
    raise AuthenticationError("the key is not valid")


class Warnings(logging.Handler):
    """The WARNING (and worse) lines of the server's loggers, uvicorn's included."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


@contextmanager
def server_warnings() -> Iterator[Warnings]:
    """`Warnings` on the ``uvicorn.error`` and ``siglip_text`` loggers while in the block."""
    handler = Warnings()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "siglip_text")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
