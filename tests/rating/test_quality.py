"""Match quality (the paper's equation 7, generalised) and Gaussian win probabilities."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import trueskill
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from app.rating.base import Rating, RatingInputError
from app.rating.quality import (
    QUALITY_FLOOR,
    _panels,
    gaussian_win_probabilities,
    match_quality,
)

BETA = 25.0 / 6.0


def _random_match(rng: random.Random, k: int) -> tuple[list[list[Rating]], list[list[float]]]:
    teams = [
        [Rating(rng.gauss(25.0, 8.0), rng.uniform(0.5, 9.0)) for _ in range(rng.randint(1, 4))]
        for _ in range(k)
    ]
    weights = [[rng.uniform(0.1, 1.0) for _ in team] for team in teams]
    return teams, weights


def _matrix_quality(teams: list[list[Rating]], weights: list[list[float]], beta: float) -> float:
    """The matrix formula of rating-models.md section 1, built literally with numpy."""
    players = [
        (r, w, j) for j, team in enumerate(teams) for r, w in zip(team, weights[j], strict=True)
    ]
    k = len(teams)
    a = np.zeros((len(players), k - 1))
    for i, (_, w, j) in enumerate(players):
        if j < k - 1:
            a[i, j] = w
        if j > 0:
            a[i, j - 1] = -w
    mu = np.array([r.mu for r, _, _ in players])
    s = np.diag([r.sigma**2 for r, _, _ in players])
    ata = beta**2 * a.T @ a
    middle = ata + a.T @ s @ a
    quad = mu @ a @ np.linalg.solve(middle, a.T @ mu)
    return float(math.sqrt(np.linalg.det(ata) / np.linalg.det(middle)) * math.exp(-0.5 * quad))


class TestMatchQuality:
    def test_equation_7_by_hand_for_1_vs_1(self) -> None:
        a, b = Rating(27.0, 5.0), Rating(22.0, 7.0)
        c2 = 2 * BETA**2 + 5.0**2 + 7.0**2
        expected = math.sqrt(2 * BETA**2 / c2) * math.exp(-((27.0 - 22.0) ** 2) / (2 * c2))
        assert match_quality([[a], [b]], None, BETA) == pytest.approx(expected, rel=1e-14)
        # Two new players at the defaults: the widely published 0.447.
        prior = Rating(25.0, 25.0 / 3.0)
        assert match_quality([[prior], [prior]], None, BETA) == pytest.approx(0.4472135955)

    def test_matches_the_literal_matrix_formula(self) -> None:
        rng = random.Random(7)
        for _ in range(60):
            teams, weights = _random_match(rng, rng.randint(2, 6))
            assert match_quality(teams, weights, BETA) == pytest.approx(
                _matrix_quality(teams, weights, BETA), rel=1e-10
            )

    def test_matches_the_trueskill_package(self) -> None:
        env = trueskill.TrueSkill(backend="scipy")
        rng = random.Random(11)
        for _ in range(40):
            teams, weights = _random_match(rng, rng.randint(2, 5))
            groups = [[trueskill.Rating(r.mu, r.sigma) for r in team] for team in teams]
            assert match_quality(teams, weights, BETA) == pytest.approx(
                env.quality(groups, weights=weights), rel=1e-10
            )
            assert match_quality(teams, None, BETA) == pytest.approx(env.quality(groups), rel=1e-10)

    def test_underflow_is_floored_at_the_smallest_normal_float(self) -> None:
        teams = [[Rating(1e6, 1.0)], [Rating(0.0, 1.0)], [Rating(0.0, 2.0)]]
        assert match_quality(teams, None, BETA) == QUALITY_FLOOR
        assert match_quality(teams[:2], None, BETA) == QUALITY_FLOOR

    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(
            st.lists(
                st.tuples(st.floats(-1e5, 1e5), st.floats(1e-6, 1e4), st.floats(0.01, 1.0)),
                min_size=1,
                max_size=4,
            ),
            min_size=2,
            max_size=8,
        )
    )
    def test_always_in_0_1(self, spec: list[list[tuple[float, float, float]]]) -> None:
        teams = [[Rating(mu, sigma) for mu, sigma, _ in team] for team in spec]
        weights = [[w for _, _, w in team] for team in spec]
        q = match_quality(teams, weights, BETA)
        assert 0.0 < q <= 1.0

    def test_invalid_input(self) -> None:
        good = [[Rating(25.0, 8.0)], [Rating(25.0, 8.0)]]
        with pytest.raises(RatingInputError) as info:
            match_quality(good, None, 0.0)
        assert info.value.argument == "beta"
        with pytest.raises(RatingInputError) as info:
            match_quality(good, [[0.0], [1.0]], BETA)
        assert info.value.argument == "weights"
        with pytest.raises(RatingInputError) as info:
            match_quality(good[:1], None, BETA)
        assert info.value.argument == "teams"


def _winner_density(x: float, j: int, means: list[float], sds: list[float]) -> float:
    """N(x; m_j, s_j^2) prod_{i != j} Phi((x - m_i) / s_i): the integrand of P(j wins)."""
    z = (x - means[j]) / sds[j]
    out = math.exp(-0.5 * z * z) / (sds[j] * math.sqrt(2.0 * math.pi))
    for i, (m, s) in enumerate(zip(means, sds, strict=True)):
        if i != j:
            out *= 0.5 * math.erfc(-(x - m) / (s * math.sqrt(2.0)))
    return out


class TestWinProbabilities:
    def test_two_teams_closed_form(self) -> None:
        p = gaussian_win_probabilities([3.0, 1.0], [2.0, 6.0])
        assert p[0] == pytest.approx(stats.norm.cdf(2.0 / math.sqrt(8.0)), rel=1e-14)
        assert sum(p) == pytest.approx(1.0, abs=1e-15)

    @pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
    def test_matches_numerical_integration(self, k: int) -> None:
        rng = random.Random(k)
        for _ in range(2):
            means = [rng.gauss(0.0, 10.0) for _ in range(k)]
            sds = [rng.uniform(0.5, 12.0) for _ in range(k)]
            p = gaussian_win_probabilities(means, [s * s for s in sds])
            for j in range(k):
                ref = integrate.quad(
                    _winner_density,
                    -np.inf,
                    np.inf,
                    args=(j, means, sds),
                    epsabs=1e-15,
                    epsrel=1e-12,
                    limit=500,
                )[0]
                assert p[j] == pytest.approx(ref, abs=1e-12)

    @pytest.mark.parametrize("k", [4, 8, 16, 64])
    def test_teams_of_alike_scales_match_numerical_integration(self, k: int) -> None:
        """Deviations within a factor of about two, as in a rated match: the uniform panels
        of twice the smallest deviation (far fewer than the teams' own grids for many teams)
        integrate to 1e-13."""
        rng = random.Random(100 + k)
        means = [rng.gauss(25.0, 5.0) for _ in range(k)]
        sds = [math.sqrt(rng.uniform(1.0, 8.3) ** 2 + (25 / 6) ** 2) for _ in range(k)]
        ends, rule, _ = _panels(np.array(means), np.array(sds))
        widths = np.diff(ends)
        np.testing.assert_allclose(widths, widths[0], rtol=1e-9)
        assert widths[0] <= 2.0 * min(sds) and rule.size == 12 and ends.size < 30 * k
        p = gaussian_win_probabilities(means, [s * s for s in sds])
        order = sorted(range(k), key=means.__getitem__)
        for j in {order[0], order[1], order[k // 2], order[-2], order[-1]}:
            ref = integrate.quad(
                _winner_density,
                -np.inf,
                np.inf,
                args=(j, means, sds),
                epsabs=1e-16,
                epsrel=1e-13,
                limit=500,
            )[0]
            assert p[j] == pytest.approx(ref, abs=1e-13)

    def test_very_different_scales(self) -> None:
        # One near-certain performance at 0, one standard, one very wide: by symmetry
        # P(X0 wins) = P(X1 < 0) P(X2 < 0) = 1/4.
        p = gaussian_win_probabilities([0.0, 0.0, 0.0], [1e-12, 1.0, 1e8])
        assert p[0] == pytest.approx(0.25, abs=1e-9)
        assert p[2] == pytest.approx(0.5, abs=1e-4)

    @settings(max_examples=100, deadline=None)
    @given(
        st.lists(st.tuples(st.floats(-1e5, 1e5), st.floats(1e-10, 1e8)), min_size=2, max_size=64)
    )
    def test_finite_and_sum_to_one(self, spec: list[tuple[float, float]]) -> None:
        p = gaussian_win_probabilities([m for m, _ in spec], [v for _, v in spec])
        assert all(math.isfinite(x) and 0.0 <= x <= 1.0 for x in p)
        assert sum(p) == pytest.approx(1.0, abs=1e-12)

    def test_invalid_input(self) -> None:
        for means, variances, argument in (
            ([1.0, 2.0], [1.0], "variances"),
            ([1.0, math.nan], [1.0, 1.0], "means"),
            ([1.0, 2.0], [1.0, 0.0], "variances"),
            ([], [], "means"),
        ):
            with pytest.raises(RatingInputError) as info:
                gaussian_win_probabilities(means, variances)
            assert info.value.argument == argument
