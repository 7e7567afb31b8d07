"""The image build's check of a model bundle: every file the manifest records has its
recorded size and sha256, so a file changed after export (even to the same size) fails the
build, not a request.

Standard library only: it runs in the Dockerfile's bundle stage, on the bare base image,
before any dependency is installed (``python3 check_bundle_files.py /opt/model``). The
function's init keeps its own, cheaper, size checks (`loading.py`); hashing a 1 GB bundle
there would cost seconds of every cold start.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

#: The files a bundle must record: the graph and the tokenizer (a graph's external data
#: file, when export wrote one, is recorded beside them and checked like them). The
#: package's names for them (engine/bundle.py) cannot be imported here: a unit test holds
#: the two equal.
REQUIRED = ("text_model.onnx", "tokenizer.json")


def problems(bundle: Path) -> list[str]:
    """What is wrong with the bundle's files against its manifest (nothing: an empty list)."""
    try:
        manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"manifest.json cannot be read: {exc}"]
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        return ["manifest.json records no 'files' (export writes each file's sha256 and size)"]
    found = []
    for name in REQUIRED:
        if name not in files:
            found.append(f"{name}: the manifest records no sha256 for it")
    for name, entry in sorted(files.items()):
        path = bundle / name
        if "/" in name or name.startswith("."):
            found.append(f"{name}: not a file name of the bundle directory")
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            found.append(f"{name}: the manifest records no sha256 for it")
            continue
        if not path.is_file():
            found.append(f"{name}: missing from the bundle")
            continue
        size = entry.get("size")
        if isinstance(size, int) and path.stat().st_size != size:
            found.append(f"{name}: {path.stat().st_size} bytes, the manifest says {size}")
            continue
        with path.open("rb") as handle:
            actual = hashlib.file_digest(handle, "sha256").hexdigest()
        if actual != entry["sha256"].lower():
            found.append(f"{name}: sha256 {actual}, the manifest says {entry['sha256']}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_bundle_files.py BUNDLE_DIR", file=sys.stderr)
        return 2
    found = problems(Path(argv[0]))
    for problem in found:
        print(f"bundle check failed: {problem}", file=sys.stderr)
    if not found:
        print(f"bundle check: every recorded file of {argv[0]} matches its sha256")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
