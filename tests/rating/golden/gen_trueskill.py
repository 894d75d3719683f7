"""Write ``trueskill.json``: reference TrueSkill updates from the ``trueskill`` package.

The package is the test oracle only (never imported by ``app/``). It runs with its exact
``scipy`` backend (its default backend approximates erfc to ~1e-7) and ``min_delta=1e-12``
so that its message passing has converged far below the tolerance the tests use.

Each scenario is a long random sequence of matches over a pool of players whose ratings
carry over from match to match (as the oracle computed them). Every match stores the
ratings going in and the oracle's ratings coming out, so each match can be checked alone
and the whole sequence can be replayed.

Run from the repository root:  .venv/bin/python -m tests.rating.golden.gen_trueskill
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import trueskill

OUT = Path(__file__).with_name("trueskill.json")
MIN_DELTA = 1e-12


def _match_shape(rng: random.Random, kind: str) -> tuple[list[int], bool]:
    """Team sizes and whether the match uses partial-play weights."""
    if kind == "1v1":
        return [1, 1], False
    if kind == "teams":
        size = rng.randint(2, 4)
        return [size, size], False
    if kind == "uneven":
        return [rng.randint(1, 4), rng.randint(1, 4)], False
    if kind == "free_for_all":
        return [1] * rng.randint(3, 8), False
    if kind == "multi_team":
        return [rng.randint(1, 3) for _ in range(rng.randint(3, 6))], False
    if kind == "weights":
        return [rng.randint(1, 3) for _ in range(rng.randint(2, 5))], True
    raise ValueError(kind)


def _ranks(rng: random.Random, k: int, draw_chance: float) -> list[int]:
    """A finishing order with ties anywhere: each adjacent pair draws with draw_chance."""
    ranks = [0]
    for _ in range(k - 1):
        ranks.append(ranks[-1] if rng.random() < draw_chance else ranks[-1] + 1)
    rng.shuffle(ranks)
    return ranks


def _scenario(
    name: str, kind: str, matches: int, seed: int, params: dict[str, float], draw_chance: float
) -> dict[str, Any]:
    rng = random.Random(seed)
    env = trueskill.TrueSkill(backend="scipy", **params)
    pool = [env.create_rating() for _ in range(24)]
    # Spread the pool out first so that strong and weak players meet.
    pool = [
        env.create_rating(
            mu=rng.gauss(params["mu"], params["sigma"]),
            sigma=params["sigma"] * rng.uniform(0.2, 1.0),
        )
        for _ in pool
    ]
    records = []
    for _ in range(matches):
        sizes, weighted = _match_shape(rng, kind)
        ids = rng.sample(range(len(pool)), sum(sizes))
        teams_ids: list[list[int]] = []
        start = 0
        for size in sizes:
            teams_ids.append(ids[start : start + size])
            start += size
        groups = [[pool[i] for i in team] for team in teams_ids]
        ranks = _ranks(rng, len(sizes), draw_chance)
        weights = (
            [[round(rng.uniform(0.1, 1.0), 3) for _ in team] for team in teams_ids]
            if weighted
            else None
        )
        rated = env.rate(groups, ranks=ranks, weights=weights, min_delta=MIN_DELTA)
        records.append(
            {
                "players": teams_ids,
                "ranks": ranks,
                "weights": weights,
                "before": [[[r.mu, r.sigma] for r in g] for g in groups],
                "after": [[[r.mu, r.sigma] for r in g] for g in rated],
            }
        )
        for team, new in zip(teams_ids, rated, strict=True):
            for i, r in zip(team, new, strict=True):
                pool[i] = r
    return {"name": name, "params": params, "pool_size": len(pool), "matches": records}


def main() -> None:
    default = {
        "mu": 25.0,
        "sigma": 25.0 / 3,
        "beta": 25.0 / 6,
        "tau": 25.0 / 300,
        "draw_probability": 0.10,
    }
    other = {"mu": 1500.0, "sigma": 300.0, "beta": 200.0, "tau": 8.0, "draw_probability": 0.25}
    scenarios = [
        _scenario("1v1", "1v1", 400, 1, default, 0.10),
        _scenario("teams", "teams", 250, 2, default, 0.10),
        _scenario("uneven", "uneven", 250, 3, default, 0.15),
        _scenario("free_for_all", "free_for_all", 250, 4, default, 0.15),
        _scenario("multi_team", "multi_team", 250, 5, default, 0.25),
        _scenario("weights", "weights", 250, 6, default, 0.15),
        _scenario("other_params", "multi_team", 200, 7, other, 0.20),
    ]
    payload = {
        "source": f"trueskill {trueskill.__version__}, backend scipy, min_delta {MIN_DELTA}",
        "scenarios": scenarios,
    }
    OUT.write_text(json.dumps(payload, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
