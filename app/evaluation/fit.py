"""Fitting model parameters to a match file: minimise log loss on the earlier part.

The objective is the pair log loss of ``metrics`` (the mean of -log P(a beats b) over
every decisive pair of teams; for two-team matches exactly the log loss of the win
probability) on the first ``train_fraction`` of the matches, replayed from the prior (by
the ladders' replay engine, ``app.evaluation.loss``, which gives ``predict``'s loss
faster).
It is minimised with scipy's bounded Powell method from the defaults, each parameter
searched in a scale that fits it (``Range``): logarithmically for the positive lengths and
rates (beta, tau, K, a deviation, a volatility), so that 0.01 is as far from 0.1 as 1 from
10, and linearly for a probability. When the best point lies on the edge of a searched
range, that range is widened fourfold (never past the parameter's documented range,
``app.rating.params``) and the search goes on from there, at most ``MAX_WIDENINGS`` times;
every round draws on the same budget of replays. A parameter still on an edge at the end
is reported (``FitResult.on_bound``). The fitted and the default parameters are then
compared on the later part: a replay of the whole file, measured only on the matches after
the split.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from app.evaluation.data import MatchFile, empirical_draw_probability
from app.evaluation.loss import PairLoss
from app.evaluation.metrics import predict, summarize
from app.evaluation.presets import build, resolve
from app.rating.params import MIN_LENGTH
from app.rating.registry import WENG_LIN_MODELS, parameters

#: How many times the searched ranges may be widened after the first search.
MAX_WIDENINGS = 6
#: A widening multiplies a logarithmic range's edge by this (or divides it); a linear
#: range's edge moves this many times closer to the documented limit, or out by this
#: many widths of the range less one, whichever is the smaller move.
WIDENING = 4.0
#: A point within this fraction of the searched range (in its scale) of an edge is on it.
EDGE = 0.01
#: A parameter with an ``off`` value stays off unless turning it on lowers the training
#: loss by at least this much (about a thousandth of the loss of a coin flip).
MIN_GAIN = 1e-3


@dataclass(frozen=True, slots=True)
class Range:
    """The searched range of one parameter and how far it may be widened.

    ``low``..``high`` is searched, logarithmically when ``log`` (both then positive);
    ``floor``..``ceiling`` is the documented range (for a logarithmic one whose documented
    lower end is 0, the smallest length ``MIN_LENGTH``), the most a widening reaches.
    ``off``: the value that turns the parameter's piece of the model off (a statistic's
    scale 0), kept unless the search found it helps (``MIN_GAIN``).
    """

    low: float
    high: float
    log: bool
    floor: float
    ceiling: float
    off: float | None = None

    def to_value(self, x: float) -> float:
        """The value at position ``x`` in [0, 1] of the searched range."""
        x = min(max(x, 0.0), 1.0)
        if self.log:
            a, b = math.log(self.low), math.log(self.high)
            return min(max(math.exp(a + x * (b - a)), self.low), self.high)
        return self.low + x * (self.high - self.low)

    def to_unit(self, v: float) -> float:
        """The position in [0, 1] of ``v`` (clamped into the searched range)."""
        v = min(max(v, self.low), self.high)
        if self.log:
            return (math.log(v) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (v - self.low) / (self.high - self.low)

    def widened(self, side: str) -> Range:
        """This range with its ``side`` ("low" or "high") edge moved out, up to the limit."""
        step = (self.high - self.low) * (WIDENING - 1.0)
        if side == "low":
            if self.log:
                low = self.low / WIDENING
            else:
                low = max(self.floor + (self.low - self.floor) / WIDENING, self.low - step)
            return replace(self, low=max(self.floor, low))
        if self.log:
            return replace(self, high=min(self.ceiling, self.high * WIDENING))
        high = min(self.ceiling - (self.ceiling - self.high) / WIDENING, self.high + step)
        return replace(self, high=high)

    def at_limit(self, side: str) -> bool:
        """Whether the ``side`` edge is the documented limit (cannot be widened)."""
        return self.low <= self.floor if side == "low" else self.high >= self.ceiling


@dataclass(frozen=True, slots=True)
class OnBound:
    """A fitted parameter whose best value lies on an edge of its searched range."""

    parameter: str
    #: "low" or "high".
    side: str
    #: The edge's value.
    bound: float
    #: True when that edge is the parameter's documented limit, so no wider search helps.
    limit: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "parameter": self.parameter,
            "side": self.side,
            "bound": self.bound,
            "limit": self.limit,
        }


@dataclass(slots=True)
class Search:
    """What ``search`` found."""

    values: dict[str, float]
    loss: float
    #: The objective at the start.
    first_loss: float
    evaluations: int
    #: How many times a range was widened (rounds of search after the first).
    widenings: int
    ranges: dict[str, Range]
    on_bound: list[OnBound] = field(default_factory=list)


class _OutOfBudget(Exception):
    pass


def search(
    objective: Callable[[dict[str, float]], float],
    ranges: Mapping[str, Range],
    start: Mapping[str, float],
    max_evaluations: int,
) -> Search:
    """Minimise ``objective`` over ``ranges`` from ``start`` with at most ``max_evaluations``
    calls, widening a range whose edge the best point presses against (see the module).

    The start is the first evaluation; the best point ever evaluated is returned.
    """
    from scipy.optimize import minimize  # the optional eval extra: imported when searching

    if max_evaluations < 1:
        raise ValueError(f"max evaluations must be at least 1, got {max_evaluations!r}")
    current = dict(ranges)
    keys = list(current)
    cache: dict[tuple[str, ...], float] = {}
    best_values = {k: float(start[k]) for k in keys}
    best_loss = math.inf

    def evaluate(values: dict[str, float]) -> float:
        nonlocal best_values, best_loss
        key = tuple(f"{values[k]:.12g}" for k in keys)
        if key in cache:
            return cache[key]
        if len(cache) >= max_evaluations:
            raise _OutOfBudget
        loss = objective(values)
        if not math.isfinite(loss):
            loss = 1e6
        cache[key] = loss
        if loss < best_loss:
            best_values, best_loss = dict(values), loss
        return loss

    def at(x: npt.NDArray[np.float64]) -> float:
        return evaluate({k: current[k].to_value(float(v)) for k, v in zip(keys, x, strict=True)})

    first_loss = evaluate(best_values)
    widenings = 0
    widened = True
    while len(cache) < max_evaluations:
        before = len(cache)
        remaining = max_evaluations - before
        # Half the rest after a widening, so that a further widening has replays left.
        share = (
            max(remaining // 2, 2 * len(keys))
            if widened and widenings < MAX_WIDENINGS
            else remaining
        )
        x0 = np.array([current[k].to_unit(best_values[k]) for k in keys])
        converged = False
        with contextlib.suppress(_OutOfBudget):
            result = minimize(
                at,
                x0,
                method="Powell",
                bounds=[(0.0, 1.0)] * len(keys),
                options={"maxfev": share, "xtol": 1e-3, "ftol": 1e-5},
            )
            converged = bool(result.success)
        movable = [
            (k, side) for k, side in _pressed(current, best_values) if not current[k].at_limit(side)
        ]
        if movable and widenings < MAX_WIDENINGS:
            for k, side in movable:
                current[k] = current[k].widened(side)
            widenings += 1
            widened = True
        elif converged or len(cache) == before:
            break
        else:
            widened = False
    for k in keys:
        off = current[k].off
        if off is None or best_values[k] == off:
            continue
        # Off again unless it helps: one more replay, past the budget if need be.
        values = {**best_values, k: off}
        loss = objective(values)
        cache[tuple(f"{values[key]:.12g}" for key in keys)] = loss
        if math.isfinite(loss) and loss <= best_loss + MIN_GAIN:
            best_values, best_loss = values, loss
    on_bound = [
        OnBound(
            k, side, current[k].low if side == "low" else current[k].high, current[k].at_limit(side)
        )
        for k, side in _pressed(current, best_values)
        if current[k].off is None or best_values[k] != current[k].off
    ]
    return Search(best_values, best_loss, first_loss, len(cache), widenings, current, on_bound)


def _pressed(ranges: Mapping[str, Range], values: Mapping[str, float]) -> list[tuple[str, str]]:
    pressed = []
    for k, r in ranges.items():
        x = r.to_unit(values[k])
        if x <= EDGE:
            pressed.append((k, "low"))
        elif x >= 1.0 - EDGE:
            pressed.append((k, "high"))
    return pressed


#: name -> (low, high, logarithmic): the first searched range of each fitted parameter.
_TRUESKILL = {
    "beta": (0.25, 25.0, True),
    "tau": (0.001, 2.0, True),
    "draw_probability": (0.0, 0.9, False),
}
_PLACKETT_LUCE = {"beta": (0.25, 25.0, True), "tau": (0.001, 2.0, True)}
#: Glicko-2: the paper's advised tau of 0.3 to 1.2 widened, and the prior's RD and volatility.
_GLICKO2 = {
    "tau": (0.1, 2.0, True),
    "deviation": (50.0, 700.0, True),
    "volatility": (0.01, 0.5, True),
}


def _advantage_range(algorithm: str, params: Mapping[str, Any]) -> tuple[float, float, bool]:
    """The first searched range of ``advantage``: a disadvantage of half a performance
    deviation to an advantage of one and a half, in the model's own units (linear)."""
    if algorithm == "glicko2":
        spread = 2.0 * 173.7178 / math.sqrt(math.pi)  # Glicko-2's quality_beta at phi 0
    elif algorithm == "elo":
        if params.get("model", "logistic") == "logistic":
            spread = 2.0 * float(params.get("scale", 400.0)) / (math.sqrt(math.pi) * math.log(10))
        else:
            spread = float(params.get("beta", 200.0))
    else:
        spread = float(params.get("beta", 25.0 / 6.0))
    return (-0.5 * spread, 1.5 * spread, False)


