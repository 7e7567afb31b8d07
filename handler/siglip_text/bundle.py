"""The artifact contract: manifest fields, the revision rule and file checks.

The manifest is a language-neutral JSON file owned by whoever produced the artifacts. The
four contract fields are required; anything else (provenance, hashes, logit scale) is kept
so one canonical file can be shared by several services.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from .errors import ModelLoadError

REVISION_PATTERN = r"^[0-9a-fA-F]{40}$"


class Manifest(BaseModel):
    """What the artifacts claim to be. ``revision`` must be an immutable commit SHA."""

    model_config = ConfigDict(extra="allow", frozen=True)

    repository: str = Field(min_length=1)
    revision: str
    embedding_dimension: StrictInt = Field(gt=0)
    text_max_token_length: StrictInt = Field(gt=1)

    @field_validator("repository")
    @classmethod
    def _repository_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("revision")
    @classmethod
    def _revision_is_commit_sha(cls, value: str) -> str:
        import re

        if not re.fullmatch(REVISION_PATTERN, value):
            raise ValueError(
                "must be a full 40-character hexadecimal commit SHA; tags and branch names "
                "are mutable and refused"
            )
        return value.lower()

    @property
    def extras(self) -> dict[str, Any]:
        """Fields beyond the contract (provenance and the like)."""
        return dict(self.model_extra or {})

    def recorded_files(self) -> list[str]:
        """Names in the ``files`` section written by ``siglip-text export`` (may be empty)."""
        files = self.extras.get("files")
        if not isinstance(files, dict):
            return []
        return [name for name in files if isinstance(name, str) and "/" not in name and name]

    def recorded_file(self, name: str) -> dict[str, Any] | None:
        """The ``files[name]`` entry (sha256, size) written by ``siglip-text export``, if any."""
        files = self.extras.get("files")
        if isinstance(files, dict):
            entry = files.get(name)
            if isinstance(entry, dict):
                return entry
        return None


def load_manifest(path: Path) -> Manifest:
    """Read and validate the manifest; every failure names the file and the field."""
    raw = read_artifact(path, "manifest")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"manifest {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"manifest {path}: must be a JSON object")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '?'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)
        )
        raise ModelLoadError(f"manifest {path}: {problems}") from None


def read_artifact(path: Path, what: str) -> bytes:
    """Read a whole artifact file, failing with a message that names it."""
    check_file(path, what)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ModelLoadError(f"{what} {path}: cannot be read ({exc.strerror})") from None


def check_file(path: Path, what: str, manifest: Manifest | None = None) -> None:
    """The file exists, is a readable non-empty regular file, and has the recorded size."""
    if not path.exists():
        raise ModelLoadError(f"{what} {path}: file not found")
    if not path.is_file():
        raise ModelLoadError(f"{what} {path}: not a regular file")
    if not os.access(path, os.R_OK):
        raise ModelLoadError(f"{what} {path}: not readable (permission denied)")
    size = path.stat().st_size
    if size == 0:
        raise ModelLoadError(f"{what} {path}: file is empty")
    recorded = manifest.recorded_file(path.name) if manifest is not None else None
    if recorded is not None and isinstance(recorded.get("size"), int) and recorded["size"] != size:
        raise ModelLoadError(
            f"{what} {path}: size {size} bytes differs from the manifest's {recorded['size']} "
            "(truncated or replaced file)"
        )


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
