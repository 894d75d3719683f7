"""Moments: stored datetimes are UTC, and the replay counts time in days."""

from __future__ import annotations

from datetime import UTC, datetime

SECONDS_PER_DAY = 86_400.0


def utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes even for timezone-aware columns; they are UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
