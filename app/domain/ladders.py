"""What a ladder is: a rating model and its ladder-level parameters (``LadderConfig``), the
checks of a new ladder's parameters, the width of its rating buckets, and the error of a
model whose arithmetic broke down on a ladder's numbers."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from app.api.schemas import MAX_MU, MAX_SIGMA, RatingOut
from app.errors import InvalidInput
from app.rating.base import CONSERVATIVE_K, Rating, RatingInputError, RatingModel
from app.rating.registry import make_model

if TYPE_CHECKING:
    from app.storage.models import Ladder

#: Ladder-level parameters of the Bayesian models (not the model's own).
LADDER_PARAMS: dict[str, float] = {"tau_per_day": 0.0, "conservative_k": CONSERVATIVE_K}
BAYESIAN = frozenset({"trueskill", "plackett_luce"})
#: What a model's arithmetic may raise on degenerate numbers besides RatingInputError.
NUMERIC_ERRORS = (ArithmeticError, ValueError)
#: The largest magnitude stored for mu or sigma (the schema's CHECK allows up to 1e308).
MAX_FINITE = 1e300

_log = logging.getLogger(__name__)
LADDER_ID = re.compile(r"[a-z0-9_-]{1,64}")


@lru_cache(maxsize=256)
def _model(algorithm: str, params_json: str) -> RatingModel:
    # Models are immutable values: one per distinct configuration is enough.
    return make_model(algorithm, json.loads(params_json))


@dataclass(frozen=True)
class LadderConfig:
    """A ladder's model and its ladder-level parameters."""

    model: RatingModel
    bayesian: bool
    tau_per_day: float
    conservative_k: float

    def conservative(self, rating: Rating) -> float:
        return rating.conservative(self.conservative_k) if self.bayesian else rating.mu

    def out(self, rating: Rating) -> RatingOut:
        return RatingOut(
            mu=rating.mu,
            sigma=rating.sigma if self.bayesian else None,
            conservative=self.conservative(rating),
        )

    def stored_sigma(self, rating: Rating) -> float | None:
        return rating.sigma if self.bayesian else None


def _split_params(
    algorithm: str, params: Mapping[str, int | float | str]
) -> tuple[dict[str, Any], dict[str, float]]:
    model_params = dict(params)
    ladder_params: dict[str, float] = {}
    if algorithm in BAYESIAN:
        for name, default in LADDER_PARAMS.items():
            value = model_params.pop(name, default)
            if isinstance(value, str) or not math.isfinite(value) or value < 0:
                raise InvalidInput(f"params.{name}: must be a finite number >= 0")
            ladder_params[name] = float(value)
        if ladder_params["tau_per_day"] > MAX_SIGMA:
            raise InvalidInput(f"params.tau_per_day: must be at most {MAX_SIGMA:g}")
        if ladder_params["conservative_k"] > 100:
            raise InvalidInput("params.conservative_k: must be at most 100")
    return model_params, ladder_params


def ladder_config(ladder: Ladder) -> LadderConfig:
    model_params, ladder_params = _split_params(ladder.algorithm, ladder.params)
    return LadderConfig(
        model=_model(ladder.algorithm, json.dumps(model_params, sort_keys=True)),
        bayesian=ladder.algorithm in BAYESIAN,
        tau_per_day=ladder_params.get("tau_per_day", 0.0),
        conservative_k=ladder_params.get("conservative_k", CONSERVATIVE_K),
    )


def full_params(algorithm: str, params: Mapping[str, int | float | str]) -> dict[str, float | str]:
    """Every parameter with its default filled in; ``InvalidInput`` naming a bad one."""
    known = set(_model(algorithm, "{}").params)
    if algorithm in BAYESIAN:
        known.update(LADDER_PARAMS)
    for name in params:
        if name not in known:
            raise InvalidInput(
                f"params.{name}: unknown parameter for {algorithm}; "
                f"expected some of {', '.join(sorted(known))}"
            )
    model_params, ladder_params = _split_params(algorithm, params)
    try:
        model = _model(algorithm, json.dumps(model_params, sort_keys=True))
    except RatingInputError as exc:
        field = (
            exc.argument if exc.argument in ("algorithm", "params") else f"params.{exc.argument}"
        )
        raise InvalidInput(f"{field}: {exc.message}") from None
    full: dict[str, float | str] = dict(model.params)
    full.update(ladder_params)
    prior = model.rating()
    if not abs(prior.mu) <= MAX_MU:
        name = "mu" if algorithm in BAYESIAN else "initial"
        raise InvalidInput(f"params.{name}: |value| must be at most {MAX_MU:g}")
    if not 0.0 <= prior.sigma <= MAX_SIGMA:
        raise InvalidInput(f"params.sigma: must be in (0, {MAX_SIGMA:g}]")
    _probe(model)
    return full


def _probe(model: RatingModel) -> None:
    """Refuse parameters the model cannot compute with (extreme scales underflow to 0):
    rate and predict a 1 v 1 and a three-team match of new players once."""
    prior = model.rating()
    try:
        for teams in ([[prior], [prior]], [[prior], [prior, prior], [prior]]):
            numbers = [model.quality(teams), *model.win_probabilities(teams)]
            numbers.extend(x for team in model.rate(teams) for r in team for x in r)
            draw = model.draw_probability(teams)
            if draw is not None:
                numbers.append(draw)
            if not all(math.isfinite(x) for x in numbers):
                raise ArithmeticError("not finite")
    except NUMERIC_ERRORS:
        raise InvalidInput(
            "params: the model cannot compute with these values (they underflow or overflow); "
            "choose less extreme ones"
        ) from None


#: Rating buckets per prior sigma (TrueSkill, Plackett-Luce) and per Elo scale: at a
#: million players the fullest bucket holds a few thousand and the ladder a few hundred
#: buckets (measured with ``benchmarks/http.py``).
BUCKETS_PER_SIGMA = 32.0
BUCKETS_PER_ELO_SCALE = 128.0


def bucket_width(algorithm: str, params: Mapping[str, float | str]) -> float:
    """The width of a new ladder's rating buckets (``rating_buckets``): a power of two, so
    dividing by it and its multiples are exact. It only tunes how fast a rank is found."""
    if algorithm in BAYESIAN:
        scale, per = params.get("sigma", 25.0 / 3.0), BUCKETS_PER_SIGMA
    else:
        scale, per = params.get("scale", 400.0), BUCKETS_PER_ELO_SCALE
    if isinstance(scale, str) or not (math.isfinite(scale) and scale > 0):
        return 1.0
    # log2 of each (their quotient underflows to 0 for the smallest floats).
    return 2.0 ** min(max(round(math.log2(scale) - math.log2(per)), -40), 40)


def degenerate(ladder: Ladder, exc: Exception) -> InvalidInput:
    """The model's arithmetic broke down on these ratings (extreme parameters or values)."""
    _log.warning("ladder %s: the model failed on a match: %r", ladder.id, exc)
    return InvalidInput(
        f"teams: ladder {ladder.id!r} cannot rate these teams: the numbers overflow or "
        "underflow with its parameters and these ratings"
    )
