"""Paging cursors: opaque to clients, the last entry's key underneath."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from app.errors import InvalidInput


def encode_cursor(key: list[Any]) -> str:
    """An opaque cursor: URL-safe base64 of the last entry's key as JSON."""
    raw = json.dumps(key, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Any:
    try:
        if len(cursor) > 1024:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        if b"\\u0000" in raw or b"\x00" in raw:
            raise ValueError("NUL")  # never in a key this service wrote
        return json.loads(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput("cursor: not a cursor returned by this service") from None
