"""Every model parameter has a documented range (``app.rating.params``) inside which every
computation of the core stays finite: updates (1 v 1, teams, free-for-alls, draws, partial
play), quality, win and draw probabilities, matchmaking, replay, ageing and the
conservative rating, from priors and from the most extreme ratings a ladder can seed.
Just outside a bound, ``check_parameters`` refuses the value naming the parameter and
its range.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.rating import glicko2
from app.rating.base import Rating, RatingInputError, RatingModel, VolatileRating, age
from app.rating.matchmaking import balanced_split
from app.rating.params import LADDER_PARAMETERS, MAX_LENGTH, MAX_MEAN, MIN_LENGTH, Parameter
from app.rating.registry import ALGORITHMS, MODELS, check_parameters, make_model, parameters
from app.rating.replay import MIN_FAST_MATCHES, ReplayMatch, replay

BAYESIAN = tuple(a for a in MODELS if a != "elo")
#: The algorithms whose ladders add ``LADDER_PARAMETERS`` (Glicko-2 holds its own).
LADDER_LEVEL = tuple(a for a in MODELS if a not in ("elo", "glicko2"))


def test_the_tables_hold_the_models_defaults() -> None:
    for algorithm in MODELS:
        table = {spec.name: spec.default for spec in parameters(algorithm)}
        assert table == make_model(algorithm).params
        assert check_parameters(algorithm, {}) == make_model(algorithm).params
    assert {spec.name: spec.default for spec in LADDER_PARAMETERS} == {
        "tau_per_day": 0.0,
        "conservative_k": 3.0,
    }


def test_every_default_is_inside_its_range() -> None:
    for algorithm in MODELS:
        for spec in (*parameters(algorithm), *LADDER_PARAMETERS):
            assert spec.problem(spec.default) is None, (algorithm, spec.name)


def _edges(spec: Parameter) -> list[float]:
    """The bounds themselves (closed ends) and the next floats inward."""
    values = []
    if not spec.low_open:
        values.append(spec.low)
    if not spec.high_open:
        values.append(spec.high)
    values += [math.nextafter(spec.low, math.inf), math.nextafter(spec.high, -math.inf)]
    return values


def _outside(spec: Parameter) -> list[float]:
    """The nearest floats outside each bound (the bound itself where it is open)."""
    low = spec.low if spec.low_open else math.nextafter(spec.low, -math.inf)
    high = spec.high if spec.high_open else math.nextafter(spec.high, math.inf)
    return [low, high, low - abs(low) - 1.0, high * 10.0 + 1.0]


def _value(spec: Parameter) -> st.SearchStrategy[Any]:
    if spec.boolean:
        return st.booleans()
    if spec.choices:
        return st.sampled_from(spec.choices)
    if spec.integer:
        return st.integers(int(spec.low), int(spec.high)).map(float)
    edges = st.sampled_from(_edges(spec))
    if spec.low > 0.0:  # scales: log-uniform, so every decade is drawn
        inner = st.floats(math.log10(spec.low), math.log10(spec.high)).map(lambda e: 10.0**e)
        inner = inner.filter(lambda x: spec.problem(x) is None)
    else:
        inner = st.floats(spec.low, spec.high, exclude_max=spec.high_open)
    return st.one_of(edges, inner, st.just(spec.default))


@st.composite
def _params(draw: st.DrawFn, algorithm: str) -> dict[str, Any]:
    values = {spec.name: draw(_value(spec)) for spec in parameters(algorithm)}
    if algorithm == "elo":
        # k_factor is also at most the model's width (scale or beta).
        width = values["scale" if values["model"] == "logistic" else "beta"]
        values["k_factor"] = min(values["k_factor"], width)
    return values


def _seeds(model: RatingModel, bayesian: bool) -> list[Rating]:
    """The prior and the most extreme ratings a ladder can seed."""
    prior = model.rating()
    if not bayesian:
        return [prior, Rating(MAX_MEAN, 0.0), Rating(-MAX_MEAN, 0.0), Rating(prior.mu + 1, 0.0)]
    seeds = [
        prior,
        Rating(MAX_MEAN, MIN_LENGTH),
        Rating(-MAX_MEAN, MAX_LENGTH),
        Rating(prior.mu, MIN_LENGTH),
        Rating(-MAX_MEAN, MIN_LENGTH),
        Rating(MAX_MEAN, MAX_LENGTH),
    ]
    if model.name == "glicko2":
        # Seeded volatilities at both ends of their range.
        ends = (glicko2.MIN_VOLATILITY, glicko2.MAX_VOLATILITY)
        seeds = [VolatileRating(r.mu, r.sigma, ends[n % 2]) for n, r in enumerate(seeds)]
    return seeds


#: (players, ranks, weights) over a table of six: 1 v 1 won and drawn, 2 v 1, 2 v 2 with
#: partial play, free-for-alls with ties and with partial play, 3 v 2 v 1.
MATCHES: list[tuple[list[list[int]], list[float] | None, list[list[float]] | None]] = [
    ([[0], [1]], None, None),
    ([[2], [3]], [0.0, 0.0], None),
    ([[4, 5], [0]], [1.0, 0.0], None),
    ([[1, 2], [3, 4]], None, [[1.0, 0.5], [0.25, 1.0]]),
    ([[5], [0], [1], [2]], [2.0, 0.0, 2.0, 1.0], None),
    ([[3], [4], [5]], [0.0, 1.0, 1.0], [[0.5], [1.0], [1e-3]]),
    ([[0, 1, 2], [3, 4], [5]], [2.0, 1.0, 0.0], None),
    ([[5], [4]], [0.0, 0.0], [[1.0], [0.5]]),
]


def _finite(*values: float) -> bool:
    return all(math.isfinite(x) for x in values)


def _exercise(model: RatingModel, bayesian: bool) -> None:
    """Rate every match of ``MATCHES`` in turn over the extreme seeds, predicting each one
    first; then matchmake and replay. Everything must be finite."""
    table = _seeds(model, bayesian)
    table += [model.rating()] * (6 - len(table))
    for players, ranks, weights in MATCHES:
        teams = [[table[i] for i in team] for team in players]
        quality = model.quality(teams, weights)
        assert 0.0 < quality <= 1.0
        win = model.win_probabilities(teams, weights)
        assert all(0.0 <= p <= 1.0 for p in win) and math.fsum(win) == pytest.approx(1.0)
        draw = model.draw_probability(teams, weights)
        assert draw is None or 0.0 <= draw <= 1.0
        new = model.rate(teams, ranks=ranks, weights=weights)
        for team, after in zip(players, new, strict=True):
            for i, rating in zip(team, after, strict=True):
                assert _finite(*rating, rating.conservative(100.0)), (players, rating)
                if bayesian:
                    assert rating.sigma > 0.0, (players, rating)
                table[i] = rating
    for k, size in ((2, 6), (3, 6), (2, 5)):
        split = balanced_split(model, table[:size], k)
        assert 0.0 < split.quality <= 1.0
    # The replay engine (vectorised for enough matches) on the same seeds.
    seeds = _seeds(model, bayesian)
    seeds += [model.rating()] * (6 - len(seeds))
    matches = [
        ReplayMatch(teams=p, ranks=r, weights=w, day=float(n))
        for n in range(MIN_FAST_MATCHES // len(MATCHES) + 1)
        for p, r, w in MATCHES
    ]
    result = replay(
        model,
        [r.mu for r in seeds],
        [r.sigma for r in seeds],
        matches,
        tau_per_day=MAX_LENGTH if bayesian else 0.0,
        with_quality=True,
    )
    assert result.quality is not None
    assert _finite(*result.mu, *result.sigma, *result.after_mu, *result.after_sigma)
    assert all(0.0 < q <= 1.0 for q in result.quality)
    if bayesian:
        assert (result.sigma > 0.0).all()


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


@pytest.mark.parametrize("algorithm", MODELS)
def test_every_computation_is_finite_inside_the_bounds(algorithm: str) -> None:
    @SETTINGS
    @given(params=_params(algorithm))
    def check(params: dict[str, Any]) -> None:
        assert check_parameters(algorithm, params) == pytest.approx(params)
        _exercise(make_model(algorithm, params), algorithm in BAYESIAN)

    check()


#: Elo's options at the corners: each model with each rule, each multiplayer form twice.
ELO_VARIANTS = (
    ("logistic", "classic", "pairwise_mean"),
    ("logistic", "mle", "pairwise_sum"),
    ("logistic", "classic", "full"),
    ("gaussian", "mle", "pairwise_mean"),
    ("gaussian", "classic", "pairwise_sum"),
    ("gaussian", "mle", "full"),
)


@pytest.mark.parametrize("algorithm", MODELS)
def test_every_corner_of_the_bounds_is_finite(algorithm: str) -> None:
    """Each scale at each of its bounds with the others at theirs: the grid of extremes."""
    specs = parameters(algorithm)
    for spec in specs:
        if spec.choices or spec.boolean:
            continue
        for value in _edges(spec)[:2]:
            for others in ("low", "high"):
                params: dict[str, Any] = {spec.name: value}
                for other in specs:
                    if other is spec or other.choices or other.boolean:
                        continue
                    bound = other.low if others == "low" else other.high
                    params[other.name] = other.default if other.problem(bound) else bound
                if algorithm == "elo":
                    params["k_factor"] = min(params["k_factor"], params["scale"])
                    for model, rule, multiplayer in ELO_VARIANTS:
                        options = dict(params, model=model, rule=rule, multiplayer=multiplayer)
                        options["k_factor"] = min(
                            options["k_factor"], options["beta"], options["scale"]
                        )
                        _exercise(make_model(algorithm, options), False)
                else:
                    _exercise(make_model(algorithm, params), True)


@pytest.mark.parametrize("algorithm", MODELS)
def test_just_outside_a_bound_names_the_parameter_and_its_range(algorithm: str) -> None:
    for spec in parameters(algorithm):
        if spec.choices:
            bad: list[Any] = ["", spec.choices[0].upper(), 1.0]
        elif spec.boolean:
            bad = [0, 1.0, "true", None]
        else:
            bad = [*_outside(spec), math.nan, math.inf, "1.0", True]
        for value in bad:
            with pytest.raises(RatingInputError) as caught:
                check_parameters(algorithm, {spec.name: value})
            assert caught.value.argument == spec.name
            assert spec.range_text in caught.value.message, caught.value.message


@pytest.mark.parametrize("model", ["logistic", "gaussian"])
def test_elo_k_factor_is_at_most_the_models_width(model: str) -> None:
    width = "scale" if model == "logistic" else "beta"
    params = {"model": model, width: 50.0, "k_factor": 50.0}
    assert check_parameters("elo", params)["k_factor"] == 50.0
    with pytest.raises(RatingInputError) as caught:
        check_parameters("elo", {**params, "k_factor": math.nextafter(50.0, 100.0)})
    assert caught.value.argument == "k_factor"
    assert f"at most {width}" in caught.value.message and "[1e-06, 50.0]" in caught.value.message


def test_ageing_at_the_largest_tau_per_day_stays_finite() -> None:
    tau_per_day = LADDER_PARAMETERS[0].high
    # A player away for the whole range of dates (year 1 to 9999).
    old = age(Rating(MAX_MEAN, MAX_LENGTH), tau_per_day, 3.7e6)
    assert _finite(*old, old.conservative(LADDER_PARAMETERS[1].high))


def test_unknown_parameters_are_named() -> None:
    with pytest.raises(RatingInputError) as caught:
        check_parameters("trueskill", {"kappa": 0.1})
    assert caught.value.argument == "kappa"


def test_the_documented_table_is_the_code_s() -> None:
    """docs/models.md lists every parameter with its default, range and meaning, as the
    tables of ``app.rating`` hold them, and nothing else."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    rows = {line for line in text.splitlines() if line.startswith("| ") and "`" in line}
    expected = set()
    for algorithm in ALGORITHMS:
        specs = parameters(algorithm) + (LADDER_PARAMETERS if algorithm in LADDER_LEVEL else ())
        for spec in specs:
            default = f"`{spec.default}`" if isinstance(spec.default, str) else repr(spec.default)
            expected.add(
                f"| {algorithm} | `{spec.name}` | {default} | {spec.range_text} "
                f"| {spec.description} |"
            )
    assert rows == expected
