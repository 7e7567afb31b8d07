"""What the tests and the benchmarks share, outside the package (never shipped).

``sam`` translates template.yaml with AWS's own SAM translator, as CloudFormation does on
deploy; ``deployment`` reads template.yaml and .dockerignore; ``events`` drives the files in
events/; ``lambda_context`` is Lambda's context object; ``snapstart_emulation`` runs
SnapStart's hooks as the runtime does, searches a process for secrets and drives CRIU, on a
function process (``snapstart_function``). What only the tests use is in tests/support/.
Importable from the repository root (pytest's rootdir, ``python -m benchmarks.NAME``); needs
the test extra.
"""

from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[1]
