"""Quality and win probabilities come from one team model per algorithm.

Elo: each team is one entrant rated by its (weight-averaged) mean. TrueSkill and
Plackett-Luce: team performance is the sum of the players'. So a quality of 1 is even
chances, two teams' quality falls as P(team 1 wins) moves away from 1/2, and matchmaking
picks the split whose chances are nearest even.
"""

from __future__ import annotations

import itertools
import math
import random
from statistics import NormalDist
from typing import Any

import pytest

from app.rating.base import Rating
from app.rating.elo import Elo
from app.rating.matchmaking import exact_split, heuristic_split, team_sizes
from app.rating.plackett_luce import PlackettLuce
from app.rating.quality import QUALITY_FLOOR, entrant_quality
from app.rating.trueskill import TrueSkill

ELOS: dict[str, Elo] = {
    "logistic": Elo(),
    "gaussian": Elo(model="gaussian", beta=150.0),
    "logistic_full": Elo(multiplayer="full", scale=250.0),
}
MODELS: dict[str, Any] = {
    **{f"elo_{name}": model for name, model in ELOS.items()},
    "trueskill": TrueSkill(),
    "plackett_luce": PlackettLuce(),
}


def _random_teams(model: Any, rng: random.Random, k: int = 2) -> list[list[Rating]]:
    teams = []
    for _ in range(k):
        size = rng.randint(1, 4)
        if isinstance(model, Elo):
            teams.append([Rating(rng.gauss(1500.0, 200.0), 0.0) for _ in range(size)])
        else:
            teams.append([Rating(rng.gauss(25.0, 6.0), 4.0) for _ in range(size)])
    return teams


@pytest.mark.parametrize("name", list(ELOS))
def test_two_against_one_at_equal_ratings_is_even(name: str) -> None:
    model = ELOS[name]
    r = model.rating()
    teams = [[r, r], [r]]
    assert model.win_probabilities(teams) == [0.5, 0.5]
    assert model.quality(teams) == 1.0
    # Three teams of sizes 3, 1, 2 at equal ratings: even chances, quality 1.
    three = [[r, r, r], [r], [r, r]]
    assert model.win_probabilities(three) == pytest.approx([1 / 3] * 3, abs=1e-12)
    assert model.quality(three) == 1.0


@pytest.mark.parametrize("name", list(ELOS))
def test_elo_quality_is_the_gaussian_draw_likeness_of_its_team_ratings(name: str) -> None:
    """q = exp(-(R_1 - R_2)^2 / (4 beta_q^2)), R_j the weighted team means; for the
    gaussian model that is exp(-z^2 / 2) with P(team 1 wins) = Phi(z)."""
    model = ELOS[name]
    rng = random.Random(name)
    for _ in range(200):
        teams = _random_teams(model, rng)
        weights = [[rng.choice([1.0, 0.5, 0.25]) for _ in team] for team in teams]
        means = [
            sum(w * r.mu for w, r in zip(ws, team, strict=True)) / sum(ws)
            for ws, team in zip(weights, teams, strict=True)
        ]
        beta = model.quality_beta
        expected = math.exp(-((means[0] - means[1]) ** 2) / (4 * beta * beta))
        assert model.quality(teams, weights) == pytest.approx(
            max(expected, QUALITY_FLOOR), rel=1e-12
        )
        if model.params["model"] == "gaussian":
            p = model.win_probabilities(teams, weights)[0]
            if 1e-12 < p < 1 - 1e-12:
                z = NormalDist().inv_cdf(p)
                assert model.quality(teams, weights) == pytest.approx(
                    math.exp(-z * z / 2), rel=1e-6, abs=1e-300
                )


@pytest.mark.parametrize("name", list(ELOS))
def test_over_random_teams_elo_quality_falls_as_the_chances_move_from_even(name: str) -> None:
    model = ELOS[name]
    rng = random.Random(f"monotone-{name}")
    points = []
    for _ in range(300):
        teams = _random_teams(model, rng)
        weights = [[rng.choice([1.0, 0.7, 0.3]) for _ in team] for team in teams]
        p = model.win_probabilities(teams, weights)[0]
        points.append((abs(p - 0.5), model.quality(teams, weights)))
    points.sort()
    for (gap_a, q_a), (gap_b, q_b) in itertools.pairwise(points):
        if gap_b > gap_a + 1e-12:
            assert q_b <= q_a * (1 + 1e-12), (gap_a, q_a, gap_b, q_b)


def _team_sums(teams: list[list[Rating]], beta: float) -> tuple[list[float], list[float], float]:
    means = [sum(r.mu for r in team) for team in teams]
    variances = [sum(r.sigma**2 + beta**2 for r in team) for team in teams]
    b = beta * beta * sum(len(team) for team in teams)
    return means, variances, b


