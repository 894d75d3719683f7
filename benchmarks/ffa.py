"""TrueSkill on free-for-alls beside the ``trueskill`` package, timed in alternation.

    .venv/bin/python benchmarks/ffa.py [--players 8 16 64] [--runs 25] [--format table|markdown]

Rates the random free-for-alls of ``core.py`` (one player per team) with ours and with the
package in alternating short runs and keeps the fastest run of each. On a shared machine a
load change then slows both sides alike, which keeps the printed ratio steadier than the
best-of-three runs of ``core.py``, whose two sides are timed seconds apart.
"""

from __future__ import annotations

import argparse
import time

from core import make_matches, ours, trueskill_package

from app.rating import TrueSkill


def fastest_pair(
    matches: list[tuple[list[list[tuple[float, float]]], list[int]]], runs: int
) -> tuple[float, float] | None:
    """Matches per second of ours and of the package, fastest of ``runs`` alternating runs."""
    reference = trueskill_package(matches)
    if reference is None:
        return None
    rate = ours(TrueSkill(), matches)
    best_ours = best_reference = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        reference()
        best_reference = min(best_reference, time.perf_counter() - start)
        start = time.perf_counter()
        rate()
        best_ours = min(best_ours, time.perf_counter() - start)
    return len(matches) / best_ours, len(matches) / best_reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, nargs="+", default=[8, 16, 64])
    parser.add_argument("--runs", type=int, default=25, help="alternating runs per size")
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    args = parser.parse_args()

    header = ("shape", "matches", "ours /s", "package /s", "ratio")
    lines: list[tuple[str, ...]] = []
    for players in args.players:
        # The package takes about 15 ms per 64-player match: fewer matches for large ones.
        count = 200 if players <= 16 else 20
        matches = make_matches([1] * players, count, seed=players * 101)
        rates = fastest_pair(matches, args.runs if players <= 16 else max(3, args.runs // 3))
        if rates is None:
            raise SystemExit("the trueskill package is not installed")
        rate, reference = rates
        lines.append(
            (
                f"ffa{players}",
                str(count),
                f"{rate:,.0f}",
                f"{reference:,.0f}",
                f"{rate / reference:.1f}x",
            )
        )
    if args.format == "markdown":
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    for line in [header, *lines]:
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            )
        )


if __name__ == "__main__":
    main()
