"""The one JSON writer of the service: compact text, non-ASCII kept, finite numbers only.

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
