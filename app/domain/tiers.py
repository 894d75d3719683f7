"""A ladder's tiers: names over the leaderboard, highest first, by threshold or by
percentile.

A tier ``{"name": "Gold", "min": 20.0}`` holds the players whose conservative rating is at
least 20 and below the ``min`` of the tier above it (the top tier has no ceiling). A
rating below the lowest ``min`` is in no tier (null).

A tier ``{"name": "Gold", "min_percentile": 90.0}`` holds the ranked players whose rank r
among the N ranked players of the leaderboard has ``100 (N - r) / N >= 90`` (the share of
ranked players below them), and who are not in a tier above: the top tenth. Tier i then
holds the ranks up to ``floor(N (100 - p_i) / 100)`` (:func:`rank_limits`, exact in
rational arithmetic), and the players up to the leaderboard key of the player at that
rank (its cutoff). A ladder's tiers are all of one kind.

Tiers describe the leaderboard: they change no rating, and changing them needs no rebuild.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

#: A ladder's tiers as stored: {"name", "min"} or {"name", "min_percentile"}, highest first.
TierList = Sequence[Mapping[str, Any]]
#: A leaderboard key: (conservative rating, player id); higher ratings first, then ids.
Key = tuple[float, str]


def by_percentile(tiers: TierList | None) -> bool:
    """Whether the tiers are by percentile (else by threshold, or none)."""
    return bool(tiers) and "min_percentile" in tiers[0]  # type: ignore[index]


def tier_of(tiers: TierList | None, conservative: float) -> str | None:
    """The threshold tier of a conservative rating (None: no tiers, below the lowest, or
    tiers by percentile: :class:`Tiering`)."""
    if not tiers or by_percentile(tiers):
        return None
    for tier in tiers:
        if conservative >= tier["min"]:
            return str(tier["name"])
    return None


def standing_tier(
    tiers: TierList | None, placement: int, conservative: float, season_matches: int
) -> str | None:
    """The threshold tier of a rating on a ladder of ``placement`` placement matches, its
    player having played ``season_matches`` counted matches in the season (a provisional
    player is in no tier)."""
    return None if season_matches < placement else tier_of(tiers, conservative)


def rank_limits(tiers: TierList, ranked: int) -> list[int]:
    """For tiers by percentile and ``ranked`` ranked players: the last rank each tier (or
    one above it) holds, ``floor(ranked (100 - p) / 100)``."""
    return [math.floor(ranked * (100 - Fraction(tier["min_percentile"])) / 100) for tier in tiers]


def tier_of_rank(tiers: TierList | None, rank: int | None, ranked: int) -> str | None:
    """The percentile tier of the player ranked ``rank`` among ``ranked`` (None: not
    ranked, or no tier holds the rank)."""
    if not tiers or rank is None or not by_percentile(tiers):
        return None
    for tier, limit in zip(tiers, rank_limits(tiers, ranked), strict=True):
        if rank <= limit:
            return str(tier["name"])
    return None


def at_or_above(conservative: float, player_id: str, key: Key) -> bool:
    """Whether (conservative, player_id) comes at or before ``key`` on the leaderboard."""
    return conservative > key[0] or (conservative == key[0] and player_id <= key[1])


@dataclass(frozen=True, slots=True)
class Tiering:
    """A ladder's tiers as one request applies them: by threshold, or by percentile with
    each tier's cutoff (the key of the last player it holds; None: it holds nobody)."""

    tiers: TierList | None
    cutoffs: Sequence[Key | None] = ()
    #: The last rank each tier by percentile holds (:func:`rank_limits`), for
    #: :meth:`of_rank`.
    limits: Sequence[int] = ()

    def of_rank(self, conservative: float, player_id: str, rank: int | None) -> str | None:
        """The tier of a ranked player by their rank among the ranked players (their
        leaderboard rank with no ``min_matches``), or by their key where cutoffs were found."""
        if not by_percentile(self.tiers) or self.cutoffs:
            return self.of(conservative, player_id)
        assert self.tiers is not None
        for tier, limit in zip(self.tiers, self.limits, strict=True):
            if rank is not None and rank <= limit:
                return str(tier["name"])
        return None

    def of(self, conservative: float, player_id: str) -> str | None:
        """The tier of a rating at this leaderboard key."""
        if not by_percentile(self.tiers):
            return tier_of(self.tiers, conservative)
        assert self.tiers is not None
        for tier, cutoff in zip(self.tiers, self.cutoffs, strict=True):
            if cutoff is not None and at_or_above(conservative, player_id, cutoff):
                return str(tier["name"])
        return None


def tier_range(tiers: TierList | None, name: str) -> tuple[float, float] | None:
    """The conservative ratings of threshold tier ``name``: [floor, ceiling) (None: no such
    tier, or tiers by percentile)."""
    if by_percentile(tiers):
        return None
    ceiling = math.inf
    for tier in tiers or ():
        if tier["name"] == name:
            return float(tier["min"]), ceiling
        ceiling = float(tier["min"])
    return None


def tier_names(tiers: TierList | None) -> list[str]:
    return [str(tier["name"]) for tier in tiers or ()]
