"""The image build's check of a model bundle, against a pin kept outside it.

The manifest records each file's sha256 and size, but a manifest edited together with a file
would vouch for the edit; so the manifest's own sha256 is pinned outside the bundle, in
``<bundle directory>.sha256`` beside it (``layers/model.sha256``: ``siglip-text export``
writes it, the deploy keeps it, e.g. committed; docs/deploy.md, "The bundle and its pin").
The build passes only a bundle that is exactly what export wrote:

- ``manifest.json`` has the pinned sha256;
- every file the manifest records has its recorded sha256 and size (an integer: a string or
  a boolean is refused), so a file changed after export, even to the same size, fails;
- the bundle holds nothing else: no file the manifest does not record, no directory, and no
  symbolic link, whether it points inside the bundle or out of it.

Standard library only: it runs in the Dockerfile's bundle stage, on the bare base image,
before any dependency is installed (``python3 check_bundle_files.py /opt/model PIN``). The
function's init keeps its own, cheaper, size checks (`loading.py`); hashing a 1 GB bundle
there would cost seconds of every cold start.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path

MANIFEST = "manifest.json"
#: The files a bundle must record: the graph and the tokenizer (a graph's external data
#: file, when export wrote one, is recorded beside them and checked like them). The
#: package's names for them (engine/bundle.py) cannot be imported here: a unit test holds
#: the two equal.
REQUIRED = ("text_model.onnx", "tokenizer.json")
SHA256 = re.compile(r"[0-9a-f]{64}")


def read_pin(text: str) -> str:
    """The manifest's sha256 from a pin file (``sha256sum`` format: ``<hex>  manifest.json``);
    ValueError if it holds none."""
    fields = text.split()
    if not fields or not SHA256.fullmatch(fields[0].lower()):
        raise ValueError("it does not start with a sha256 (64 hexadecimal digits)")
    if len(fields) > 2 or (len(fields) == 2 and fields[1].lstrip("*") != MANIFEST):
        raise ValueError(f"it must hold one line: '<sha256>  {MANIFEST}'")
    return fields[0].lower()


def problems(bundle: Path, manifest_sha256: str) -> list[str]:
    """What is wrong with the bundle against the pinned manifest sha256 (nothing: empty)."""
    if bundle.is_symlink() or not bundle.is_dir():
        return [f"{bundle}: not a directory (a bundle is a plain directory of plain files)"]
    manifest_path = bundle / MANIFEST
    if manifest_path.is_symlink() or not manifest_path.is_file():
        return [f"{MANIFEST}: missing, or not a plain file"]
    raw = manifest_path.read_bytes()  # hashed and parsed from the same bytes
    actual = hashlib.sha256(raw).hexdigest()
    if actual != manifest_sha256.lower():
        return [
            f"{MANIFEST}: sha256 {actual}, the pin says {manifest_sha256} (the manifest is not "
            "the one export wrote for this deploy)"
        ]
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        return [f"{MANIFEST} cannot be read: {exc}"]
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        return [f"{MANIFEST} records no 'files' (export writes each file's sha256 and size)"]
    found = [
        f"{name}: the manifest records no sha256 for it" for name in REQUIRED if name not in files
    ]
    found += _unlisted(bundle, set(files))
    for name, entry in sorted(files.items()):
        found += _file_problems(bundle, name, entry)
    return found


def _unlisted(bundle: Path, recorded: set[str]) -> list[str]:
    """Everything in the bundle but plain files the manifest records (and the manifest)."""
    found = []
    entries = []
    for top, dirs, names in os.walk(bundle):  # never follows a link
        entries += [Path(top) / name for name in dirs + names]
    for path in sorted(entries):
        name = path.relative_to(bundle).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            found.append(f"{name}: a symbolic link (a bundle holds plain files only)")
        elif stat.S_ISDIR(mode):
            found.append(f"{name}: a directory (a bundle holds plain files only)")
        elif not stat.S_ISREG(mode):
            found.append(f"{name}: not a plain file")
        elif name != MANIFEST and name not in recorded:
            found.append(f"{name}: not recorded in the manifest (export wrote no such file)")
    return found


def _file_problems(bundle: Path, name: str, entry: object) -> list[str]:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name[0] == ".":
        return [f"{name}: not a file name of the bundle directory"]
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        return [f"{name}: the manifest records no sha256 for it"]
    if not SHA256.fullmatch(entry["sha256"].lower()):
        return [f"{name}: the manifest's sha256 is not 64 hexadecimal digits"]
    size = entry.get("size")
    # bool is an int in Python: refused by type, as a string is
    if "size" in entry and (type(size) is not int or size < 0):
        return [f"{name}: the manifest's size {size!r} is not a whole number of bytes"]
    path = bundle / name
    if path.is_symlink() or not path.is_file():
        return [f"{name}: missing from the bundle"]
    if size is not None and path.stat().st_size != size:
        return [f"{name}: {path.stat().st_size} bytes, the manifest says {size}"]
    with path.open("rb") as handle:
        actual = hashlib.file_digest(handle, "sha256").hexdigest()
    if actual != entry["sha256"].lower():
        return [f"{name}: sha256 {actual}, the manifest says {entry['sha256']}"]
    return []


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_bundle_files.py BUNDLE_DIR PIN_FILE", file=sys.stderr)
        return 2
    bundle, pin = Path(argv[0]), Path(argv[1])
    try:
        manifest_sha256 = read_pin(pin.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"bundle check failed: the pin {pin} cannot be used: {exc}", file=sys.stderr)
        return 1
    found = problems(bundle, manifest_sha256)
    for problem in found:
        print(f"bundle check failed: {problem}", file=sys.stderr)
    if not found:
        print(
            f"bundle check: {MANIFEST} of {bundle} has the pinned sha256, and every file "
            "matches its recorded sha256 and size"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
