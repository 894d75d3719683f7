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
from datetime import datetime
from functools import lru_cache
from typing import Any

from app.domain.documents.shared import RatingOut
from app.domain.times import SECONDS_PER_DAY, utc
from app.errors import InvalidInput
from app.rating.base import CONSERVATIVE_K, Rating, RatingInputError, RatingModel, age
from app.rating.params import LADDER_PARAMETERS, Parameter
from app.rating.registry import WENG_LIN_MODELS, check_parameters, make_model, parameters

BAYESIAN = frozenset({"trueskill", "plackett_luce", "glicko2", *WENG_LIN_MODELS})
#: The algorithms whose ladders add ``LADDER_PARAMETERS`` to the model's; Glicko-2's model
#: holds its own (``deviation_per_day``, ``conservative_k``).
LADDER_LEVEL = frozenset({"trueskill", "plackett_luce", *WENG_LIN_MODELS})
#: The algorithms whose ratings carry a volatility (stored in ``ratings.volatility``).
VOLATILE = frozenset({"glicko2"})
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
    #: The ratings carry a volatility (Glicko-2).
    volatile: bool = False

    def conservative(self, rating: Rating) -> float:
        return rating.conservative(self.conservative_k) if self.bayesian else rating.mu

    def out(self, rating: Rating, volatility: float | None = None) -> RatingOut:
        """The rating as the API shows it; ``volatility`` only on a Glicko-2 ladder."""
        return RatingOut(
            mu=rating.mu,
            sigma=rating.sigma if self.bayesian else None,
            conservative=self.conservative(rating),
            volatility=volatility if self.volatile else None,
        )

    def stored_sigma(self, rating: Rating) -> float | None:
        return rating.sigma if self.bayesian else None

    @property
    def ages(self) -> bool:
        """Whether time away widens a rating: ``tau_per_day`` (Glicko-2's
        ``deviation_per_day``) above 0 on a Bayesian ladder."""
        return self.bayesian and self.tau_per_day > 0.0

    def standing(
        self,
        mu: float,
        sigma: float | None,
        last_played_at: datetime | None,
        as_of: datetime | None,
    ) -> tuple[float | None, float]:
        """A rating as it stands at ``as_of``: (sigma, conservative), the sigma widened for
        the days since the player's last match as their next match would widen it
        (``app.rating.base.age``; Glicko-2's up to its prior deviation), on a ladder that
        ages ratings. Without ``as_of``, a last match, or at or before that match: the
        rating as it is. (Elo: no sigma; the conservative rating is mu.)"""
        if not self.bayesian or sigma is None:
            return None, mu
        if self.ages and as_of is not None and last_played_at is not None:
            days = (utc(as_of) - utc(last_played_at)).total_seconds() / SECONDS_PER_DAY
            if days > 0.0:
                ceiling = self.model.rating().sigma if self.volatile else None
                sigma = age(Rating(mu, sigma), self.tau_per_day, days, ceiling=ceiling).sigma
        return sigma, mu - self.conservative_k * sigma


def _split_params(
    algorithm: str, params: Mapping[str, int | float | str]
) -> tuple[dict[str, Any], dict[str, float]]:
    """The model's parameters and the ladder-level ones (with their defaults)."""
    model_params = dict(params)
    ladder_params: dict[str, float] = {}
    if algorithm in LADDER_LEVEL:
        for spec in LADDER_PARAMETERS:
            value = model_params.pop(spec.name, spec.default)
            ladder_params[spec.name] = float(value)
    return model_params, ladder_params


def ladder_config(algorithm: str, params: Mapping[str, int | float | str]) -> LadderConfig:
    """The model and ladder-level parameters of a ladder of ``algorithm`` with ``params``."""
    model_params, ladder_params = _split_params(algorithm, params)
    if algorithm in VOLATILE:
        model = _model(algorithm, json.dumps(model_params, sort_keys=True))
        params = model.params
        return LadderConfig(
            model=model,
            bayesian=True,
            tau_per_day=float(params["deviation_per_day"]),
            conservative_k=float(params["conservative_k"]),
            volatile=True,
        )
    return LadderConfig(
        model=_model(algorithm, json.dumps(model_params, sort_keys=True)),
        bayesian=algorithm in BAYESIAN,
        tau_per_day=ladder_params.get("tau_per_day", 0.0),
        conservative_k=ladder_params.get("conservative_k", CONSERVATIVE_K),
    )


@lru_cache(maxsize=256)
def config_of(algorithm: str, params_text: str) -> LadderConfig:
    """:func:`ladder_config` of parameters as stored (JSON text), parsed once per text."""
    return ladder_config(algorithm, json.loads(params_text))


def full_params(algorithm: str, params: Mapping[str, int | float | str]) -> dict[str, float | str]:
    """Every parameter with its default filled in; ``InvalidInput`` naming a parameter that
    is unknown or outside its documented range (``parameter_table``)."""
    try:
        specs = parameters(algorithm)
    except RatingInputError as exc:
        raise InvalidInput(f"algorithm: {exc.message}") from None
    ladder_specs = LADDER_PARAMETERS if algorithm in LADDER_LEVEL else ()
    known = {spec.name for spec in (*specs, *ladder_specs)}
    for name in params:
        if name not in known:
            raise InvalidInput(
                f"params.{name}: unknown parameter for {algorithm}; "
                f"expected some of {', '.join(sorted(known))}"
            )
    for spec in ladder_specs:
        problem = spec.problem(params.get(spec.name, spec.default))
        if problem is not None:
            raise InvalidInput(f"params.{spec.name}: {problem}")
    model_params, ladder_params = _split_params(algorithm, params)
    try:
        checked = check_parameters(algorithm, model_params)
        model = _model(algorithm, json.dumps(checked, sort_keys=True))
    except RatingInputError as exc:
        raise InvalidInput(f"params.{exc.argument}: {exc.message}") from None
    full: dict[str, float | str] = dict(model.params)
    full.update(ladder_params)
    _probe(model)
    return full


def parameter_table(algorithm: str) -> tuple[Parameter, ...]:
    """Every parameter a ladder of ``algorithm`` accepts: the model's, then the ladder's."""
    return parameters(algorithm) + (LADDER_PARAMETERS if algorithm in LADDER_LEVEL else ())


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
    if algorithm in VOLATILE:
        scale, per = params.get("deviation", 350.0), BUCKETS_PER_SIGMA
    elif algorithm in BAYESIAN:
        scale, per = params.get("sigma", 25.0 / 3.0), BUCKETS_PER_SIGMA
    else:
        scale, per = params.get("scale", 400.0), BUCKETS_PER_ELO_SCALE
    if isinstance(scale, str) or not (math.isfinite(scale) and scale > 0):
        return 1.0
    # log2 of each (their quotient underflows to 0 for the smallest floats).
    return 2.0 ** min(max(round(math.log2(scale) - math.log2(per)), -40), 40)


def degenerate(ladder_id: str, exc: Exception) -> InvalidInput:
    """The model's arithmetic broke down on these ratings (extreme parameters or values)."""
    _log.warning("ladder %s: the model failed on a match: %r", ladder_id, exc)
    return InvalidInput(
        f"teams: ladder {ladder_id!r} cannot rate these teams: the numbers overflow or "
        "underflow with its parameters and these ratings"
    )
