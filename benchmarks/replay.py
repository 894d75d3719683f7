"""Replay speed: matches per second of ``replay()`` beside ``model.rate`` one match at a time.

    .venv/bin/python benchmarks/replay.py [--matches 1000000] [--players 100000]
        [--scalar-matches 50000] [--only trueskill-1v1] [--format table|markdown]

For each scenario it builds a random, time-ordered list of matches among the players
(uniformly random players, random ranks with one draw in ten, days increasing, ageing by
``tau_per_day``) and times ``replay()`` over all of it, everything included: reading the
matches, building the waves, the updates, the before/after arrays. In the same run the
first ``--scalar-matches`` of them go through the match-by-match replay (``model.rate``
for each match, with the same ageing and table bookkeeping), and the ratio of the two
rates is printed. Rates and ratio are per second of processor time of this process
("cpu s"), which other processes on a busy, shared machine inflate far less than the
wall-clock time ("wall s", also shown). Both results are checked against each other (to
1e-12) on that prefix.

The Glicko-2 scenarios rate the very matches of the TrueSkill scenario of the same shape
(same seed and count), on the 1500 scale (RD 30 to 240, volatility 0.06), ageing as much
on that scale. ``replay()`` rates Glicko-2 one match at a time, so their ratio is about 1.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from app.rating import Elo, Glicko2, PlackettLuce, RatingModel, TrueSkill
from app.rating.replay import ReplayMatch, _replay_one_by_one, replay

#: Ageing per day on the 25 / 8.33 scale; Glicko-2 ages its 1500 / 350 scale as much.
TAU_PER_DAY = 0.05
GLICKO2_TAU_PER_DAY = TAU_PER_DAY * 350.0 / (25.0 / 3.0)


@dataclass(frozen=True)
class Scenario:
    name: str
    model: RatingModel
    shape: tuple[int, ...]
    #: Matches as a fraction of ``--matches`` (bigger matches: fewer of them).
    share: float
    #: Seed of the matches: a scenario with another's seed, shape and share rates the
    #: very same matches.
    seed: int
    #: Ageing per day, on the model's scale.
    tau_per_day: float = TAU_PER_DAY


SCENARIOS = [
    Scenario("trueskill-1v1", TrueSkill(), (1, 1), 1.0, 0),
    Scenario("trueskill-4v4", TrueSkill(), (4, 4), 0.25, 1),
    Scenario("trueskill-ffa8", TrueSkill(), (1,) * 8, 0.02, 2),
    Scenario("plackett-luce-1v1", PlackettLuce(), (1, 1), 1.0, 3),
    Scenario("plackett-luce-4v4", PlackettLuce(), (4, 4), 0.25, 4),
    Scenario("plackett-luce-ffa8", PlackettLuce(), (1,) * 8, 0.05, 5),
    Scenario("elo-1v1", Elo(), (1, 1), 1.0, 6),
    Scenario("elo-4v4", Elo(), (4, 4), 0.25, 7),
    Scenario("elo-full-4v4", Elo(multiplayer="full"), (4, 4), 0.25, 8),
    Scenario("elo-ffa8", Elo(), (1,) * 8, 0.05, 9),
    # Glicko-2 on the very matches of the TrueSkill scenario of the same shape.
    Scenario("glicko2-1v1", Glicko2(), (1, 1), 1.0, 0, GLICKO2_TAU_PER_DAY),
    Scenario("glicko2-4v4", Glicko2(), (4, 4), 0.25, 1, GLICKO2_TAU_PER_DAY),
    Scenario("glicko2-ffa8", Glicko2(), (1,) * 8, 0.02, 2, GLICKO2_TAU_PER_DAY),
]


def make_matches(shape: tuple[int, ...], count: int, players: int, seed: int) -> list[ReplayMatch]:
    """Random matches: distinct random players, shuffled ranks, a draw in ten, a day apart."""
    rng = np.random.default_rng(seed)
    size = sum(shape)
    # Distinct players per match: a random start and random distinct offsets from it.
    start = rng.integers(0, players, count)
    offsets = np.argsort(rng.random((count, players if players < 64 else 64)), axis=1)[:, :size]
    picked = ((start[:, None] + offsets) % players).tolist()
    ranks = np.argsort(rng.random((count, len(shape))), axis=1).astype(float)
    drawn = rng.random(count) < 0.1
    ranks[drawn, 1] = ranks[drawn, 0]
    bounds = np.cumsum((0, *shape)).tolist()
    days = (np.arange(count) * (400.0 / count)).tolist()
    return [
        ReplayMatch(
            teams=[row[bounds[j] : bounds[j + 1]] for j in range(len(shape))],
            ranks=r,
            day=d,
        )
        for row, r, d in zip(picked, ranks.tolist(), days, strict=True)
    ]


def table(model: RatingModel, players: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    if model.name == "elo":
        return rng.normal(1500.0, 200.0, players), np.zeros(players)
    if model.name == "glicko2":
        return rng.normal(1500.0, 200.0, players), rng.uniform(30.0, 240.0, players)
    return rng.normal(25.0, 5.0, players), rng.uniform(1.0, 8.0, players)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=1_000_000, help="1 vs 1 matches")
    parser.add_argument("--players", type=int, default=100_000)
    parser.add_argument(
        "--scalar-matches",
        type=int,
        default=50_000,
        help="matches timed one by one (a prefix of the same list)",
    )
    parser.add_argument("--only", action="append", help="scenario name (repeatable)")
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    args = parser.parse_args()

    header = ("scenario", "matches", "wall s", "cpu s", "replay /s", "one by one /s", "ratio")
    rows: list[tuple[str, ...]] = []
    for sc in SCENARIOS:
        if args.only and sc.name not in args.only:
            continue
        count = max(1, int(args.matches * sc.share))
        matches = make_matches(sc.shape, count, args.players, seed=sc.seed)
        mu, sigma = table(sc.model, args.players)
        start = time.perf_counter()
        cpu = time.process_time()
        replay(sc.model, mu, sigma, matches, tau_per_day=sc.tau_per_day)
        cpu_s = time.process_time() - cpu
        fast_s = time.perf_counter() - start
        prefix = matches[: min(count, args.scalar_matches)]
        fast_prefix = replay(sc.model, mu, sigma, prefix, tau_per_day=sc.tau_per_day)
        prior_volatility = sc.model.rating().volatility
        cpu = time.process_time()
        slow = _replay_one_by_one(
            sc.model,
            mu.copy(),
            sigma.copy(),
            np.full(args.players, np.nan),
            prefix,
            sc.tau_per_day,
            False,
            None if prior_volatility is None else np.full(args.players, prior_volatility),
        )
        slow_s = time.process_time() - cpu
        for name in ("after_mu", "after_sigma", "after_volatility"):
            if getattr(slow, name) is None:
                continue
            np.testing.assert_allclose(
                getattr(fast_prefix, name), getattr(slow, name), rtol=1e-12, atol=1e-12
            )
        fast_rate = count / cpu_s
        slow_rate = len(prefix) / slow_s
        rows.append(
            (
                sc.name,
                f"{count:,}",
                f"{fast_s:.2f}",
                f"{cpu_s:.2f}",
                f"{fast_rate:,.0f}",
                f"{slow_rate:,.0f}",
                f"{fast_rate / slow_rate:.1f}x",
            )
        )
        if args.format == "table":
            print(" ".join(rows[-1]), flush=True)

    if args.format == "markdown":
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        print()
        print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for row in rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
