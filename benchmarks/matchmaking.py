"""Matchmaking: how close the heuristic comes to the exact optimum, and how long both take.

    .venv/bin/python benchmarks/matchmaking.py [--pools 200] [--seed 1] [--format table|markdown]

Quality ratio: on random pools small enough for the exact search, the heuristic's quality
divided by the exact optimum (1 is optimal), mean and worst over ``--pools`` pools, and the
share of pools where the heuristic found the optimum; for the heuristic as the service runs
it, and for its first phase alone (snake draft and swaps, ``kicks=0``).
Pools: TrueSkill players with mu ~ N(25, 8^2) and sigma ~ U(1, 8.33); Elo players with
rating ~ N(1500, 200^2); Glicko-2 players with rating ~ N(1500, 300^2) and RD ~ U(30, 350).
Times: median wall time of ``balanced_split`` (the service's entry point) over repeated
runs on random pools, after one warm-up run (which builds the cached partition table).

At the contract's limits, every algorithm: the slowest of ``--limit-runs`` runs of
``balanced_split`` for the pools the API accepts at its bounds (12 players, the largest
exact search, into 4 and 5 teams, 5 having the most partitions; 100 players into 2; 256
players into 2, 8 and 64), and of the quality query's numbers (quality, win and draw
probabilities and predicted ranks, what ``POST .../quality`` computes) for 2 teams of 128
and 64 teams of 4. The API's documented bound for both is 1 s on one core (README,
"Matchmaking").
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from app.rating.base import Rating, RatingModel
from app.rating.matchmaking import balanced_split, exact_split, heuristic_split
from app.rating.quality import predict_rank
from app.rating.registry import ALGORITHMS, make_model

RATIO_CASES: list[tuple[str, int, int]] = [
    ("trueskill", 8, 2),
    ("trueskill", 10, 2),
    ("trueskill", 12, 2),
    ("trueskill", 11, 2),
    ("trueskill", 12, 3),
    ("trueskill", 12, 4),
    ("trueskill", 11, 3),
    ("elo", 10, 2),
    ("elo", 12, 3),
    ("glicko2", 10, 2),
    ("glicko2", 12, 3),
]

TIME_CASES: list[tuple[str, int, int]] = [
    ("trueskill", 12, 2),
    ("trueskill", 12, 3),
    ("trueskill", 12, 4),
    ("trueskill", 12, 6),
    ("trueskill", 12, 5),
    ("trueskill", 100, 2),
    ("trueskill", 200, 2),
    ("trueskill", 200, 4),
    ("trueskill", 256, 8),
    ("trueskill", 256, 64),
    ("elo", 100, 2),
]


#: Matchmaking pools at the contract's limits (players, teams).
LIMIT_SPLITS: list[tuple[int, int]] = [
    (12, 4),
    (12, 5),
    (100, 2),
    (256, 2),
    (256, 8),
    (256, 64),
]
#: Quality queries at the contract's limits (teams, players a team).
LIMIT_QUERIES: list[tuple[int, int]] = [(2, 128), (64, 4)]


def random_pool(model_name: str, n: int, rng: random.Random) -> list[Rating]:
    if model_name == "elo":
        return [Rating(rng.gauss(1500.0, 200.0), 0.0) for _ in range(n)]
    if model_name == "glicko2":
        return [Rating(rng.gauss(1500.0, 300.0), rng.uniform(30.0, 350.0)) for _ in range(n)]
    return [Rating(rng.gauss(25.0, 8.0), rng.uniform(1.0, 25.0 / 3.0)) for _ in range(n)]


def ratio_rows(pools: int, seed: int) -> list[list[str]]:
    rows = []
    for model_name, n, k in RATIO_CASES:
        model: RatingModel = make_model(model_name)
        rng = random.Random(f"{seed}-{model_name}-{n}-{k}")
        ratios, bare = [], []
        for _ in range(pools):
            pool = random_pool(model_name, n, rng)
            best = exact_split(model, pool, k).quality
            ratios.append(heuristic_split(model, pool, k).quality / best)
            bare.append(heuristic_split(model, pool, k, kicks=0).quality / best)
        row = [model_name, f"{n} into {k}", str(pools)]
        for values in (ratios, bare):
            optimal = sum(r >= 1.0 - 1e-12 for r in values)
            row += [
                f"{statistics.fmean(values):.5f}",
                f"{min(values):.5f}",
                f"{optimal}/{len(values)}",
            ]
        rows.append(row)
    return rows


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def time_rows(seed: int) -> list[list[str]]:
    rows = []
    for model_name, n, k in TIME_CASES:
        model: RatingModel = make_model(model_name)
        rng = random.Random(f"{seed}-time-{model_name}-{n}-{k}")
        pools = [random_pool(model_name, n, rng) for _ in range(11)]
        it = iter(pools * 2)
        ms = median_ms(lambda m=model, i=it, k=k: balanced_split(m, next(i), k), runs=10)
        method = "exact" if n <= 12 else "heuristic"
        rows.append([model_name, f"{n} into {k}", method, f"{ms:.1f}"])
    return rows


def slowest_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000.0 * max(times)


def _query(model: RatingModel, teams: list[list[Rating]]) -> None:
    model.quality(teams)
    model.win_probabilities(teams)
    model.draw_probability(teams)
    predict_rank(model, teams)


def limit_rows(seed: int, runs: int) -> list[list[str]]:
    """Per algorithm, the slowest run of each request at the contract's limits (ms)."""
    rows = []
    for name in ALGORITHMS:
        model: RatingModel = make_model(name)
        rng = random.Random(f"{seed}-limits-{name}")
        row = [name]
        for n, k in LIMIT_SPLITS:
            pool = random_pool(name, n, rng)
            row.append(
                f"{slowest_ms(lambda m=model, p=pool, k=k: balanced_split(m, p, k), runs):.0f}"
            )
        for k, size in LIMIT_QUERIES:
            teams = [random_pool(name, size, rng) for _ in range(k)]
            row.append(f"{slowest_ms(lambda m=model, t=teams: _query(m, t), runs):.0f}")
        rows.append(row)
    return rows


def render(headers: list[str], rows: list[list[str]], fmt: str) -> str:
    if fmt == "markdown":
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pools", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    parser.add_argument("--limit-runs", type=int, default=3)
    args = parser.parse_args()
    print("At the contract's limits: the slowest run, ms (matchmaking: players into teams;")
    print("quality: the quality query's numbers for teams x players)")
    print(
        render(
            [
                "algorithm",
                *(f"{n} into {k}" for n, k in LIMIT_SPLITS),
                *(f"quality {k}x{size}" for k, size in LIMIT_QUERIES),
            ],
            limit_rows(args.seed, args.limit_runs),
            args.format,
        )
    )
    print()
    print("Heuristic quality / exact optimum")
    print(
        render(
            [
                "model",
                "pool",
                "pools",
                "mean ratio",
                "worst ratio",
                "optimum found",
                "draft+swaps mean",
                "draft+swaps worst",
                "draft+swaps optimum",
            ],
            ratio_rows(args.pools, args.seed),
            args.format,
        )
    )
    print()
    print("Time of balanced_split (median)")
    print(render(["model", "pool", "search", "ms"], time_rows(args.seed), args.format))


if __name__ == "__main__":
    main()
