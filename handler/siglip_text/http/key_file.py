"""The API key file: `serve`'s key source without AWS (``--api-key-file``, ``SIGLIP_API_KEY_FILE``).

The file holds the valid keys, one per line; blank lines and lines whose first non-blank
character is ``#`` are ignored, and so is the whitespace around a key. Every key is at
least `MIN_KEY_LENGTH` characters and holds no whitespace. Several keys are all valid, so a
rotation adds the new key, moves the clients, then deletes the old line.

The file must be private to its owner, as ssh requires of a private key: a file whose mode
gives the group or others any permission (``mode & 0o077``) is refused (`KeyFileExposed`:
``chmod 600 PATH``). The mode is read from the open file (``fstat``), so a file swapped
between the check and the read is the one checked; a symbolic link is followed to its target
(a Kubernetes secret volume mounts its files as links), whose mode is what counts.

This module reads and checks; when to read is the authenticator's call (`auth`). The
file's identity (`Signature`: device, inode, size, modification and change times) tells
whether it may have changed since the last read without reading it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .key_secret import MIN_KEY_LENGTH

#: A key file is a few lines; a larger one is not a key file (and is not read into memory).
MAX_KEY_FILE_BYTES = 64 * 1024


class KeyFileError(ValueError):
    """Raised when the key file cannot be read, or holds something that is not keys."""


class KeyFileExposed(KeyFileError):
    """Raised when the key file's mode lets the group or others read or write it."""


@dataclass(frozen=True)
class Signature:
    """What tells a changed file from the one read: a replaced file (``mv``, a secret volume's
    update) has another inode, an edited one another size or times."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    mode: int

    @classmethod
    def of(cls, status: os.stat_result) -> Signature:
        return cls(
            status.st_dev,
            status.st_ino,
            status.st_size,
            status.st_mtime_ns,
            status.st_ctime_ns,
            status.st_mode,
        )


def signature(path: Path) -> Signature:
    """The file's signature now (``stat``, following links); OSError if it cannot be had."""
    return Signature.of(os.stat(path))


def check_private(path: Path, mode: int) -> None:
    """KeyFileExposed unless only the owner may read or write the file."""
    if mode & 0o077:
        raise KeyFileExposed(
            f"{path} has mode {stat.S_IMODE(mode):04o}: the group or others may read it, and "
            f"a key file must be private to its owner: chmod 600 {path}"
        )


def parse_key_file(text: str) -> tuple[str, ...]:
    """The keys a key file's text holds: one per line, blank and ``#`` lines ignored. Never
    quotes a key in its errors: a line is named by its number."""
    keys: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        if any(character.isspace() for character in key):
            raise KeyFileError(f"line {number}: a key holds no whitespace (one key per line)")
        if len(key) < MIN_KEY_LENGTH:
            raise KeyFileError(f"line {number}: a key must be at least {MIN_KEY_LENGTH} characters")
        keys.append(key)
    return tuple(keys)


def read_key_file(path: Path) -> tuple[tuple[str, ...], Signature]:
    """The keys the file holds now, and the signature of what was read.

    KeyFileExposed if the group or others may read it; KeyFileError if it is not a regular
    file, cannot be read, is larger than `MAX_KEY_FILE_BYTES` or holds something else than
    keys. An empty list of keys is returned as it is (the caller decides what no key means).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise KeyFileError(f"{path} cannot be opened: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise KeyFileError(f"{path} is not a regular file")
        check_private(path, status.st_mode)
        if status.st_size > MAX_KEY_FILE_BYTES:
            raise KeyFileError(f"{path} is larger than {MAX_KEY_FILE_BYTES} bytes: not a key file")
        try:
            raw = handle.read(MAX_KEY_FILE_BYTES + 1)
        except OSError as exc:
            raise KeyFileError(f"{path} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(f"{path} is larger than {MAX_KEY_FILE_BYTES} bytes: not a key file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KeyFileError(f"{path} is not UTF-8 text") from None
    try:
        keys = parse_key_file(text)
    except KeyFileError as exc:
        raise KeyFileError(f"{path}: {exc}") from None
    return keys, Signature.of(status)
