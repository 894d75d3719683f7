"""The pair measures against the loops ``metrics.predict`` ran pair by pair before
(kept here, as they were, as the reference): counts exactly, the pair log loss to
rounding, on random matches of 2 to 300 teams with ties, equal strengths and weights,
a few large ones, and whole replays."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from app.evaluation.data import Match
from app.evaluation.metrics import predict
from app.evaluation.pairs import EPS, PairCounts, count_pairs, match_pair_loss
from app.evaluation.presets import build
from app.rating.base import Rating, RatingInputError, RatingModel, Teams, Weights
from app.rating.registry import ALGORITHMS

NAMES = (*ALGORITHMS, "elo-paper", "elo-full-logistic")


def reference_counts(strength: Sequence[float], ranks: Sequence[float]) -> PairCounts:
    """The prediction-error loop of ``predict`` before the pair measures moved out."""
    k = len(strength)
    bad = 0
    even = 0
    count = 0
    ties = 0
    for a in range(k - 1):
        ra = ranks[a]
        sa = strength[a]
        for b in range(a + 1, k):
            rb = ranks[b]
            if ra == rb:
                ties += 1
                continue
            count += 1
            d = sa - strength[b]
            if d == 0.0:
                even += 1
            elif (d > 0.0) != (ra < rb):
                bad += 1
    return PairCounts(bad, even, count, ties)


def _clip(p: float) -> float:
    return min(max(p, EPS), 1.0 - EPS)


def reference_loss(
    model: RatingModel, teams: Teams, ranks: Sequence[float], weights: Weights | None
) -> float:
    """The pair log loss of ``predict`` before: every decisive pair asked on its own."""
    k = len(teams)
    total = 0.0
    if k == 2:
        p = model.win_probabilities(teams, weights)[0]
        total = -math.log(_clip(p if ranks[0] < ranks[1] else 1.0 - p))
    else:
        for a in range(k - 1):
            for b in range(a + 1, k):
                if ranks[a] == ranks[b]:
                    continue
                w2 = None if weights is None else [weights[a], weights[b]]
                p = model.win_probabilities([teams[a], teams[b]], w2)[0]
                total -= math.log(_clip(p if ranks[a] < ranks[b] else 1.0 - p))
    return total


def _strengths(rng: random.Random, k: int) -> list[float]:
    """Strengths with many exact repeats (and both zeros), or all distinct."""
    kind = rng.randrange(3)
    if kind == 0:
        return [rng.gauss(0.0, 1.0) for _ in range(k)]
    values = [rng.choice([0.0, -0.0, 25.0, 24.5, 1e-300]) for _ in range(4)]
    return [rng.choice(values) + (0.0 if kind == 1 else rng.randrange(3)) for _ in range(k)]


def _ranks(rng: random.Random, k: int) -> list[float]:
    """Ranks with ties: few distinct values, or a shuffled order with some shared places."""
    if rng.random() < 0.5:
        levels = rng.randint(1, k)
        return [float(rng.randrange(levels)) for _ in range(k)]
    places = [float(p) for p in range(k)]
    rng.shuffle(places)
    return [p - p % 3 if rng.random() < 0.2 else -p for p in places]  # scores-like too


class TestCountPairs:
    def test_random_matches_of_2_to_300_teams(self) -> None:
        rng = random.Random(1)
        for _ in range(600):
            k = rng.randint(2, 300)
            strength = _strengths(rng, k)
            ranks = _ranks(rng, k)
            assert count_pairs(strength, ranks) == reference_counts(strength, ranks)

    @pytest.mark.parametrize("k", [1000, 2500])
    def test_large_matches(self, k: int) -> None:
        rng = random.Random(k)
        strength = _strengths(rng, k)
        ranks = _ranks(rng, k)
        assert count_pairs(strength, ranks) == reference_counts(strength, ranks)

    def test_by_hand(self) -> None:
        # Strengths 3, 1, 2, 2 (teams 2 and 3 even); finishing 1st, 2nd, 2nd (drawn), 4th.
        strength = [3.0, 1.0, 2.0, 2.0] * 10
        ranks = [1.0, 2.0, 2.0, 4.0] * 10
        got = count_pairs(strength, ranks)
        assert got == reference_counts(strength, ranks)
        assert got.pairs + got.drawn == 40 * 39 // 2
        small = count_pairs(strength[:4], ranks[:4])
        # Pairs (0,1) (0,2) (0,3) right, (1,3) wrong (1 < 2 finished ahead), (2,3) even.
        assert small == PairCounts(wrong=1, even=1, pairs=5, drawn=1)


def _random_match(
    model: Any, rng: random.Random, k: int, weighted: bool
) -> tuple[list[list[Rating]], list[float], list[list[float]] | None]:
    prior = model.rating()
    spread = prior.sigma if prior.sigma > 0.0 else 200.0
    teams = []
    for _ in range(k):
        team = []
        for _ in range(rng.randint(1, 3)):
            sigma = prior.sigma * rng.uniform(0.3, 1.0) if prior.sigma > 0.0 else None
            team.append(model.rating(prior.mu + rng.gauss(0.0, spread), sigma))
        teams.append(team)
    weights = [[rng.uniform(0.1, 1.0) for _ in team] for team in teams] if weighted else None
    return teams, _ranks(rng, k), weights


class TestPairLoss:
    @pytest.mark.parametrize("name", NAMES)
    def test_random_matches_agree_with_the_pair_by_pair_loss(self, name: str) -> None:
        model = build(name)
        rng = random.Random(name)
        for trial in range(12):
            k = rng.choice([2, 3, 9, rng.randint(10, 120)])
            teams, ranks, weights = _random_match(model, rng, k, weighted=trial % 2 == 1)
            want = reference_loss(model, teams, ranks, weights)
            got = match_pair_loss(model, teams, ranks, weights)
            assert got == pytest.approx(want, rel=1e-12)
            if k == 2:
                assert got == want  # the log loss itself, unchanged

    @pytest.mark.parametrize("name", ["trueskill", "plackett_luce", "elo", "glicko2"])
    def test_a_large_match(self, name: str) -> None:
        model = build(name)
        rng = random.Random(f"{name}-large")
        teams, ranks, weights = _random_match(model, rng, 400, weighted=False)
        want = reference_loss(model, teams, ranks, weights)
        assert match_pair_loss(model, teams, ranks, weights) == pytest.approx(want, rel=1e-12)

    def test_a_model_without_the_array_methods_is_asked_pair_by_pair(self) -> None:
        class OnlyWinProbabilities:
            name = "plain"

            def __init__(self) -> None:
                self.model = build("trueskill")
                self.asked = 0

            def win_probabilities(
                self,
                teams: Teams,
                weights: Weights | None = None,
                advantage: Sequence[float] | None = None,
            ) -> list[float]:
                self.asked += 1
                return self.model.win_probabilities(teams, weights, advantage)

        plain = OnlyWinProbabilities()
        rng = random.Random(3)
        teams, _, _ = _random_match(plain.model, rng, 12, weighted=False)
        ranks = [float(j // 2) for j in range(12)]  # six drawn pairs
        got = match_pair_loss(plain, teams, ranks, None)  # type: ignore[arg-type]
        assert plain.asked == 12 * 11 // 2 - 6
        assert got == reference_loss(plain.model, teams, ranks, None)


def _matches(rng: random.Random, players: int) -> list[Match]:
    """A season of events: mostly small, a few of hundreds of teams, ties, some weights."""
    out = []
    for n in range(40):
        k = rng.choice([2, 2, 3, 8, 30, 70, 150]) if n % 10 else 250
        size = 1 if rng.random() < 0.7 else 2
        chosen = rng.sample(range(players), k * size)
        teams = tuple(tuple(chosen[j * size : (j + 1) * size]) for j in range(k))
        ranks = tuple(float(r) for r in _ranks(rng, k))
        weights = (
            tuple(tuple(rng.choice([1.0, 0.5]) for _ in team) for team in teams)
            if n % 7 == 3
            else None
        )
        out.append(Match(n + 1, str(n), float(n), teams, ranks, weights))
    return out


def reference_replay(model: RatingModel, matches: list[Match], players: int) -> list[list[float]]:
    """Per match: the reference counts and loss, replaying like ``predict``."""
    table: list[Rating] = [model.rating()] * players
    rows = []
    for m in matches:
        teams = [[table[i] for i in team] for team in m.teams]
        if m.weights is None:
            strength = [sum(r[0] for r in team) for team in teams]
        else:
            strength = [
                sum(w * r[0] for w, r in zip(ws, team, strict=True))
                for ws, team in zip(m.weights, teams, strict=True)
            ]
        counts = reference_counts(strength, m.ranks)
        loss = reference_loss(model, teams, m.ranks, m.weights) if counts.pairs else 0.0
        rows.append([*map(float, counts), loss])
        try:
            new = model.rate(teams, ranks=m.ranks, weights=m.weights)
        except RatingInputError:
            continue
        for team_idx, new_team in zip(m.teams, new, strict=True):
            for i, r in zip(team_idx, new_team, strict=True):
                table[i] = r
    return rows


@pytest.mark.parametrize("name", ["trueskill", "plackett_luce", "elo-full-logistic", "glicko2"])
def test_predict_measures_every_match_as_the_reference(name: str) -> None:
    rng = random.Random(name)
    players = 600
    matches = _matches(rng, players)
    run = predict(build(name), matches, players, pair_loss=True)
    want = np.asarray(reference_replay(build(name), matches, players))
    assert run.wrong.tolist() == want[:, 0].tolist()
    assert run.tied.tolist() == want[:, 1].tolist()
    assert run.pairs.tolist() == want[:, 2].tolist()
    assert run.drawn.tolist() == want[:, 3].tolist()
    assert run.pair_loss is not None
    assert run.pair_loss.tolist() == pytest.approx(want[:, 4].tolist(), rel=1e-12)