def _margin_range(algorithm: str, params: Mapping[str, Any]) -> tuple[float, float, bool]:
    """The first searched range of ``margin``, linear from 0 (off): TrueSkill's rating
    units per point up to one beta; Elo's multiplier weight up to 2; the Weng-Lin margin
    (points) up to 4."""
    if algorithm == "trueskill":
        return (0.0, float(params.get("beta", 25.0 / 6.0)), False)
    if algorithm == "elo":
        return (0.0, 2.0, False)
    return (0.0, 4.0, False)


def _statistics_ranges(
    algorithm: str, params: Mapping[str, Any]
) -> dict[str, tuple[float, float, bool]]:
    """The first searched ranges of a statistic's evidence, all logarithmic: ``stat_scale``
    (deviations of the statistic per performance unit) from a hundredth to two per
    performance deviation, off at 0 (the search starts there); ``stat_noise`` in
    deviations of the statistic; ``stat_spread`` in the statistic's units (a tenth of a
    point to ten). Elo's scale is rating points per deviation of the statistic, linear
    from 0, with its step ``stat_weight`` in place of a noise."""
    if algorithm == "elo":  # rating points per deviation of the statistic; a step
        return {
            "stat_scale": (0.0, float(params.get("scale", 400.0)), False),
            "stat_weight": (0.01, 0.5, True),
            "stat_spread": (0.1, 10.0, True),
        }
    beta = float(params.get("beta", 25.0 / 6.0))
    return {
        "stat_scale": (0.01 / beta, 2.0 / beta, True),
        "stat_noise": (0.05, 2.0, True),
        "stat_spread": (0.1, 10.0, True),
    }


