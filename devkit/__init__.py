"""What the tests and the benchmarks share, outside the package (never shipped): the one home
of the test helpers (tests/README.md).

For the deployment: ``sam`` translates template.yaml with AWS's own SAM translator, as
CloudFormation does on deploy; ``deployment`` reads template.yaml and .dockerignore;
``stacks``, ``guided``, ``sam_build`` and ``samcli_probe`` drive the SAM CLI's views of it.
For Lambda: ``events`` drives the files in events/; ``lambda_context`` is Lambda's context
object; ``aws_lambda`` builds the function in-process and makes gateway events;
``function_url`` turns HTTP requests into function URL events; ``secrets_manager`` is moto's
Secrets Manager, in process or on loopback; ``snapstart_emulation`` runs SnapStart's hooks as
the runtime does, searches a process for secrets and drives CRIU, on a function process
(``snapstart_function``). For HTTP: ``asgi``, ``servers``, ``guarded_server``, ``guards``,
``hostile`` and ``openai_shapes``. ``outcomes`` records a pytest run for CI. No test imports
another test module. Importable from the repository root (pytest's rootdir,
``python -m benchmarks.NAME``); needs the test extra.
"""

from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[1]
