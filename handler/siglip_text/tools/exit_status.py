"""The tools' two kinds of failure, and the one exit-status rule every tool follows.

- `CheckFailed` (exit 1): the input was usable and a check on it missed its threshold
  (an export whose graph does not match PyTorch, a verify whose vectors differ).
- `ToolError` (exit 2): the input or an option is unusable (a missing file, a bad flag, a
  model that cannot be loaded, an endpoint that refuses the request).

``siglip-text`` (cli.main) turns either into ``siglip-text CMD: message`` on stderr.
Standard library only: the CLI imports this before any tool.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_UNUSABLE_INPUT = 2


class ToolError(Exception):
    """Raised when a tool's input or option is unusable; the message is for the user."""

    exit_status = EXIT_UNUSABLE_INPUT


class CheckFailed(Exception):
    """Raised when a check on usable input misses its threshold; the message says which."""

    exit_status = EXIT_CHECK_FAILED
