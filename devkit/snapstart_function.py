"""A Lambda function process for the SnapStart tests: ``python -m devkit.snapstart_function
SOCKET``, from the repository root, with the function's environment.

It runs the init (imports ``siglip_text.lambda_function``), listens on the UNIX socket SOCKET
(SOCKET.ready appears once it does) and answers one JSON command per connection, closing each
connection before the next: between commands it holds no open connection, so CRIU can
checkpoint it then. A UNIX socket, not loopback TCP: criu 4.1 cannot dump an inet socket on
kernels that refuse SO_PASSCRED on one (6.18 here). Commands
(devkit/snapstart_emulation.py sends them):

- ``hooks``: how many callables each snapshot_restore_py registry holds;
- ``before_snapshot`` / ``after_restore``: run the registries as the runtime client does;
- ``timed_after_restore``: the same, timed, and the error it raised if any;
- ``drop_connections``: close the connections to Secrets Manager, keeping the keys (CRIU
  cannot dump an open inet socket here);
- ``invoke``: the Lambda handler on an event (and its duration in the process);
- ``rss``: the process's resident memory;
- ``reads``: GetSecretValue calls made since the process started (the init's included);
- ``secrets_calls``: every Secrets Manager operation called since the process started;
- ``reachable``: which of the given (masked) secrets a walk of the garbage collector's objects
  reaches (see `devkit.snapstart_emulation.reachable`);
- ``perturb``: make ONNX Runtime's outputs another host's (reversed vectors).
"""

from __future__ import annotations

import importlib
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

from devkit.lambda_context import LambdaContext
from devkit.snapstart_emulation import (
    reachable,
    record_secrets_calls,
    run_after_restore,
    run_before_snapshot,
    unmask,
)


def main(path: Path) -> None:
    calls, _ = record_secrets_calls()
    function = importlib.import_module("siglip_text.lambda_function")  # the init
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    path.with_suffix(".ready").touch()
    while True:
        connection, _ = server.accept()
        with connection, connection.makefile("rwb") as stream:
            line = stream.readline()
            if not line:
                continue
            command = json.loads(line)
            try:
                answer = dispatch(function, calls, command)
            except Exception as exc:  # the test reads it
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            stream.write(json.dumps(answer).encode() + b"\n")
            stream.flush()
        if command["op"] == "exit":
            return


def dispatch(function: Any, calls: list[str], command: dict[str, Any]) -> dict[str, Any]:
    op = command["op"]
    if op == "hooks":
        from snapshot_restore_py import get_after_restore, get_before_snapshot

        return {"before": len(get_before_snapshot()), "after": len(get_after_restore())}
    if op == "before_snapshot":
        run_before_snapshot()
        return {"ok": True}
    if op == "after_restore":
        run_after_restore()
        return {"ok": True}
    if op == "timed_after_restore":
        began = time.perf_counter()
        error = None
        try:
            run_after_restore()
        except Exception as exc:  # the test reads it, with the time it took to fail
            error = f"{type(exc).__name__}: {exc}"
        return {"seconds": time.perf_counter() - began, "error": error}
    if op == "drop_connections":
        authenticator = function.parts.authenticator
        if authenticator is not None:
            authenticator.provider.client.close()
        return {"ok": True}
    if op == "invoke":
        began = time.perf_counter()
        result = function.handler(command["event"], LambdaContext())
        return {"result": result, "seconds": time.perf_counter() - began}
    if op == "rss":
        status = Path("/proc/self/status").read_text()
        (line,) = [row for row in status.splitlines() if row.startswith("VmRSS:")]
        return {"rss_mb": int(line.split()[1]) / 1024}
    if op == "reads":
        return {"reads": calls.count("GetSecretValue")}
    if op == "secrets_calls":
        return {"calls": list(calls)}
    if op == "reachable":
        return {"found": reachable(unmask(command["masked"]))}
    if op == "perturb":
        session = function.parts.service.encoder.session
        run = session.run
        session.run = lambda *args, **kwargs: [out[..., ::-1] for out in run(*args, **kwargs)]
        return {"ok": True}
    if op == "exit":
        return {"ok": True}
    raise ValueError(f"unknown command {op!r}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
