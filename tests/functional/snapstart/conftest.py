"""What the SnapStart tests share: the runtime client's hook registries, emptied around each
test, and moto's Secrets Manager in process holding the test key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devkit.keys import KEY
from devkit.secrets_manager import in_process_secret


@pytest.fixture
def registries() -> Iterator[tuple[list[Any], list[Any]]]:
    """snapshot_restore_py's registries (process-wide lists), emptied around each test."""
    snapshot_restore_py = pytest.importorskip(
        "snapshot_restore_py", reason="snapshot-restore-py is a runtime dependency"
    )
    before = snapshot_restore_py.get_before_snapshot()
    after = snapshot_restore_py.get_after_restore()
    saved = before[:], after[:]
    before.clear()
    after.clear()
    try:
        yield before, after
    finally:
        before[:], after[:] = saved


@pytest.fixture
def moto_secret() -> Iterator[tuple[Any, str]]:
    """moto's Secrets Manager in process holding `KEY`: its client and the secret's ARN."""
    with in_process_secret(KEY) as found:
        yield found