def fitted_ranges(
    name: str, *, advantage: bool = False, margin: bool = False, statistics: bool = False
) -> dict[str, Range]:
    """The parameters fitted for an algorithm or preset and their first searched ranges.

    TrueSkill: beta, tau, draw_probability; the Weng-Lin models (Plackett-Luce,
    Bradley-Terry, Thurstone-Mosteller): beta, tau; Glicko-2: tau and the prior's deviation
    and volatility; the Elo family: k_factor, from 1/20 to 8 times the configuration's own.
    With ``advantage`` (the matches give advantage shares), also ``advantage``, linearly
    from -1/2 to 3/2 performance deviations. With ``margin`` (the matches give scores),
    also ``margin`` where the algorithm has one (``_margin_range``). With ``statistics``
    (the matches give players' statistics), also ``stat_scale`` and ``stat_noise`` where
    the algorithm has them (``_statistics_ranges``; the scale stays 0, off, unless it
    helps). Each may be widened up to its documented range.
    """
    algorithm, params = resolve(name)
    if algorithm == "trueskill":
        first = _TRUESKILL
    elif algorithm == "plackett_luce" or algorithm in WENG_LIN_MODELS:
        first = _PLACKETT_LUCE
    elif algorithm == "glicko2":
        first = _GLICKO2
    else:
        k = float(params.get("k_factor", 32.0))
        first = {"k_factor": (k / 20.0, k * 8.0, True)}
    specs = {spec.name: spec for spec in parameters(algorithm)}
    if advantage:
        first = {"advantage": _advantage_range(algorithm, params), **first}
    if margin and "margin" in specs:
        first = {"margin": _margin_range(algorithm, params), **first}
    if statistics and "stat_scale" in specs:
        first = {**_statistics_ranges(algorithm, params), **first}
    ranges = {}
    for key, (low, high, log) in first.items():
        spec = specs[key]
        floor = max(spec.low, MIN_LENGTH) if log else spec.low
        ceiling = math.nextafter(spec.high, -math.inf) if spec.high_open else spec.high
        off = 0.0 if key == "stat_scale" else None
        ranges[key] = Range(max(low, floor), min(high, ceiling), log, floor, ceiling, off)
    return ranges