def test_trueskill_quality_and_win_probability_share_the_team_sums() -> None:
    """Uneven sizes included: with c^2 = s_1^2 + s_2^2 the summed team variances,
    P(1 wins) = Phi(d / c) and q = sqrt(beta^2 (n_1 + n_2) / c^2) exp(-(d / c)^2 / 2)."""
    model = TrueSkill()
    rng = random.Random(11)
    for _ in range(200):
        teams = _random_teams(model, rng)
        teams = [[Rating(r.mu, rng.uniform(0.5, 8.0)) for r in team] for team in teams]
        means, variances, b = _team_sums(teams, 25.0 / 6.0)
        c2 = variances[0] + variances[1]
        p = model.win_probabilities(teams)[0]
        assert p == pytest.approx(NormalDist().cdf((means[0] - means[1]) / math.sqrt(c2)))
        z = NormalDist().inv_cdf(p)
        assert model.quality(teams) == pytest.approx(
            math.sqrt(b / c2) * math.exp(-z * z / 2), rel=1e-6
        )


@pytest.mark.parametrize("name", list(MODELS))
def test_over_the_splits_of_a_pool_quality_falls_as_the_chances_move_from_even(
    name: str,
) -> None:
    """For TrueSkill and Plackett-Luce the uncertainty factor of the quality is the same
    for every split of one pool, so among splits it orders exactly as |P - 1/2| does."""
    model = MODELS[name]
    rng = random.Random(f"splits-{name}")
    for n in (5, 6, 7):
        pool = [p for team in _random_teams(model, rng, k=4) for p in team][:n]
        while len(pool) < n:
            pool.append(model.rating())
        points = []
        for size in {n // 2, n - n // 2}:
            for first in itertools.combinations(range(n), size):
                teams = [[pool[i] for i in first], [pool[i] for i in range(n) if i not in first]]
                p = model.win_probabilities(teams)[0]
                points.append((abs(p - 0.5), model.quality(teams)))
        points.sort()
        for (gap_a, q_a), (gap_b, q_b) in itertools.pairwise(points):
            if gap_b > gap_a + 1e-12:
                assert q_b <= q_a * (1 + 1e-9), (gap_a, q_a, gap_b, q_b)


def _nearest_even(model: Any, pool: list[Rating]) -> float:
    """The smallest |P(team 1 wins) - 1/2| over every split of the pool into two teams of
    the balanced sizes, by brute force over the win probabilities."""
    n = len(pool)
    best = math.inf
    for size in set(team_sizes(n, 2)):
        for first in itertools.combinations(range(n), size):
            teams = [[pool[i] for i in first], [pool[i] for i in range(n) if i not in first]]
            best = min(best, abs(model.win_probabilities(teams)[0] - 0.5))
    return best


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("n", [4, 5, 7, 8])
def test_matchmaking_picks_the_split_nearest_even_chances(name: str, n: int) -> None:
    model = MODELS[name]
    rng = random.Random(f"nearest-{name}-{n}")
    for _ in range(8):
        pool = [p for team in _random_teams(model, rng, k=6) for p in team][:n]
        while len(pool) < n:
            pool.append(model.rating())
        split = exact_split(model, pool, 2)
        teams = [[pool[i] for i in team] for team in split.teams]
        chosen = abs(model.win_probabilities(teams)[0] - 0.5)
        assert chosen <= _nearest_even(model, pool) + 1e-12


@pytest.mark.parametrize("name", list(ELOS))
def test_elo_matchmaking_of_an_uneven_pool_balances_the_team_means(name: str) -> None:
    """Five equal players into two teams: any 3 v 2 split is even for Elo (equal means),
    so the split's quality is 1; with one strong player, the strong one plays in the
    larger team, where the mean is diluted most."""
    model = ELOS[name]
    r = model.rating()
    assert exact_split(model, [r] * 5, 2).quality == 1.0
    strong = Rating(r.mu + 300.0, 0.0)
    pool = [strong, r, r, r, r]
    split = exact_split(model, pool, 2)
    assert 0 in max(split.teams, key=len)
    # The heuristic (13 players, teams of 7 and 6) does the same.
    assert 0 in max(heuristic_split(model, pool + [r] * 8, 2).teams, key=len)


def test_entrant_quality_never_underflows_to_zero_nor_overflows() -> None:
    assert entrant_quality([0.0, 1e12], 1e-6) == QUALITY_FLOOR
    assert entrant_quality([0.0, 1e300], 1e-300) == QUALITY_FLOOR
    assert entrant_quality([5.0, 5.0, 5.0], 1.0) == 1.0
    assert entrant_quality([0.0, 2.0], 1.0) == pytest.approx(math.exp(-1.0))
