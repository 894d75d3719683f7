"""Placement: a player with fewer than the ladder's ``placement_matches`` counted matches in
the current season is provisional. A provisional player is left off the leaderboard
(unless asked for), has no rank and no tier, and is not counted in anyone's rank."""

from __future__ import annotations

#: The most placement matches a ladder may ask for.
MAX_PLACEMENT = 1000


def is_provisional(placement: int, matches: int, season_base: int) -> bool:
    """Whether a player with ``matches`` counted matches, ``season_base`` of them before
    the current season, is still placing on a ladder of ``placement`` placement matches."""
    return matches - season_base < placement
