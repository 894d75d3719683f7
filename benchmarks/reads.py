"""Reads against the minimal app: leaderboards, players and quality at a game's scale.

    .venv/bin/python benchmarks/reads.py [--players 1000000] [--launch-players 100000]
        [--workers 2] [--connections 64,1] [--seconds 10] [--seed 1]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--format table|markdown]
        [--cases 'player with rank,...'] [--autogroup off|keep]

On a fresh PostgreSQL database (made on ``--postgres`` and dropped afterwards) two ladders:
``big``, ``--players`` rated players with spread ratings (the rows written straight into
``ratings``, as ``benchmarks/http.py`` seeds its big ladder), and ``launch``,
``--launch-players`` players who have each played one 1 v 1 match at the prior, so half sit
at the winners' rating and half at the losers' (TrueSkill's exact values, written the same
way): a game's first day, where an exact rank must count tens of thousands of tied players.
Both are loaded by SQL, so their full rating blocks are then cut as ``ratings ladders
blocks`` cuts them (the service cuts them itself as writes come in). A third, ``launch-api``,
is the same game's first day filled through the API: ``--launch-players`` / 2 one-on-one
matches posted in batches of 5,000, nothing cut by hand (the service cuts what each batch
filled).

``ratings serve`` with ``--workers`` serves them, and wrk (with ``benchmarks/http.py``'s
script) drives each read for ``--seconds`` at each connection count (closed loop: a
connection sends its next request when its answer is in): the leaderboard's first page,
a deep keyset page (cursors at random ranks of the lower half), a random player with
rank, the quality of random 4 v 4 teams and the most balanced split of 8 random players
into two teams (their GET forms), the 50 entries around a random player (``around=``)
and a tier's first page (``tier=``, each of the ladder's four tiers), each also with the
``If-None-Match`` of the answer it would get (fetched once before). The minimal app in
the same run is FastAPI serving, from memory, a body of the same size as the route's
mean answer (``GET /body/{size}``, one route, no database); ``x app`` is the rate's
ratio to it. The CPU columns are the workers' and the PostgreSQL backends' processor
time per request during the timed run, from ``/proc``. The service keeps the bodies it
made (``RATINGS_READ_CACHE_MB``), so a read repeated during a run may cost only its
validator; ``RATINGS_READ_CACHE_MB=0`` in the environment makes every body afresh.

wrk's percentiles are corrected for coordinated omission: an answer slower than twice a
connection's mean interval between requests adds the answers an open-loop client would
have waited for meanwhile, so one stall of a few hundred milliseconds moves a p99 by as
much. ``stall ms`` is the machine's longest stall during each timed run, as a sleeping
process in a session of its own saw it (``benchmarks/scheduling.py``); ``--autogroup
off``, the default, turns the kernel's session groups off for the run when it can (root)
and on again afterwards, since with them this machine left PostgreSQL's backends, in the
database server's own session, unscheduled for seconds under the benchmark's load.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# ``benchmarks/http.py`` shares its name with the standard library's package: this folder
# must not shadow it on the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from benchmarks.databases import http_benchmark  # noqa: E402
from benchmarks.scheduling import StallProbe, autogroup, without_session_groups  # noqa: E402

bench = http_benchmark()

#: The minimal app: a body of the asked size, made once and answered from memory.
MINIMAL_SOURCE = """\
from fastapi import FastAPI, Response

app = FastAPI()
_bodies: dict[int, bytes] = {}


@app.get("/body/{size}")
async def body(size: int) -> Response:
    made = _bodies.get(size)
    if made is None:
        made = _bodies[size] = b"x" * size
    return Response(content=made, media_type="application/json")


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}
"""

BIG = "big"
LAUNCH = "launch"
#: The launch ladder filled through the API (its full blocks cut by the service alone).
LAUNCH_API = "launch-api"


def launch_ratings(n: int, seed: int) -> Iterator[tuple[str, float, float, float]]:
    """``n`` players after one 1 v 1 each at TrueSkill's prior: winners and losers."""
    from app.rating.trueskill import TrueSkill

    model = TrueSkill()
    winner, loser = model.rate_1vs1(model.rating(), model.rating())
    rng = random.Random(seed)
    for i in range(n):
        rating = winner if rng.random() < 0.5 else loser
        yield f"p{i:07d}", rating.mu, rating.sigma, rating.mu - 3.0 * rating.sigma


def cut_blocks(url: str, ladder: str) -> int:
    """What ``ratings ladders blocks`` does after a bulk load: cut every full block."""
    from app.storage import blocks
    from app.storage.engine import get_engine, session_factory

    with session_factory(get_engine(url)).begin() as session:
        return blocks.cut(session=session, ladder_id=ladder)


