"""The dependency direction of the package (see STYLE.md): checked from the source."""

from __future__ import annotations

import ast
from pathlib import Path

import siglip_text

PACKAGE = Path(siglip_text.__file__).resolve().parent


def imports_of(module: str) -> set[str]:
    """Top-level modules (package-relative or third-party roots) a module imports anywhere."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level >= 1:
                if node.module:
                    found.add(f".{node.module.split('.')[0]}")
                else:
                    found.update(f".{alias.name}" for alias in node.names)
            elif node.module:
                found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def test_base_modules_import_nothing_of_the_package() -> None:
    for module in ("config", "errors", "manifest"):
        own = {i for i in imports_of(module) if i.startswith(".")}
        assert own <= {".errors"}, (module, own)


def test_engine_modules_never_import_http_frameworks() -> None:
    for module in ("config", "errors", "manifest", "tokenization", "encoder", "embedding"):
        assert not imports_of(module) & {"fastapi", "starlette", "mangum", "uvicorn"}, module


def test_only_api_imports_fastapi_and_only_lambda_function_imports_mangum() -> None:
    for module in modules():
        found = imports_of(module)
        if module != "api":
            assert not found & {"fastapi", "starlette"}, module
        if module != "lambda_function":
            assert "mangum" not in found, module


def test_nothing_imports_cli_or_lambda_function() -> None:
    for module in modules():
        assert not imports_of(module) & {".cli", ".lambda_function"}, module


def test_serving_path_never_imports_torch_or_transformers() -> None:
    serving = (
        "config",
        "errors",
        "manifest",
        "tokenization",
        "encoder",
        "embedding",
        "schemas",
        "api",
        "admission",
        "lambda_function",
        "observability",
    )
    for module in serving:
        assert not imports_of(module) & {"torch", "transformers", "onnx"}, module
