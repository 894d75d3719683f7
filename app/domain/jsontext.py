"""The one JSON writer of the service: compact text, non-ASCII kept, finite numbers only;
and the reader's rule that a key appears once per object.

Result documents, JSON columns, the rows sent to PostgreSQL as JSON and the size check of
``meta`` all write JSON with these options, so the bytes a client gets back, the bytes
stored and the bytes measured agree. ``canonical`` adds sorted keys, for the idempotency
hash of a match body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: ``value`` as compact JSON text; a number that is not finite is a ValueError.
compact: Callable[[Any], str] = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode

#: :data:`compact` with the keys of every object sorted: one text per value.
canonical: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode

#: A string as :data:`compact` writes it (quoted, escaped; non-ASCII kept).
string: Callable[[str], str] = json.encoder.encode_basestring


class DuplicateKey(ValueError):
    """A key twice in one JSON object (:func:`unique_keys`); the message is the key."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` refusing a key twice in one object (a parser
    keeps the last value silently); raises :class:`DuplicateKey`."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return out
