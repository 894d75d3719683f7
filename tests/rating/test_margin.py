"""Learning from the margin: TrueSkill's Gaussian observation of the score difference and
Elo's margin-of-victory multiplier, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.rating import Elo, Rating, RatingInputError, TrueSkill


def _kalman(
    teams: list[list[Rating]],
    weights: list[list[float]],
    beta: float,
    tau: float,
    offsets: list[float],
    observed: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The posterior of the skills given t_1 - t_2 = ``observed``, by the joint Gaussian.

    Skills s ~ N(mu, diag(sigma^2 + tau^2)); performance p_i = s_i + N(0, beta^2);
    t_j = sum_i w_i p_i + offset_j; d = t_1 - t_2. Conditioning on d is textbook
    Gaussian algebra on the vector (s, d).
    """
    mu = np.array([r.mu for team in teams for r in team])
    var = np.array([r.sigma**2 + tau**2 for team in teams for r in team])
    a = np.array([w for w in weights[0]] + [-w for w in weights[1]])
    cov_s = np.diag(var)
    d_mean = a @ mu + offsets[0] - offsets[1]
    d_var = a @ cov_s @ a + beta**2 * float(a @ a)
    cross = cov_s @ a
    post_mu = mu + cross * (observed - d_mean) / d_var
    post_cov = cov_s - np.outer(cross, cross) / d_var
    return post_mu, np.sqrt(np.diag(post_cov))


@pytest.mark.parametrize(
    ("scores", "weights", "shares"),
    [
        ([3.0, 1.0], [[1.0], [1.0]], None),
        ([0.0, 2.0], [[1.0, 0.5], [1.0]], [1.0, 0.0]),
        ([2.0, 2.0], [[1.0, 1.0], [0.25, 1.0]], [0.0, 1.0]),
    ],
)
def test_trueskill_margin_is_the_exact_gaussian_posterior(
    scores: list[float], weights: list[list[float]], shares: list[float] | None
) -> None:
    model = TrueSkill(margin=1.5, advantage=2.0, tau=0.3)
    sizes = [len(w) for w in weights]
    teams = [[Rating(24.0 + 2 * i + j, 5.0 + i) for i in range(sizes[j])] for j in range(2)]
    new = model.rate(teams, scores=scores, weights=weights, advantage=shares)
    offsets = [2.0 * a for a in shares] if shares else [0.0, 0.0]
    mu, sigma = _kalman(teams, weights, 25 / 6, 0.3, offsets, 1.5 * (scores[0] - scores[1]))
    flat = [r for team in new for r in team]
    assert [r.mu for r in flat] == pytest.approx(mu.tolist(), rel=1e-12)
    assert [r.sigma for r in flat] == pytest.approx(sigma.tolist(), rel=1e-12)


def test_trueskill_margin_needs_scores_and_two_teams() -> None:
    plain = TrueSkill()
    model = TrueSkill(margin=1.0)
    teams = [[Rating(25, 8)], [Rating(27, 6)]]
    # Ranks alone: the order only, as without a margin.
    assert model.rate(teams, ranks=[1, 2]) == plain.rate(teams, ranks=[1, 2])
    # Three teams with scores: their order.
    three = [*teams, [Rating(20, 7)]]
    assert model.rate(three, scores=[3, 1, 2]) == plain.rate(three, scores=[3, 1, 2])
    # A margin of 0 (the default) is off.
    assert TrueSkill(margin=0.0).rate(teams, scores=[5, 0]) == plain.rate(teams, scores=[5, 0])
    # A bigger win moves the winner further.
    small = model.rate(teams, scores=[1, 0])[0][0].mu
    big = model.rate(teams, scores=[4, 0])[0][0].mu
    assert big > small > 25
    with pytest.raises(RatingInputError) as info:
        TrueSkill(margin=-1.0)
    assert info.value.argument == "margin"


def test_elo_margin_multiplies_the_step_by_one_plus_margin_ln_n() -> None:
    model = Elo(margin=0.72, k_factor=20.0)
    a, b = Rating(1600.0, 0.0), Rating(1500.0, 0.0)
    p = 1.0 / (1.0 + 10.0 ** (-100.0 / 400.0))
    for goals, gain in ((1, 1.0), (2, 1.0 + 0.72 * math.log(2)), (5, 1.0 + 0.72 * math.log(5))):
        (na,), (nb,) = model.rate([[a], [b]], scores=[goals, 0])
        assert na.mu - 1600.0 == pytest.approx(gain * 20.0 * (1.0 - p), rel=1e-14)
        assert nb.mu - 1500.0 == pytest.approx(-gain * 20.0 * (1.0 - p), rel=1e-14)
    # World Football Elo's index for 2, 3 and 4 goals: 1.5, 1.75, 1.875.
    assert [1.0 + 0.72 * math.log(n) for n in (2, 3, 4)] == pytest.approx(
        [1.5, 1.75, 1.875], abs=0.13
    )
    # A draw, ranks and three teams: no multiplier.
    plain = Elo(k_factor=20.0)
    assert model.rate([[a], [b]], scores=[2, 2]) == plain.rate([[a], [b]], scores=[2, 2])
    assert model.rate([[a], [b]], ranks=[1, 2]) == plain.rate([[a], [b]], ranks=[1, 2])
    three = [[a], [b], [Rating(1550.0, 0.0)]]
    assert model.rate(three, scores=[5, 0, 1]) == plain.rate(three, scores=[5, 0, 1])
    # Teams: every member's delta is multiplied.
    teams = [[a, Rating(1450.0, 0.0)], [b, Rating(1700.0, 0.0)]]
    base = plain.rate(teams, scores=[3, 0])
    moved = model.rate(teams, scores=[3, 0])
    gain = 1.0 + 0.72 * math.log(3)
    for team, old, new in zip(teams, base, moved, strict=True):
        for r, o, n in zip(team, old, new, strict=True):
            assert n.mu - r.mu == pytest.approx(gain * (o.mu - r.mu), rel=1e-13)
