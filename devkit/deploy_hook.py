"""The pre-traffic hook's module, imported as Lambda imports it: ``pre_traffic`` from the root
of its zip (handler/deploy_hook/), outside the siglip_text package it never imports."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from devkit.paths import ROOT

HOOK_DIRECTORY = ROOT / "handler" / "deploy_hook"
MODULE = "pre_traffic"


def load_hook() -> ModuleType:
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    spec = importlib.util.spec_from_file_location(MODULE, HOOK_DIRECTORY / f"{MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
    return module
