"""`siglip-text export --revision main`: a branch or tag resolved once to its commit SHA.

The Hub is a loopback HTTP server speaking its model-info route
(``GET /api/models/{repo}/revision/{revision}``), reached through huggingface_hub's own
client pointed at it with ``HF_ENDPOINT``: the real client, no fake.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from siglip_text.tools.exit_status import ToolError
from siglip_text.tools.export.pipeline import validate
from siglip_text.tools.export.revision import resolve_revision
from siglip_text.tools.export.state import ExportOptions

pytest.importorskip(
    "huggingface_hub", reason="tokenizers' dependency huggingface_hub resolves revisions"
)

REPOSITORY = "google/siglip2-base-patch16-224"
SHA = "c0ffee0123456789abcdef0123456789abcdef01"


class FakeHub:
    """Answers model info for REPOSITORY at ``main`` and ``v1.0``; 404 for anything else."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hub.paths.append(self.path)
                known = {f"/api/models/{REPOSITORY}/revision/{ref}" for ref in ("main", "v1.0")}
                if self.path.split("?")[0] in known:
                    body = {"id": REPOSITORY, "modelId": REPOSITORY, "sha": SHA, "private": False}
                    status = 200
                else:
                    body = {"error": "Invalid rev id: nope"}
                    status = 404
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    fake = FakeHub()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


@pytest.mark.parametrize("ref", ["main", "v1.0"])
def test_a_branch_or_tag_resolves_to_the_commit_sha(hub: FakeHub, ref: str) -> None:
    assert resolve_revision(REPOSITORY, ref) == SHA
    assert hub.paths[-1].startswith(f"/api/models/{REPOSITORY}/revision/{ref}")


def test_export_pins_the_resolved_sha_and_prints_it(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN export of a Hub id with --revision main
    options = ExportOptions(source=REPOSITORY, out=tmp_path / "bundle", revision="main")

    # WHEN it validates its options (before anything is loaded)
    spec = validate(options)

    # THEN the SHA is what the export loads and records, and the user sees it
    assert spec.revision == SHA and spec.kind == "hub"
    assert f"--revision main of {REPOSITORY} is commit {SHA}" in capsys.readouterr().err
    assert len(hub.paths) == 1  # resolved once


def test_a_full_sha_is_used_as_given_without_asking_the_hub(hub: FakeHub) -> None:
    assert resolve_revision(REPOSITORY, SHA) == SHA
    assert hub.paths == []


def test_an_unknown_ref_is_refused_with_how_to_find_the_sha(hub: FakeHub) -> None:
    with pytest.raises(ToolError) as caught:
        resolve_revision(REPOSITORY, "nope")

    message = str(caught.value)
    assert "could not be resolved" in message
    assert f"https://huggingface.co/{REPOSITORY}/commits/nope" in message
    assert f"git ls-remote https://huggingface.co/{REPOSITORY} nope" in message


def test_offline_a_branch_is_refused_with_how_to_find_the_sha(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN the Hub switched off as huggingface_hub users do
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    options = ExportOptions(source=REPOSITORY, out=tmp_path / "bundle", revision="main")

    # WHEN export validates --revision main
    with pytest.raises(ToolError) as caught:
        validate(options)

    # THEN it is refused before any request, saying where the SHA is found
    message = str(caught.value)
    assert "offline" in message and "commit SHA" in message
    assert f"https://huggingface.co/{REPOSITORY}/commits/main" in message
    assert hub.paths == []
    assert not (tmp_path / "bundle").exists()


def test_an_unreachable_hub_is_refused_with_how_to_find_the_sha(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    with pytest.raises(ToolError, match="git ls-remote"):
        resolve_revision(REPOSITORY, "main", endpoint=f"http://127.0.0.1:{port}")


def test_only_a_hub_id_with_a_branch_or_tag_is_sent_to_the_hub(
    hub: FakeHub, tmp_path: Path
) -> None:
    from siglip_text.tools.export.revision import hub_revision

    (tmp_path / "ckpt").mkdir()

    assert hub_revision(str(tmp_path / "ckpt"), "main") == "main"  # a local directory
    assert hub_revision("./not/here", "main") == "main"
    assert hub_revision(REPOSITORY, None) is None
    assert hub_revision(REPOSITORY, SHA) == SHA
    assert hub.paths == []
    assert hub_revision(REPOSITORY, "main") == SHA
    assert len(hub.paths) == 1
