"""Events of thousands of teams: a synthetic match file and how long evaluating it takes.

    .venv/bin/python benchmarks/large_events.py [FILE] [--events 990] [--median 222]
        [--largest 15794] [--players 50000] [--seed 1] [--algorithms a,b,...]
        [--fit trueskill,...] [--max-evaluations 40] [--write-only] [--format table|markdown]

Writes the file (to FILE, or to a temporary folder) and then times ``ratings evaluate`` on
it (the default algorithms unless ``--algorithms``), and with ``--fit`` ``ratings fit`` of
each algorithm named there, each as its own process of the ``ratings`` command, printing a
table: the replay seconds and processor seconds of every algorithm (from the command's
JSON) and the whole command's wall-clock and processor time (reading the file included).

The file has the shape of a season of mass-participation events (races, open
tournaments): ``--events`` events whose team counts follow a log-normal law through
evenly spaced quantiles, scaled so that the median is ``--median`` teams and the largest
``--largest`` (990, 222 and 15,794 by default: about 510,000 entries and 700 million pairs
of teams in all), in a shuffled order, one event a day. Every team is one player. Players
come from a pool of ``--players`` with a latent skill N(0, 1) and an activity (log-normal)
that makes some enter far more events than others; an event draws its entrants by
activity without repetition, each performs at skill + N(0, 1), and the finishing order
follows the performances, with about one neighbour in fifty tied (a run of ties is
short, so no tie is larger than a handful of teams). Teams are listed in a random order
and carry explicit ``ranks``. The same seed writes the same file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

#: The chance that a team ties with the one finishing just ahead of it.
TIE_CHANCE = 0.02
#: The deviation of a performance around the skill (skills are N(0, 1)).
NOISE = 1.0
#: The log-normal deviation of the players' activities.
ACTIVITY_SPREAD = 1.0
#: The first event's day.
FIRST_DAY = date(2020, 1, 1)
#: What ``ratings evaluate`` runs when no ``--algorithms`` are given.
DEFAULT_ALGORITHMS = "trueskill,plackett_luce,elo,elo-paper,elo-full-logistic"
#: The checkout whose ``app`` the timed commands run.
ROOT = Path(__file__).resolve().parents[1]


def team_counts(events: int, median: int, largest: int, rng: np.random.Generator) -> list[int]:
    """``events`` team counts at evenly spaced quantiles of a log-normal law whose median
    is ``median`` and whose top quantile is ``largest``, shuffled; at least 2 each."""
    top = NormalDist().inv_cdf((events - 0.5) / events)
    spread = math.log(largest / median) / top if events > 1 else 0.0
    counts = [
        max(2, round(median * math.exp(spread * NormalDist().inv_cdf((i + 0.5) / events))))
        for i in range(events)
    ]
    counts[-1] = largest
    order = rng.permutation(events)
    return [counts[i] for i in order]


def finishing_ranks(performance: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ranks (1 is best, ties share the better rank) from performances, higher is better;
    each team ties with the one just ahead of it with probability ``TIE_CHANCE``."""
    order = np.argsort(-performance, kind="stable")
    places = np.arange(1, len(order) + 1, dtype=np.int64)
    tie = rng.random(len(order)) < TIE_CHANCE
    tie[0] = False
    # A tied place takes the place of the nearest untied one above it.
    places = np.maximum.accumulate(np.where(tie, 0, places))
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = places
    return ranks


