"""Fitting the statistics' evidence (``stat_scale``, ``stat_noise``, ``stat_spread``):
where each player's statistic says how they performed, the fit turns it on and predicts
the later part better; where it is noise, ``stat_scale`` stays 0 (off)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.evaluation.data import read_matches
from app.evaluation.fit import fit
from tests.evaluation.conftest import WriteMatches


def _teams_league(seed: int, matches: int, informative: bool) -> list[Any]:
    """3 vs 3 matches between 36 players of fixed skill N(25, 6^2), performances N(skill,
    4^2); each player's statistic is their performance (or, ``informative`` false, a
    number that has nothing to do with it)."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(25.0, 6.0, 36)
    bodies: list[Any] = []
    for i in range(matches):
        who = rng.choice(36, 6, replace=False)
        teams = [who[:3].tolist(), who[3:].tolist()]
        perf = [[skill[p] + rng.normal(0.0, 4.0) for p in t] for t in teams]
        stats = perf if informative else [[rng.normal(0.0, 4.0) for _ in t] for t in teams]
        bodies.append(
            {
                "match_id": str(i),
                "played_at": f"2024-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
                "teams": [[f"p{p}" for p in t] for t in teams],
                "ranks": [1, 2] if sum(perf[0]) > sum(perf[1]) else [2, 1],
                "player_scores": [[round(x, 2) for x in row] for row in stats],
            }
        )
    return bodies


def test_an_informative_statistic_is_fitted_and_helps(write_matches: WriteMatches) -> None:
    league = read_matches(write_matches(_teams_league(4, 600, informative=True)))
    result = fit(league, "trueskill", max_evaluations=60)
    assert float(result.params["stat_scale"]) > 0.0
    later = result.test
    assert later["fitted"]["pair_log_loss"] < later["default"]["pair_log_loss"] - 0.02


def test_a_statistic_that_is_noise_stays_off(write_matches: WriteMatches) -> None:
    league = read_matches(write_matches(_teams_league(5, 600, informative=False)))
    result = fit(league, "trueskill", max_evaluations=60)
    assert result.params["stat_scale"] == 0.0