@dataclass(slots=True)
class FitResult:
    """What ``fit`` found and how the fitted parameters do on the later part."""

    name: str
    algorithm: str
    #: The full parameter set of the fitted model (what a ladder's ``params`` takes).
    params: dict[str, float | str]
    #: The parameters the search started from: the defaults, or those given to ``fit``.
    default_params: dict[str, float | str]
    train_matches: int
    test_matches: int
    train_loss_default: float
    train_loss: float
    evaluations: int
    #: Metrics on the later part: "default" and "fitted" -> result rows of ``summarize``.
    test: dict[str, dict[str, Any]]
    #: Fitted parameters left on an edge of their searched range.
    on_bound: list[OnBound] = field(default_factory=list)
    #: How many times a searched range was widened.
    widenings: int = 0


@dataclass(frozen=True, slots=True)
class Problem:
    """Fitting one algorithm or preset on one match file: the parameters held fixed
    (``base``), the full parameters the search starts from, the searched ranges and where
    the file is split."""

    name: str
    algorithm: str
    base: dict[str, Any]
    start_params: dict[str, float | str]
    ranges: dict[str, Range]
    #: Matches before this index are the training part.
    split: int

    @property
    def start(self) -> dict[str, float]:
        """The start of the search: the fitted parameters' values in ``start_params``."""
        return {k: float(self.start_params[k]) for k in self.ranges}

    def params(self, values: Mapping[str, float]) -> dict[str, Any]:
        """The parameters with the fitted ones at ``values``."""
        return {**self.base, **values}


