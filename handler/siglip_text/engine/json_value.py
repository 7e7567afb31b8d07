"""The type of a JSON value, named once: what `json.loads` returns and `json.dumps` takes.

It is `Any` because the standard library types it so, and a recursive union would need an
isinstance check at every step of documents (manifests, tokenizer.json, events) that their
own schemas (pydantic models, explicit checks) already validate where they are read.
"""

from __future__ import annotations

from typing import Any, TypeAlias

#: A JSON value: an object, array, string, number, boolean or null (see the docstring).
JSONValue: TypeAlias = Any
#: A JSON object.
JSONObject: TypeAlias = dict[str, JSONValue]
