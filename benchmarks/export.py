"""Export benchmark: the memory and pace of ``GET .../export/ratings`` and ``.../export/matches``
on a ladder of a million players and a million matches, beside the same exports of a small
ladder: an export's memory must not grow with the ladder.

    .venv/bin/python benchmarks/export.py [--players 1000000] [--matches 1000000]
        [--small 10000] [--databases sqlite,postgresql]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--format table|markdown]

Each database is made fresh; the big ladder's rating rows and match rows (1 v 1s between
its players, each a stored request as recording writes it) are written straight into
their tables, the small ladder's likewise. The service then runs in a uvicorn process of
its own (one worker), and each export is read to its end over HTTP, counting its lines.
The table gives the lines, the seconds, lines a second, and the server's resident memory:
before the export, and the most it reached during it (read from ``/proc`` every 20 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from app.domain.documents.ladders import LadderCreate  # noqa: E402
from app.services import auth, ladders  # noqa: E402
from app.storage.engine import dispose_engines  # noqa: E402
from benchmarks.databases import (  # noqa: E402
    big_ladder,
    fresh_database,
    http_benchmark,
    print_table,
)

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"
BIG, SMALL = "big", "small"
MATCH_COLUMNS = (
    "ladder_id, match_id, body_hash, played_at, recorded_at, request, result, win_probabilities"
)


def match_rows(ladder: str, matches: int, players: int) -> Iterator[tuple[object, ...]]:
    """1 v 1s between random players of the ladder, an hour apart, as recording stores them."""
    rng = random.Random(11)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(matches):
        a, b = rng.sample(range(players), 2)
        played = start + timedelta(hours=n)
        request = {
            "teams": [[f"q{a:07d}"], [f"q{b:07d}"]],
            "ranks": None,
            "scores": [rng.randint(0, 5), rng.randint(0, 5)],
            "weights": None,
            "played_at": played.isoformat(),
            "meta": None,
        }
        yield (
            ladder,
            f"m{n}",
            "0" * 64,
            played,
            played,
            json.dumps(request),
            "{}",
            json.dumps([0.5, 0.5]),
        )


def insert_matches(url: str, ladder: str, matches: int, players: int) -> None:
    rows = match_rows(ladder, matches, players)
    if url.startswith("sqlite"):
        import sqlite3

        connection = sqlite3.connect(url.split("///", 1)[1])
        with connection:
            connection.executemany(
                f"INSERT INTO matches ({MATCH_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (lad, mid, digest, p.isoformat(), r.isoformat(), req, res, wp)
                    for lad, mid, digest, p, r, req, res, wp in rows  # type: ignore[misc]
                ),
            )
        connection.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        with (
            connection.cursor() as cursor,
            cursor.copy(f"COPY matches ({MATCH_COLUMNS}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        connection.execute("VACUUM ANALYZE matches")


def fill(url: str, players: int, matches: int, small: int) -> str:
    """Both ladders filled; an admin key."""
    sessions = big_ladder(url, LadderCreate(id=BIG, algorithm="trueskill"), players)
    insert_matches(url, BIG, matches, players)
    with sessions() as session:
        ladders.create_ladder(
            session=session,
            body=LadderCreate(id=SMALL, algorithm="trueskill"),
            now=datetime.now(UTC),
        )
        key = auth.create_key(session, name="bench", scope="admin").key
        session.commit()
    http = http_benchmark()
    http.insert_ratings(url, SMALL, http.big_ratings(small, 2))
    insert_matches(url, SMALL, small, small)
    dispose_engines()
    return key


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def measure(base: str, key: str, pid: int, path: str) -> tuple[int, float, int, int]:
    """Lines, seconds, resident KiB before and the most during."""
    before = rss_kib(pid)
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_kib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    lines = 0
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.stream("GET", f"{base}{path}", headers=headers, timeout=600) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            lines += chunk.count(b"\n")
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    return lines, seconds, before, peak


def run(kind: str, url: str, players: int, matches: int, small: int) -> list[tuple[str, ...]]:
    from tests.console.demo import served

    key = fill(url, players, matches, small)
    rows = []
    with served(url) as base:
        port = base.rsplit(":", 1)[1]
        pid = int(
            subprocess.run(
                ["pgrep", "-f", f"uvicorn app.main:app --port {port}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()[0]
        )
        for ladder in (SMALL, BIG):
            for what in ("ratings", "matches"):
                lines, seconds, before, peak = measure(
                    base, key, pid, f"/v1/ladders/{ladder}/export/{what}"
                )
                rows.append(
                    (
                        kind,
                        what,
                        f"{lines:,}",
                        f"{seconds:.1f}",
                        f"{lines / seconds:,.0f}",
                        f"{before / 1024:.0f}",
                        f"{peak / 1024:.0f}",
                    )
                )
    dispose_engines()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--matches", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    os.environ.setdefault("RATINGS_LOG_LEVEL", "warning")
    rows: list[tuple[str, ...]] = []
    for kind in args.databases.split(","):
        with fresh_database(kind, args.postgres, "export") as url:
            rows += run(kind, url, args.players, args.matches, args.small)
    header = ("database", "export", "lines", "s", "lines/s", "RSS before MiB", "RSS peak MiB")
    print_table(header, rows, args.format)
    return 0


if __name__ == "__main__":
    sys.exit(main())
