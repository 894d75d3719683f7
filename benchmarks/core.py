"""Rating-core speed: updates per second for common match shapes, beside the public packages.

    .venv/bin/python benchmarks/core.py [--seconds 0.5] [--format table|markdown]

For each model and shape it rates a fixed list of random matches (random ratings, random
outcomes, a draw now and then) through the public ``rate()`` and reports matches rated per
second, best of three runs. When the ``trueskill`` and ``openskill`` packages are installed
they rate the same matches in the same run and the ratio is printed, so the figures compare
on a shared, noisy machine. ``rate_1vs1`` is the fast path for one-on-one games.
"TrueSkill+player_scores" rates the same matches with each player's own statistic as
evidence (``stat_scale`` 0.25), beside TrueSkill without it: its ratio is the cost of the
statistics.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from app.rating import (
    BradleyTerryFull,
    BradleyTerryPart,
    Elo,
    Glicko2,
    PlackettLuce,
    Rating,
    ThurstoneMostellerFull,
    ThurstoneMostellerPart,
    TrueSkill,
    VolatileRating,
)

#: The Weng-Lin models, each beside ``openskill``'s model of the same name.
WENG_LIN: dict[str, Any] = {
    "PlackettLuce": PlackettLuce,
    "BradleyTerryFull": BradleyTerryFull,
    "BradleyTerryPart": BradleyTerryPart,
    "ThurstoneMostellerFull": ThurstoneMostellerFull,
    "ThurstoneMostellerPart": ThurstoneMostellerPart,
}

SHAPES: dict[str, list[int]] = {
    "1v1": [1, 1],
    "4v4": [4, 4],
    "8v8": [8, 8],
    "ffa8": [1] * 8,
}


Match = tuple[list[list[tuple[float, float]]], list[int]]


def make_matches(shape: list[int], n: int, seed: int) -> list[Match]:
    rng = random.Random(seed)
    matches = []
    for _ in range(n):
        teams = [
            [(rng.gauss(25.0, 5.0), rng.uniform(1.0, 8.0)) for _ in range(size)] for size in shape
        ]
        ranks = list(range(len(shape)))
        rng.shuffle(ranks)
        if rng.random() < 0.1:  # a draw between two teams
            a, b = rng.sample(range(len(shape)), 2)
            ranks[a] = ranks[b]
        matches.append((teams, ranks))
    return matches


def best_rate(fn: Callable[[], int], seconds: float) -> float:
    """Matches per second, best of three timed runs of ``fn`` (which returns its count)."""
    best = 0.0
    for _ in range(3):
        count = 0
        start = time.perf_counter()
        while True:
            count += fn()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / 3:
                break
        best = max(best, count / elapsed)
    return best


def as_rating(mu: float, sigma: float, elo: bool, glicko2: bool = False) -> Rating:
    """A benchmark rating; Elo ratings are put on the 1500 scale with no sigma, Glicko-2
    ratings on the 1500 scale with RD 30 to 240 and volatility 0.06."""
    if glicko2:
        return VolatileRating(1500.0 + (mu - 25.0) * 60.0, sigma * 30.0, 0.06)
    return Rating(mu * 60.0, 0.0) if elo else Rating(mu, sigma)


def ours(
    model: Any, matches: list[Match], elo: bool = False, glicko2: bool = False
) -> Callable[[], int]:
    prepared = [
        ([[as_rating(mu, s, elo, glicko2) for mu, s in t] for t in teams], ranks)
        for teams, ranks in matches
    ]
    rate = model.rate

    def run() -> int:
        for teams, ranks in prepared:
            rate(teams, ranks=ranks)
        return len(prepared)

    return run


def ours_1vs1(
    model: Any, matches: list[Match], elo: bool = False, glicko2: bool = False
) -> Callable[[], int]:
    prepared = [
        (as_rating(*t[0][0], elo, glicko2), as_rating(*t[1][0], elo, glicko2), ranks[0] == ranks[1])
        for t, ranks in matches
    ]
    rate = model.rate_1vs1

    def run() -> int:
        for a, b, drawn in prepared:
            rate(a, b, drawn)
        return len(prepared)

    return run


def with_statistics(model: Any, matches: list[Match], seed: int) -> Callable[[], int]:
    """``ours`` with a random statistic for every player (an integer score, now and then
    unknown)."""
    rng = random.Random(seed)
    prepared = [
        (
            [[as_rating(mu, s, False) for mu, s in t] for t in teams],
            ranks,
            [[None if rng.random() < 0.05 else float(rng.randrange(20)) for _ in t] for t in teams],
        )
        for teams, ranks in matches
    ]
    rate = model.rate

    def run() -> int:
        for teams, ranks, scores in prepared:
            rate(teams, ranks=ranks, player_scores=scores)
        return len(prepared)

    return run


def trueskill_package(matches: list[Match]) -> Callable[[], int] | None:
    try:
        import trueskill
    except ImportError:
        return None
    env = trueskill.TrueSkill(draw_probability=0.10)
    prepared = [
        ([tuple(env.create_rating(mu, s) for mu, s in t) for t in teams], ranks)
        for teams, ranks in matches
    ]
    rate = env.rate

    def run() -> int:
        for teams, ranks in prepared:
            rate(teams, ranks=ranks)
        return len(prepared)

    return run


def openskill_package(matches: list[Match], name: str) -> Callable[[], int] | None:
    try:
        from openskill import models
    except ImportError:
        return None
    model = getattr(models, name)()
    prepared = [
        ([[model.rating(mu=mu, sigma=s) for mu, s in t] for t in teams], ranks)
        for teams, ranks in matches
    ]
    rate = model.rate

    def run() -> int:
        for teams, ranks in prepared:
            rate(teams, ranks=ranks)
        return len(prepared)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="time per measurement")
    parser.add_argument("--matches", type=int, default=2000, help="distinct matches per shape")
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    args = parser.parse_args()

    rows: list[tuple[str, str, float, str, float | None]] = []
    for shape_name, shape in SHAPES.items():
        matches = make_matches(shape, args.matches, seed=len(shape) * 100 + sum(shape))
        ts_ref = trueskill_package(matches)
        ts_ref_rate = best_rate(ts_ref, args.seconds) if ts_ref else None
        ts = best_rate(ours(TrueSkill(), matches), args.seconds)
        rows.append(("TrueSkill", shape_name, ts, "trueskill", ts_ref_rate))
        stats = with_statistics(TrueSkill(stat_scale=0.25, stat_noise=1.0), matches, len(shape))
        rows.append(
            ("TrueSkill+player_scores", shape_name, best_rate(stats, args.seconds), "TrueSkill", ts)
        )
        os_ref_rates: dict[str, float | None] = {}
        for name, cls in WENG_LIN.items():
            os_ref = openskill_package(matches, name)
            os_ref_rate = best_rate(os_ref, args.seconds) if os_ref else None
            os_ref_rates[name] = os_ref_rate
            ours_rate = best_rate(ours(cls(), matches), args.seconds)
            rows.append((name, shape_name, ours_rate, "openskill", os_ref_rate))
        elo = best_rate(ours(Elo(), matches, elo=True), args.seconds)
        rows.append(("Elo", shape_name, elo, "", None))
        glicko = best_rate(ours(Glicko2(), matches, glicko2=True), args.seconds)
        rows.append(("Glicko2", shape_name, glicko, "", None))
        if shape_name == "1v1":
            rows.append(
                (
                    "TrueSkill.rate_1vs1",
                    shape_name,
                    best_rate(ours_1vs1(TrueSkill(), matches), args.seconds),
                    "trueskill",
                    ts_ref_rate,
                )
            )
            for name, cls in WENG_LIN.items():
                rows.append(
                    (
                        f"{name}.rate_1vs1",
                        shape_name,
                        best_rate(ours_1vs1(cls(), matches), args.seconds),
                        "openskill",
                        os_ref_rates[name],
                    )
                )
            rows.append(
                (
                    "Elo.rate_1vs1",
                    shape_name,
                    best_rate(ours_1vs1(Elo(), matches, elo=True), args.seconds),
                    "",
                    None,
                )
            )
            rows.append(
                (
                    "Glicko2.rate_1vs1",
                    shape_name,
                    best_rate(ours_1vs1(Glicko2(), matches, glicko2=True), args.seconds),
                    "",
                    None,
                )
            )

    header = ("model", "shape", "ours /s", "package", "package /s", "ratio")
    lines = []
    for model, shape_name, rate, pkg, pkg_rate in rows:
        lines.append(
            (
                model,
                shape_name,
                f"{rate:,.0f}",
                pkg or "-",
                f"{pkg_rate:,.0f}" if pkg_rate else "-",
                f"{rate / pkg_rate:.1f}x" if pkg_rate else "-",
            )
        )
    if args.format == "markdown":
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(str(r[i])) for r in [header, *lines]) for i in range(len(header))]
        for line in [header, *lines]:
            print(
                "  ".join(
                    str(c).rjust(w) if i >= 2 else str(c).ljust(w)
                    for i, (c, w) in enumerate(zip(line, widths, strict=True))
                )
            )


if __name__ == "__main__":
    main()
