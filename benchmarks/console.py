"""What a console page costs against the API read it shows: time per request on a big ladder.

A ladder of ``--players`` rating rows (100,000 by default) is written straight into a fresh
database (the HTTP benchmark's routine), then the app answers, in process and one request
at a time, each case by the API's JSON read and by the console's page, alternately, with
the worker's cache of read answers off (``RATINGS_READ_CACHE_MB=0``: both do their whole
work every time):

- first page: the leaderboard's top 50 (``/v1/ladders/{id}/leaderboard`` against
  ``/console/ladders/{id}``);
- deep page: 50 entries after a cursor at a random rank in the lower half, a new one per
  request (the rank of the first entry is counted from the rating buckets);
- player: one player by id with their rank (``/v1/ladders/{id}/players/{player}`` against
  the console's search ``?player=``).

It prints the median and 90th percentile per request and the console's median over the
API's. Wall-clock figures of one machine: compare the ratio, not the milliseconds.

    .venv/bin/python benchmarks/console.py [--players 100000] [--requests 200]
        [--database sqlite|postgresql] [--server postgresql://postgres@127.0.0.1:5432]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# This folder holds http.py, which must not shadow the standard library's http.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from benchmarks.databases import fresh_database, http_benchmark, print_table  # noqa: E402

bench = http_benchmark()

LADDER = "bench-console"
PAGE = 50


def _cases(url: str, n: int, requests: int, rng: random.Random) -> dict[str, list[tuple[str, str]]]:
    """Per case, ``requests`` pairs of (API path, console path)."""
    from sqlalchemy import create_engine, text

    from app.domain.cursors import encode_cursor
    from app.storage.engine import normalize_url

    engine = create_engine(normalize_url(url))
    cursors = []
    try:
        with engine.connect() as connection:
            for _ in range(requests):
                row = connection.execute(
                    text(
                        "SELECT conservative, player_id FROM ratings WHERE ladder_id = :ladder"
                        " ORDER BY conservative DESC, player_id LIMIT 1 OFFSET :offset"
                    ),
                    {"ladder": LADDER, "offset": rng.randrange(n // 2, n - PAGE)},
                ).one()
                cursors.append(encode_cursor([row[0], row[1]]))
    finally:
        engine.dispose()
    board = f"/v1/ladders/{LADDER}/leaderboard?limit={PAGE}"
    page = f"/console/ladders/{LADDER}?limit={PAGE}"
    players = [f"q{rng.randrange(n):07d}" for _ in range(requests)]
    return {
        "first page": [(board, page)] * requests,
        "deep page": [(f"{board}&cursor={c}", f"{page}&cursor={c}") for c in cursors],
        "player": [
            (f"/v1/ladders/{LADDER}/players/{p}", f"/console/ladders/{LADDER}?player={p}")
            for p in players
        ],
    }


def _timed(client: Any, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    response = client.get(path)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"{path}: {response.status_code} {response.text[:200]}")
    return elapsed, len(response.content)


def run(args: argparse.Namespace) -> list[list[str]]:
    from fastapi.testclient import TestClient

    from app.config import get_settings
    from app.storage.engine import upgrade

    rng = random.Random(args.seed)
    with fresh_database(args.database, args.server, "console") as url:
        upgrade(url)
        os.environ["RATINGS_DATABASE_URL"] = url
        os.environ["RATINGS_READ_CACHE_MB"] = "0"
        get_settings.cache_clear()
        from app.main import create_app
        from app.services import auth
        from app.storage.engine import SessionLocal

        session = SessionLocal()
        key = auth.create_key(session, name="bench", scope="admin").key
        session.commit()
        session.close()
        with TestClient(create_app()) as client:
            created = client.post(
                "/v1/ladders",
                json={"id": LADDER, "algorithm": "trueskill"},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert created.status_code == 201, created.text
            started = time.perf_counter()
            bench.insert_ratings(url, LADDER, bench.big_ratings(args.players, args.seed))
            print(f"seeded {args.players:,} players in {time.perf_counter() - started:.1f} s")
            rows = []
            for case, pairs in _cases(url, args.players, args.requests, rng).items():
                api: list[float] = []
                console: list[float] = []
                sizes = [0, 0]
                for _ in range(3):  # warm both paths
                    _timed(client, pairs[0][0])
                    _timed(client, pairs[0][1])
                for api_path, console_path in pairs:
                    elapsed, sizes[0] = _timed(client, api_path)
                    api.append(elapsed)
                    elapsed, sizes[1] = _timed(client, console_path)
                    console.append(elapsed)
                rows.append(_row(case, api, console, sizes))
    return rows


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _row(case: str, api: list[float], console: list[float], sizes: list[int]) -> list[str]:
    return [
        case,
        f"{_ms(api, 0.5):.2f}",
        f"{_ms(api, 0.9):.2f}",
        f"{sizes[0]:,}",
        f"{_ms(console, 0.5):.2f}",
        f"{_ms(console, 0.9):.2f}",
        f"{sizes[1]:,}",
        f"{statistics.median(console) / statistics.median(api):.2f}",
    ]


HEADER = [
    "case",
    "API p50 ms",
    "API p90 ms",
    "API bytes",
    "console p50 ms",
    "console p90 ms",
    "console bytes",
    "console / API",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = run(args)
    print(f"{args.database}, {args.players:,} players, {args.requests} requests per case")
    print_table(HEADER, rows, "markdown" if args.markdown else "table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
