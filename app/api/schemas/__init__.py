"""Request and response bodies, with the shape checks of ``http-api.md`` ("Limits", "Errors").

Every request model forbids unknown fields (a misspelt ``rank`` must not silently mean
"winner first") and every number is finite and of a sane magnitude. A validator's message
starts with the field it is about; the problem+json ``detail`` adds the location.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)

from app.domain import jsontext
from app.rating.params import LADDER_PARAMETERS, MAX_LENGTH, MAX_MEAN, MIN_LENGTH, Parameter
from app.rating.registry import WENG_LIN_MODELS, parameters

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

    @field_validator("teams")
    @classmethod
    def _players_once(cls, teams: list[list[str]]) -> list[list[str]]:
        total = sum(len(team) for team in teams)
        if total > MAX_PLAYERS:
            raise ValueError(f"teams: at most {MAX_PLAYERS} players in a match, got {total}")
        seen: set[str] = set()
        for team in teams:
            for player in team:
                if player in seen:
                    raise ValueError(f"teams: player {player[:MAX_ID_LENGTH]!r} appears twice")
                seen.add(player)
        return teams

    @field_validator("weights")
    @classmethod
    def _weights_match_teams(
        cls, weights: list[list[float]] | None, info: ValidationInfo
    ) -> list[list[float]] | None:
        teams = info.data.get("teams")
        if weights is None or teams is None:
            return weights
        if len(weights) != len(teams):
            raise ValueError(
                f"weights: expected {len(teams)} lists (one per team), got {len(weights)}"
            )
        for j, (team, row) in enumerate(zip(teams, weights, strict=True)):
            if len(row) != len(team):
                raise ValueError(f"weights[{j}]: {len(row)} values for a team of {len(team)}")
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


# -- ladders --------------------------------------------------------------------------------


def _parameter_field(spec: Parameter) -> tuple[Any, Any]:
    description = f"{spec.description} Default {spec.default!r}; range {spec.range_text}."
    if spec.boolean:
        return bool, Field(default=spec.default, description=description, strict=True)
    if spec.choices:
        return Literal[spec.choices], Field(default=spec.default, description=description)
    low, high = spec.low, spec.high
    return float, Field(
        default=spec.default,
        description=description,
        ge=None if spec.low_open else low,
        gt=low if spec.low_open else None,
        le=None if spec.high_open else high,
        lt=high if spec.high_open else None,
    )


def _parameters_model(name: str, algorithm: str) -> type[BaseModel]:
    """The parameters of ``algorithm`` as a model, generated from the core's table of
    parameters (``app.rating.params``): the one place their defaults and ranges live."""
    # Glicko-2's model holds its own time and leaderboard parameters.
    ladder_level = algorithm not in ("elo", "glicko2")
    specs = parameters(algorithm) + (LADDER_PARAMETERS if ladder_level else ())
    fields: dict[str, Any] = {spec.name: _parameter_field(spec) for spec in specs}
    model: type[BaseModel] = create_model(
        name,
        __config__=ConfigDict(extra="forbid"),
        __doc__=f"The parameters of a {algorithm} ladder; any left out take their default.",
        **fields,
    )
    return model


TrueSkillParams = _parameters_model("TrueSkillParams", "trueskill")
PlackettLuceParams = _parameters_model("PlackettLuceParams", "plackett_luce")
EloParams = _parameters_model("EloParams", "elo")
Glicko2Params = _parameters_model("Glicko2Params", "glicko2")
PARAMS_MODELS: dict[str, type[BaseModel]] = {
    "trueskill": TrueSkillParams,
    "plackett_luce": PlackettLuceParams,
    "elo": EloParams,
    "glicko2": Glicko2Params,
    **{
        algorithm: _parameters_model(
            "".join(word.title() for word in algorithm.split("_")) + "Params", algorithm
        )
        for algorithm in WENG_LIN_MODELS
    },
}
_PARAMS_DESCRIPTION = (
    "The algorithm's parameters, each in its documented range (outside it: 422 naming "
    "the parameter and the range). One shape per `algorithm`."
)
#: How ``params`` appears in the OpenAPI document: one shape per algorithm, with the range
#: of every parameter. Requests are checked against the ladder's algorithm by the service
#: (a PATCH names no algorithm), which gives the 422 its detail.
PARAMS_SCHEMA: dict[str, Any] = {
    "anyOf": [model.model_json_schema() for model in PARAMS_MODELS.values()],
    "maxProperties": 32,
    "description": _PARAMS_DESCRIPTION,
}
ParamsBody = dict[Annotated[str, StringConstraints(max_length=64)], ParamValue]


class LadderCreate(RequestBody):
    """A new ladder: an algorithm and its parameters (missing ones take their defaults)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "id": "halo-ffa",
                    "algorithm": "trueskill",
                    "params": {"draw_probability": 0.05, "tau_per_day": 0.01},
                    "description": "Halo free-for-all",
                }
            ]
        },
    )

    id: LadderId = Field(description="1 to 64 of [a-z0-9_-].")
    algorithm: Algorithm
    params: Annotated[ParamsBody, WithJsonSchema(PARAMS_SCHEMA)] = Field(
        default_factory=dict, max_length=32
    )
    description: (
        Annotated[str, StringConstraints(max_length=1000, pattern=r"^[^\x00]*$")] | None
    ) = None


