"""The report of ``siglip-text verify``: a fixed-width table, then the failing details."""

from __future__ import annotations

from .checks import Check


def render(checks: list[Check], *, title: str, show: int = 10) -> str:
    """A fixed-width table, then the first ``show`` details of each failing check."""
    headers = ("check", "result", "threshold", "status")
    rows = [(c.name, c.result, c.threshold, c.status) for c in checks]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [f"verify {title}", line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for check in checks:
        if check.details and not check.passed:
            out.append(f"\n{check.name}: {len(check.details)} mismatch(es)")
            if check.cause:
                out.append(f"  {check.cause}")
            out += [f"  {d}" for d in check.details[:show]]
            if len(check.details) > show:
                out.append(f"  ... and {len(check.details) - show} more")
    verdict = "PASS" if all(c.passed for c in checks) else "FAIL"
    out.append(f"\n{verdict}: {sum(c.passed for c in checks)}/{len(checks)} checks passed")
    return "\n".join(out)
