"""Placement benchmark: the leaderboard and ranks of a ladder of many players, some of them
provisional.

    .venv/bin/python benchmarks/placement.py [--players 1000000] [--databases sqlite,postgresql]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--shares 0,5,50,99] [--reads 200]
        [--format table|markdown]

Each database is made fresh (a temporary SQLite file; a PostgreSQL database created on the
server and dropped after); a TrueSkill ladder gets ``--players`` rated players of one match
each, written straight into ``ratings`` (as ``benchmarks/http.py`` seeds its big ladder).
For each share of ``--shares`` (per cent), that share of the players (spread over the
ratings) is made provisional: ``placement_matches`` 1, and their one match counted before
the current season (``season_base``), and the ladder's rating buckets and blocks are
counted again (as a ``PATCH`` of ``placement_matches`` does, timed: "recount"); share 0
is the ladder without placement. 99 % is the ladder right after a season opens, when few
have placed again. Each read is a service call on one connection (no HTTP): the leaderboard's
first page, a page from the middle (a cursor at a ranked player about half way down), a
ranked player's answer with its rank (players spread over the leaderboard), each
``--reads`` times; with ``--tiers percentile`` (four tiers by percentile) also the first
page of one tier; the table gives p50 and p99 in milliseconds.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.orm import Session

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.domain.cursors import encode_cursor  # noqa: E402
from app.domain.documents.ladders import LadderCreate, Tier  # noqa: E402
from app.domain.documents.players import LeaderboardPage  # noqa: E402
from app.services import ladders, players  # noqa: E402
from app.storage import blocks  # noqa: E402
from app.storage.engine import dispose_engines, get_engine  # noqa: E402
from benchmarks.databases import big_ladder, fresh_database, print_table, without_timeout  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"
LADDER = "bench"
PAGE = 50


def _ms(samples: list[float], q: float) -> str:
    ordered = sorted(samples)
    return f"{1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.2f}"


def _timed(fn: Callable[[int], object], reads: int) -> list[float]:
    samples = []
    for n in range(reads):
        start = time.perf_counter()
        fn(n)
        samples.append(time.perf_counter() - start)
    return samples


def _analyze(url: str) -> None:
    """Fresh statistics after the share changed (as autovacuum would give them)."""
    engine = get_engine(url).execution_options(isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        if url.startswith("postgresql"):
            connection.exec_driver_sql("VACUUM ANALYZE ratings")
        else:
            connection.exec_driver_sql("ANALYZE")


def _measure(
    session: Session, ranked: list[tuple[float, str]], reads: int, rng: random.Random
) -> dict[str, list[float] | None]:
    """The reads' times, after checking what they answer against ``ranked`` (the ranked
    players in leaderboard order)."""
    ladder = ladders.get_ladder(session=session, ladder_id=LADDER)
    middle = ranked[len(ranked) // 2]
    chosen = [ranked[rng.randrange(len(ranked))][1] for _ in range(reads)]
    cursor = encode_cursor([middle[0], middle[1]])

    def page(cursor: str | None, tier: str | None = None) -> LeaderboardPage:
        return players.leaderboard(
            session=session, ladder=ladder, limit=PAGE, cursor=cursor, min_matches=0, tier=tier
        )

    first = page(None)
    assert [e.player_id for e in first.entries] == [p for _, p in ranked[:PAGE]]
    found = players.get_player(session=session, ladder=ladder, player_id=middle[1])
    assert found.rank == len(ranked) // 2 + 1, (found.rank, len(ranked) // 2 + 1)
    tier = None
    if ladder.tiers:  # the top tenth, less the top hundredth: Diamond starts at rank N/100 + 1
        diamond = page(None, "Diamond").entries
        assert diamond[0].rank == len(ranked) // 100 + 1, (diamond[0].rank, len(ranked))
        tier = _timed(lambda _: page(None, "Diamond"), reads)
    return {
        "tier": tier,
        "first": _timed(lambda _: page(None), reads),
        "deep": _timed(lambda _: page(cursor), reads),
        "player": _timed(
            lambda n: players.get_player(session=session, ladder=ladder, player_id=chosen[n]),
            reads,
        ),
    }


def run(
    url: str, players_n: int, shares: list[int], reads: int, tiers: list[Tier] | None
) -> list[list[str]]:
    body = LadderCreate(id=LADDER, algorithm="trueskill", tiers=tiers)
    sessions = big_ladder(url, body, players_n)
    rows: list[list[str]] = []
    rng = random.Random(7)
    for share in shares:
        placement = 1 if share else 0
        with sessions() as session:
            without_timeout(session, url)
            session.execute(
                text(
                    "UPDATE ratings SET season_base = CASE WHEN"
                    " CAST(substr(player_id, 2) AS INTEGER) % 100 < :share THEN 1 ELSE 0 END"
                ),
                {"share": share},
            )
            session.execute(
                text("UPDATE ladders SET placement_matches = :p WHERE id = :id"),
                {"p": placement, "id": LADDER},
            )
            # As a PATCH of placement_matches counts the ladder again, timed.
            start = time.perf_counter()
            blocks.recount(session, ladder_id=LADDER)
            session.commit()
            recount = time.perf_counter() - start
        _analyze(url)
        with sessions() as session:
            ranked = [
                (float(c), str(p))
                for c, p in session.execute(
                    text(
                        "SELECT conservative, player_id FROM ratings"
                        " WHERE ladder_id = :id AND matches - season_base >= :p"
                        " ORDER BY conservative DESC, player_id"
                    ),
                    {"id": LADDER, "p": placement},
                )
            ]
            results = _measure(session, ranked, reads, rng)
            session.rollback()
        rows.append(
            [
                f"{share} %",
                f"{len(ranked):,}",
                f"{recount:.1f}",
                *(_cell(results[name]) for name in ("first", "deep", "player", "tier")),
            ]
        )
    dispose_engines()
    return rows


def _cell(samples: list[float] | None) -> str:
    return "-" if samples is None else f"{_ms(samples, 0.5)} / {_ms(samples, 0.99)}"


#: ``--tiers percentile``: the top hundredth, the next nine, the upper half, the rest.
PERCENTILE_TIERS = [
    Tier(name="Master", min_percentile=99.0),
    Tier(name="Diamond", min_percentile=90.0),
    Tier(name="Gold", min_percentile=50.0),
    Tier(name="Silver", min_percentile=0.0),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL server URL")
    parser.add_argument("--shares", default="0,5,50,99")
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--tiers", choices=("none", "percentile"), default="none")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    shares = [int(s) for s in args.shares.split(",")]
    table: list[list[str]] = []
    for kind in args.databases.split(","):
        with fresh_database(kind, args.postgres, "placement") as url:
            tiers = PERCENTILE_TIERS if args.tiers == "percentile" else None
            for row in run(url, args.players, shares, args.reads, tiers):
                table.append([kind, *row])
                print(" | ".join(table[-1]), file=sys.stderr, flush=True)
    header = (
        "database",
        "provisional",
        "ranked",
        "recount s",
        "first page p50 / p99 ms",
        "middle page p50 / p99 ms",
        "player's rank p50 / p99 ms",
        "a tier's first page p50 / p99 ms",
    )
    print_table(header, table, args.format)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
