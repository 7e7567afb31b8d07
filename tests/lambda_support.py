"""Import the Lambda entry point in-process under a given environment (its init phase).

Importing it reconfigures the package's loggers for good (Powertools'
``copy_config_to_registered_loggers``: its own handlers, ``propagate = False``); the helpers
here put them back, so that later tests see plain `logging` as `siglip-text serve` has it.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from siglip_text.config import get_settings

MODULE = "siglip_text.lambda_function"


@contextmanager
def imported_lambda(model_dir: Path, **env: str) -> Iterator[ModuleType]:
    """`siglip_text.lambda_function` freshly imported (init at import) with SIGLIP_* set."""
    patch = pytest.MonkeyPatch()
    patch.setenv("SIGLIP_MODEL_DIR", str(model_dir))
    patch.setenv("SIGLIP_ORT_INTRA_OP_THREADS", "1")
    patch.setenv("SIGLIP_AUTH_MODE", "none")
    patch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    patch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SiglipTextTest")
    for name, value in env.items():
        patch.setenv(name, value)
    get_settings.cache_clear()
    sys.modules.pop(MODULE, None)
    try:
        with plain_package_loggers():
            yield importlib.import_module(MODULE)
    finally:
        sys.modules.pop(MODULE, None)
        get_settings.cache_clear()
        patch.undo()


@contextmanager
def plain_package_loggers() -> Iterator[None]:
    """The ``siglip_text`` loggers as plain `logging` has them (no handlers, propagating) for
    the block, and as they were afterwards."""
    loggers = [logging.getLogger("siglip_text")] + [
        logger
        for name, logger in logging.root.manager.loggerDict.items()
        if name.startswith("siglip_text.") and isinstance(logger, logging.Logger)
    ]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    for logger in loggers:
        logger.handlers, logger.propagate, logger.disabled = [], True, False
        logger.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        for logger, handlers, level, propagate, disabled in saved:
            logger.handlers, logger.propagate, logger.disabled = handlers, propagate, disabled
            logger.setLevel(level)
