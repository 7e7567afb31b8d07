"""The API key file (`http.key_file`, `http.auth.KeyFileAuthenticator`): one key per line,
private to its owner, changes picked up on the authenticator's own check period.

The file is a real file on disk and the app the real one on the demo model; only the clock
is the test's, so "the check period passed" takes no waiting.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from siglip_text.assembly import Platform, require_auth_mode
from siglip_text.engine.errors import ConfigError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.auth import (
    KeyFileAuthenticator,
    build_authenticator,
    build_key_file_authenticator,
)
from siglip_text.http.key_file import KeyFileError, KeyFileExposed, parse_key_file, read_key_file
from siglip_text.settings import load_settings

from devkit.keyed_apps import Clock

KEY = "sk-siglip-file-key-0123456789abcdef"
NEW_KEY = "sk-siglip-file-key-new-fedcba98765"
BODY = {"input": ["a red block"]}


def key_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "keys"
    path.write_text(text)
    path.chmod(mode)
    return path


def keyed_client(
    service: EmbeddingService, demo_dir: Path, path: Path, clock: Clock
) -> tuple[TestClient, KeyFileAuthenticator]:
    settings = load_settings(
        model_dir=demo_dir, ort_intra_op_threads=1, api_key_file=path, api_key_file_check_seconds=5
    )
    authenticator = build_key_file_authenticator(settings, clock=clock)
    app = create_app(service, settings, authenticator=authenticator, offload_inference=False)
    return TestClient(app), authenticator


def one_key_client(
    tmp_path: Path, demo_dir: Path, service: EmbeddingService
) -> tuple[Path, Clock, TestClient]:
    """`keyed_client` of a file holding `KEY`: the file, the clock its checks follow, the
    client."""
    path = key_file(tmp_path, KEY + "\n")
    clock = Clock()
    client, _ = keyed_client(service, demo_dir, path, clock)
    return path, clock, client


def status(client: TestClient, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.post("/v1/embeddings", json=BODY, headers=headers).status_code


def test_one_key_per_line_blank_lines_and_comments_ignored() -> None:
    text = f"# the rotation's new key\n\n  {NEW_KEY}  \n{KEY}\r\n   # old\n"

    assert parse_key_file(text) == (NEW_KEY, KEY)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("short-key\n", "line 1: a key must be at least 16 characters"),
        (f"# c\n{KEY} {NEW_KEY}\n", "line 2: a key holds no whitespace"),
    ],
)
def test_a_line_that_is_not_a_key_is_named_by_number_never_quoted(text: str, problem: str) -> None:
    with pytest.raises(KeyFileError, match=problem) as raised:
        parse_key_file(text)
    assert KEY not in str(raised.value) and "short-key" not in str(raised.value)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o602])
def test_a_file_the_group_or_others_may_touch_is_refused_with_the_chmod(
    tmp_path: Path, mode: int
) -> None:
    path = key_file(tmp_path, KEY + "\n", mode)

    with pytest.raises(KeyFileExposed, match=f"chmod 600 {path}"):
        read_key_file(path)


def test_a_private_file_read_through_a_link_is_read_with_its_targets_mode(tmp_path: Path) -> None:
    target = key_file(tmp_path, KEY + "\n", 0o400)
    link = tmp_path / "link"
    link.symlink_to(target)

    keys, _ = read_key_file(link)

    assert keys == (KEY,)


def test_serve_settings_a_key_file_means_api_key_and_refuses_a_second_source(
    tmp_path: Path,
) -> None:
    path = key_file(tmp_path, KEY + "\n")

    assert load_settings(api_key_file=path).auth_mode == "api-key"
    with pytest.raises(ConfigError, match="needs auth mode api-key, not none"):
        load_settings(api_key_file=path, auth_mode="none")
    with pytest.raises(ConfigError, match="from one source"):
        load_settings(api_key_file=path, api_key_secret_arn="arn:aws:secretsmanager:x")


def test_an_empty_key_file_variable_is_no_key_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGLIP_API_KEY_FILE", "")

    settings = load_settings()

    assert settings.api_key_file is None and settings.auth_mode == "none"


def test_the_lambda_function_refuses_a_key_file_pointing_at_secrets_manager(
    tmp_path: Path, demo_dir: Path
) -> None:
    settings = load_settings(model_dir=demo_dir, api_key_file=key_file(tmp_path, KEY + "\n"))

    with pytest.raises(ConfigError, match="API_KEY_SECRET_ARN"):
        require_auth_mode(settings, Platform.LAMBDA, host="")


@pytest.mark.parametrize(
    ("text", "mode", "problem"),
    [
        ("# no key yet\n", 0o600, "holds no key"),
        (KEY + "\n", 0o644, "chmod 600"),
        ("short\n", 0o600, "at least 16"),
    ],
)
def test_the_start_refuses_a_file_it_cannot_use(
    tmp_path: Path, demo_dir: Path, text: str, mode: int, problem: str
) -> None:
    settings = load_settings(model_dir=demo_dir, api_key_file=key_file(tmp_path, text, mode))

    with pytest.raises(ConfigError, match=problem):
        build_authenticator(settings)


def test_a_missing_file_is_refused_at_start(tmp_path: Path, demo_dir: Path) -> None:
    settings = load_settings(model_dir=demo_dir, api_key_file=tmp_path / "absent")

    with pytest.raises(ConfigError, match="cannot be opened"):
        build_authenticator(settings)


def test_an_added_key_works_and_a_deleted_one_stops_after_the_check_period(
    tmp_path: Path, demo_dir: Path, service: EmbeddingService
) -> None:
    # GIVEN a server reading one key from its file
    path, clock, client = one_key_client(tmp_path, demo_dir, service)
    assert (status(client, None), status(client, KEY), status(client, NEW_KEY)) == (401, 200, 401)
    # WHEN a key is appended (same inode: an edit in place)
    with path.open("a") as handle:
        handle.write(NEW_KEY + "\n")
    # THEN it is not read before the check period ends, and works after it
    assert status(client, NEW_KEY) == 401
    clock.now += 5
    assert (status(client, NEW_KEY), status(client, KEY)) == (200, 200)
    # WHEN the file is replaced by one without the old key (write elsewhere, then rename)
    fresh = tmp_path / "keys.new"
    fresh.write_text(NEW_KEY + "\n")
    fresh.chmod(0o600)
    os.replace(fresh, path)
    clock.now += 5
    # THEN the old key no longer passes
    assert (status(client, KEY), status(client, NEW_KEY)) == (401, 200)


def test_a_file_that_becomes_readable_by_others_fails_closed_until_it_is_private(
    tmp_path: Path, demo_dir: Path, service: EmbeddingService, caplog: pytest.LogCaptureFixture
) -> None:
    path, clock, client = one_key_client(tmp_path, demo_dir, service)

    path.chmod(0o644)
    clock.now += 5
    with caplog.at_level(logging.ERROR, logger="siglip_text.http.auth"):
        answer = client.post(
            "/v1/embeddings", json=BODY, headers={"Authorization": f"Bearer {KEY}"}
        )
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
    assert "chmod 600" in caplog.text and KEY not in caplog.text

    path.chmod(0o600)
    clock.now += 5
    assert status(client, KEY) == 200


def test_a_file_that_cannot_be_used_later_keeps_the_keys_held_and_says_so_once(
    tmp_path: Path, demo_dir: Path, service: EmbeddingService, caplog: pytest.LogCaptureFixture
) -> None:
    path, clock, client = one_key_client(tmp_path, demo_dir, service)

    with caplog.at_level(logging.WARNING, logger="siglip_text.http.auth"):
        path.write_text("half-writ\n")  # an edit caught halfway
        for _ in range(3):
            clock.now += 5
            assert status(client, KEY) == 200
        path.unlink()  # deleted
        for _ in range(3):
            clock.now += 5
            assert status(client, KEY) == 200
    warnings = [r for r in caplog.records if "cannot be used" in r.getMessage()]
    assert len(warnings) == 2  # once per state of the file, not once per check
    assert "half-writ" not in caplog.text

    key_file(tmp_path, NEW_KEY + "\n")
    clock.now += 5
    assert (status(client, KEY), status(client, NEW_KEY)) == (401, 200)


def test_a_file_emptied_of_keys_means_no_key_is_valid(
    tmp_path: Path, demo_dir: Path, service: EmbeddingService
) -> None:
    path, clock, client = one_key_client(tmp_path, demo_dir, service)

    path.write_text("# every key revoked\n")
    clock.now += 5

    assert status(client, KEY) == 401


def test_a_key_file_is_an_auth_mode_beyond_loopback_and_the_refusal_names_it(
    tmp_path: Path,
) -> None:
    path = key_file(tmp_path, KEY + "\n")

    require_auth_mode(load_settings(api_key_file=path), Platform.SERVE, host="0.0.0.0")
    with pytest.raises(ConfigError, match="--api-key-file PATH"):
        require_auth_mode(load_settings(), Platform.SERVE, host="0.0.0.0")