LADDER_EXAMPLE: dict[str, Any] = {
    "id": "halo-ffa",
    "algorithm": "trueskill",
    "params": {
        "mu": 25.0,
        "sigma": 8.333333333333334,
        "beta": 4.166666666666667,
        "tau": 0.08333333333333334,
        "draw_probability": 0.1,
        "tau_per_day": 0.0,
        "conservative_k": 3.0,
    },
    "description": "Halo free-for-all",
    "created_at": "2026-11-21T10:00:00Z",
    "players": 1672,
    "matches": 6227,
}


class LadderOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [LADDER_EXAMPLE]})

    id: str
    algorithm: Algorithm
    params: dict[str, bool | float | str]
    description: str | None
    created_at: datetime
    players: int
    matches: int = Field(description="Recorded matches that count (voided ones left out).")


class LadderUpdate(RequestBody):
    """New parameters or description. Parameters not named keep their current values."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"params": {"tau_per_day": 0.02}, "rebuild": True},
                {"description": "Halo 2 free-for-all, season 2"},
            ]
        },
    )

    params: Annotated[
        ParamsBody | None,
        WithJsonSchema(
            {
                "anyOf": [PARAMS_SCHEMA, {"type": "null"}],
                "description": "Parameters to change, each in its range for the ladder's "
                "algorithm. Every recorded match is then re-rated, so this needs "
                "`rebuild: true` (or `?rebuild=true`); without it a change is 409.",
            }
        ),
    ] = Field(default=None, max_length=32)
    description: (
        Annotated[str, StringConstraints(max_length=1000, pattern=r"^[^\x00]*$")] | None
    ) = None
    rebuild: StrictBool = Field(
        default=False,
        description="Change the parameters and replay every match with them, in one transaction.",
    )

    @model_validator(mode="before")
    @classmethod
    def _algorithm_is_fixed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "algorithm" in data:
            raise ValueError(
                "algorithm: a ladder's algorithm cannot change (its ratings are in that "
                "algorithm's units); create a new ladder with the algorithm, and import or "
                "replay its matches there"
            )
        return data


class RebuildResult(BaseModel):
    """A whole ladder replayed from its matches."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"ladder": "halo-ffa", "matches_rerated": 6227, "players": 1672}]
        }
    )

    ladder: str
    matches_rerated: int = Field(description="Matches replayed (voided ones are left out).")
    players: int = Field(description="Players whose ratings were recomputed.")


class LadderUpdated(BaseModel):
    """The ladder after a PATCH, and the rebuild it ran (null when none was needed)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "ladder": LADDER_EXAMPLE,
                    "rebuild": {"ladder": "halo-ffa", "matches_rerated": 6227, "players": 1672},
                }
            ]
        }
    )

    ladder: LadderOut
    rebuild: RebuildResult | None


class LadderPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"entries": [LADDER_EXAMPLE], "next_cursor": None}]}
    )

    entries: list[LadderOut]
    next_cursor: NextCursor


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


class LadderDeleted(BaseModel):
    """What deleting a ladder removed."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"ladder": "halo-ffa", "players": 41, "matches": 118, "history_entries": 420}
            ]
        }
    )

    ladder: str
    players: int = Field(description="Ratings removed (leaderboard entries).")
    matches: int = Field(description="Stored matches removed, voided ones included.")
    history_entries: int = Field(description="Rating changes removed.")


class MatchPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"entries": [MATCH_RESULT_EXAMPLE], "next_cursor": None}]}
    )

    entries: list[MatchResult]
    next_cursor: NextCursor


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


class LeaderboardEntry(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [LEADERBOARD_ENTRY_EXAMPLE]})

    rank: int = Field(
        description="Place on this leaderboard: 1 + the players ahead of this one "
        "(among those with at least `min_matches`)."
    )
    player_id: str
    mu: float
    sigma: float | None
    conservative: float
    matches: int
    last_played_at: datetime | None
    volatility: float | None = Field(default=None, description=VOLATILITY_DESCRIPTION)


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
                }
            ]
        }
    )

    ladder: str
    player_id: str
    mu: float
    sigma: float | None
    conservative: float
    rank: int = Field(description="Place on the leaderboard: players ahead of this one, plus 1.")
    matches: int
    last_played_at: datetime | None
    volatility: float | None = Field(default=None, description=VOLATILITY_DESCRIPTION)


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
                }
            ]
        }
    )

    kind: Literal["match", "adjustment"]
    match_id: str | None = Field(description="Null for an adjustment.")
    played_at: datetime
    before: RatingOut
    after: RatingOut


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
                        }
                    ],
                    "next_cursor": None,
                }
            ]
        }
    )

    entries: list[HistoryEntry]
    next_cursor: NextCursor