def deep_cursors(url: str, ladder: str, n: int, count: int, rng: random.Random) -> list[str]:
    """Cursors after random ranks in the lower half (made with the service's encoder)."""
    import psycopg

    from app.domain.cursors import encode_cursor

    cursors = []
    with psycopg.connect(url) as connection:
        for _ in range(count):
            row = connection.execute(
                "SELECT conservative, player_id FROM ratings WHERE ladder_id = %s"
                " ORDER BY conservative DESC, player_id LIMIT 1 OFFSET %s",
                (ladder, rng.randrange(n // 2, n - 100)),
            ).fetchone()
            assert row is not None
            cursors.append(encode_cursor([row[0], row[1]]))
    return cursors


def fill_through_the_api(admin: Any, ladder: str, players: int) -> None:
    """``players`` / 2 one-on-one matches between new players (``p0000000`` beat
    ``p0000001``, and so on), posted in batches of 5,000."""
    step = 5_000
    for start in range(0, players // 2, step):
        bodies = [
            {"teams": [[f"p{2 * i:07d}"], [f"p{2 * i + 1:07d}"]]}
            for i in range(start, min(start + step, players // 2))
        ]
        response = admin.post(f"/v1/ladders/{ladder}/matches/batch", json={"matches": bodies})
        assert response.status_code == 201, response.text[:300]


def paths(url: str, ladder: str, n: int, rng: random.Random) -> dict[str, list[str]]:
    from urllib.parse import quote

    base = f"/v1/ladders/{ladder}"
    prefix = "q" if ladder == BIG else "p"
    player = [f"{base}/players/{prefix}{rng.randrange(n):07d}" for _ in range(2000)]
    quality, matchmaking = [], []
    for _ in range(500):
        ids = [f"{prefix}{i:07d}" for i in rng.sample(range(n), 8)]
        teams = json.dumps([ids[:4], ids[4:]], separators=(",", ":"))
        quality.append(f"{base}/quality?teams={quote(teams)}")
        players = json.dumps(ids, separators=(",", ":"))
        matchmaking.append(f"{base}/matchmaking?players={quote(players)}&teams=2")
    around = [
        f"{base}/leaderboard?around={prefix}{rng.randrange(n):07d}&limit=50" for _ in range(2000)
    ]
    return {
        "first page": [f"{base}/leaderboard"],
        "deep page": [
            f"{base}/leaderboard?cursor={c}" for c in deep_cursors(url, ladder, n, 200, rng)
        ],
        "player with rank": player,
        "4 v 4 quality": quality,
        "8 players into 2 teams": matchmaking,
        "around a player": around,
        "a tier's first page": [f"{base}/leaderboard?tier={tier['name']}" for tier in TIERS],
    }


#: The ladders' tiers: the big ladder's conservative ratings run from about -15 to 35, the
#: launch ladder's sit at two values (about 3.0 and -3.0).
TIERS = [
    {"name": "Diamond", "min": 20.0},
    {"name": "Gold", "min": 10.0},
    {"name": "Silver", "min": 0.0},
    {"name": "Bronze", "min": -1000.0},
]


def timed(
    server: Any, db_url: str | None, connections: int, gets: list[list[str]], seconds: float
) -> dict[str, float]:
    """``gets`` (path and ``If-None-Match``, or "") driven by the HTTP benchmark's wrk for
    ``seconds`` after a second's warm-up, with the CPU time the workers and the database's
    backends spent and the machine's longest stall meanwhile (:class:`StallProbe`)."""
    requests = [["GET", path, "", tag] for path, tag in gets]
    bench._wrk(server.base_url, "", connections, requests, 1.0)
    workers = server.worker_pids()
    backends = bench.postgres_backends(db_url)
    server_before, db_before = bench.cpu_seconds(workers), bench.cpu_seconds(backends)
    probe = StallProbe(seconds)
    figures = bench._wrk(server.base_url, "", connections, requests, seconds)
    stall = probe.worst()
    count = max(1, int(figures["count"]))
    server_cpu = bench.cpu_delta(server_before, bench.cpu_seconds(workers))
    # Backends the pool opened during the run count from zero.
    db_after = bench.cpu_seconds(bench.postgres_backends(db_url))
    db_cpu = bench.cpu_delta(db_before, db_after) if db_url else 0.0
    return {
        "rate": figures["count"] / figures["wall"],
        "p50": figures["p50"] * 1000,
        "p99": figures["p99"] * 1000,
        "server_cpu": server_cpu * 1000 / count,
        "db_cpu": db_cpu * 1000 / count,
        "errors": count - figures["statuses"].get("2xx", 0),
        "stall": stall,
    }


def prefetch(base_url: str, key: str, cases: dict[str, list[str]]) -> dict[str, Any]:
    """Each path's answer once: its ETag, and each case's mean body size."""
    import httpx

    tags: dict[str, str] = {}
    sizes: dict[str, int] = {}
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as http:
        for case, listed in cases.items():
            total = 0
            for path in listed:
                response = http.get(path)
                if response.status_code != 200:
                    raise RuntimeError(f"{path}: {response.status_code} {response.text[:200]}")
                tags[path] = response.headers["etag"]
                total += len(response.content)
            sizes[case] = max(1, round(total / len(listed)))
    return {"tags": tags, "sizes": sizes}


def run(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    import httpx

    name = f"ratings_reads_{int(time.time())}"
    url = bench.create_postgres(args.postgres, name)
    rows: list[dict[str, Any]] = []
    try:
        key = bench.prepare_database(url)
        # 20 pooled connections a worker (and as many again in overflow): two workers stay
        # within PostgreSQL's 100 connections.
        server = bench.service_server(url, bench.free_port(), args.workers, workdir / "s.log", 20)
        minimal_dir = workdir / "minimal"
        minimal_dir.mkdir()
        (minimal_dir / "ratings_ceiling.py").write_text(MINIMAL_SOURCE)
        minimal = bench.ceiling_server(
            minimal_dir, bench.free_port(), args.workers, workdir / "m.log"
        )
        server.start()
        minimal.start()
        try:
            with httpx.Client(
                base_url=server.base_url,
                headers={"Authorization": f"Bearer {key}"},
                timeout=300.0,
            ) as admin:
                for ladder in (BIG, LAUNCH, LAUNCH_API):
                    body = {"id": ladder, "algorithm": "trueskill", "tiers": TIERS}
                    made = admin.post("/v1/ladders", json=body)
                    assert made.status_code == 201, made.text
                started = time.monotonic()
                fill_through_the_api(admin, LAUNCH_API, args.launch_players)
                print(
                    f"{LAUNCH_API} filled through the API in {time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                )
            started = time.monotonic()
            bench.insert_ratings(url, BIG, bench.big_ratings(args.players, args.seed))
            bench.insert_ratings(url, LAUNCH, launch_ratings(args.launch_players, args.seed))
            print(f"seeded in {time.monotonic() - started:.0f} s", file=sys.stderr)
            started = time.monotonic()
            cut = {ladder: cut_blocks(url, ladder) for ladder in (BIG, LAUNCH)}
            print(f"cut {cut} rating blocks in {time.monotonic() - started:.1f} s", file=sys.stderr)
            rng = random.Random(args.seed)
            ladders = (
                (BIG, args.players),
                (LAUNCH, args.launch_players),
                (LAUNCH_API, args.launch_players),
            )
            for ladder, n in ladders:
                cases = paths(url, ladder, n, rng)
                if args.cases:
                    cases = {k: v for k, v in cases.items() if k in args.cases.split(",")}
                seen = prefetch(server.base_url, key, cases)
                for connections in args.connections:
                    for case, listed in cases.items():
                        size = seen["sizes"][case]
                        app = timed(
                            minimal, None, connections, [[f"/body/{size}", ""]], args.seconds
                        )
                        for conditional in (False, True):
                            gets = [[p, seen["tags"][p] if conditional else ""] for p in listed]
                            got = timed(server, url, connections, gets, args.seconds)
                            row = {
                                "ladder": f"{ladder} ({n:,})",
                                "connections": connections,
                                "case": case + (" (If-None-Match)" if conditional else ""),
                                "bytes": size,
                                **got,
                                "app_rate": app["rate"],
                                "app_cpu": app["server_cpu"],
                                "x_app": got["rate"] / app["rate"],
                            }
                            rows.append(row)
                            print(json.dumps(row), file=sys.stderr)
        finally:
            server.stop()
            minimal.stop()
    finally:
        bench.drop_postgres(args.postgres, name)
    return rows


def table(rows: list[dict[str, Any]], markdown: bool) -> str:
    head = [
        "ladder",
        "conn",
        "case",
        "body B",
        "req/s",
        "p50 ms",
        "p99 ms",
        "server CPU ms",
        "db CPU ms",
        "app req/s",
        "app CPU ms",
        "x app",
        "stall ms",
    ]
    body = [
        [
            r["ladder"],
            str(r["connections"]),
            r["case"],
            f"{r['bytes']:,}",
            f"{r['rate']:,.0f}",
            f"{r['p50']:.1f}",
            f"{r['p99']:.1f}",
            f"{r['server_cpu']:.2f}",
            f"{r['db_cpu']:.2f}",
            f"{r['app_rate']:,.0f}",
            f"{r['app_cpu']:.2f}",
            f"{r['x_app']:.2f}" + (f" ({r['errors']} errors)" if r["errors"] else ""),
            f"{r['stall']:.0f}",
        ]
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in body])
    widths = [max(len(cells[i]) for cells in [head, *body]) for i in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        for cells in [head, *body]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--launch-players", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", default="64,1")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    parser.add_argument(
        "--cases", help="comma-separated cases to run (e.g. 'player with rank'); default: all"
    )
    parser.add_argument(
        "--autogroup",
        choices=("off", "keep"),
        default="off",
        help="turn the kernel's session groups off for the run (when root) or keep them",
    )
    args = parser.parse_args()
    args.connections = [int(c) for c in args.connections.split(",")]
    with (
        without_session_groups(args.autogroup == "off") as groups,
        tempfile.TemporaryDirectory(prefix="ratings-reads-") as scratch,
    ):
        rows = run(args, Path(scratch))
    print(f"{bench.machine()}, autogroup {groups} (now {autogroup()})")
    print(table(rows, args.format == "markdown"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
