"""How long ``ratings fit`` takes on a large one-on-one match file, per algorithm and ``auto``.

    .venv/bin/python benchmarks/fit.py [--dir DIR] [--matches 400000] [--players 20000]
        [--seed 1] [--algorithms auto,trueskill,...] [--jobs N] [--format table|markdown]

It writes a seeded synthetic match file into ``--dir`` (a temporary directory when not
given, removed afterwards; a file already there from the same arguments is reused) and
times ``ratings fit FILE --algorithm NAME --format json`` for each name, as a separate
process, reading the file included: wall-clock seconds, and the processor seconds of the
command and its worker processes ("cpu s"; on a busy shared machine the wall-clock time
grows with the load, the processor time much less). The table also gives the replays of
the training part, the training pair log loss and the later part's measures of the fitted
parameters (for ``auto``, of the algorithm it chose).

The file: ``--players`` players whose latent skill drifts (a Gaussian random walk in
time, its variance growing ``DRIFT ** 2`` per day, from N(0, 1) at the start), playing
``--matches`` one-on-one matches spread evenly over ``DAYS`` days, each player's share of
the matches drawn from a Pareto distribution (a few very active players, many occasional
ones). A match is won by the player whose skill plus logistic noise (scale ``NOISE``) is
higher; a difference below ``DRAW_MARGIN`` is a draw.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from app.rating.registry import ALGORITHMS

#: The days the matches span.
DAYS = 730
#: The standard deviation of a player's skill drift per square root of a day.
DRIFT = 0.03
#: The scale of the logistic noise on each player's performance in a match.
NOISE = 0.6
#: Performances closer than this are a draw (about one match in eleven).
DRAW_MARGIN = 0.25
#: The Pareto shape of the players' activity.
ACTIVITY_SHAPE = 1.5


def generate(path: Path, *, matches: int, players: int, seed: int) -> None:
    """Write the synthetic match file (see the module) to ``path``."""
    rng = np.random.default_rng(seed)
    activity = rng.pareto(ACTIVITY_SHAPE, players) + 1.0
    activity /= activity.sum()
    first = rng.choice(players, size=matches, p=activity)
    second = rng.choice(players, size=matches, p=activity)
    second = np.where(second == first, (second + 1) % players, second)  # never oneself
    days = np.sort(rng.uniform(0.0, DAYS, matches))
    # Each participant's skill: its start plus the drift since the player's previous match.
    who = np.concatenate([first, second])
    when = np.concatenate([days, days])
    order = np.lexsort((when, who))
    gaps = np.diff(when[order], prepend=0.0)
    new_player = np.diff(who[order], prepend=-1) != 0
    gaps[new_player] = when[order][new_player]
    steps = rng.normal(0.0, 1.0, 2 * matches) * DRIFT * np.sqrt(gaps)
    start = rng.normal(0.0, 1.0, players)
    walk = np.cumsum(steps)
    # Restart the cumulative sum at each player's first match.
    base = np.maximum.accumulate(np.where(new_player, np.arange(2 * matches), 0))
    offset = walk[base] - steps[base]
    skill = np.empty(2 * matches)
    skill[order] = start[who[order]] + walk - offset
    noise = rng.logistic(0.0, NOISE, (2, matches))
    diff = skill[:matches] + noise[0] - skill[matches:] - noise[1]
    epoch = datetime(2024, 1, 1, tzinfo=UTC)
    with path.open("w", encoding="utf-8") as out:
        for n in range(matches):
            d = float(diff[n])
            ranks = [1, 1] if abs(d) < DRAW_MARGIN else ([1, 2] if d > 0 else [2, 1])
            played = epoch + timedelta(days=float(days[n]))
            line = {
                "match_id": f"m{n}",
                "played_at": played.isoformat(timespec="seconds").replace("+00:00", "Z"),
                "teams": [[f"p{first[n]}"], [f"p{second[n]}"]],
                "ranks": ranks,
            }
            out.write(json.dumps(line, separators=(",", ":")) + "\n")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_fit(path: Path, name: str, jobs: int | None) -> tuple[float, float, dict[str, Any]]:
    """``ratings fit`` of ``name`` as its own process: (wall-clock seconds, processor
    seconds of it and its worker processes, its JSON)."""
    command = [sys.executable, "-m", "app.cli", "fit", str(path), "--algorithm", name]
    command += ["--format", "json"]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    cpu = _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    out: dict[str, Any] = json.loads(done.stdout)
    return seconds, cpu, out


def _row(name: str, seconds: float, cpu: float, out: dict[str, Any]) -> list[str]:
    if name == "auto":
        chosen = out["chosen"]
        result = next(c for c in out["candidates"] if c["algorithm"] == chosen)
        replays = sum(c["evaluations"] for c in out["candidates"])
        fitted = out["test"]["fitted"]
        label = f"auto ({chosen})"
    else:
        result = out
        replays = out["evaluations"]
        fitted = out["test"]["fitted"]
        label = name
    return [
        label,
        f"{seconds:.0f}",
        f"{seconds / 60:.1f}",
        f"{cpu:.0f}",
        str(replays),
        f"{result['train_log_loss']:.5f}",
        f"{100 * fitted['prediction_error']:.2f}%",
        f"{fitted['log_loss']:.5f}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="where the match file goes (default: a temporary one)")
    parser.add_argument("--matches", type=int, default=400_000)
    parser.add_argument("--players", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--algorithms",
        default=",".join(("auto", *ALGORITHMS)),
        help="comma-separated names for --algorithm (default: %(default)s)",
    )
    parser.add_argument("--jobs", type=int, help="passed to `ratings fit --jobs`")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.dir or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"fit-{args.matches}-{args.players}-{args.seed}.jsonl"
        if not path.exists():
            started = time.perf_counter()
            generate(path, matches=args.matches, players=args.players, seed=args.seed)
            print(
                f"wrote {path} ({args.matches:,} matches) in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
        header = ["algorithm", "seconds", "minutes", "cpu s", "replays", "train pair ll"]
        header += ["later error", "later log loss"]
        rows = []
        loads = [os.getloadavg()[0]]
        for name in args.algorithms.split(","):
            seconds, cpu, out = run_fit(path, name, args.jobs)
            rows.append(_row(name, seconds, cpu, out))
            loads.append(os.getloadavg()[0])
            print(f"{name}: {seconds:.1f} s", file=sys.stderr)
    print(
        f"{args.matches:,} one-on-one matches, {args.players:,} players, {os.cpu_count()} "
        f"cores, load average {min(loads):.1f} to {max(loads):.1f} while measuring"
    )
    if args.format == "markdown":
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
