"""Paging cursors: opaque to clients, the last entry's key underneath."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from app.errors import InvalidInput


def encode_cursor(key: list[Any]) -> str:
    """An opaque cursor: URL-safe base64 of the last entry's key as JSON."""
    raw = json.dumps(key, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


#: The range of the integers a key holds (the database's 64-bit integers).
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def _storable(value: Any) -> bool:
    """Whether every part of a decoded key is something the database can take: an integer
    of 64 bits, a finite float, a string of valid UTF-8 without NUL, or a list of those."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return _INT_MIN <= value <= _INT_MAX
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate
            return False
        return "\x00" not in value
    if isinstance(value, list):
        return all(_storable(item) for item in value)
    return value is None


def decode_cursor(cursor: str) -> Any:
    """The key inside a cursor. A cursor is untrusted input: anything this service did not
    write (not base64 of JSON, or a key the database could not take: a number beyond 64
    bits or not finite, a lone surrogate, NUL) is a 422 naming the cursor."""
    try:
        if len(cursor) > 1024:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        if b"\\u0000" in raw or b"\x00" in raw:
            raise ValueError("NUL")  # never in a key this service wrote
        key = json.loads(raw)
        if not _storable(key):
            raise ValueError("not storable")
        return key
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        raise InvalidInput("cursor: not a cursor returned by this service") from None
