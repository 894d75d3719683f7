"""Build a rating model from a ladder's algorithm name and parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.rating.base import RatingInputError, RatingModel
from app.rating.params import Parameter

#: The Weng-Lin models beside Plackett-Luce.
WENG_LIN_MODELS = (
    "bradley_terry_full",
    "bradley_terry_part",
    "thurstone_mosteller_full",
    "thurstone_mosteller_part",
)
#: The algorithms a ladder may use.
ALGORITHMS = ("trueskill", "plackett_luce", "elo", "glicko2", *WENG_LIN_MODELS)
#: Every model ``make_model`` builds: every ladder algorithm.
MODELS = ALGORITHMS


def _weng_lin(algorithm: str) -> tuple[Any, tuple[Parameter, ...]]:
    """The class and parameter table of one of ``WENG_LIN_MODELS``."""
    from app.rating import bradley_terry, thurstone_mosteller

    return {
        "bradley_terry_full": (bradley_terry.BradleyTerryFull, bradley_terry.PARAMETERS),
        "bradley_terry_part": (bradley_terry.BradleyTerryPart, bradley_terry.PART_PARAMETERS),
        "thurstone_mosteller_full": (
            thurstone_mosteller.ThurstoneMostellerFull,
            thurstone_mosteller.PARAMETERS,
        ),
        "thurstone_mosteller_part": (
            thurstone_mosteller.ThurstoneMostellerPart,
            thurstone_mosteller.PART_PARAMETERS,
        ),
    }[algorithm]


def make_model(algorithm: str, params: Mapping[str, Any] | None = None) -> RatingModel:
    """The model for ``algorithm`` with ``params`` (missing ones at their defaults).

    Raises ``RatingInputError`` naming ``algorithm`` or the offending parameter.
    """
    params = dict(params or {})
    if algorithm == "trueskill":
        from app.rating.trueskill import TrueSkill

        cls: Any = TrueSkill
    elif algorithm == "plackett_luce":
        from app.rating.plackett_luce import PlackettLuce

        cls = PlackettLuce
    elif algorithm == "elo":
        from app.rating.elo import Elo

        cls = Elo
    elif algorithm == "glicko2":
        from app.rating.glicko2 import Glicko2

        cls = Glicko2
    elif algorithm in WENG_LIN_MODELS:
        cls = _weng_lin(algorithm)[0]
    else:
        raise RatingInputError("algorithm", f"must be one of {', '.join(MODELS)}")
    try:
        model: RatingModel = cls(**params)
    except TypeError as exc:  # an unknown keyword
        raise RatingInputError("params", f"unknown parameter for {algorithm}: {exc}") from None
    return model


def parameters(algorithm: str) -> tuple[Parameter, ...]:
    """The parameters of ``algorithm`` a ladder may set, with their defaults and ranges."""
    if algorithm == "trueskill":
        from app.rating import trueskill

        return trueskill.PARAMETERS
    if algorithm == "plackett_luce":
        from app.rating import plackett_luce

        return plackett_luce.PARAMETERS
    if algorithm == "elo":
        from app.rating import elo

        return elo.PARAMETERS
    if algorithm == "glicko2":
        from app.rating import glicko2

        return glicko2.PARAMETERS
    if algorithm in WENG_LIN_MODELS:
        specs: tuple[Parameter, ...] = _weng_lin(algorithm)[1]
        return specs
    raise RatingInputError("algorithm", f"must be one of {', '.join(MODELS)}")


def check_parameters(algorithm: str, params: Mapping[str, object]) -> dict[str, float | str]:
    """``params`` with every missing parameter at its default, each checked against its
    range (``app.rating.params``); numbers come back as floats.

    Raises ``RatingInputError`` naming the first parameter out of its range (or unknown).
    """
    specs = parameters(algorithm)
    known = {spec.name for spec in specs}
    for name in params:
        if name not in known:
            raise RatingInputError(
                name,
                f"unknown parameter for {algorithm}; expected some of {', '.join(sorted(known))}",
            )
    full: dict[str, float | str] = {}
    for spec in specs:
        value = params.get(spec.name, spec.default)
        problem = spec.problem(value)
        if problem is not None:
            raise RatingInputError(spec.name, problem)
        full[spec.name] = value if isinstance(value, str | bool) else float(value)  # type: ignore[arg-type]
    if algorithm == "elo":
        from app.rating.elo import k_factor_problem

        problem = k_factor_problem(full)
        if problem is not None:
            raise RatingInputError("k_factor", problem)
    return full