def write_file(
    path: Path,
    *,
    events: int = 990,
    median: int = 222,
    largest: int = 15_794,
    players: int = 50_000,
    seed: int = 1,
) -> dict[str, Any]:
    """Write the synthetic file; return its shape (events, entries, pairs, ties...)."""
    if players < largest:
        raise ValueError(f"{players} players cannot fill an event of {largest} teams")
    rng = np.random.default_rng(seed)
    skill = rng.normal(0.0, 1.0, players)
    log_activity = rng.normal(0.0, ACTIVITY_SPREAD, players)
    counts = team_counts(events, median, largest, rng)
    entries = pairs = tied = 0
    with path.open("w", encoding="utf-8") as out:
        for e, k in enumerate(counts):
            # k distinct players by activity: the k largest log-activity + Gumbel keys.
            keys = log_activity + rng.gumbel(size=players)
            entrants = np.argpartition(-keys, k - 1)[:k]
            entrants = entrants[rng.permutation(k)]
            performance = skill[entrants] + rng.normal(0.0, NOISE, k)
            ranks = finishing_ranks(performance, rng)
            _, group = np.unique(ranks, return_counts=True)
            entries += k
            pairs += k * (k - 1) // 2
            tied += int((group * (group - 1) // 2).sum())
            body = {
                "match_id": f"event-{e + 1:04d}",
                "played_at": (FIRST_DAY + timedelta(days=e)).isoformat(),
                "teams": [[f"p{i:06d}"] for i in entrants.tolist()],
                "ranks": ranks.tolist(),
            }
            out.write(json.dumps(body, separators=(",", ":")) + "\n")
    return {
        "events": events,
        "median_teams": float(np.median(counts)),
        "largest": max(counts),
        "entries": entries,
        "pairs": pairs,
        "drawn_pairs": tied,
        "players": players,
    }


def _ratings_command() -> list[str]:
    """The ``ratings`` command of this checkout (run from its root), this interpreter."""
    return [sys.executable, "-m", "app.cli"]


def _run(argv: list[str]) -> tuple[dict[str, Any], float, float]:
    """Run a ``ratings`` command with JSON output; its result, wall and processor seconds."""
    started = time.perf_counter()
    before = os.times()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    after = os.times()
    wall = time.perf_counter() - started
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result, wall, cpu


def time_evaluate(path: Path, algorithms: str) -> tuple[list[dict[str, Any]], float, float]:
    """``ratings evaluate`` of the file: its result rows, wall and processor seconds."""
    out, wall, cpu = _run(
        [
            *_ratings_command(),
            "evaluate",
            str(path.resolve()),
            "--algorithms",
            algorithms,
            "--format",
            "json",
        ]
    )
    rows: list[dict[str, Any]] = out["results"]
    return rows, wall, cpu


def time_fit(
    path: Path, algorithm: str, max_evaluations: int
) -> tuple[dict[str, Any], float, float]:
    """``ratings fit`` of one algorithm on the file: its result, wall and processor seconds."""
    return _run(
        [
            *_ratings_command(),
            "fit",
            str(path.resolve()),
            "--algorithm",
            algorithm,
            "--max-evaluations",
            str(max_evaluations),
            "--format",
            "json",
        ]
    )


def render(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", nargs="?", help="where to write the file (default: a temp dir)")
    parser.add_argument("--events", type=int, default=990)
    parser.add_argument("--median", type=int, default=222)
    parser.add_argument("--largest", type=int, default=15_794)
    parser.add_argument("--players", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--algorithms", default=DEFAULT_ALGORITHMS)
    parser.add_argument("--fit", default="", help="comma-separated algorithms to fit too")
    parser.add_argument("--max-evaluations", type=int, default=40)
    parser.add_argument("--write-only", action="store_true", help="write the file, time nothing")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args(argv)
    markdown = args.format == "markdown"

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(args.file) if args.file else Path(scratch) / "large_events.jsonl"
        started = time.perf_counter()
        shape = write_file(
            path,
            events=args.events,
            median=args.median,
            largest=args.largest,
            players=args.players,
            seed=args.seed,
        )
        print(
            f"{path}: {shape['events']} events, median {shape['median_teams']:g} teams, "
            f"largest {shape['largest']}, {shape['entries']:,} entries of "
            f"{shape['players']:,} players, {shape['pairs']:,} pairs of teams "
            f"({shape['drawn_pairs']:,} tied); written in "
            f"{time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        if args.write_only:
            return 0

        rows, wall, cpu = time_evaluate(path, args.algorithms)
        table = [
            [
                row["algorithm"],
                f"{100.0 * row['prediction_error']:.2f}%",
                str(row["unrated"]),
                f"{row['seconds']:.1f}",
                f"{row['cpu_seconds']:.1f}",
            ]
            for row in rows
        ]
        table.append(["whole command", "", "", f"{wall:.1f}", f"{cpu:.1f}"])
        print(f"ratings evaluate --algorithms {args.algorithms}")
        print(render(["algorithm", "error", "unrated", "seconds", "cpu seconds"], table, markdown))

        fits = [n.strip() for n in args.fit.split(",") if n.strip()]
        if fits:
            fit_rows = []
            for name in fits:
                result, wall, cpu = time_fit(path, name, args.max_evaluations)
                fit_rows.append(
                    [
                        name,
                        str(result["evaluations"]),
                        f"{result['train_log_loss_default']:.5f}",
                        f"{result['train_log_loss']:.5f}",
                        f"{wall:.1f}",
                        f"{cpu:.1f}",
                    ]
                )
            print()
            print(f"ratings fit --max-evaluations {args.max_evaluations}")
            header = ["algorithm", "replays", "train pair ll (default)", "fitted", "seconds"]
            print(render([*header, "cpu seconds"], fit_rows, markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
