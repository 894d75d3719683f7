"""A match's documents: the match posted, its stored result, batches, voids and pages of
matches."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from app.domain import jsontext
from app.domain.documents.shared import (
    MAX_META_BYTES,
    MAX_META_DEPTH,
    MatchId,
    NextCursor,
    Outcome,
    RatingOut,
    RequestBody,
    TeamsBody,
    check_shape_of_teams,
    parse_time,
)

# -- matches --------------------------------------------------------------------------------


class MatchCreate(TeamsBody):
    """One finished match. The outcome is `ranks`, or `scores`, or the order of `teams`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "match_id": "g-1042",
                    "played_at": "2026-11-21T10:00:00Z",
                    "teams": [["alice"], ["bob", "carol"], ["dave"]],
                    "ranks": [1, 2, 2],
                    "weights": [[1.0], [1.0, 0.5], [1.0]],
                    "meta": {"map": "lockout"},
                },
                {"teams": [["alice"], ["bob"]]},
                {"match_id": "g-1043", "teams": [["alice"], ["bob"]], "scores": [3, 5]},
                {
                    "match_id": "g-1044",
                    "teams": [["alice", "bob"], ["carol", "dave"]],
                    "ranks": [1, 2],
                    "player_scores": [[14, 3], [9, None]],
                },
            ]
        },
    )

    match_id: MatchId | None = Field(
        default=None,
        description="Idempotency key, 1 to 128 characters (the server makes one if absent): "
        "the same id with the same body again returns the stored result; with another "
        "body, 409.",
    )
    played_at: datetime | None = Field(
        default=None,
        description="When the match was played (RFC 3339; a time without offset is UTC). "
        "Default: now.",
    )
    ranks: list[Outcome] | None = Field(
        default=None, description="One per team, lower is better, equal is a draw."
    )
    scores: list[Outcome] | None = Field(
        default=None, description="One per team, higher is better (instead of ranks)."
    )
    player_scores: list[list[Outcome | None]] | None = Field(
        default=None,
        description="Each player's own statistic in the match (score, kills, objective "
        "points: higher is better), in the shape of `teams`; null where unknown. On a "
        "ladder whose `stat_scale` is above 0 it is evidence about each player's "
        "performance besides the outcome (TrueSkill 2's individual statistics).",
    )
    meta: dict[str, Any] | None = Field(
        default=None, description="Anything the game wants kept with the match (at most 4 KB)."
    )

    @field_validator("played_at", mode="before")
    @classmethod
    def _played_at(cls, value: Any) -> datetime | None:
        return None if value is None else parse_time(value, "played_at")

    @field_validator("ranks", "scores")
    @classmethod
    def _one_per_team(cls, values: list[float] | None, info: ValidationInfo) -> list[float] | None:
        teams = info.data.get("teams")
        if values is None:
            return None
        if info.field_name == "scores" and info.data.get("ranks") is not None:
            raise ValueError("scores: give ranks or scores, not both")
        if teams is not None and len(values) != len(teams):
            raise ValueError(
                f"{info.field_name}: expected {len(teams)} values (one per team), got {len(values)}"
            )
        return values

    @field_validator("player_scores")
    @classmethod
    def _scores_match_teams(
        cls, values: list[list[float | None]] | None, info: ValidationInfo
    ) -> list[list[float | None]] | None:
        check_shape_of_teams("player_scores", values, info.data.get("teams"))
        return values

    @field_validator("meta")
    @classmethod
    def _meta(cls, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        if meta is None:
            return None
        try:
            text = jsontext.compact(meta)
        except (ValueError, RecursionError):
            text = ""  # non-finite or absurdly deep: found and named just below
        if not text or text.count("[") + text.count("{") > MAX_META_DEPTH:
            # Fewer brackets than the depth limit cannot nest deeper than it.
            check_json_value(meta, "meta")
        size = len(text.encode())
        if size > MAX_META_BYTES:
            raise ValueError(f"meta: {size} bytes serialized, at most {MAX_META_BYTES}")
        return meta


def check_json_value(value: Any, field: str) -> None:
    """Reject non-finite numbers and nesting deeper than ``MAX_META_DEPTH`` (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_META_DEPTH:
            raise ValueError(f"{field}: nested deeper than {MAX_META_DEPTH} levels")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{field}: numbers must be finite")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


class PlayerResult(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "player_id": "alice",
                    "weight": 1.0,
                    "before": {"mu": 25.0, "sigma": 8.333333333333334, "conservative": 0.0},
                    "after": {
                        "mu": 29.39583201999916,
                        "sigma": 7.171475587326195,
                        "conservative": 7.881405258020575,
                    },
                }
            ]
        }
    )

    player_id: str
    weight: float
    before: RatingOut
    after: RatingOut


class TeamResult(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "rank": 1,
                    "players": [
                        {
                            "player_id": "alice",
                            "weight": 1.0,
                            "before": {"mu": 25.0, "sigma": 8.333333333333334, "conservative": 0.0},
                            "after": {
                                "mu": 29.39583201999916,
                                "sigma": 7.171475587326195,
                                "conservative": 7.881405258020575,
                            },
                        }
                    ],
                }
            ]
        }
    )

    rank: int = Field(description="1 is best; tied teams share a rank (dense ranking).")
    players: list[PlayerResult]


MATCH_RESULT_EXAMPLE: dict[str, Any] = {
    "match_id": "g-1042",
    "ladder": "halo-ffa",
    "seq": 17,
    "played_at": "2026-11-21T10:00:00Z",
    "recorded_at": "2026-11-21T10:00:02.125Z",
    "quality": 0.4472135954999579,
    "win_probabilities": [0.5, 0.5],
    "teams": [
        {
            "rank": 1,
            "players": [
                {
                    "player_id": "alice",
                    "weight": 1.0,
                    "before": {"mu": 25.0, "sigma": 8.333333333333334, "conservative": 0.0},
                    "after": {
                        "mu": 29.39583201999916,
                        "sigma": 7.171475587326195,
                        "conservative": 7.881405258020575,
                    },
                }
            ],
        },
        {
            "rank": 2,
            "players": [
                {
                    "player_id": "bob",
                    "weight": 1.0,
                    "before": {"mu": 25.0, "sigma": 8.333333333333334, "conservative": 0.0},
                    "after": {
                        "mu": 20.604167980000835,
                        "sigma": 7.171475587326195,
                        "conservative": -0.910258781977749,
                    },
                }
            ],
        },
    ],
    "meta": None,
}


class MatchResult(BaseModel):
    """A recorded match: every player's rating before and after, and the pre-match quality."""

    model_config = ConfigDict(json_schema_extra={"examples": [MATCH_RESULT_EXAMPLE]})

    match_id: str
    ladder: str
    seq: int = Field(
        description="The match's place in the order of recording. One numbering serves the "
        "whole service, every ladder together, so a ladder's seqs have gaps: other ladders' "
        "matches, and on PostgreSQL the numbers of recordings that rolled back. A client may "
        "rely on this: a seq is unique across all ladders and never changes (a void or a "
        "rebuild keeps it); within a ladder, a match whose recording began after another's "
        "was answered has a higher seq, and a match sharing a player with an earlier one "
        "always has a higher seq (ratings are applied in seq order); the matches list is "
        "newest first by seq. It is not a count of matches and not contiguous; on PostgreSQL "
        "two matches of different players recorded at the same moment may become visible "
        "in an order other than their seqs."
    )
    played_at: datetime
    recorded_at: datetime
    quality: float | None = Field(description="Match quality before the match, in (0, 1].")
    win_probabilities: list[float] | None = Field(
        default=None,
        description="Each team's probability of finishing first (in the teams' order, "
        "summing to 1), from the ratings the match's update started from: what the ladder "
        "predicted, and what its accuracy (`GET .../accuracy`) scores. Null where the model "
        "gave none; absent in matches recorded before it was stored (a rebuild of the ladder "
        "adds it).",
    )
    teams: list[TeamResult]
    meta: dict[str, Any] | None = None
    voided: bool = Field(
        default=False,
        description="True once the match was voided: it no longer counts, and the numbers "
        "above are those it had when it was voided.",
    )
    voided_at: datetime | None = Field(default=None, description="When it was voided.")


#: The most matches one batch may hold (http-api.md "Limits").
MAX_BATCH = 10_000
#: The most player slots (players summed over its matches) one batch may hold: the work
#: and the memory of a batch grow with its slots, not its matches (a match holds up to
#: ``MAX_PLAYERS``). Chosen by measurement (benchmarks/batch.py): the largest batches within
#: both bounds take a few seconds on either database, far inside PostgreSQL's default
#: statement timeout and SQLite's busy timeout, and a worker's memory peaks about 150 MB
#: above its resting size.
MAX_BATCH_SLOTS = 50_000


def batch_slots(matches: list[Any]) -> int:
    """The player slots of a batch's matches as they arrived (not validated yet): the
    players of each match's ``teams`` summed; whatever is not a list of lists counts 0
    (validation names it afterwards)."""
    slots = 0
    for match in matches:
        teams = match.get("teams") if isinstance(match, dict) else None
        if isinstance(teams, list):
            slots += sum(len(team) for team in teams if isinstance(team, list))
    return slots


class MatchBatch(RequestBody):
    """Matches applied in list order, all or nothing."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "matches": [
                        {"match_id": "g-1", "teams": [["alice"], ["bob"]]},
                        {"match_id": "g-2", "teams": [["bob"], ["carol"]], "ranks": [1, 1]},
                    ]
                }
            ]
        },
    )

    matches: list[MatchCreate] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description=f"1 to {MAX_BATCH:,} match bodies holding at most {MAX_BATCH_SLOTS:,} "
        "players in all (each match's players summed), applied in this order. A match_id "
        "recorded before with the same body is returned as stored and not applied again; "
        "with another body the batch is refused (409); a match_id twice in one batch is 422.",
    )

    @field_validator("matches", mode="before")
    @classmethod
    def _within_bounds(cls, matches: Any) -> Any:
        # On the parsed JSON, before a match is validated: a batch past a bound costs no
        # more than counting it.
        if not isinstance(matches, list):
            return matches
        if len(matches) > MAX_BATCH:
            raise ValueError(
                f"matches: {len(matches)} matches, past the limit of {MAX_BATCH} matches in a batch"
            )
        slots = batch_slots(matches)
        if slots > MAX_BATCH_SLOTS:
            raise ValueError(
                f"matches: {slots} player slots (players summed over the matches), past the "
                f"limit of {MAX_BATCH_SLOTS} player slots in a batch"
            )
        return matches


class BatchResult(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"results": [MATCH_RESULT_EXAMPLE]}]})

    results: list[MatchResult] = Field(description="One per match, in the order sent.")


class VoidResult(BaseModel):
    """What voiding a match did."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "match_id": "g-1042",
                    "ladder": "halo-ffa",
                    "voided_at": "2026-11-21T12:00:00Z",
                    "already_voided": False,
                    "matches_rerated": 118,
                    "players_affected": 41,
                }
            ]
        }
    )

    match_id: str
    ladder: str
    voided_at: datetime
    already_voided: bool = Field(
        description="True when the match was voided before: nothing changed this time."
    )
    matches_rerated: int = Field(description="Later matches re-rated without it.")
    players_affected: int = Field(description="Players whose ratings were recomputed.")


class MatchPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"entries": [MATCH_RESULT_EXAMPLE], "next_cursor": None}]}
    )

    entries: list[MatchResult]
    next_cursor: NextCursor
