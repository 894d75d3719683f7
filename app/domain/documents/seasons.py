"""Seasons: opening the next one, the list, and a closed season's archived standings (the
leaderboard's shape: :class:`~app.domain.documents.players.LeaderboardPage`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from app.domain.documents.shared import (
    ID_PATTERN,
    NextCursor,
    RequestBody,
    _one_segment,
    parse_time,
)

#: The id of a ladder's first season, opened when the ladder is made.
FIRST_SEASON = "1"

#: The longest season id.
MAX_SEASON_ID = 64

SeasonId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_SEASON_ID, pattern=ID_PATTERN),
    AfterValidator(_one_segment),
]


class SeasonCreate(RequestBody):
    """Close the current season and open this one: every rated player starts it from the
    soft reset of their rating (`keep`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"id": "2027-s1", "keep": 0.5},
                {"id": "2027-s2", "keep": 0.5, "starts_at": "2027-04-01T00:00:00Z"},
            ]
        },
    )

    id: SeasonId = Field(
        description="The new season's id: 1 to 64 characters, no `/` (it names the season "
        "in paths), unique in the ladder."
    )
    keep: float | None = Field(
        default=None,
        strict=True,
        allow_inf_nan=False,
        ge=0.0,
        le=1.0,
        description="How much of each rating carries over, f in [0, 1]: mu' = mu0 + f (mu - "
        "mu0), sigma'^2 = f sigma^2 + (1 - f) sigma0^2 against the ladder's prior (Elo: "
        "r' = initial + f (r - initial); Glicko-2's volatility is kept). 1 carries every "
        "rating over unchanged, 0 starts everyone at the prior. Default: the ladder's "
        "`season_keep` (itself 1 unless set).",
    )
    starts_at: datetime | None = Field(
        default=None,
        description="When to open it, in the future (RFC 3339): the service opens it by "
        "itself then (within `RATINGS_SEASON_CLOCK_S`, a second by default), exactly once "
        "whatever the number of workers and instances. A ladder holds one scheduled "
        "season at a time. Without it the season opens now.",
    )

    @field_validator("starts_at", mode="before")
    @classmethod
    def _starts_at(cls, value: Any) -> datetime | None:
        return None if value is None else parse_time(value, "starts_at")


_SEASON_EXAMPLE: dict[str, Any] = {
    "id": "2027-s1",
    "ordinal": 2,
    "state": "open",
    "keep": 0.5,
    "starts_at": None,
    "started_at": "2027-01-01T00:00:00Z",
    "ended_at": None,
    "matches": 1042,
    "players": 311,
    "opening": False,
}


class SeasonOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_SEASON_EXAMPLE]})

    id: str
    ordinal: int = Field(description="The season's place in the ladder's order, from 1.")
    state: Literal["scheduled", "open", "closed"] = Field(
        description="`scheduled`: to open at `starts_at`; `open`: the current season, which "
        "matches record into; `closed`: its standings are archived."
    )
    keep: float = Field(description="The soft reset's factor that opened it (1 for the first).")
    starts_at: datetime | None = Field(
        default=None, description="A scheduled season: when it opens. Null otherwise."
    )
    started_at: datetime | None = Field(description="When it opened; null while scheduled.")
    ended_at: datetime | None
    matches: int = Field(description="Matches recorded in the season that count.")
    players: int = Field(
        description="Open: the ladder's rated players; closed: the players of its archived "
        "standings."
    )
    opening: bool = Field(
        default=False,
        description="The current season is still opening: its soft reset is applied and the "
        "season before archived in steps of players, while matches go on being recorded "
        "(a player a match reaches first is reset first). Until it is done the leaderboard "
        "shows each player not reached yet as they ended the season before, and the season "
        "before's standings answer 409. Under a minute at a million players.",
    )


class SeasonPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"entries": [_SEASON_EXAMPLE], "next_cursor": None}]}
    )

    entries: list[SeasonOut] = Field(description="Newest first: the current season leads.")
    next_cursor: NextCursor
