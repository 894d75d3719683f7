"""What every document shares: the limits of ``http-api.md`` ("Limits"), the id and number
types, the request base (unknown fields refused), times, and a rating as the API shows it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from app.rating.params import MAX_LENGTH, MAX_MEAN, MIN_LENGTH

# -- limits (http-api.md "Limits") ---------------------------------------------------------

MAX_TEAMS = 64
MAX_PLAYERS = 256
MAX_ID_LENGTH = 128
MAX_META_BYTES = 4096
MAX_META_DEPTH = 32
MAX_PAGE = 1000
DEFAULT_PAGE = 50
#: Largest |mu| of a seeded rating: the range of a ladder's prior mean (``app.rating.params``).
MAX_MU = MAX_MEAN
#: Smallest and largest sigma of a seeded rating: the range of a ladder's prior sigma.
MIN_SIGMA = MIN_LENGTH
MAX_SIGMA = MAX_LENGTH
#: Largest |rank| or |score|.
MAX_OUTCOME = 1e15

Algorithm = Literal[
    "trueskill",
    "plackett_luce",
    "elo",
    "glicko2",
    "bradley_terry_full",
    "bradley_terry_part",
    "thurstone_mosteller_full",
    "thurstone_mosteller_part",
]

#: Player and match ids: 1 to 128 characters, no control characters, no "/" and not "." or
#: "..": every id must be addressable as one path segment by every route that takes it (a
#: "/", even percent-encoded, splits the segment; clients drop "." and ".." segments).
ID_PATTERN = r"^[^\x00-\x1f\x7f/]+$"


def _one_segment(value: str) -> str:
    if value in (".", ".."):
        raise ValueError(f"{value!r} cannot be addressed in a URL path")
    return value


PlayerId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN),
    AfterValidator(_one_segment),
]
MatchId = PlayerId
LadderId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,64}$")]
Weight = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=1.0)]
Outcome = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-MAX_OUTCOME, le=MAX_OUTCOME)]
Mu = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-MAX_MU, le=MAX_MU)]
Sigma = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=MIN_SIGMA, le=MAX_SIGMA)]
ParamValue = (
    Annotated[int, Field(strict=True)]
    | Annotated[float, Field(strict=True, allow_inf_nan=False)]
    | Annotated[str, StringConstraints(min_length=1, max_length=64)]
    | Annotated[bool, Field(strict=True)]
)


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


def parse_time(value: Any, field: str) -> datetime:
    """An RFC 3339 time (or an ISO 8601 date or local date-time, taken as UTC) in UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and len(value) <= 64:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{field}: not an RFC 3339 date-time") from None
    else:
        raise ValueError(f"{field}: must be an RFC 3339 date-time string")
    try:
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{field}: out of range") from None


# -- shared pieces --------------------------------------------------------------------------


#: What ``volatility`` is, wherever a rating shows it.
VOLATILITY_DESCRIPTION = (
    "Glicko-2 ladders: the player's volatility (Glickman's sigma, on Glicko-2's internal "
    "scale: how erratic the player's results are). Other ladders: null."
)


class RatingOut(BaseModel):
    """A belief: mean, standard deviation (null for Elo) and mu - k sigma; on a Glicko-2
    ladder also the volatility. A player's history gives `volatility` on every ladder (null
    but on Glicko-2 ladders); a match result gives it on Glicko-2 ladders only."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"mu": 25.0, "sigma": 8.333333333333334, "conservative": 0.0},
                {"mu": 1516.0, "sigma": None, "conservative": 1516.0},
                {
                    "mu": 1662.310893906298,
                    "sigma": 290.31896371798047,
                    "conservative": 1081.672966470337,
                    "volatility": 0.05999967537233814,
                },
            ]
        }
    )

    mu: float
    sigma: float | None
    conservative: float
    volatility: float | None = Field(
        default=None,
        description=VOLATILITY_DESCRIPTION + " Left out of the match results of other ladders.",
    )


NextCursor = Annotated[
    str | None, Field(description="Pass as `cursor` for the next page; null on the last page.")
]


#: The type of the error of a match that names a player twice (what a reader of match
#: files may leave out rather than stop at: ``app.domain.match_files``).
REPEATED_PLAYER = "repeated_player"


def check_shape_of_teams(
    field: str, values: Sequence[Sequence[object]] | None, teams: list[list[str]] | None
) -> None:
    """``values`` (a field of one value per player) has the shape of ``teams``, or the
    ValueError naming ``field``: a list per team, a value per player."""
    if values is None or teams is None:
        return
    if len(values) != len(teams):
        raise ValueError(f"{field}: expected {len(teams)} lists (one per team), got {len(values)}")
    for j, (team, row) in enumerate(zip(teams, values, strict=True)):
        if len(row) != len(team):
            raise ValueError(f"{field}[{j}]: {len(row)} values for a team of {len(team)}")


class TeamsBody(RequestBody):
    """Teams of player ids, with optional partial-play weights of the same shape and
    advantage shares, one per team."""

    teams: list[Annotated[list[PlayerId], Field(min_length=1, max_length=MAX_PLAYERS)]] = Field(
        min_length=2,
        max_length=MAX_TEAMS,
        description="Teams of player ids: 2 to 64 teams, each of at least 1 player, "
        "at most 256 players in all, each player at most once.",
    )
    weights: list[list[Weight]] | None = Field(
        default=None,
        description="Partial play in [0, 1], one per player in the shape of `teams` (default 1).",
    )
    advantage: list[Weight] | None = Field(
        default=None,
        description="Each team's share in [0, 1] of the ladder's `advantage` (home ground, "
        "first move, white): `[1, 0]` when the first team plays at home. Default: no team "
        "has any. It counts only on a ladder whose `advantage` parameter is not 0.",
    )

    #: The most players one match may name: a request's bound (a match file rated offline
    #: has none: ``app.domain.match_files``).
    max_players: ClassVar[int | None] = MAX_PLAYERS

    @field_validator("teams")
    @classmethod
    def _players_once(cls, teams: list[list[str]]) -> list[list[str]]:
        total = sum(len(team) for team in teams)
        if cls.max_players is not None and total > cls.max_players:
            raise ValueError(f"teams: at most {MAX_PLAYERS} players in a match, got {total}")
        seen: set[str] = set()
        for team in teams:
            for player in team:
                if player in seen:
                    raise PydanticCustomError(
                        REPEATED_PLAYER,
                        "teams: player {player} appears twice",
                        {"player": repr(player[:MAX_ID_LENGTH])},
                    )
                seen.add(player)
        return teams

    @field_validator("weights")
    @classmethod
    def _weights_match_teams(
        cls, weights: list[list[float]] | None, info: ValidationInfo
    ) -> list[list[float]] | None:
        check_shape_of_teams("weights", weights, info.data.get("teams"))
        return weights

    @field_validator("advantage")
    @classmethod
    def _one_share_per_team(
        cls, shares: list[float] | None, info: ValidationInfo
    ) -> list[float] | None:
        teams = info.data.get("teams")
        if shares is None or teams is None:
            return shares
        if len(shares) != len(teams):
            raise ValueError(
                f"advantage: expected {len(teams)} values (one per team), got {len(shares)}"
            )
        return shares
