"""A player's documents: the leaderboard, the player's rating and rank, seeds, history and
erasure."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from app.domain.documents.shared import (
    VOLATILITY_DESCRIPTION,
    Mu,
    NextCursor,
    RatingOut,
    RequestBody,
    Sigma,
)

# -- players and leaderboard ----------------------------------------------------------------


LEADERBOARD_ENTRY_EXAMPLE: dict[str, Any] = {
    "rank": 1,
    "player_id": "alice",
    "mu": 29.39583201999916,
    "sigma": 7.171475587326195,
    "conservative": 7.881405258020575,
    "matches": 1,
    "last_played_at": "2026-11-21T10:00:00Z",
    "volatility": None,
}


#: What ``provisional`` is, wherever a player shows it.
PROVISIONAL_DESCRIPTION = (
    "Still placing: fewer counted matches in the current season than the ladder's "
    "`placement_matches`. A provisional player has no rank and no tier, is left off the "
    "leaderboard unless `include_provisional=true`, and counts in no one's rank."
)

#: What ``as_of`` is, wherever ratings show it.
AS_OF_DESCRIPTION = (
    "On a ladder that ages ratings (`tau_per_day`, Glicko-2's `deviation_per_day`): the "
    "time each rating here stands at, its sigma widened for the player's time away since "
    "their last match and its conservative rating (the leaderboard's order) with it, so an "
    "inactive player sinks. Brought forward by the daily inactivity pass (at most a day "
    "old); a player who played since is shown as their match left them. Null: the ladder "
    "does not age ratings (or no pass has run yet)."
)

#: What ``tier`` is, wherever a rating shows it.
TIER_DESCRIPTION = (
    "The tier of the conservative rating by the ladder's `tiers` (null without tiers or "
    "below the lowest)."
)


class LeaderboardEntry(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [LEADERBOARD_ENTRY_EXAMPLE]})

    rank: int | None = Field(
        description="Place on this leaderboard: 1 + the ranked players ahead of this one "
        "(among those with at least `min_matches`); null for a provisional player."
    )
    player_id: str
    mu: float
    sigma: float | None
    conservative: float
    matches: int
    last_played_at: datetime | None
    volatility: float | None = Field(default=None, description=VOLATILITY_DESCRIPTION)
    tier: str | None = Field(default=None, description=TIER_DESCRIPTION)
    provisional: bool = Field(default=False, description=PROVISIONAL_DESCRIPTION)


class LeaderboardPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "entries": [LEADERBOARD_ENTRY_EXAMPLE],
                    "next_cursor": "WzcuODgxNDA1MjU4MDIwNTc1LCJhbGljZSJd",
                }
            ]
        }
    )

    entries: list[LeaderboardEntry]
    next_cursor: NextCursor
    prev_cursor: str | None = Field(
        default=None,
        description="The page before this one, as `cursor` (null on the first page): "
        "paging back up from a deep page or from `around`.",
    )
    as_of: datetime | None = Field(default=None, description=AS_OF_DESCRIPTION)


class PlayerOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "ladder": "halo-ffa",
                    "player_id": "alice",
                    "mu": 29.39583201999916,
                    "sigma": 7.171475587326195,
                    "conservative": 7.881405258020575,
                    "rank": 1,
                    "matches": 1,
                    "last_played_at": "2026-11-21T10:00:00Z",
                    "volatility": None,
                    "season": "1",
                }
            ]
        }
    )

    ladder: str
    player_id: str
    mu: float
    sigma: float | None
    conservative: float
    rank: int | None = Field(
        description="Place on the leaderboard: ranked players ahead of this one, plus 1 "
        "(null while provisional)."
    )
    matches: int
    last_played_at: datetime | None
    volatility: float | None = Field(default=None, description=VOLATILITY_DESCRIPTION)
    season: str = Field(default="1", description="The ladder's current season (its id).")
    tier: str | None = Field(default=None, description=TIER_DESCRIPTION)
    season_matches: int = Field(default=0, description="Counted matches in the current season.")
    provisional: bool = Field(default=False, description=PROVISIONAL_DESCRIPTION)
    as_of: datetime | None = Field(default=None, description=AS_OF_DESCRIPTION)


class PlayerSeed(RequestBody):
    """Set a player's rating (an import from another system); kept in history as an adjustment."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"mu": 31.5, "sigma": 2.5}, {"mu": 1720.0}]},
    )

    mu: Mu
    sigma: Sigma | None = Field(
        default=None,
        description="Bayesian ladders: default the player's current sigma (the prior's for "
        "a new player). Elo: omit or null.",
    )
    volatility: float | None = Field(
        default=None,
        description="Glicko-2 ladders: the volatility, in the range of the ladder's "
        "`volatility` parameter; default the player's current one (the prior's for a new "
        "player). Other ladders: omit or null.",
    )


class HistoryEntry(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "kind": "adjustment",
                    "match_id": None,
                    "played_at": "2026-11-21T09:00:00Z",
                    "before": {
                        "mu": 25.0,
                        "sigma": 8.333333333333334,
                        "conservative": 0.0,
                        "volatility": None,
                    },
                    "after": {"mu": 31.5, "sigma": 2.5, "conservative": 24.0, "volatility": None},
                    "season": "1",
                }
            ]
        }
    )

    kind: Literal["match", "adjustment", "season_reset"] = Field(
        description="`match`, `adjustment` (a seeded rating) or `season_reset` (the soft "
        "reset that carried the rating into a new season)."
    )
    match_id: str | None = Field(description="Null for an adjustment or a reset.")
    played_at: datetime = Field(
        description="When the match was played; when an adjustment or a reset was made."
    )
    before: RatingOut
    after: RatingOut
    season: str = Field(default="1", description="The season the entry belongs to (its id).")
    tier_before: str | None = Field(
        default=None, description="The tier of the rating before, by the ladder's tiers now."
    )
    tier_after: str | None = Field(
        default=None,
        description="The tier of the rating after: where it differs from `tier_before`, "
        "the player changed tier.",
    )


class HistoryPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "entries": [
                        {
                            "kind": "match",
                            "match_id": "g-1042",
                            "played_at": "2026-11-21T10:00:00Z",
                            "before": {
                                "mu": 1500.0,
                                "sigma": 350.0,
                                "conservative": 800.0,
                                "volatility": 0.06,
                            },
                            "after": {
                                "mu": 1662.310893906298,
                                "sigma": 290.31896371798047,
                                "conservative": 1081.672966470337,
                                "volatility": 0.05999967537233814,
                            },
                            "season": "1",
                        }
                    ],
                    "next_cursor": None,
                }
            ]
        }
    )

    entries: list[HistoryEntry]
    next_cursor: NextCursor


class ErasureResult(BaseModel):
    """What erasing a player did. The pseudonym now in their matches is not told: it would
    link those matches to the id again."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "ladder": "halo-ffa",
                    "player_id": "alice",
                    "matches_pseudonymised": 12,
                    "history_entries_removed": 13,
                }
            ]
        }
    )

    ladder: str
    player_id: str = Field(description="The id erased: the ladder no longer knows it.")
    matches_pseudonymised: int = Field(
        description="Stored matches (voided ones included) that now name a pseudonym instead."
    )
    history_entries_removed: int = Field(
        description="Rating changes removed: one per counted match and per seeded rating."
    )
