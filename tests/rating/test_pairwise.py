"""Many pairs at once: each model's array methods against its own scalar code.

- ``pair_win_probabilities`` of every model against ``win_probabilities`` of the two teams
  alone, on random teams with partial play, small arrays (the math module's erfc) and
  large ones (Cody's).
- The updates of matches beyond the ladder bounds (``LARGE_MATCH_TEAMS``,
  ``LARGE_MATCH_PLAYERS``), taken with arrays, against the scalar updates every smaller
  match takes (the bounds raised for the reference), on random matches with ties and
  weights of 65 to 300 teams and a few larger ones.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from app.rating import (
    bradley_terry,
    elo,
    glicko2,
    plackett_luce,
    thurstone_mosteller,
)
from app.rating.base import Rating
from app.rating.pairwise import (
    LARGE_MATCH_PLAYERS,
    LARGE_MATCH_TEAMS,
    PairwiseModel,
    TeamStrengths,
    pair_blocks,
)
from app.rating.plackett_luce import _many_teams, _many_teams_array
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

#: Modules whose large-match updates the reference turns off.
_BOUNDED = (bradley_terry, elo, glicko2, plackett_luce, thurstone_mosteller)


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


def random_ranks(k: int, rng: random.Random, ties: float = 0.3) -> list[float]:
    """A random finishing order where about ``ties`` of the teams tie with another."""
    places = list(range(k))
    rng.shuffle(places)
    return [float(p - p % 2) if rng.random() < ties else float(p) for p in places]


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


def _scalar_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in _BOUNDED:
        monkeypatch.setattr(module, "LARGE_MATCH_TEAMS", 10**9)
    monkeypatch.setattr(elo, "LARGE_MATCH_PLAYERS", 10**9)


#: Glicko-2's new volatility is the iterate at which the Illinois search stops
#: (|B - A| <= 1e-6): one unit in the last place of its inputs I and S moves it by up to
#: a relative 6e-7 in the scalar code itself, and the rating and deviation with it a
#: little. Sums of the same terms in another order can do no better.
VOLATILITY_REL = 2e-6
GLICKO2_REL = 1e-8


def _assert_close(
    got: list[list[Rating]], want: list[list[Rating]], scale: float, rel: float = 1e-12
) -> None:
    for got_team, want_team in zip(got, want, strict=True):
        for g, w in zip(got_team, want_team, strict=True):
            assert type(g) is type(w)
            close = rel if w.volatility is None else GLICKO2_REL
            assert g.mu == pytest.approx(w.mu, rel=close, abs=close * scale)
            assert g.sigma == pytest.approx(w.sigma, rel=close, abs=1e-300)
            if w.volatility is not None:
                assert g.volatility == pytest.approx(w.volatility, rel=VOLATILITY_REL)


#: The models with array updates beyond the bounds.
LARGE = [
    "plackett_luce",
    "bradley_terry_full",
    "thurstone_mosteller_full",
    "glicko2",
    "elo",
    "elo_gaussian",
    "elo_full",
    "elo_paper",
]


class TestLargeMatchUpdates:
    @pytest.mark.parametrize("name", LARGE)
    def test_arrays_agree_with_the_scalar_update(
        self, name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        model = MODELS[name]
        rng = random.Random(name)
        for trial in range(8):
            k = rng.randint(LARGE_MATCH_TEAMS + 1, 300)
            most = 1 if trial % 2 else 3
            teams = random_teams(model, rng, k, most=most)
            weights = random_weights(teams, rng) if trial % 3 == 1 else None
            # elo "full" averages a tie over its subsets: ties of two, not of thousands.
            ranks = random_ranks(k, rng, ties=0.3 if trial % 4 else 0.0)
            got = model.rate(teams, ranks=ranks, weights=weights)
            with monkeypatch.context() as patch:
                _scalar_reference(patch)
                want = model.rate(teams, ranks=ranks, weights=weights)
            _assert_close(got, want, _spread(model) + abs(model.rating().mu))

    @pytest.mark.parametrize("name", ["plackett_luce", "glicko2", "elo", "elo_full"])
    def test_a_thousand_teams(self, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        model = MODELS[name]
        rng = random.Random(f"{name}-large")
        teams = random_teams(model, rng, 1000, most=1)
        ranks = random_ranks(1000, rng, ties=0.05)
        got = model.rate(teams, ranks=ranks)
        with monkeypatch.context() as patch:
            _scalar_reference(patch)
            want = model.rate(teams, ranks=ranks)
        _assert_close(got, want, _spread(model) + abs(model.rating().mu))

    def test_the_bounds_are_the_ladders(self) -> None:
        from app.domain.documents.shared import MAX_PLAYERS, MAX_TEAMS

        # Every match a ladder records takes the scalar code (which the replay kernels
        # repeat bit for bit).
        assert (LARGE_MATCH_TEAMS, LARGE_MATCH_PLAYERS) == (MAX_TEAMS, MAX_PLAYERS)

    @pytest.mark.parametrize("multiplayer", ["pairwise_mean", "pairwise_sum"])
    def test_elo_duels_past_the_player_bound(
        self, multiplayer: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Three teams of many players: the duels in blocks.
        model = make_model("elo", {"multiplayer": multiplayer})
        rng = random.Random(f"elo-{multiplayer}")
        teams = [
            [model.rating(1500.0 + rng.gauss(0.0, 200.0)) for _ in range(size)]
            for size in (100, 120, 90)
        ]
        assert sum(map(len, teams)) > LARGE_MATCH_PLAYERS
        weights = random_weights(teams, rng)
        got = model.rate(teams, ranks=[2.0, 1.0, 2.0], weights=weights)
        with monkeypatch.context() as patch:
            _scalar_reference(patch)
            want = model.rate(teams, ranks=[2.0, 1.0, 2.0], weights=weights)
        _assert_close(got, want, 1700.0)
        if multiplayer == "pairwise_sum":  # every duel adds to one side what it takes
            moved = [
                n.mu - o.mu
                for new_team, old_team in zip(got, teams, strict=True)
                for n, o in zip(new_team, old_team, strict=True)
            ]
            assert sum(moved) == pytest.approx(0.0, abs=1e-9)


class TestPlackettLuceSums:
    @pytest.mark.parametrize("scale", [0.05, 1.0, 30.0, 3000.0])
    def test_prefix_sums_agree_with_the_loop(self, scale: float) -> None:
        # 3000: exponents spanning thousands, the log-space branch.
        rng = random.Random(f"pl-{scale}")
        for trial in range(20):
            k = rng.randint(3, 300)
            x = [rng.gauss(0.0, scale) for _ in range(k)]
            ranks = None if trial % 4 == 0 else random_ranks(k, rng, ties=0.5)
            omega, delta = _many_teams_array(x, ranks)
            want_omega, want_delta = _many_teams(x, ranks)
            # Omega and Delta are sums of up to k terms of at most 1 each (a strong team
            # ranked far behind has p near 1 in many groups): rounding of order k units
            # in the last place of 1; the log-space branch's exponents are thousands.
            tolerance = 1e-13 * k if scale < 100 else 1e-9
            assert omega == pytest.approx(want_omega, rel=1e-12, abs=tolerance)
            assert delta == pytest.approx(want_delta, rel=1e-12, abs=tolerance)
            assert min(delta) >= 0.0
