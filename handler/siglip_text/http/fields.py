"""OpenAI's rule for a request body's fields: one the endpoint does not define is a 400 that
names it (`refuse_unknown_fields`), for the embeddings and tokenize endpoints alike."""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.json_value import JSONValue
from .errors import UnknownFieldError, short


def refuse_unknown_fields(
    data: JSONValue, known: Mapping[str, JSONValue], advice: Mapping[str, str]
) -> None:
    """OpenAI's rule: a field the endpoint does not define (not in ``known``) is a 400
    (`UnknownFieldError`) that names it: OpenAI's own message, then what to do here
    (``advice``, by field name). Never silently ignored: a client written for another server
    would get an answer other than the one it asked for. Only the keys of a JSON object are
    read (anything else is left to the schema's own refusal)."""
    unknown = [name for name in data if name not in known] if isinstance(data, dict) else []
    if not unknown:
        return
    names = ", ".join(short(name, 40) for name in unknown[:5])
    if len(unknown) > 5:
        names += f" (and {len(unknown) - 5} more)"
    plural = "s" if len(unknown) > 1 else ""
    first = unknown[0]
    hint = advice.get(first) or (
        "this endpoint's fields are " + ", ".join(f"'{f}'" for f in known) + "; remove it"
    )
    raise UnknownFieldError(
        f"Unrecognized request argument{plural} supplied: {names}. {hint[0].upper()}{hint[1:]}",
        param=short(first, 40),
    )