# -- predictions ----------------------------------------------------------------------------


class QualityRequest(TeamsBody):
    """Proposed teams; players never seen count at the ladder's prior."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"teams": [["alice", "bob"], ["carol", "dave"]]},
                {"teams": [["alice"], ["bob"], ["carol"]], "weights": [[1.0], [0.5], [1.0]]},
            ]
        },
    )


class PredictedRankOut(BaseModel):
    """One team's predicted place in the finishing order."""

    rank: int = Field(description="1 is first; teams with equal chances share a rank.")
    probability: float = Field(
        description="The team's mean chance of beating each other team, normalised over "
        "the teams to sum to 1; the ranks follow it, highest first."
    )


class QualityOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "quality": 0.4472135954999579,
                    "win_probabilities": [0.5, 0.5],
                    "draw_probability": 0.1,
                    "predicted_ranks": [
                        {"rank": 1, "probability": 0.5},
                        {"rank": 1, "probability": 0.5},
                    ],
                }
            ]
        }
    )

    quality: float = Field(description="How balanced the match is, in (0, 1].")
    win_probabilities: list[float] = Field(description="One per team, summing to 1.")
    draw_probability: float | None = Field(description="Null where the model has no draws.")
    predicted_ranks: list[PredictedRankOut] = Field(
        description="The predicted finishing order: one entry per team, in the teams' order."
    )


# -- jobs -----------------------------------------------------------------------------------

JobKind = Literal["void", "rebuild", "fit"]
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobProgress(BaseModel):
    done: int = Field(
        description="Matches re-rated and written so far (a fit: replays of the training part)."
    )
    total: int | None = Field(
        description="Matches the job re-rates (a fit: at most how many replays); null until "
        "it has read them (queued)."
    )


class JobProblem(BaseModel):
    """Why a job failed: the problem document its request would have been answered with."""

    type: str
    title: str
    status: int
    detail: str


class JobOut(BaseModel):
    """A void or a rebuild run in the background, in one transaction: all or nothing."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "3f2c9a7e5b1d4c8e9f0a1b2c3d4e5f60",
                    "kind": "void",
                    "ladder": "halo-ffa",
                    "state": "running",
                    "progress": {"done": 15000, "total": 48610},
                    "result": None,
                    "error": None,
                    "created_at": "2026-11-21T12:00:00Z",
                    "started_at": "2026-11-21T12:00:00.2Z",
                    "finished_at": None,
                },
                {
                    "id": "3f2c9a7e5b1d4c8e9f0a1b2c3d4e5f60",
                    "kind": "void",
                    "ladder": "halo-ffa",
                    "state": "succeeded",
                    "progress": {"done": 48610, "total": 48610},
                    "result": {
                        "match_id": "g-1042",
                        "ladder": "halo-ffa",
                        "voided_at": "2026-11-21T12:00:00.2Z",
                        "already_voided": False,
                        "matches_rerated": 48610,
                        "players_affected": 9140,
                    },
                    "error": None,
                    "created_at": "2026-11-21T12:00:00Z",
                    "started_at": "2026-11-21T12:00:00.2Z",
                    "finished_at": "2026-11-21T12:00:17Z",
                },
            ]
        }
    )

    id: str = Field(description="The job's id: `GET /v1/jobs/{id}`.")
    kind: JobKind = Field(
        description="`void` (DELETE of a match), `rebuild` (PATCH of a ladder with rebuild) "
        "or `fit` (POST of a ladder's fit)."
    )
    ladder: str
    state: JobState = Field(
        description="`queued` (accepted; waiting for the ladder), `running`, `succeeded` "
        "(everything committed) or `failed` (nothing changed)."
    )
    progress: JobProgress
    result: VoidResult | LadderUpdated | FitOutcome | None = Field(
        description="Once succeeded: what the inline answer would have been (the void's "
        "summary, or the ladder and its rebuild); for a fit, what it found and applied."
    )
    error: JobProblem | None = Field(description="Once failed: why; nothing was changed.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


# The fit's bodies are a module of their own, built on the ones above; a job's result may be
# one, so it is resolved once they exist.
from app.api.schemas.fitting import FitOutcome  # noqa: E402

JobOut.model_rebuild()
