"""Guards for the tests: a hang kills the run loudly; resident memory for leak bounds."""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def hang_guard(seconds: float) -> Iterator[None]:
    """Kill the test process with every thread's traceback if the block runs past `seconds`.

    A hang must fail the suite loudly rather than stall it; the limit is generous, it is not
    a speed assertion.
    """
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def rss_bytes() -> int:
    """This process's resident memory (Linux) once garbage is collected and the C heap's free
    pages are handed back (so that what remains is memory still held), for a leak bound."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")
