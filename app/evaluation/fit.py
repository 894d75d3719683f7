"""Fitting model parameters to a match file: minimise log loss on the earlier part.

The objective is the pair log loss of ``metrics`` (the mean of -log P(a beats b) over
every decisive pair of teams; for two-team matches exactly the log loss of the win
probability) on the first ``train_fraction`` of the matches, replayed from the prior.
It is minimised with scipy's bounded Powell method over the parameters below, each
mapped onto [0, 1] (logarithmically for scale parameters), from the defaults, with a
small budget of replays. The fitted and the default parameters are then compared on the
later part: a replay of the whole file, measured only on the matches after the split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from app.evaluation.data import MatchFile, empirical_draw_probability
from app.evaluation.metrics import pair_log_loss, predict, summarize
from app.evaluation.presets import build, resolve
from app.rating.registry import WENG_LIN_MODELS

#: name -> (low, high, logarithmic): the searched range of each fitted parameter.
Bounds = dict[str, tuple[float, float, bool]]

_TRUESKILL: Bounds = {
    "beta": (0.25, 25.0, True),
    "tau": (0.0, 2.0, False),
    "draw_probability": (0.0, 0.9, False),
}
_PLACKETT_LUCE: Bounds = {"beta": (0.25, 25.0, True), "tau": (0.0, 2.0, False)}
#: Glicko-2: the paper's advised tau of 0.3 to 1.2 widened, and the prior's RD and volatility.
_GLICKO2: Bounds = {
    "tau": (0.1, 2.0, True),
    "deviation": (50.0, 700.0, True),
    "volatility": (0.01, 0.5, True),
}


def fitted_bounds(name: str) -> Bounds:
    """The parameters fitted for an algorithm or preset and their ranges.

    TrueSkill: beta, tau, draw_probability; the Weng-Lin models (Plackett-Luce,
    Bradley-Terry, Thurstone-Mosteller): beta, tau; Glicko-2: tau and the prior's deviation
    and volatility; the Elo family: k_factor, from 1/20 to 8 times the configuration's own.
    """
    algorithm, params = resolve(name)
    if algorithm == "trueskill":
        return dict(_TRUESKILL)
    if algorithm == "plackett_luce" or algorithm in WENG_LIN_MODELS:
        return dict(_PLACKETT_LUCE)
    if algorithm == "glicko2":
        return dict(_GLICKO2)
    k = float(params.get("k_factor", 32.0))
    return {"k_factor": (k / 20.0, k * 8.0, True)}


def _to_value(x: float, low: float, high: float, log: bool) -> float:
    x = min(max(x, 0.0), 1.0)
    if log:
        return math.exp(math.log(low) + x * (math.log(high) - math.log(low)))
    return low + x * (high - low)


def _to_unit(v: float, low: float, high: float, log: bool) -> float:
    v = min(max(v, low), high)
    if log:
        return (math.log(v) - math.log(low)) / (math.log(high) - math.log(low))
    return (v - low) / (high - low)


@dataclass(slots=True)
class FitResult:
    """What ``fit`` found and how the fitted parameters do on the later part."""

    name: str
    algorithm: str
    #: The full parameter set of the fitted model (what a ladder's ``params`` takes).
    params: dict[str, float | str]
    default_params: dict[str, float | str]
    train_matches: int
    test_matches: int
    train_loss_default: float
    train_loss: float
    evaluations: int
    #: Metrics on the later part: "default" and "fitted" -> result rows of ``summarize``.
    test: dict[str, dict[str, Any]]


def fit(
    match_file: MatchFile,
    name: str,
    *,
    train_fraction: float = 0.5,
    max_evaluations: int = 40,
    on_evaluation: Callable[[int, dict[str, float], float], None] | None = None,
) -> FitResult:
    """Fit ``name``'s parameters on the earlier ``train_fraction`` of ``match_file``."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train fraction must be in (0, 1), got {train_fraction!r}")
    matches = match_file.matches
    split = int(len(matches) * train_fraction)
    if split < 1 or split >= len(matches):
        raise ValueError(f"{len(matches)} matches cannot be split at {train_fraction}")
    train = matches[:split]
    draw = empirical_draw_probability(train)
    algorithm, base = resolve(name, draw_probability=draw)
    default_model = build(name, draw_probability=draw)
    defaults = default_model.params
    bounds = fitted_bounds(name)
    keys = list(bounds)
    cache: dict[tuple[float, ...], float] = {}

    def params_at(x: npt.NDArray[np.float64]) -> dict[str, float]:
        return {k: _to_value(float(v), *bounds[k]) for k, v in zip(keys, x, strict=True)}

    def objective(x: npt.NDArray[np.float64]) -> float:
        key = tuple(round(float(v), 12) for v in x)
        if key in cache:
            return cache[key]
        values = params_at(x)
        try:
            model = build(name, {**base, **values})
            run = predict(model, train, len(match_file.players), pair_loss=True)
            loss = pair_log_loss(run)
        except (ValueError, ArithmeticError):
            loss = math.inf
        if not math.isfinite(loss):
            loss = 1e6
        cache[key] = loss
        if on_evaluation is not None:
            on_evaluation(len(cache), values, loss)
        return loss

    x0 = np.array([_to_unit(float(defaults[k]), *bounds[k]) for k in keys])
    default_loss = objective(x0)
    result = minimize(
        objective,
        x0,
        method="Powell",
        bounds=[(0.0, 1.0)] * len(keys),
        options={"maxfev": max_evaluations, "xtol": 1e-3, "ftol": 1e-5},
    )
    best_x = np.asarray(result.x, dtype=np.float64)
    best_loss = objective(best_x)
    if best_loss > default_loss:
        best_x, best_loss = x0, default_loss
    fitted = {**base, **params_at(best_x)}
    fitted_model = build(name, fitted)
    evaluation = _compare(match_file, name, dict(defaults), fitted, split)
    return FitResult(
        name=name,
        algorithm=algorithm,
        params=dict(fitted_model.params),
        default_params=dict(defaults),
        train_matches=split,
        test_matches=len(matches) - split,
        train_loss_default=default_loss,
        train_loss=best_loss,
        evaluations=len(cache),
        test=evaluation,
    )


def _compare(
    match_file: MatchFile,
    name: str,
    defaults: Mapping[str, Any],
    fitted: Mapping[str, Any],
    split: int,
) -> dict[str, dict[str, Any]]:
    runs = []
    for label, params in (("default", defaults), ("fitted", fitted)):
        model = build(name, params)
        runs.append(
            predict(
                model, match_file.matches, len(match_file.players), algorithm=label, pair_loss=True
            )
        )
    rows = summarize(runs, start=split)
    return {row["algorithm"]: row for row in rows}
