"""Season benchmark: open a season on a ladder of many rated players, with matches being
recorded meanwhile.

    .venv/bin/python benchmarks/seasons.py [--players 1000000] [--databases sqlite,postgresql]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--keep 0.5] [--format table|markdown]

Each database is made fresh (a temporary SQLite file; a PostgreSQL database created on the
server and dropped after); a TrueSkill ladder gets ``--players`` rated players, their rows
written straight into ``ratings`` (as ``benchmarks/http.py`` seeds its big ladder). A
writer thread then records single 1 v 1 matches between random players of the ladder, one
transaction each, as fast as it can, while the next season opens: its first transaction
(the season made current), then its steps (``seasons.settle_opening``: archive, reset and
history for 5,000 players a step, then the archive's ranks). The table gives the
opening's time (from its first transaction's start to its last step's commit), the first
transaction's, how long that waited for its turn to write (SQLite: the process's writers
take turns), and what the writer saw while the opening ran: the matches it recorded, its
longest wait for one (the time a recording was held up by the opening), and the
recordings refused meanwhile (on PostgreSQL a recording waits for a held ladder at most
the statement timeout, 10 s, then fails as a client's 503 would). The writer pauses 2 ms
between matches; a match it records for a player the steps have not reached resets that
player first.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.domain.documents.ladders import LadderCreate  # noqa: E402
from app.domain.documents.matches import MatchCreate  # noqa: E402
from app.domain.documents.seasons import SeasonCreate, SeasonOut  # noqa: E402
from app.services import batches, ladders, seasons  # noqa: E402
from app.storage import unit_of_work  # noqa: E402
from app.storage.engine import dispose_engines, get_engine, session_factory  # noqa: E402
from benchmarks.databases import big_ladder, fresh_database, print_table  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"
LADDER = "bench"


class Writer(threading.Thread):
    """Records single 1 v 1 matches between random players until stopped; keeps each
    recording's start and duration."""

    def __init__(self, url: str, players: int) -> None:
        super().__init__(daemon=True)
        self.transact = unit_of_work.transactor(session_factory(get_engine(url)))
        self.players = players
        self.stop = threading.Event()
        self.timings: list[tuple[float, float]] = []
        self.failed = 0

    def run(self) -> None:
        rng = random.Random(7)
        n = 0
        while not self.stop.is_set():
            a, b = rng.sample(range(self.players), 2)
            body = MatchCreate(match_id=f"w{n}", teams=[[f"q{a:07d}"], [f"q{b:07d}"]])
            started = time.perf_counter()
            try:
                self.transact(
                    lambda session, body=body: batches.record_matches(
                        session=session, ladder_id=LADDER, bodies=[body], now=datetime.now(UTC)
                    )
                )
            except DBAPIError:  # the ladder held past the statement timeout: a 503 to a client
                self.failed += 1
            self.timings.append((started, time.perf_counter() - started))
            n += 1
            time.sleep(0.002)  # a steady stream, not a writer that never lets go


def run(url: str, players: int, keep: float) -> tuple[str, ...]:
    sessions = big_ladder(url, LadderCreate(id=LADDER, algorithm="trueskill"), players)
    writer = Writer(url, players)
    writer.start()
    time.sleep(2.0)  # the writer's pace before the opening
    before = len(writer.timings)
    begun: list[float] = []
    owner = seasons.new_owner()

    def work(session: Session) -> SeasonOut:
        begun.append(time.perf_counter())  # its transaction has begun: the turn is its own
        return seasons.open_season(
            session=session,
            ladder=ladders.get_ladder(session=session, ladder_id=LADDER),
            body=SeasonCreate(id="two", keep=keep),
            now=datetime.now(UTC),
            owner=owner,
        )

    asked = time.perf_counter()
    opened = unit_of_work.run(work, session_factory=sessions)
    current = time.perf_counter()
    settled = seasons.settle_opening(
        transact=unit_of_work.transactor(sessions), ladder_id=LADDER, owner=owner
    )
    ended = time.perf_counter()
    assert not settled.opening
    started = begun[-1]
    seconds = ended - started
    time.sleep(1.0)
    writer.stop.set()
    writer.join()
    dispose_engines()
    during = [
        wait
        for start, wait in writer.timings
        if start < started + seconds and start + wait > started
    ]
    pace = before / 2.0
    return (
        f"{opened.players:,}",
        f"{seconds:.1f}",
        f"{current - started:.2f}",
        f"{started - asked:.1f}",
        f"{pace:,.0f}",
        f"{len(during):,}",
        f"{max(during, default=0.0):.2f}",
        f"{writer.failed:,}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL server URL")
    parser.add_argument("--keep", type=float, default=0.5)
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    table = []
    for kind in args.databases.split(","):
        with fresh_database(kind, args.postgres, "seasons") as url:
            table.append((kind, *run(url, args.players, args.keep)))
    header = (
        "database",
        "players",
        "opening s",
        "first transaction s",
        "turn waited s",
        "writes/s before",
        "writes during",
        "longest write wait s",
        "writes refused",
    )
    print_table(header, table, args.format)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
