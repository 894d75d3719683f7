"""Build a rating model from a ladder's algorithm name and parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.rating.base import RatingInputError, RatingModel

#: The algorithms a ladder may use.
ALGORITHMS = ("trueskill", "plackett_luce", "elo")


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
    else:
        raise RatingInputError("algorithm", f"must be one of {', '.join(ALGORITHMS)}")
    try:
        model: RatingModel = cls(**params)
    except TypeError as exc:  # an unknown keyword
        raise RatingInputError("params", f"unknown parameter for {algorithm}: {exc}") from None
    return model
