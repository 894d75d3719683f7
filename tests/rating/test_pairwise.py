"""Many pairs at once: each model's array methods against its own scalar code.

- ``pair_win_probabilities`` of every model against ``win_probabilities`` of the two teams
  alone, on random teams with partial play, small arrays (the math module's erfc) and
  large ones (Cody's).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from app.rating.base import Rating
from app.rating.pairwise import (
    PairwiseModel,
    TeamStrengths,
    pair_blocks,
)
from app.rating.registry import ALGORITHMS, make_model

#: Every algorithm at its defaults, and the other Elo win probabilities.
MODELS: dict[str, Any] = {
    **{name: make_model(name) for name in ALGORITHMS},
    "elo_gaussian": make_model("elo", {"model": "gaussian", "beta": 150.0}),
    "elo_full": make_model("elo", {"multiplayer": "full", "scale": 250.0}),
    "elo_paper": make_model(
        "elo", {"initial": 25.0, "model": "gaussian", "beta": 25 / 6, "k_factor": 0.517}
    ),
}


def _spread(model: Any) -> float:
    prior = model.rating()
    return float(prior.sigma) if prior.sigma > 0.0 else 200.0


def random_teams(
    model: Any, rng: random.Random, k: int, most: int = 3, spread: float = 1.0
) -> list[list[Rating]]:
    """k teams of 1 to ``most`` players around the prior (Elo: +-200 points)."""
    prior = model.rating()
    scale = spread * _spread(model)
    teams = []
    for _ in range(k):
        team = []
        for _ in range(rng.randint(1, most)):
            mu = prior.mu + rng.gauss(0.0, scale)
            sigma = prior.sigma * rng.uniform(0.2, 1.2) if prior.sigma > 0.0 else None
            team.append(model.rating(mu, sigma))
        teams.append(team)
    return teams


def random_weights(teams: list[list[Rating]], rng: random.Random) -> list[list[float]]:
    return [[rng.choice([1.0, rng.uniform(0.05, 1.0)]) for _ in team] for team in teams]


class TestPairBlocks:
    @pytest.mark.parametrize(("k", "size"), [(2, 1), (3, 1), (7, 4), (50, 60), (301, 1000)])
    def test_every_pair_once_in_order(self, k: int, size: int) -> None:
        got: list[tuple[int, int]] = []
        for block in pair_blocks(k, size):
            rows = np.arange(k)[block.first]
            cols = np.arange(k)[block.second]
            a, b = np.broadcast_arrays(rows, cols)
            got.extend(zip(a[block.upper].tolist(), b[block.upper].tolist(), strict=True))
            assert block.upper.size <= max(size, k)  # one row at least, else about size
        assert got == [(a, b) for a in range(k) for b in range(a + 1, k)]

    def test_no_pairs_of_one_team(self) -> None:
        assert list(pair_blocks(1)) == []


class TestPairWinProbabilities:
    @pytest.mark.parametrize("name", list(MODELS))
    @pytest.mark.parametrize("weighted", [False, True])
    def test_each_pair_is_win_probabilities_of_the_two_teams(
        self, name: str, weighted: bool
    ) -> None:
        model = MODELS[name]
        assert isinstance(model, PairwiseModel)
        rng = random.Random(f"{name}-{weighted}")
        for k in (2, 5, 60):  # 60 teams: 1,770 pairs, past the math module's erfc
            teams = random_teams(model, rng, k, spread=2.0)
            weights = random_weights(teams, rng) if weighted else None
            strengths = model.team_strengths(teams, weights)
            a, b = np.triu_indices(k, 1)
            got = model.pair_win_probabilities(strengths.take(a), strengths.take(b))
            want = [
                model.win_probabilities(
                    [teams[i], teams[j]], None if weights is None else [weights[i], weights[j]]
                )[0]
                for i, j in zip(a.tolist(), b.tolist(), strict=True)
            ]
            assert got.shape == a.shape
            # A team of full play within a match of partial play is averaged with its
            # weights (w / W = 1 / n each), alone with the other team of full play by its
            # plain mean: the last bit of a team rating can differ, which Phi's far tail
            # (1e-97 at z = -21) turns into a relative 1e-13.
            assert got == pytest.approx(want, rel=1e-12, abs=1e-300)

    @pytest.mark.parametrize("name", list(MODELS))
    def test_grids_broadcast(self, name: str) -> None:
        model = MODELS[name]
        rng = random.Random(name)
        teams = random_teams(model, rng, 9)
        strengths = model.team_strengths(teams)
        block = next(pair_blocks(9))
        grid = model.pair_win_probabilities(
            strengths.take(block.first), strengths.take(block.second)
        )
        rows = np.arange(9)[block.first]
        cols = np.arange(9)[block.second]
        a, b = np.broadcast_arrays(rows, cols)
        flat = model.pair_win_probabilities(
            strengths.take(a[block.upper]), strengths.take(b[block.upper])
        )
        assert grid[block.upper].tolist() == flat.tolist()

    def test_strengths_are_the_team_models(self) -> None:
        teams = [[Rating(30.0, 4.0), Rating(20.0, 3.0)], [Rating(25.0, 8.0)]]
        weights = [[1.0, 0.5], [1.0]]
        ts = MODELS["trueskill"].team_strengths(teams, weights)
        beta2 = (25.0 / 6.0) ** 2
        assert ts.mean.tolist() == [40.0, 25.0]
        assert ts.variance.tolist() == pytest.approx(
            [16.0 + beta2 + 0.25 * (9.0 + beta2), 64.0 + beta2]
        )
        wl = MODELS["plackett_luce"].team_strengths(teams, weights)
        assert wl.variance.tolist() == pytest.approx([16.0 + 0.25 * 9.0, 64.0])
        elo_teams = [[Rating(1600.0, 0.0), Rating(1400.0, 0.0)], [Rating(1500.0, 0.0)]]
        e = MODELS["elo"].team_strengths(elo_teams, weights)
        assert e.mean.tolist() == pytest.approx([1600.0 * 2 / 3 + 1400.0 / 3, 1500.0])
        assert e.variance.tolist() == [0.0, 0.0]
        assert isinstance(e, TeamStrengths)

    @pytest.mark.parametrize("name", ["trueskill", "elo", "glicko2", "plackett_luce"])
    def test_bad_teams_are_refused_like_win_probabilities(self, name: str) -> None:
        model = MODELS[name]
        with pytest.raises(ValueError, match="teams"):
            model.team_strengths([[model.rating()]])
