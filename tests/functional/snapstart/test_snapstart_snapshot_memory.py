"""What a SnapStart snapshot carries: the memory of a checkpointed function process, searched
byte for byte for the API key (../shared/CONTRACT.md section 7).

Each checkpoint is a fresh function process under ``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start``
with api-key auth, a fresh key of the template's form in Secrets Manager (moto's server on
loopback, in this process), its init and before-snapshot hooks run, no request before the
snapshot (as on Lambda), then CRIU's dump. The test process reads the dump's memory pages
(``pages-*.img``) and counts the key's bytes and its raw SHA-256 digest. The key never goes to
the function process in any form (no environment variable, no command carrying it): only the
secret's ARN does. Freed memory is reused by chance, so a single clean checkpoint proves little;
``SIGLIP_SNAPSHOT_CHECKPOINTS`` (default 8) sets how many.

A control checkpoint shows that the search finds what a process holds: one whose after-restore
hook has read the key (its digest is then held) must show the digest.

Skips, naming why, where CRIU cannot run (no criu root: scripts/make_criu_root.sh; not root;
a kernel criu rejects).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from devkit.secrets_manager import secrets_client
from devkit.snapstart_emulation import (
    FunctionProcess,
    api_key_env,
    checkpoint_copies,
    criu_dump,
    template_key,
)

pytestmark = [pytest.mark.slow, pytest.mark.emulation]

CHECKPOINTS = int(os.environ.get("SIGLIP_SNAPSHOT_CHECKPOINTS", "8"))


def checkpoint(
    env: dict[str, str], work: Path, key: str, *, read_keys_first: bool = False
) -> tuple[dict[str, int], list[str]]:
    """Start the function, run its before-snapshot hooks, dump it: the key's copies in the
    dump, and the Secrets Manager operations the process called before it."""
    work.mkdir()
    images = work / "images"
    function = FunctionProcess(env, work)
    try:
        function.start()
        assert function.call("before_snapshot") == {"ok": True}
        calls: list[str] = function.call("secrets_calls")["calls"]
        if read_keys_first:
            # the control: the after-restore hook reads the key; its connection is closed
            # (CRIU cannot dump it here), its digest kept
            assert function.call("after_restore") == {"ok": True}
            assert function.call("drop_connections") == {"ok": True}
        criu_dump(function.pid, images)
    finally:
        function.stop()
    try:
        return checkpoint_copies(images, key), calls
    finally:
        shutil.rmtree(images, ignore_errors=True)


def test_no_snapshot_of_a_snap_start_function_holds_its_key_or_the_key_digest(
    criu: None, demo_dir: Path, moto_server: str, tmp_path: Path
) -> None:
    client = secrets_client(moto_server)
    # GIVEN a fresh key of the template's form for each checkpoint, held by Secrets Manager
    found: list[dict[str, int]] = []
    reads_before: list[int] = []
    for index in range(CHECKPOINTS):
        key = template_key()
        name = f"siglip-text/{tmp_path.name}-{index}"
        arn = client.create_secret(Name=name, SecretString=key)["ARN"]
        # WHEN a snap-start function is initialized, its before-snapshot hooks run, and it is
        # checkpointed
        env = api_key_env(demo_dir, moto_server, arn)
        copies, calls = checkpoint(env, tmp_path / f"c{index}", key)
        found.append(copies)
        reads_before.append(calls.count("GetSecretValue"))
    # AND a control checkpoint of a process that holds the key's digest (after a restore)
    key = template_key()
    name = f"siglip-text/{tmp_path.name}-control"
    arn = client.create_secret(Name=name, SecretString=key)["ARN"]
    env = api_key_env(demo_dir, moto_server, arn)
    control, _ = checkpoint(env, tmp_path / "control", key, read_keys_first=True)
    with_copies = [copies for copies in found if any(copies.values())]
    print(
        f"\n{CHECKPOINTS} checkpoints: {len(with_copies)} hold the key or its digest "
        f"(key copies {sum(c['key'] for c in found)}, digest copies "
        f"{sum(c['sha256'] for c in found)}: {found}); GetSecretValue calls before each "
        f"snapshot {reads_before}; control {control}"
    )
    # THEN the search finds the digest a process holds
    assert control["sha256"] >= 1, control
    # AND no snapshot holds the key or its digest, and no process read the key before it
    assert with_copies == [], found
    assert reads_before == [0] * CHECKPOINTS, reads_before
