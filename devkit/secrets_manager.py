"""Secrets Manager for the tests: moto in server mode on loopback, reached through a relay
that can fail the way an outage does (connections accepted, never answered).

The authenticator under test talks to it with its real boto3 client (endpoint from
``AWS_ENDPOINT_URL_SECRETS_MANAGER``), so timeouts, retries and connection reuse are botocore's.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

#: While a relay trickles: one byte of an answer that never ends, every this many seconds.
TRICKLE_INTERVAL_SECONDS = 0.5


class Relay:
    """A loopback TCP listener: forwards to ``target`` while up; while down it accepts each
    connection and never answers (what a hung Secrets Manager endpoint looks like), or, if
    ``down(trickle=True)``, answers one byte at a time and never finishes: each byte restarts
    a client's read timeout, so only a deadline of the caller's own ends the call."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = True
        self.trickle = False
        self.hung = 0  # connections accepted while down
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def down(self, *, trickle: bool = False) -> None:
        """Hang from now on; connections already open are closed (botocore reconnects)."""
        with self._lock:
            self.up = False
            self.trickle = trickle
            self._close_open()

    def restore(self) -> None:
        with self._lock:
            self.up = True
            self._close_open()

    def _close_open(self) -> None:
        """Close every connection open now (the lock held)."""
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.close()
        self._open.clear()

    def close(self) -> None:
        self.down()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._open.append(client)
                if not self.up:
                    self.hung += 1
                    if self.trickle:
                        threading.Thread(target=self._trickle, args=(client,), daemon=True).start()
                    continue  # held open, never answered in full
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._open.append(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def _trickle(self, client: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\n" + b"Content-Type: application/x-amz-json-1.1\r\n" * 99
        with contextlib.suppress(OSError):
            client.recv(65536)
            for byte in answer:
                time.sleep(TRICKLE_INTERVAL_SECONDS)
                if self.up:
                    return
                client.sendall(bytes([byte]))


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.close()


@dataclass
class SecretsServer:
    """moto's Secrets Manager behind a `Relay`; ``client`` talks to moto directly."""

    relay: Relay
    client: Any
    arn: str
    extra: dict[str, Any] = field(default_factory=dict)

    def put(self, value: str) -> None:
        self.client.put_secret_value(SecretId=self.arn, SecretString=value)


@functools.cache
def _moto_server() -> tuple[str, int]:
    """moto in server mode on loopback, one for the whole test session: each test makes
    secrets of its own names (moto's state outlives a server in the same process anyway),
    and a server's stop waits out its poll interval, half a second a test."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()  # its thread is a daemon: it ends with the session
    return server.get_host_and_port()


@contextlib.contextmanager
def secrets_server(secret: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretsServer]:
    """moto in server mode with one secret; botocore's Secrets Manager endpoint is the relay."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    host, port = _moto_server()
    relay = Relay((host, port))
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", relay.url)
    try:
        client = boto3.client(
            "secretsmanager", region_name="us-east-1", endpoint_url=f"http://{host}:{port}"
        )
        # the server outlives the test: a secret of its own each time
        name = f"siglip-text/api-key-{uuid.uuid4().hex[:8]}"
        arn = client.create_secret(Name=name, SecretString=secret)["ARN"]
        yield SecretsServer(relay=relay, client=client, arn=arn)
    finally:
        relay.close()


@contextlib.contextmanager
def in_process_secret(value: str) -> Iterator[tuple[Any, str]]:
    """moto's Secrets Manager in process (``mock_aws``) holding one secret of ``value``: a
    client of it and the secret's ARN."""
    from moto import mock_aws

    with pytest.MonkeyPatch.context() as patch, mock_aws():
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="siglip-text/api-key", SecretString=value)["ARN"]
        yield client, arn


@contextlib.contextmanager
def moto_endpoint() -> Iterator[str]:
    """moto in server mode on loopback, for a function in another process: its URL (each
    test names its secrets for itself)."""
    host, port = _moto_server()
    yield f"http://{host}:{port}"


def secrets_client(endpoint: str) -> Any:
    """A Secrets Manager client of moto's server at ``endpoint``."""
    return boto3.client(
        "secretsmanager",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
