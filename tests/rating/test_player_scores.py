"""Individual statistics in TrueSkill (``rating-models.md`` section 9): each player's
statistic, standardised within the match, is one more Gaussian factor on their
performance. The update is checked against numerical integration of the same model (the
skills and performances integrated on grids, the outcome as an indicator), and it is the
plain update exactly when there is no evidence."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from app.rating._vector import kernel_for
from app.rating.base import Rating, RatingInputError, standard_scores, statistic_evidence
from app.rating.registry import make_model
from app.rating.replay import ReplayMatch, replay
from app.rating.replay import _replay_one_by_one as replay_one_by_one
from app.rating.trueskill import TrueSkill

FloatArray = npt.NDArray[np.float64]


def _gauss(x: Any, m: Any, v: float) -> Any:
    return np.exp(-0.5 * (x - m) ** 2 / v) / math.sqrt(2.0 * math.pi * v)


def _quadrature(
    players: list[Rating],
    team_of: list[int],
    beta: float,
    eps: float,
    drawn: bool,
    evidence: list[tuple[float, float] | None],
    n: int,
) -> list[tuple[float, float]]:
    """Posterior mean and deviation of each skill, team 0 beating team 1 (or drawing) by
    the margin ``eps``, by quadrature: per player a grid over the performance p, weighted
    by the integral over the skill of N(s; mu, sigma^2) N(p; s, beta^2) (itself on a grid)
    and by the evidence N(p; e, r); then the sum over every performance grid point that
    meets the outcome."""
    grids, weight, first, second = [], [], [], []
    for r, found in zip(players, evidence, strict=True):
        v = r.sigma * r.sigma
        sd = math.sqrt(v + beta * beta)
        p = np.linspace(r.mu - 9 * sd, r.mu + 9 * sd, n)
        s = np.linspace(r.mu - 9 * r.sigma, r.mu + 9 * r.sigma, 1601)
        joint = _gauss(s[None, :], r.mu, v) * _gauss(p[:, None], s[None, :], beta * beta)
        seen = np.ones_like(p) if found is None else _gauss(p, found[0], found[1])
        grids.append(p)
        weight.append(joint.sum(1) * seen)
        first.append((joint * s[None, :]).sum(1) * seen)
        second.append((joint * s[None, :] ** 2).sum(1) * seen)
    mesh = np.meshgrid(*grids, indexing="ij")
    d = sum(m if team == 0 else -m for m, team in zip(mesh, team_of, strict=True))
    inside = (np.abs(d) <= eps) if drawn else (d > eps)
    k = len(players)
    out = []
    for i in range(k):
        shape = [1] * k
        shape[i] = n
        rest = inside.astype(float)
        for j in range(k):
            if j != i:
                other = [1] * k
                other[j] = n
                rest = rest * weight[j].reshape(other)
        z = (rest * weight[i].reshape(shape)).sum()
        one = (rest * first[i].reshape(shape)).sum() / z
        two = (rest * second[i].reshape(shape)).sum() / z
        out.append((float(one), math.sqrt(two - one * one)))
    return out


#: Evidence N(p_i; c + 3 z_i, 2.5^2): a statistic of 1/3 deviation per performance unit,
#: with noise of 2.5/3 deviations.
MODEL = TrueSkill(stat_scale=1 / 3, stat_noise=2.5 / 3, tau=0.0)


def _moments(evidence: Any) -> list[tuple[float, float] | None]:
    """The evidence of each player (in order) as N(p; mean, variance), from its canonical
    form (precision pi, precision-adjusted mean tau)."""
    assert evidence is not None
    return [
        None if found is None else (found[1] / found[0], 1.0 / found[0])
        for row in evidence
        for found in row
    ]


@pytest.mark.parametrize("drawn", [False, True])
def test_a_duel_matches_numerical_integration(drawn: bool) -> None:
    a, b = Rating(27.0, 6.0), Rating(24.0, 7.0)
    scores = [[2.0], [10.0]]  # the winner did less by their own statistic
    new = MODEL.rate([[a], [b]], ranks=[1, 1] if drawn else None, player_scores=scores)
    evidence = _moments(statistic_evidence([[a], [b]], scores, 1 / 3, 2.5 / 3))
    flat = [x for found in evidence for x in (found or ())]
    assert flat == pytest.approx([22.5, 6.25, 28.5, 6.25])  # centre 25.5, z = -1 and +1
    expected = _quadrature(
        [a, b],
        [0, 1],
        MODEL.params["beta"],
        MODEL.draw_margin(2),
        drawn,  # type: ignore[arg-type]
        evidence,
        n=2001,
    )
    for rating, (mu, sigma) in zip([new[0][0], new[1][0]], expected, strict=True):
        assert rating.mu == pytest.approx(mu, abs=1e-3)
        assert rating.sigma == pytest.approx(sigma, abs=1e-3)


def test_two_against_one_with_an_unknown_statistic_matches_numerical_integration() -> None:
    a, c, b = Rating(27.0, 6.0), Rating(20.0, 5.0), Rating(24.0, 7.0)
    scores: list[list[float | None]] = [[5.0, None], [1.0]]
    new = MODEL.rate([[a, c], [b]], player_scores=scores)
    evidence = _moments(statistic_evidence([[a, c], [b]], scores, 1 / 3, 2.5 / 3))
    assert evidence[1] is None
    expected = _quadrature(
        [a, c, b],
        [0, 0, 1],
        MODEL.params["beta"],
        MODEL.draw_margin(3),
        False,  # type: ignore[arg-type]
        evidence,
        n=161,
    )
    for rating, (mu, sigma) in zip([new[0][0], new[0][1], new[1][0]], expected, strict=True):
        assert rating.mu == pytest.approx(mu, abs=2e-3)
        assert rating.sigma == pytest.approx(sigma, abs=2e-3)


TEAMS = [[Rating(25.0, 8.0), Rating(30.0, 4.0)], [Rating(22.0, 6.0), Rating(26.0, 3.0)]]
THREE = [[Rating(25.0, 8.0)], [Rating(30.0, 4.0)], [Rating(22.0, 6.0)]]


@pytest.mark.parametrize("teams", [TEAMS, THREE])
def test_without_evidence_the_update_is_the_plain_one(teams: list[list[Rating]]) -> None:
    plain = TrueSkill()
    scores = [[float(n) for n, _ in enumerate(team)] for team in teams]
    expected = plain.rate(teams)
    # No statistics; statistics on a model whose stat_scale is 0; fewer than two known;
    # all equal: every one gives the plain update bit for bit.
    assert plain.rate(teams, player_scores=scores) == expected
    assert MODEL.rate(teams) == TrueSkill(tau=0.0).rate(teams)
    lone = [[None] * len(team) for team in teams]
    lone[0][0] = 3.0
    assert TrueSkill(stat_scale=2.0).rate(teams, player_scores=lone) == expected
    same = [[1.0] * len(team) for team in teams]
    assert TrueSkill(stat_scale=2.0).rate(teams, player_scores=same) == expected


@pytest.mark.parametrize("teams", [TEAMS, THREE])
def test_evidence_of_no_weight_is_the_plain_update(teams: list[list[Rating]]) -> None:
    scores = [[float(n * 7 + j) for n, _ in enumerate(team)] for j, team in enumerate(teams)]
    loose = TrueSkill(stat_scale=1e-12, stat_noise=1.0).rate(teams, player_scores=scores)
    for got, want in zip(loose, TrueSkill().rate(teams), strict=True):
        for g, w in zip(got, want, strict=True):
            assert g.mu == pytest.approx(w.mu, rel=1e-9)
            assert g.sigma == pytest.approx(w.sigma, rel=1e-9)


def test_the_better_statistic_gains_more_within_a_team() -> None:
    teams = [[Rating(25.0, 8.0), Rating(25.0, 8.0)], [Rating(25.0, 8.0), Rating(25.0, 8.0)]]
    new = TrueSkill(stat_scale=0.25, stat_noise=0.75).rate(teams, player_scores=[[9, 1], [5, 5]])
    assert new[0][0].mu > new[0][1].mu  # the winning team's carry gains more
    assert new[1][0].mu == pytest.approx(new[1][1].mu)
    plain = TrueSkill().rate(teams)
    assert new[0][0].mu > plain[0][0].mu > new[0][1].mu
    pairs = zip(new, plain, strict=True)
    assert all(r.sigma < p.sigma for row, prow in pairs for r, p in zip(row, prow, strict=True))


def test_standard_scores() -> None:
    teams = [[Rating(25, 8), Rating(25, 8)], [Rating(25, 8)]]
    z = standard_scores(teams, [[1.0, None], [3.0]])
    assert z is not None and z[0][0] == -1.0 and math.isnan(z[0][1]) and z[1][0] == 1.0
    for bad, message in (
        ([[1.0]], "expected 2 teams"),
        ([[1.0], [2.0]], "player_scores[0] has 1 values"),
        ([[1.0, math.inf], [2.0]], "non-finite"),
        ([[1.0, True], [2.0]], "non-finite"),
    ):
        with pytest.raises(RatingInputError, match=message.replace("[", r"\[")) as info:
            standard_scores(teams, bad)  # type: ignore[arg-type]
        assert info.value.argument == "player_scores"


WENG_LIN = [
    "plackett_luce",
    "bradley_terry_full",
    "bradley_terry_part",
    "thurstone_mosteller_full",
    "thurstone_mosteller_part",
]


@pytest.mark.parametrize("algorithm", WENG_LIN)
def test_the_weng_lin_models_observe_the_evidence_after_the_outcome(algorithm: str) -> None:
    """The team update, then each skill's exact Gaussian update by e_i observed with
    variance beta^2 + r (the performance's deviation and the evidence's)."""
    teams = [[Rating(25.0, 8.0), Rating(30.0, 4.0)], [Rating(22.0, 6.0), Rating(26.0, 3.0)]]
    scores: list[list[float | None]] = [[9.0, 1.0], [None, 4.0]]
    params = {"stat_scale": 1 / 3, "stat_noise": 2.0 / 3, "stat_spread": 1.5}
    model = make_model(algorithm, params)
    plain = make_model(algorithm).rate(teams)
    evidence = statistic_evidence(teams, scores, 1 / 3, 2.0 / 3, 1.5)  # c + 3 z, 2^2
    assert evidence is not None and evidence[1][0] is None
    beta2 = (25.0 / 6.0) ** 2
    new = model.rate(teams, player_scores=scores)
    for got_row, plain_row, found_row in zip(new, plain, evidence, strict=True):
        for got, before, found in zip(got_row, plain_row, found_row, strict=True):
            if found is None:
                assert got == before
                continue
            e, r = found[1] / found[0], 1.0 / found[0]
            v = before.sigma**2
            assert got.mu == pytest.approx(before.mu + v * (e - before.mu) / (v + beta2 + r))
            assert got.sigma == pytest.approx(math.sqrt(v * (beta2 + r) / (v + beta2 + r)))
    assert model.rate(teams) == make_model(algorithm, params).rate(teams)


def test_elo_steps_towards_the_evidence() -> None:
    teams = [[Rating(1500.0, 0.0), Rating(1600.0, 0.0)], [Rating(1550.0, 0.0), Rating(1450.0, 0.0)]]
    scores: list[list[float | None]] = [[10.0, 2.0], [6.0, 6.0]]
    model = make_model("elo", {"stat_scale": 100.0, "stat_weight": 0.2})
    plain = make_model("elo").rate(teams)
    z = standard_scores(teams, scores)
    assert z is not None
    centre = (1500 + 1600 + 1550 + 1450) / 4
    new = model.rate(teams, player_scores=scores)
    for got_row, plain_row, z_row in zip(new, plain, z, strict=True):
        for got, before, x in zip(got_row, plain_row, z_row, strict=True):
            e = centre + 100.0 * x
            assert got.mu == pytest.approx(before.mu + 0.2 * (e - before.mu))
    assert new[0][0].mu > plain[0][0].mu and new[0][1].mu < plain[0][1].mu
    assert make_model("elo").rate(teams, player_scores=scores) == plain


def test_glicko2_checks_statistics_and_rates_without_them() -> None:
    teams = [[Rating(1500.0, 200.0)], [Rating(1400.0, 80.0)]]
    model = make_model("glicko2")
    assert model.rate(teams, player_scores=[[3.0], [1.0]]) == model.rate(teams)
    with pytest.raises(RatingInputError):
        model.rate(teams, player_scores=[[3.0]])


def test_the_vectorised_replay_takes_statistics_as_the_scalar_update_does() -> None:
    """Two-team blocks with statistics go through the vectorised update, and give what
    rating the matches one by one gives, to rounding."""
    rng = random.Random(3)
    players = 6000
    matches = []
    for n in range(8000):
        shape = rng.choice([(4, 4), (3, 3), (1, 1), (2, 2, 2)])
        chosen = rng.sample(range(players), sum(shape))
        teams = [chosen[sum(shape[:j]) : sum(shape[: j + 1])] for j in range(len(shape))]
        ranks = (
            [0] * len(shape) if rng.random() < 0.2 else rng.sample(range(len(shape)), len(shape))
        )
        stats = None
        if rng.random() < 0.7:
            stats = [
                [None if rng.random() < 0.1 else float(rng.randrange(5)) for _ in t] for t in teams
            ]
        matches.append(ReplayMatch(teams, ranks, day=n / 10, player_scores=stats))
    model = TrueSkill(stat_scale=0.1, stat_noise=0.5, stat_spread=1.0, beta=8.0, tau=0.3)
    assert kernel_for(model) is not None and kernel_for(model).evidence  # type: ignore[union-attr]
    mu = np.full(players, 25.0)
    sigma = np.full(players, 25.0 / 3.0)
    fast = replay(model, mu, sigma, matches, tau_per_day=0.1)
    slow = replay_one_by_one(
        model, mu.copy(), sigma.copy(), np.full(players, np.nan), matches, 0.1, False
    )
    np.testing.assert_allclose(fast.after_mu, slow.after_mu, rtol=1e-12)
    np.testing.assert_allclose(fast.after_sigma, slow.after_sigma, rtol=1e-12)
    plain = replay(TrueSkill(beta=8.0, tau=0.3), mu, sigma, matches, tau_per_day=0.1)
    assert not np.allclose(plain.mu, fast.mu)  # the statistics counted
