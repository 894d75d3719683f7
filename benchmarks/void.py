"""Void benchmark: void a match early (and one late) in a ladder of 100,000 matches.

    .venv/bin/python benchmarks/void.py [--matches 100000] [--players 20000]
        [--algorithm trueskill] [--databases sqlite,postgresql]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--format table|markdown]

Each database is made fresh (a temporary SQLite file; a PostgreSQL database created on the
server and dropped after) and loaded with random matches through the batch path, 10,000
per transaction: one in two a 1 v 1, the others 2 v 2 or a four-player free-for-all,
players drawn with Zipf-like repeats from the pool (seed 1), a match every ten minutes.
Then ``rerate.void_match`` voids the 100th match (its players reach almost every later
match), and after that a match 100 from the end; each void is one transaction, timed
to its commit.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.domain.documents.ladders import LadderCreate  # noqa: E402
from app.domain.documents.matches import MAX_BATCH, MatchCreate  # noqa: E402
from app.services import batches, ladders, rerate  # noqa: E402
from app.storage.engine import get_engine, session_factory, upgrade  # noqa: E402
from benchmarks.databases import fresh_database, print_table  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"


def synthetic(count: int, players: int, seed: int = 1) -> list[MatchCreate]:
    rng = random.Random(seed)
    names = [f"player-{n}" for n in range(players)]
    cumulative = list(itertools.accumulate(1.0 / (n + 1) ** 0.6 for n in range(players)))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    bodies = []
    for n in range(count):
        shape = rng.random()
        size = 2 if shape < 0.5 else 4
        chosen: list[str] = []
        while len(chosen) < size:
            (pick,) = rng.choices(names, cum_weights=cumulative)
            if pick not in chosen:
                chosen.append(pick)
        teams = [[p] for p in chosen] if size == 2 or shape > 0.75 else [chosen[:2], chosen[2:]]
        ranks = [rng.randint(1, len(teams)) for _ in teams]
        bodies.append(
            MatchCreate(
                match_id=f"m{n}",
                played_at=start + timedelta(minutes=10 * n),
                teams=teams,
                ranks=[float(r) for r in ranks],
            )
        )
    return bodies


def run(url: str, bodies: list[MatchCreate], algorithm: str) -> list[tuple[str, ...]]:
    upgrade(url)
    sessions = session_factory(get_engine(url))
    with sessions() as session:
        ladders.create_ladder(
            session=session,
            body=LadderCreate(id="bench", algorithm=algorithm),
            now=datetime.now(UTC),
        )
        session.commit()
    started = time.perf_counter()
    for begin in range(0, len(bodies), MAX_BATCH):
        with sessions() as session:
            batches.record_matches(
                session=session,
                ladder_id="bench",
                bodies=bodies[begin : begin + MAX_BATCH],
                now=datetime.now(UTC),
            )
            session.commit()
    load = time.perf_counter() - started
    rows = []
    for label, index in (("early", 99), ("late", len(bodies) - 100)):
        started = time.perf_counter()
        with sessions() as session:
            ladder = ladders.get_ladder(session=session, ladder_id="bench")
            result = rerate.void_match(
                session=session,
                ladder=ladder,
                match_id=f"m{index}",
                now=datetime.now(UTC),
            )
            session.commit()
        seconds = time.perf_counter() - started
        rows.append(
            (
                label,
                f"m{index}",
                f"{result.matches_rerated:,}",
                f"{result.players_affected:,}",
                f"{seconds:.2f}",
                f"{len(bodies) / load:,.0f}",
            )
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matches", type=int, default=100_000)
    parser.add_argument("--players", type=int, default=20_000)
    parser.add_argument("--algorithm", default="trueskill")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL server URL")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    bodies = synthetic(args.matches, args.players)
    table = []
    for kind in args.databases.split(","):
        with fresh_database(kind, args.postgres, "void") as url:
            table.extend((kind, args.algorithm, *row) for row in run(url, bodies, args.algorithm))
    header = (
        "database",
        "algorithm",
        "void",
        "match",
        "matches re-rated",
        "players affected",
        "seconds",
        "load matches/s",
    )
    print_table(header, table, args.format)
    return 0


if __name__ == "__main__":
    sys.exit(main())
