"""The Bayesian Plackett-Luce model (Weng and Lin 2011, Algorithm 4).

References: the ``openskill`` package's ``PlackettLuce`` (test-only oracle) through a
checked-in golden file and a live comparison; the Gumbel-max form of the Plackett-Luce
first-place probability integrated numerically; properties of the paper's update.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from app.rating import Rating, RatingInputError, RatingModel
from app.rating import plackett_luce as pl_module
from app.rating.plackett_luce import PlackettLuce

GOLDEN = Path(__file__).parent / "golden" / "plackett_luce.json"
TOL = 1e-9


def _load_golden() -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text())
    sequences: list[dict[str, Any]] = data["sequences"]
    return sequences


def _assert_close(got: list[list[Rating]], expected: list[list[list[float]]]) -> None:
    assert [len(t) for t in got] == [len(t) for t in expected]
    for team_got, team_expected in zip(got, expected, strict=True):
        for r, (mu, sigma) in zip(team_got, team_expected, strict=True):
            assert type(r) is Rating
            assert r.mu == pytest.approx(mu, abs=TOL, rel=0)
            assert r.sigma == pytest.approx(sigma, abs=TOL, rel=0)


# ---------------------------------------------------------------------- fixed numbers


def test_defaults_are_the_papers_and_openskills() -> None:
    model: RatingModel = PlackettLuce()
    assert model.name == "plackett_luce"
    assert model.params == {
        "mu": 25.0,
        "sigma": 25.0 / 3,
        "beta": 25.0 / 6,
        "tau": 25.0 / 300,
        "kappa": 1e-4,
        "limit_sigma": False,
        "advantage": 0.0,
        "margin": 0.0,
        "stat_scale": 0.0,
        "stat_noise": 1.0,
        "stat_spread": 0.0,
    }
    assert model.rating() == Rating(25.0, 25.0 / 3)
    assert model.rating(mu=30.0) == Rating(30.0, 25.0 / 3)
    assert model.rating(sigma=2) == Rating(25.0, 2.0)


def test_default_one_on_one_locks_the_numbers() -> None:
    # openskill 6.2 PlackettLuce().rate([[a], [b]]) on two new players.
    model = PlackettLuce()
    (w,), (l,) = model.rate([[model.rating()], [model.rating()]])
    assert w.mu == pytest.approx(27.635389493140497, abs=1e-12)
    assert l.mu == pytest.approx(22.364610506859503, abs=1e-12)
    assert w.sigma == pytest.approx(8.06590141354368, abs=1e-12)
    assert l.sigma == pytest.approx(8.06590141354368, abs=1e-12)


def test_one_on_one_by_hand_from_algorithm_4() -> None:
    # Two one-player teams: c^2 = 2 (sigma'^2 + beta^2), p = 1/2,
    # Omega = sigma'^2/c * (1 - 1/2), Delta = (sigma'/c) * sigma'^2/c^2 * 1/4.
    model = PlackettLuce()
    s2 = (25 / 3) ** 2 + (25 / 300) ** 2
    c = math.sqrt(2 * (s2 + (25 / 6) ** 2))
    omega = s2 / c * 0.5
    delta = math.sqrt(s2) / c * s2 / c**2 * 0.25
    w, l = model.rate_1vs1(model.rating(), model.rating())
    assert w.mu == pytest.approx(25 + omega, abs=1e-12)
    assert l.mu == pytest.approx(25 - omega, abs=1e-12)
    assert w.sigma == pytest.approx(math.sqrt(s2 * (1 - delta)), abs=1e-12)
    d, e = model.rate_1vs1(model.rating(), model.rating(), drawn=True)
    assert d == Rating(25.0, w.sigma)
    assert e == Rating(25.0, w.sigma)


# ---------------------------------------------------------------------- the oracle

GOLDEN_SEQUENCES = _load_golden()


@pytest.mark.parametrize("sequence", GOLDEN_SEQUENCES, ids=[s["name"] for s in GOLDEN_SEQUENCES])
def test_golden_sequences_match_openskill(sequence: dict[str, Any]) -> None:
    model = PlackettLuce(**sequence["params"])
    assert len(sequence["matches"]) >= 200
    for match in sequence["matches"]:
        teams = [[Rating(mu, sigma) for mu, sigma in team] for team in match["teams"]]
        got = model.rate(
            teams,
            ranks=match.get("ranks"),
            scores=match.get("scores"),
            weights=match.get("weights"),
        )
        _assert_close(got, match["expected"])


def test_golden_file_covers_what_it_claims() -> None:
    matches = [m for s in GOLDEN_SEQUENCES for m in s["matches"]]
    n_teams = {len(m["teams"]) for m in matches}
    assert min(n_teams) == 2
    assert max(n_teams) >= 14
    assert any(len({len(t) for t in m["teams"]}) > 1 for m in matches)  # uneven
    tied = [m for m in matches if "ranks" in m and len(set(m["ranks"])) < len(m["ranks"])]
    assert len(tied) > 100
    assert sum("weights" in m for m in matches) > 200
    assert sum("scores" in m for m in matches) > 200
    assert {json.dumps(s["params"]) for s in GOLDEN_SEQUENCES} != {"{}"}


def _openskill_rate(
    params: dict[str, Any], teams: list[list[Rating]], **outcome: Any
) -> list[list[list[float]]]:
    from openskill.models import PlackettLuce as Oracle

    oracle = Oracle(**params)
    given_teams = [[oracle.rating(mu=r.mu, sigma=r.sigma) for r in team] for team in teams]
    result = oracle.rate(given_teams, **outcome)
    return [[[p.mu, p.sigma] for p in team] for team in result]


def _random_match(rng: random.Random) -> tuple[list[list[Rating]], dict[str, Any]]:
    k = rng.randint(2, 9)
    teams = [
        [Rating(rng.uniform(-10, 60), rng.uniform(0.2, 15)) for _ in range(rng.randint(1, 4))]
        for _ in range(k)
    ]
    outcome: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.5:
        outcome["ranks"] = [rng.randint(0, k - 1) for _ in range(k)]
    elif roll < 0.8:
        outcome["scores"] = [rng.choice([0.0, 1.5, 2.0, 7.0]) for _ in range(k)]
    if rng.random() < 0.4:
        weights = [[rng.choice([0.0, 0.3, 1.0, rng.random()]) for _ in t] for t in teams]
        if any(w != 1.0 for row in weights for w in row):
            outcome["weights"] = weights
    return teams, outcome


def test_live_openskill_on_random_matches() -> None:
    pytest.importorskip("openskill")
    rng = random.Random(4242)
    for n in range(150):
        params: dict[str, Any] = {}
        if n % 3 == 1:
            params = {"mu": 10.0, "sigma": 4.0, "beta": 3.0, "tau": 0.5, "kappa": 0.01}
        teams, outcome = _random_match(rng)
        _assert_close(
            PlackettLuce(**params).rate(teams, **outcome), _openskill_rate(params, teams, **outcome)
        )


def test_overflow_free_path_agrees_with_openskill(monkeypatch: pytest.MonkeyPatch) -> None:
    # Force the per-group log-sum-exp path on ordinary matches, where openskill's plain
    # exponentials are still exact enough to compare.
    pytest.importorskip("openskill")
    monkeypatch.setattr(pl_module, "_SHIFT_SPAN", -1.0)
    rng = random.Random(99)
    for _ in range(60):
        teams, outcome = _random_match(rng)
        _assert_close(PlackettLuce().rate(teams, **outcome), _openskill_rate({}, teams, **outcome))


def test_rate_1vs1_is_rate_of_two_one_player_teams() -> None:
    rng = random.Random(5)
    model = PlackettLuce(tau=0.3)
    for _ in range(200):
        a = Rating(rng.uniform(-50, 80), rng.uniform(0.1, 20))
        b = Rating(rng.uniform(-50, 80), rng.uniform(0.1, 20))
        drawn = rng.random() < 0.3
        w, l = model.rate_1vs1(a, b, drawn=drawn)
        (rw,), (rl,) = model.rate([[a], [b]], ranks=[0, 0] if drawn else None)
        for x, y in ((w, rw), (l, rl)):
            assert x.mu == pytest.approx(y.mu, abs=1e-12)
            assert x.sigma == pytest.approx(y.sigma, abs=1e-12)


# ---------------------------------------------------------------------- documented choices


def test_ties_rate_tied_teams_of_different_strength_differently() -> None:
    model = PlackettLuce()
    strong, weak = Rating(32.0, 4.0), Rating(18.0, 4.0)
    (s,), (w,) = model.rate([[strong], [weak]], ranks=[1, 1])
    assert s.mu < strong.mu
    assert w.mu > weak.mu
    # Equal strength and a draw: no one moves, uncertainty still shrinks.
    (a,), (b,) = model.rate([[model.rating()], [model.rating()]], scores=[3, 3])
    assert a.mu == b.mu == 25.0
    assert a.sigma < 25.0 / 3


def test_symmetric_tie_under_partial_play_moves_no_mean() -> None:
    # Every team tied with equal means: Omega_i is exactly 0, so the weight multiplies
    # the variance reduction (the documented choice where openskill follows rounding).
    model = PlackettLuce()
    r = model.rating()
    teams = [[r, r] for _ in range(5)]
    new = model.rate(teams, ranks=[2] * 5, weights=[[0.5, 1.0]] * 5)
    plain = model.rate(teams, ranks=[2] * 5)
    for team, plain_team in zip(new, plain, strict=True):
        assert team[0].mu == team[1].mu == 25.0
        assert team[0] == plain_team[0]  # the smallest weight rescales to 1
        s2 = (25 / 3) ** 2 + (25 / 300) ** 2
        # weight 2 doubles the variance reduction 1 - f of the unweighted update
        f = plain_team[1].sigma ** 2 / s2
        assert team[1].sigma ** 2 / s2 == pytest.approx(1 - 2 * (1 - f), abs=1e-14)


def test_all_one_weights_are_no_weights() -> None:
    model = PlackettLuce()
    teams = [[Rating(20.0, 5.0)], [Rating(30.0, 3.0), Rating(22.0, 6.0)]]
    assert model.rate(teams, weights=[[1.0], [1, 1.0]]) == model.rate(teams)


def test_partial_play_is_relative_within_a_team() -> None:
    # openskill's rescaling: weights only matter relative to the team's own range.
    model = PlackettLuce()
    teams = [[Rating(20.0, 5.0), Rating(27.0, 4.0), Rating(25.0, 7.0)], [Rating(24.0, 6.0)]]
    a = model.rate(teams, weights=[[0.0, 0.5, 1.0], [0.3]])
    b = model.rate(teams, weights=[[0.2, 0.4, 0.6], [1.0]])
    assert a == b


def test_fractional_ranks_are_compared_as_given() -> None:
    model = PlackettLuce()
    teams = [[Rating(25.0, 8.0)], [Rating(25.0, 8.0)]]
    assert model.rate(teams, ranks=[0.5, 0.7]) == model.rate(teams)
    assert model.rate(teams, ranks=[0.5, 0.5]) == model.rate(teams, ranks=[0, 0])


# ---------------------------------------------------------------------- predictions


def _gumbel_first_place(x: list[float], j: int) -> float:
    """P(j first) as the Gumbel-max integral: int g(t - x_j) prod_i G(t - x_i) dt."""

    def integrand(t: float) -> float:
        z = t - x[j]
        density = math.exp(-z - math.exp(-z))
        others = math.exp(-sum(math.exp(-(t - xi)) for i, xi in enumerate(x) if i != j))
        return density * others

    value, _ = integrate.quad(integrand, -40.0 + min(x), 40.0 + max(x), limit=200)
    return float(value)


def test_win_probabilities_match_the_gumbel_integral() -> None:
    model = PlackettLuce(beta=3.0)
    teams = [
        [Rating(25.0, 5.0), Rating(30.0, 2.0)],
        [Rating(40.0, 8.0)],
        [Rating(20.0, 1.0), Rating(15.0, 3.0)],
    ]
    theta = [55.0, 40.0, 35.0]
    c = math.sqrt(25 + 4 + 64 + 1 + 9 + 3 * 9.0)
    probs = model.win_probabilities(teams)
    for j, p in enumerate(probs):
        assert p == pytest.approx(_gumbel_first_place([t / c for t in theta], j), abs=1e-8)
    assert sum(probs) == pytest.approx(1.0, abs=1e-15)


def test_win_probabilities_weight_partial_play() -> None:
    model = PlackettLuce()
    teams = [[Rating(30.0, 4.0), Rating(10.0, 2.0)], [Rating(20.0, 3.0)]]
    probs = model.win_probabilities(teams, weights=[[1.0, 0.5], [1.0]])
    c = math.sqrt(16 + 0.25 * 4 + 9 + 2 * (25 / 6) ** 2)
    d = (35.0 - 20.0) / c
    assert probs[0] == pytest.approx(1 / (1 + math.exp(-d)), abs=1e-14)


def test_quality_is_equation_7_for_one_on_one() -> None:
    # The TrueSkill paper's equation 7 with c^2 = 2 beta^2 + sigma_1^2 + sigma_2^2.
    model = PlackettLuce(beta=4.0)
    a, b = Rating(30.0, 6.0), Rating(22.0, 3.0)
    c2 = 2 * 16.0 + 36.0 + 9.0
    expected = math.sqrt(2 * 16.0 / c2) * math.exp(-(8.0**2) / (2 * c2))
    assert model.quality([[a], [b]]) == pytest.approx(expected, rel=1e-12)
    even = model.quality([[model.rating()], [model.rating()]])
    assert even == pytest.approx(math.sqrt(32.0 / (32.0 + 2 * (25 / 3) ** 2)), rel=1e-12)
    assert model.quality([[a, b], [b, a]]) > model.quality([[a, a], [b, b]])


def test_draw_probability_is_openskills_predict_draw() -> None:
    # Two new players: n = 2, eps = sqrt(2) beta Phi^-1(3/4), c^2 = 2 beta^2 + 2 sigma^2.
    model = PlackettLuce()
    beta, sigma = 25 / 6, 25 / 3
    eps = math.sqrt(2) * beta * NormalDist().inv_cdf(0.75)
    c = math.sqrt(2 * beta**2 + 2 * sigma**2)
    expected = NormalDist().cdf(eps / c) - NormalDist().cdf(-eps / c)
    got = model.draw_probability([[model.rating()], [model.rating()]])
    assert got == pytest.approx(expected, abs=1e-14)
    with pytest.raises(RatingInputError) as info:
        model.draw_probability([[model.rating()]])
    assert info.value.argument == "teams"


# ---------------------------------------------------------------------- properties

finite_mu = st.floats(-1e4, 1e4, allow_nan=False)
sigmas = st.floats(1e-6, 1e4, allow_nan=False)
ratings = st.builds(Rating, finite_mu, sigmas)
teams_st = st.lists(st.lists(ratings, min_size=1, max_size=4), min_size=2, max_size=6)
models = st.builds(
    PlackettLuce,
    mu=st.just(25.0),
    sigma=st.floats(0.5, 50),
    beta=st.floats(0.1, 50),
    tau=st.sampled_from([0.0, 25 / 300, 2.0]),
    kappa=st.sampled_from([1e-4, 1e-2]),
)


@st.composite
def two_team_matches(draw: st.DrawFn) -> tuple[list[list[Rating]], list[list[float]] | None]:
    teams = draw(st.lists(st.lists(ratings, min_size=1, max_size=4), min_size=2, max_size=2))
    weights = None
    if draw(st.booleans()):
        weights = [[draw(st.floats(0.0, 1.0)) for _ in t] for t in teams]
    return teams, weights


@settings(max_examples=150, deadline=None)
@given(model=models, match=two_team_matches())
def test_two_team_winner_never_loses_and_loser_never_gains(
    model: PlackettLuce, match: tuple[list[list[Rating]], list[list[float]] | None]
) -> None:
    teams, weights = match
    new = model.rate(teams, weights=weights)
    for old, r in zip(teams[0], new[0], strict=True):
        assert r.mu >= old.mu
    for old, r in zip(teams[1], new[1], strict=True):
        assert r.mu <= old.mu


@settings(max_examples=150, deadline=None)
@given(
    model=models,
    teams=teams_st,
    data=st.data(),
)
def test_outputs_are_finite_and_sigma_never_grows(
    model: PlackettLuce, teams: list[list[Rating]], data: st.DataObject
) -> None:
    k = len(teams)
    ranks = data.draw(st.lists(st.integers(0, 3), min_size=k, max_size=k))
    weights = None
    if data.draw(st.booleans()):
        weights = [[data.draw(st.floats(0.0, 1.0)) for _ in t] for t in teams]
    tau = model.params["tau"]
    assert isinstance(tau, float)
    for new in (model.rate(teams, ranks=ranks, weights=weights), model.rate(teams)):
        for old_team, new_team in zip(teams, new, strict=True):
            for old, r in zip(old_team, new_team, strict=True):
                assert math.isfinite(r.mu)
                assert math.isfinite(r.sigma)
                assert r.sigma > 0.0
                assert r.sigma <= math.sqrt(old.sigma**2 + tau**2) * (1 + 1e-12)
    probs = model.win_probabilities(teams, weights=weights)
    assert all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in probs)
    assert sum(probs) == pytest.approx(1.0, abs=1e-12)
    assert 0.0 < model.quality(teams) <= 1.0
    if weights is not None and all(any(w >= 1e-6 for w in row) for row in weights):
        assert 0.0 < model.quality(teams, weights=weights) <= 1.0


@settings(max_examples=100, deadline=None)
@given(teams=teams_st, data=st.data())
def test_relabelling_teams_with_their_ranks_changes_nothing(
    teams: list[list[Rating]], data: st.DataObject
) -> None:
    model = PlackettLuce()
    k = len(teams)
    ranks = data.draw(st.lists(st.integers(0, 3), min_size=k, max_size=k))
    weights = [[data.draw(st.floats(0.0, 1.0)) for _ in t] for t in teams]
    perm = data.draw(st.permutations(range(k)))
    new = model.rate(teams, ranks=ranks, weights=weights)
    moved = model.rate(
        [teams[j] for j in perm], ranks=[ranks[j] for j in perm], weights=[weights[j] for j in perm]
    )
    for pos, j in enumerate(perm):
        for a, b in zip(new[j], moved[pos], strict=True):
            assert a.mu == pytest.approx(b.mu, rel=1e-9, abs=1e-9)
            assert a.sigma == pytest.approx(b.sigma, rel=1e-9, abs=1e-12)
    probs = model.win_probabilities(teams)
    moved_probs = model.win_probabilities([teams[j] for j in perm])
    for pos, j in enumerate(perm):
        assert probs[j] == pytest.approx(moved_probs[pos], rel=1e-9, abs=1e-300)


def test_extreme_inputs_stay_finite() -> None:
    rng = random.Random(11)
    model = PlackettLuce()
    for _ in range(20):
        # 64 teams of 4: 256 players, sigmas from 1e-6 to 1e4, means 10^4 sigma apart.
        teams = []
        for _ in range(64):
            team = []
            for _ in range(4):
                sigma = 10 ** rng.uniform(-6, 4)
                team.append(Rating(25.0 + rng.choice([-1, 0, 1]) * 1e4 * sigma, sigma))
            teams.append(team)
        ranks = [rng.randint(0, 20) for _ in range(64)]
        weights = [[rng.random() for _ in t] for t in teams]
        for new in (
            model.rate(teams, ranks=ranks),
            model.rate(teams, ranks=ranks, weights=weights),
            model.rate(teams[::-1]),
        ):
            assert all(
                math.isfinite(r.mu) and math.isfinite(r.sigma) and r.sigma > 0.0
                for team in new
                for r in team
            )
        probs = model.win_probabilities(teams, weights=weights)
        assert all(math.isfinite(p) for p in probs)
        assert sum(probs) == pytest.approx(1.0, abs=1e-12)
        assert 0.0 < model.quality(teams, weights=weights) <= 1.0
    huge, tiny = Rating(1e8, 1e-6), Rating(-1e8, 1e4)
    for drawn in (False, True):
        for a, b in (model.rate_1vs1(huge, tiny, drawn), model.rate_1vs1(tiny, huge, drawn)):
            assert all(math.isfinite(v) for v in (*a, *b))
            assert a.sigma > 0.0
            assert b.sigma > 0.0


def test_a_certain_upset_still_moves_ratings_finitely() -> None:
    # A gap of thousands of c: the worths exp(theta/c) would overflow if formed directly.
    model = PlackettLuce()
    favourite, underdog = Rating(1e5, 1.0), Rating(0.0, 1.0)
    (u,), (f,) = model.rate([[underdog], [favourite]])
    assert u.mu > 0.0
    assert f.mu < 1e5
    assert math.isfinite(u.sigma)
    assert math.isfinite(f.sigma)
    assert model.win_probabilities([[favourite], [underdog]]) == [1.0, 0.0]


# ---------------------------------------------------------------------- input handling


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"mu": math.nan}, "mu"),
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": math.inf}, "sigma"),
        ({"beta": -1.0}, "beta"),
        ({"tau": -0.1}, "tau"),
        ({"kappa": 0.0}, "kappa"),
        ({"kappa": 1.0}, "kappa"),
        ({"beta": True}, "beta"),
        ({"margin": -1.0}, "margin"),
        ({"margin": math.nan}, "margin"),
        ({"margin": math.inf}, "margin"),
    ],
)
def test_invalid_parameters_name_the_argument(kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises(RatingInputError) as info:
        PlackettLuce(**kwargs)
    assert info.value.argument == argument


def test_invalid_rating_arguments() -> None:
    model = PlackettLuce()
    with pytest.raises(RatingInputError) as info:
        model.rating(sigma=-1.0)
    assert info.value.argument == "sigma"
    with pytest.raises(RatingInputError) as info:
        model.rating(mu=math.inf)
    assert info.value.argument == "mu"


R = Rating(25.0, 8.0)


@pytest.mark.parametrize(
    ("teams", "kwargs", "argument"),
    [
        ([[R]], {}, "teams"),
        ([[R], []], {}, "teams"),
        ([[R], [(25.0, 8.0)]], {}, "teams"),
        ([[R], [Rating(25.0, 0.0)]], {}, "teams"),
        ([[R], [Rating(math.nan, 1.0)]], {}, "teams"),
        ([[R], [R]], {"ranks": [1]}, "ranks"),
        ([[R], [R]], {"ranks": [1, math.inf]}, "ranks"),
        ([[R], [R]], {"ranks": [1, 2], "scores": [1, 2]}, "ranks"),
        ([[R], [R]], {"scores": [1, "2"]}, "scores"),
        ([[R], [R]], {"weights": [[1.0]]}, "weights"),
        ([[R], [R]], {"weights": [[1.0], [1.5]]}, "weights"),
        ([[R], [R]], {"weights": [[1.0], [0.5, 0.5]]}, "weights"),
        ([[R], [R]], {"weights": [[1.0], [math.nan]]}, "weights"),
    ],
)
def test_invalid_matches_name_the_argument(
    teams: list[list[Any]], kwargs: dict[str, Any], argument: str
) -> None:
    model = PlackettLuce()
    with pytest.raises(RatingInputError) as info:
        model.rate(teams, **kwargs)
    assert info.value.argument == argument
    if "ranks" not in kwargs and "scores" not in kwargs:
        with pytest.raises(RatingInputError) as info:
            model.win_probabilities(teams, weights=kwargs.get("weights"))
        assert info.value.argument == argument
        with pytest.raises(RatingInputError) as info:
            model.quality(teams, weights=kwargs.get("weights"))
        assert info.value.argument == argument


@pytest.mark.parametrize(
    ("winner", "loser", "argument"),
    [
        (Rating(25.0, 0.0), R, "winner"),
        (R, Rating(math.inf, 1.0), "loser"),
        ((25.0, 8.0), R, "winner"),
    ],
)
def test_invalid_one_on_one_names_the_player(winner: Any, loser: Any, argument: str) -> None:
    with pytest.raises(RatingInputError) as info:
        PlackettLuce().rate_1vs1(winner, loser)
    assert info.value.argument == argument


def test_inputs_and_model_are_never_mutated() -> None:
    model = PlackettLuce(tau=1.0)
    params = model.params
    teams = [[Rating(20.0, 5.0), Rating(22.0, 3.0)], [Rating(30.0, 2.0)], [Rating(25.0, 8.0)]]
    ranks = [2, 1, 1]
    weights = [[0.5, 1.0], [0.2], [1.0]]
    saved = copy.deepcopy((teams, ranks, weights))
    model.rate(teams, ranks=ranks, weights=weights)
    model.win_probabilities(teams, weights=weights)
    model.quality(teams, weights=weights)
    model.rate_1vs1(teams[0][0], teams[1][0])
    assert (teams, ranks, weights) == saved
    assert model.params == params
    model.params["tau"] = 5.0
    assert model.params == params
    with pytest.raises(AttributeError):
        model.tau = 3.0  # type: ignore[attr-defined]
