"""A ladder's documents: its creation, parameters, changes, rebuilds and deletion."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    WithJsonSchema,
    create_model,
    model_serializer,
    model_validator,
)

from app.domain.documents.shared import Algorithm, LadderId, NextCursor, ParamValue, RequestBody
from app.domain.placement import MAX_PLACEMENT
from app.rating.params import LADDER_PARAMETERS, Parameter
from app.rating.registry import WENG_LIN_MODELS, parameters

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


#: A soft reset's factor: how much of each rating carries into a new season.
Keep = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=1.0)]

#: How many placement matches a ladder asks of each player every season.
PlacementMatches = Annotated[int, Field(strict=True, ge=0, le=MAX_PLACEMENT)]

#: Most tiers a ladder may have.
MAX_TIERS = 32


class Tier(RequestBody):
    """A tier: the players whose conservative rating is at least ``min`` (and below the
    tier above's), or whose rank puts them at or above the ``min_percentile`` of the
    ranked players (and not in a tier above). One of the two, the same for every tier."""

    name: Annotated[
        str, StringConstraints(min_length=1, max_length=32, pattern=r"^[^\x00-\x1f\x7f]+$")
    ]
    min: float | None = Field(
        default=None,
        strict=True,
        allow_inf_nan=False,
        ge=-1e15,
        le=1e15,
        description="The lowest conservative rating of the tier.",
    )
    min_percentile: float | None = Field(
        default=None,
        strict=True,
        allow_inf_nan=False,
        ge=0.0,
        lt=100.0,
        description="The lowest percentile of the tier: a ranked player of rank r among N "
        "is at percentile 100 (N - r) / N (the share ranked below them), so 90 is the top "
        "tenth and 0 everyone.",
    )

    @model_validator(mode="after")
    def _one_bound(self) -> Tier:
        if (self.min is None) == (self.min_percentile is None):
            raise ValueError("give min or min_percentile (one of the two)")
        return self

    @model_serializer(mode="wrap")
    def _without_the_other(self, handler: Any) -> Any:
        return {key: value for key, value in handler(self).items() if value is not None}


def _check_tiers(tiers: list[Tier] | None) -> list[Tier] | None:
    """Tiers highest first: each bound below the one before (no overlap), names unique,
    every tier of one kind."""
    if tiers is None:
        return None
    names: set[str] = set()
    percentile = tiers[0].min_percentile is not None if tiers else False
    field = "min_percentile" if percentile else "min"
    for n, tier in enumerate(tiers):
        if tier.name in names:
            raise ValueError(f"tiers.{n}.name: {tier.name!r} is named twice")
        names.add(tier.name)
        if (tier.min_percentile is not None) != percentile:
            raise ValueError(f"tiers.{n}: every tier by min or every tier by min_percentile")
        bound = getattr(tier, field)
        before = getattr(tiers[n - 1], field)
        if n and bound >= before:
            raise ValueError(
                f"tiers.{n}.{field}: tiers go highest first, each {field} below the one "
                f"before ({bound!r} is not below {before!r})"
            )
    return tiers


Tiers = Annotated[
    list[Tier],
    Field(
        max_length=MAX_TIERS,
        description="Tiers, highest first: by `min`, a player is in the first tier whose "
        "`min` their conservative rating reaches (none below the last); by "
        "`min_percentile`, in the first tier whose percentile their rank reaches among the "
        "ranked players (100 (N - r) / N). "
        "Leaderboard entries, players and history entries carry their tier; "
        "`GET .../leaderboard?tier=NAME` pages one tier. Changing them needs no rebuild.",
    ),
    AfterValidator(_check_tiers),
]

TIERS_EXAMPLE: list[Any] = [
    {"name": "Diamond", "min": 30.0},
    {"name": "Gold", "min": 20.0},
    {"name": "Silver", "min": 10.0},
    {"name": "Bronze", "min": -1000.0},
]


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
    tiers: Tiers | None = None
    season_keep: Keep | None = Field(
        default=None,
        description="The `keep` of a new season whose request names none (default 1: "
        "ratings carry over unchanged).",
    )
    placement_matches: PlacementMatches | None = Field(
        default=None,
        description="Placement: a player with fewer counted matches in the current season "
        "is provisional (default 0: none).",
    )


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
    "tiers": TIERS_EXAMPLE,
    "season_keep": 0.5,
    "placement_matches": 5,
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
    tiers: list[Tier] | None = Field(default=None, description="The ladder's tiers, if any.")
    season_keep: float = Field(
        default=1.0, description="The `keep` of a new season whose request names none."
    )
    placement_matches: int = Field(
        default=0,
        description="Counted matches in the current season before a player is ranked.",
    )
    created_at: datetime
    players: int = Field(
        description="Players on the leaderboard: every rated player (on a ladder with "
        "placement, those placed in the current season)."
    )
    matches: int = Field(description="Recorded matches that count (voided ones left out).")


class LadderUpdate(RequestBody):
    """New parameters or description. Parameters not named keep their current values."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"params": {"tau_per_day": 0.02}, "rebuild": True},
                {"description": "Halo 2 free-for-all, season 2"},
                {"tiers": TIERS_EXAMPLE},
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
    tiers: Tiers | None = Field(
        default=None,
        description="New tiers (`[]`: none), replacing the ladder's; no rebuild needed.",
    )
    season_keep: Keep | None = Field(
        default=None, description="A new default `keep` for the seasons opened from now on."
    )
    placement_matches: PlacementMatches | None = Field(
        default=None,
        description="New placement matches (`0`: none); who is provisional follows at once.",
    )
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
