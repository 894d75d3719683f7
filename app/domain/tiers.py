"""A ladder's tiers: names over ranges of the conservative rating, highest first.

A tier ``{"name": "Gold", "min": 20.0}`` holds the players whose conservative rating is at
least 20 and below the ``min`` of the tier above it (the top tier has no ceiling). A
rating below the lowest ``min`` is in no tier (null). Tiers describe the leaderboard: they
change no rating, and changing them needs no rebuild.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: A ladder's tiers as stored: (name, min) pairs, highest first.
TierList = Sequence[Mapping[str, Any]]


def tier_of(tiers: TierList | None, conservative: float) -> str | None:
    """The tier of a conservative rating (None: no tiers, or below the lowest)."""
    if not tiers:
        return None
    for tier in tiers:
        if conservative >= tier["min"]:
            return str(tier["name"])
    return None


def tier_range(tiers: TierList | None, name: str) -> tuple[float, float] | None:
    """The conservative ratings of tier ``name``: [floor, ceiling) (None: no such tier)."""
    ceiling = math.inf
    for tier in tiers or ():
        if tier["name"] == name:
            return float(tier["min"]), ceiling
        ceiling = float(tier["min"])
    return None


def tier_names(tiers: TierList | None) -> list[str]:
    return [str(tier["name"]) for tier in tiers or ()]
