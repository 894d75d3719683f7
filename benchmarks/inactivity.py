"""Inactivity benchmark: the pass that brings a ladder of many players to now, with
matches being recorded meanwhile.

    .venv/bin/python benchmarks/inactivity.py [--players 1000000] [--databases sqlite,postgresql]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--step 5000] [--format table|markdown]

Each database is made fresh; a TrueSkill ladder with ``tau_per_day`` 0.05 gets
``--players`` rated players written straight into ``ratings`` (as ``benchmarks/seasons.py``
does), their last matches spread over the last 60 days. The writer thread of
``benchmarks/seasons.py`` records single 1 v 1 matches between random players of the
ladder (a transaction each, 2 ms apart) while ``inactivity.age_due_ladders`` runs the
ladder's pass (every player brought to now, in steps of ``--step`` players). The table
gives the pass's time, what the writer saw meanwhile (matches recorded, its longest wait
for one, recordings refused) and a check: 1,000 players read back, each equal to its rating
widened to the pass's time.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import bindparam, text

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.domain.documents.ladders import LadderCreate  # noqa: E402
from app.domain.ladders import ladder_config  # noqa: E402
from app.services import inactivity  # noqa: E402
from app.storage import unit_of_work  # noqa: E402
from app.storage.engine import dispose_engines  # noqa: E402
from benchmarks.databases import big_ladder, fresh_database, print_table, without_timeout  # noqa: E402
from benchmarks.seasons import LADDER, Writer  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"
PARAMS = {"tau_per_day": 0.05}


def run(url: str, players: int, step: int) -> tuple[str, ...]:
    body = LadderCreate(id=LADDER, algorithm="trueskill", params=PARAMS)
    sessions = big_ladder(url, body, players)
    now = datetime.now(UTC)
    with sessions() as session:
        without_timeout(session, url)
        for days in range(60):  # last matches spread over 60 days, by player id
            session.execute(
                text(
                    "UPDATE ratings SET last_played_at = :at"
                    " WHERE CAST(substr(player_id, 2) AS INTEGER) % 60 = :days"
                ),
                {"at": now - timedelta(days=days, hours=1), "days": days},
            )
        session.commit()
    writer = Writer(url, players)
    writer.start()
    time.sleep(2.0)
    before = len(writer.timings)
    transact = unit_of_work.transactor(sessions)
    as_of = datetime.now(UTC)
    started = time.perf_counter()
    finished = inactivity.age_due_ladders(
        transact=transact, clock=lambda: datetime.now(UTC), every=timedelta(days=1), size=step
    )
    ended = time.perf_counter()
    seconds = ended - started
    time.sleep(1.0)
    writer.stop.set()
    writer.join()
    assert finished == [LADDER], finished
    config = ladder_config("trueskill", PARAMS)
    with sessions() as session:
        aged_at = session.scalar(text("SELECT aged_at FROM ladders WHERE id = :id"), {"id": LADDER})
        sample = session.execute(
            text(
                "SELECT mu, sigma, last_played_at, conservative FROM ratings"
                " WHERE ladder_id = :id AND player_id IN :ids"
            ).bindparams(bindparam("ids", expanding=True)),
            {"id": LADDER, "ids": [f"q{n:07d}" for n in random.sample(range(players), 1000)]},
        ).all()
    exact = sum(
        1
        for mu, sigma, last, conservative in sample
        if config.standing(mu, sigma, _aware(last), _aware(aged_at))[1] == conservative
    )
    dispose_engines()
    during = [wait for start, wait in writer.timings if start < ended and start + wait > started]
    assert aged_at is not None and _aware(aged_at) >= as_of
    return (
        f"{players:,}",
        f"{seconds:.1f}",
        f"{before / 2.0:,.0f}",
        f"{len(during):,}",
        f"{max(during, default=0.0):.2f}",
        f"{writer.failed:,}",
        f"{exact} / {len(sample)}",
    )


def _aware(value: object) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL server URL")
    parser.add_argument("--step", type=int, default=inactivity.STEP)
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    table = []
    for kind in args.databases.split(","):
        with fresh_database(kind, args.postgres, "inactivity") as url:
            table.append((kind, *run(url, args.players, args.step)))
            print(" | ".join(table[-1]), file=sys.stderr, flush=True)
    header = (
        "database",
        "players",
        "pass s",
        "writes/s before",
        "writes during",
        "longest write wait s",
        "writes refused",
        "read back exact",
    )
    print_table(header, table, args.format)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
