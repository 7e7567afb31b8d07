"""The ``siglip-text`` command. Only the chosen subcommand's module is imported.

A subcommand module provides ``configure(parser)`` (arguments only, no heavy imports at
module level) and ``run(args) -> int`` (the exit status). ``siglip-text load-test --help`` thus
loads neither ONNX Runtime nor tokenizers. Every tool follows one exit-status rule
(tools/exit_status.py): 0 success, 1 a check failed, 2 unusable input.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

#: name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("siglip_text.serve", "serve the OpenAI-compatible API with uvicorn"),
    "load-test": (
        "siglip_text.tools.load_generator",
        "HTTP load test of any /v1/embeddings endpoint",
    ),
    "export": (
        "siglip_text.tools.export.command",
        "export a SigLIP checkpoint to a checked bundle (fp32/int8)",
    ),
    "verify": (
        "siglip_text.tools.verify.command",
        "check a bundle or endpoint against reference ids/vectors",
    ),
    "reference": (
        "siglip_text.tools.reference",
        "write reference ids and vectors with transformers",
    ),
    "embed": ("siglip_text.tools.embed", "embed a text file or JSONL to .npy or JSONL"),
    "zero-shot": ("siglip_text.tools.zero_shot", "top-1/top-5 accuracy from image embeddings"),
    "fingerprint": (
        "siglip_text.tools.checkpoint_fingerprint",
        "the contract fingerprint of a checkpoint (no ONNX, no torch); compare an endpoint's",
    ),
    "fidelity": (
        "siglip_text.tools.fidelity",
        "a bundle's vectors vs fp32 on each CPU (native, AVX2, AVX, arm64 under qemu)",
    ),
    "check-deploy": (
        "siglip_text.tools.deploy_check",
        "check a samconfig.toml environment against the template's rules, before sam build",
    ),
}


#: The one install line of each optional extra (from a checkout of the repository). The
#: export line takes torch from PyTorch's CPU wheel index first: from PyPI, torch for Linux
#: x86_64 is the CUDA build, gigabytes of CUDA libraries (https://pytorch.org/get-started/locally/).
INSTALL_LINES: dict[str, str] = {
    "server": "pip install -e '.[server]'",
    "export": "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
    "&& pip install -e '.[export]'",
    "deploy": "pip install -e '.[deploy]'",
}

#: command -> (extra, the modules of that extra the command imports). Checked before the
#: command runs, so a missing extra is one line and exit 2, never a traceback.
NEEDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "serve": ("server", ("uvicorn",)),
    "export": ("export", ("transformers", "torch", "onnx")),
    "reference": ("export", ("transformers", "torch")),
    "check-deploy": ("deploy", ("yaml",)),
}


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (torch takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(command: str) -> str | None:
    """The message for a command whose extra is not installed, or None when it is."""
    extra, modules = NEEDS.get(command, ("", ()))
    missing = [module for module in modules if not is_installed(module)]
    if not missing:
        return None
    return (
        f"needs the '{extra}' extra (missing: {', '.join(missing)}); install it with:\n"
        f"  {INSTALL_LINES[extra]}"
    )


def missing_module_message(exc: ModuleNotFoundError) -> str | None:
    """The install line for a module of a known extra that a command failed to import."""
    top = (exc.name or "").split(".")[0]
    for extra, modules in NEEDS.values():
        if top in modules:
            return (
                f"needs the '{extra}' extra (missing: {top}); install it with:\n  "
                + (INSTALL_LINES[extra])
            )
    return None


#: Other names of a command: ``bench`` is ``load-test``, whose name keeps it apart from the
#: repository's benchmarks/ (the project's own measurements).
ALIASES: dict[str, str] = {"bench": "load-test"}


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first argument that is one), if any."""
    for arg in argv:
        if arg in COMMANDS or arg in ALIASES:
            return ALIASES.get(arg, arg)
        if not arg.startswith("-"):
            return None
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` gets its module imported and arguments."""
    parser = argparse.ArgumentParser(
        prog="siglip-text", description="SigLIP 2 text embeddings on CPU with ONNX Runtime."
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = chosen_command(argv)
    for name, (module_name, help_text) in COMMANDS.items():
        aliases = [alias for alias, command in ALIASES.items() if command == name]
        sub = commands.add_parser(name, aliases=aliases, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.configure(sub)
            sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(argv).parse_args(argv)
    except ModuleNotFoundError as exc:  # a command module that imports its extra at the top
        message = missing_module_message(exc)
        if message is None:
            raise
        print(f"siglip-text {chosen_command(argv)}: {message}", file=sys.stderr)
        return 2
    from .tools.exit_status import EXIT_UNUSABLE_INPUT, CheckFailed, ToolError

    command = ALIASES.get(args.command, args.command)
    message = missing_extra(command)
    if message is not None:
        print(f"siglip-text {command}: {message}", file=sys.stderr)
        return EXIT_UNUSABLE_INPUT
    try:
        return int(args._module.run(args))
    except (ToolError, CheckFailed) as exc:
        print(f"siglip-text {args.command}: {exc}", file=sys.stderr)
        return exc.exit_status
    except ModuleNotFoundError as exc:
        message = missing_module_message(exc)
        if message is None:
            raise
        print(f"siglip-text {args.command}: {message}", file=sys.stderr)
        return EXIT_UNUSABLE_INPUT


if __name__ == "__main__":
    sys.exit(main())