def problem(
    match_file: MatchFile,
    name: str,
    *,
    train_fraction: float = 0.5,
    params: Mapping[str, Any] | None = None,
) -> Problem:
    """What fitting ``name`` on the earlier ``train_fraction`` of ``match_file`` searches,
    from ``params`` (missing ones at their defaults; TrueSkill's draw probability at the
    training part's empirical one). Raises ``ValueError`` for a split that leaves a part
    empty and ``RatingInputError`` for an unknown name or a bad parameter."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train fraction must be in (0, 1), got {train_fraction!r}")
    matches = match_file.matches
    split = int(len(matches) * train_fraction)
    if split < 1 or split >= len(matches):
        raise ValueError(f"{len(matches)} matches cannot be split at {train_fraction}")
    train = matches[:split]
    draw = empirical_draw_probability(train)
    algorithm, base = resolve(name, params, draw_probability=draw)
    start_params = dict(build(name, base).params)
    ranges = fitted_ranges(
        name,
        advantage=any(m.advantage is not None for m in train),
        margin=any(m.scores is not None for m in train),
        statistics=any(m.player_scores is not None for m in train),
    )
    return Problem(name, algorithm, base, start_params, ranges, split)


def objective(
    fitting: Problem,
    loss: PairLoss,
    on_evaluation: Callable[[int, dict[str, float], float], None] | None = None,
) -> Callable[[dict[str, float]], float]:
    """The training loss of ``fitting``'s model at the fitted parameters' values (inf when
    the model refuses them or its arithmetic fails); ``on_evaluation(count, values, loss)``
    after each replay."""
    count = 0

    def at(values: dict[str, float]) -> float:
        nonlocal count
        try:
            value = loss(build(fitting.name, fitting.params(values)))
        except (ValueError, ArithmeticError):
            value = math.inf
        count += 1
        if on_evaluation is not None:
            on_evaluation(count, values, value if math.isfinite(value) else 1e6)
        return value

    return at


def fit(
    match_file: MatchFile,
    name: str,
    *,
    train_fraction: float = 0.5,
    max_evaluations: int = 40,
    params: Mapping[str, Any] | None = None,
    on_evaluation: Callable[[int, dict[str, float], float], None] | None = None,
) -> FitResult:
    """Fit ``name``'s parameters on the earlier ``train_fraction`` of ``match_file`` with at
    most ``max_evaluations`` replays of it (every round of the search included), starting
    from ``params`` (the defaults where not given), which the later part compares with."""
    fitting = problem(match_file, name, train_fraction=train_fraction, params=params)
    loss = PairLoss(match_file.matches[: fitting.split], len(match_file.players))
    found = search(
        objective(fitting, loss, on_evaluation), fitting.ranges, fitting.start, max_evaluations
    )
    test = compare(match_file, fitting, found.values)
    return fit_result(match_file, fitting, found, found.evaluations, test)


def fit_result(
    match_file: MatchFile,
    fitting: Problem,
    found: Search,
    evaluations: int,
    test: dict[str, dict[str, Any]],
) -> FitResult:
    """The ``FitResult`` of ``found`` (its ``first_loss`` the loss at the start)."""
    return FitResult(
        name=fitting.name,
        algorithm=fitting.algorithm,
        params=dict(build(fitting.name, fitting.params(found.values)).params),
        default_params=dict(fitting.start_params),
        train_matches=fitting.split,
        test_matches=len(match_file.matches) - fitting.split,
        train_loss_default=found.first_loss,
        train_loss=found.loss,
        evaluations=evaluations,
        test=test,
        on_bound=found.on_bound,
        widenings=found.widenings,
    )


def compare(
    match_file: MatchFile, fitting: Problem, values: Mapping[str, float]
) -> dict[str, dict[str, Any]]:
    """The later part's measures of the start ("default") and of ``values`` ("fitted"):
    each a replay of the whole file, measured from the split on."""
    runs = []
    for label, params in (("default", fitting.start_params), ("fitted", fitting.params(values))):
        model = build(fitting.name, params)
        runs.append(
            predict(
                model, match_file.matches, len(match_file.players), algorithm=label, pair_loss=True
            )
        )
    rows = summarize(runs, start=fitting.split)
    return {row["algorithm"]: row for row in rows}
