"""HTTP benchmark: the service over loopback, against a ceiling of a minimal FastAPI app plus
the database's floor.

    .venv/bin/python benchmarks/http.py [--quick] [--databases sqlite,postgresql]
        [--workers 1,2] [--connections 16] [--seed-via auto|batch|insert]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--format table|markdown]
    .venv/bin/python benchmarks/http.py --launch [--launch-connections 16,64] [--workers 2]

For each database (a fresh SQLite file; a fresh PostgreSQL database made on the server
given by ``--postgres`` and dropped afterwards) and each worker count, ``ratings serve``
runs as a subprocess on a free loopback port. A client process (asyncio and httpx,
``--connections`` keep-alive connections) drives it and measures every request:

- single-match POSTs: 1 v 1, 4 v 4 and an 8-player free-for-all, players drawn from a pool
  of 10,000 with Zipf-like repeats (a few players play much more often than most);
- batch ingest (``POST .../matches/batch``) when the route exists, skipped otherwise;
- on a ladder of 1,000,000 rated players (100,000 with ``--quick``), seeded through the
  batch route when present (``--seed-via auto``) or else with one bulk INSERT of rating
  rows: the leaderboard's first page, a deep keyset page (a cursor at a random rank in
  the lower half), a player with rank, and the quality of random 4 v 4 teams.

``--launch`` runs launch day on PostgreSQL instead, alone: single 1 v 1 POSTs between
players drawn uniformly from 10,000 (most of them new at first), each run on a new
database made for it, once as it comes (no statistics until autovacuum's first pass) and
once with an ``ANALYZE`` of the whole database at the start and every 2 s beside it (the
statistics always fresh), for each of ``--launch-connections`` and the largest of
``--workers``. ``x gathered`` is the rate on the new database over the rate with
statistics.

The minimal app (``CEILING_SOURCE`` below) is FastAPI served the same way by uvicorn,
parsing the same match body with the same pydantic schema (``MatchCreate``) and answering
without a database (the "ceiling POST" rows). ``x app`` is each rate's ratio to the minimal
app's rate for the same worker count (for reads, to its 1 v 1 rate). After each run the
peak resident memory (``VmHWM``) and the current one (``VmRSS``) of every worker process is
read from ``/proc``.

The database's floor (the "floor" rows), for each database before the service runs: the
first matches of each shape that the service runs post (1,024 timed after 128 untimed with
``--quick``, 3,200 after 320 otherwise) are recorded by the service's own
``record_group``, in process, 16 a transaction (what a worker's group commit writes at
most), on a fresh database migrated by the service's migrations, with a ladder per shape
whose players are all rated already. Every statement the driver is handed while
``key_and_ladder``, ``lock_players`` and ``write_recorded`` run (the key, ladder and
recorded match_ids in one statement, the players' row locks, and the write of matches,
participants, history and ratings: three statements on PostgreSQL; on SQLite the service's
``BEGIN IMMEDIATE``, the next seqs and one executemany per table) is taken at the cursor,
text and parameters as SQLAlchemy converted them. A copy of that database made before the
recording then gets the same transactions through the bare driver alone (psycopg 3;
sqlite3, opened with the service's pragmas), on one connection, rows fetched, a commit
after each transaction, and must end with the same rows as the service's. Only that replay
is timed: the database's and the driver's cost, none of the service's Python. Its ``server
CPU`` column is the CPU time of the process running the driver per match (on SQLite
SQLite's own work is in it), ``db CPU`` the PostgreSQL backend's, and its rate one
connection's, waiting for each answer.

The truer ceiling of a single-match POST (``ceiling/s``, and ``x ceiling``: the rate's
ratio to it) adds the two. With ``a`` the minimal app's server CPU per request (same worker
count and shape), ``c`` and ``d`` the floor's CPU per match in the driver's process and in
PostgreSQL (0 on SQLite), ``W`` the workers and ``N`` the machine's cores::

    ceiling/s = min(W / (a + c), N / (a + c + d))

A worker is one process doing at most a core's work, the app's and the driver's; the
workers and the database share the ``N`` cores. On SQLite, where one writer at a time holds
the database for its whole transaction, the ceiling is also at most the floor's own rate.
Left out, as a ceiling should: the load generator's and the kernel's work outside these
processes, and everything the service does beyond the minimal app and the floor (rating,
result documents, SQLAlchemy, grouping, new players' inserts), which ``x ceiling`` shows.
The batch row has no such ceiling: the minimal app has no batch route and a batch is one
transaction of 100 matches.

The load generator shares the machine's cores with the server and the database. With wrk
installed (``--load-generator auto``, the default, or ``wrk``) it drives every case for
``--seconds`` after a short warm-up, two threads over the same connections, and costs the
machine a few percent of a core; the Python client costs about a millisecond of CPU per
request, so with it the ceiling row is the client's own limit rather than the minimal
app's (``--load-generator python`` measures a fixed count of requests that way).
The CPU columns are the CPU time the server's workers, and the PostgreSQL backends
serving them, spent per request (per match for batches and the floor) during the timed
requests: on a shared machine they move far less with the load than rates and latencies do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# This file shares its name with the standard library's ``http`` package, which httpx and
# uvicorn import (lazily, below): its own folder must not shadow that on the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: The ceiling: FastAPI parsing the match body with the service's own schema, no database.
CEILING_SOURCE = """\
from fastapi import FastAPI, Response

from app.domain.documents.matches import MatchCreate

app = FastAPI()


@app.post("/v1/ladders/{ladder}/matches", status_code=201)
def record_match(ladder: str, body: MatchCreate) -> Response:
    return Response(content=b'{"ok":true}', status_code=201, media_type="application/json")


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
"""

POOL = 10_000
#: Zipf exponent of the player pool: the most active player plays ~1,000 times as often
#: as the least active one.
ZIPF_S = 0.75
MODES = {"1v1": (2, 1), "4v4": (2, 4), "ffa8": (8, 1)}
BIG_LADDER = "bench-big"


# -- the client process -----------------------------------------------------------------------


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    index = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[index]


async def _drive(spec: dict[str, Any]) -> dict[str, Any]:
    import httpx

    connections = int(spec["connections"])
    headers = {"Authorization": f"Bearer {spec['key']}", "Content-Type": "application/json"}
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    sample_error = ""
    # One client per connection: httpx's pool serialises a lot of bookkeeping across the
    # connections of one client, which halves the rate at 16 connections.
    clients = [
        httpx.AsyncClient(
            base_url=spec["base_url"],
            headers=headers,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=120.0,
        )
        for _ in range(connections)
    ]

    async def run(requests: list[list[Any]], timed: bool) -> None:
        iterator = iter(requests)

        async def worker(client: httpx.AsyncClient) -> None:
            nonlocal sample_error
            for method, path, body in iterator:
                content = body.encode() if body is not None else None
                started = time.perf_counter()
                response = await client.request(method, path, content=content)
                elapsed = time.perf_counter() - started
                if timed:
                    latencies.append(elapsed)
                    statuses[response.status_code] += 1
                if response.status_code >= 300 and not sample_error:
                    sample_error = f"{response.status_code} {response.text[:300]}"

        await asyncio.gather(*(worker(client) for client in clients))

    try:
        await run(spec["warmup"], timed=False)
        started = time.perf_counter()
        await run(spec["requests"], timed=True)
        wall = time.perf_counter() - started
    finally:
        for client in clients:
            await client.aclose()
    latencies.sort()
    return {
        "count": len(latencies),
        "wall": wall,
        "p50": _percentile(latencies, 0.50),
        "p95": _percentile(latencies, 0.95),
        "p99": _percentile(latencies, 0.99),
        "statuses": {str(k): v for k, v in statuses.items()},
        "error": sample_error,
    }


def client_main() -> int:
    spec = json.load(sys.stdin)
    json.dump(asyncio.run(_drive(spec)), sys.stdout)
    return 0


# -- servers ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _memory_kb(pid: int) -> tuple[int, int]:
    hwm = rss = 0
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return hwm, rss


@dataclass
class Server:
    """A uvicorn server subprocess (one process, or a supervisor with worker children)."""

    command: list[str]
    env: dict[str, str]
    port: int
    workers: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        import httpx

        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env, cwd=ROOT, stdout=log, stderr=log
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: see {self.log}\n{self.log.read_text()[-2000:]}")
            try:
                healthy = httpx.get(self.base_url + "/healthz", timeout=1).status_code == 200
                if healthy and len(self.worker_pids()) >= self.workers:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not start: see {self.log}")

    def worker_pids(self) -> list[int]:
        assert self.process is not None
        if self.workers == 1:
            return [self.process.pid]
        return [
            pid for pid in _children(self.process.pid) if "resource_tracker" not in _cmdline(pid)
        ]

    def memory(self) -> list[tuple[int, int]]:
        return [_memory_kb(pid) for pid in self.worker_pids()]

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def service_server(url: str, port: int, workers: int, log: Path, connections: int) -> Server:
    env = dict(os.environ)
    env.update(
        RATINGS_DATABASE_URL=url,
        RATINGS_LOG_LEVEL="warning",
        RATINGS_HOST="127.0.0.1",
        # A pool as large as the connections: no connection is opened beyond the pool's
        # size and closed again during a run, so every backend's CPU time is counted.
        RATINGS_POOL_SIZE=str(max(10, connections)),
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [
        str(Path(sys.executable).with_name("ratings")),
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    return Server(command=command, env=env, port=port, workers=workers, log=log)


def ceiling_server(directory: Path, port: int, workers: int, log: Path) -> Server:
    (directory / "ratings_ceiling.py").write_text(CEILING_SOURCE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(directory), str(ROOT)])
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "ratings_ceiling:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    return Server(command=command, env=env, port=port, workers=workers, log=log)


# -- workloads --------------------------------------------------------------------------------


class Zipf:
    """Player indices 0..n-1 drawn with probability proportional to 1 / (i + 1) ** s."""

    def __init__(self, n: int, s: float, rng: random.Random) -> None:
        weights = [1.0 / (i + 1) ** s for i in range(n)]
        total = 0.0
        self.cumulative = []
        for weight in weights:
            total += weight
            self.cumulative.append(total)
        self.n = n
        self.rng = rng

    def distinct(self, k: int) -> list[int]:
        import bisect

        chosen: list[int] = []
        while len(chosen) < k:
            x = self.rng.random() * self.cumulative[-1]
            index = min(bisect.bisect_left(self.cumulative, x), self.n - 1)
            if index not in chosen:
                chosen.append(index)
        return chosen


def match_bodies(mode: str, count: int, prefix: str, seed: int) -> list[dict[str, Any]]:
    teams_n, size = MODES[mode]
    rng = random.Random(seed)
    zipf = Zipf(POOL, ZIPF_S, rng)
    bodies = []
    for n in range(count):
        players = [f"p{index:05d}" for index in zipf.distinct(teams_n * size)]
        teams = [players[j * size : (j + 1) * size] for j in range(teams_n)]
        ranks = list(range(1, teams_n + 1))
        rng.shuffle(ranks)
        bodies.append({"match_id": f"{prefix}-{n}", "teams": teams, "ranks": ranks})
    return bodies


def post_requests(path: str, bodies: list[dict[str, Any]]) -> list[list[Any]]:
    return [["POST", path, json.dumps(body, separators=(",", ":"))] for body in bodies]


# -- databases and seeding --------------------------------------------------------------------


def create_postgres(server: str, name: str, template: str | None = None) -> str:
    """A new database ``name`` on ``server`` (a copy of the database ``template`` if given,
    which nobody may be connected to); returns its URL."""
    import psycopg

    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"{copy}')
    return f"{server}/{name}"


def drop_postgres(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def prepare_database(url: str) -> str:
    """Migrate ``url`` to head and make an admin key; returns the key."""
    from app.services import auth
    from app.storage.engine import dispose_engines, get_engine, session_factory, upgrade

    upgrade(url)
    session = session_factory(get_engine(url))()
    try:
        key = auth.create_key(session, name="bench", scope="admin").key
        session.commit()
    finally:
        session.close()
        dispose_engines()
    return key


def big_ratings(n: int, seed: int) -> Iterator[tuple[str, float, float, float]]:
    rng = random.Random(seed)
    for i in range(n):
        mu = rng.gauss(25.0, 5.0)
        sigma = rng.uniform(1.0, 25.0 / 3.0)
        yield f"q{i:07d}", mu, sigma, mu - 3.0 * sigma


def seed_by_insert(url: str, n: int, seed: int) -> None:
    """The big ladder's rating rows straight into ``ratings`` (:func:`insert_ratings`)."""
    insert_ratings(url, BIG_LADDER, big_ratings(n, seed))


def insert_ratings(url: str, ladder: str, rows: Iterator[tuple[str, float, float, float]]) -> None:
    """Rating rows (player id, mu, sigma, conservative; one match each) straight into
    ``ratings`` of ``ladder``: COPY on PostgreSQL, one executemany on SQLite."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    if url.startswith("sqlite"):
        import sqlite3

        path = url.split("///", 1)[1]
        connection = sqlite3.connect(path)
        with connection:
            connection.executemany(
                "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches,"
                " last_played_at, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
                (
                    (ladder, pid, mu, sigma, cons, now.isoformat(), now.isoformat())
                    for pid, mu, sigma, cons in rows
                ),
            )
        connection.execute("ANALYZE")
        connection.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        with (
            connection.cursor() as cursor,
            cursor.copy(
                "COPY ratings (ladder_id, player_id, mu, sigma, conservative, matches,"
                " last_played_at, updated_at) FROM STDIN"
            ) as copy,
        ):
            for pid, mu, sigma, cons in rows:
                copy.write_row((ladder, pid, mu, sigma, cons, 1, now, now))
        # What autovacuum would do soon after a load this size: statistics and the
        # visibility map that index-only scans rely on.
        connection.execute("VACUUM ANALYZE ratings")


def seed_by_batch(base_url: str, key: str, n: int, seed: int, batch: int) -> None:
    """Free-for-alls of 8 new players each through the batch route, ``batch`` per request."""
    import httpx

    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {key}"}
    path = f"/v1/ladders/{BIG_LADDER}/matches/batch"
    with httpx.Client(base_url=base_url, headers=headers, timeout=600) as client:
        player = 0
        number = 0
        while player < n:
            matches = []
            while player < n and len(matches) < batch:
                size = min(8, n - player)
                if size < 2:
                    size = 2
                    player -= 1
                teams = [[f"q{player + j:07d}"] for j in range(size)]
                player += size
                ranks = list(range(1, size + 1))
                rng.shuffle(ranks)
                matches.append({"match_id": f"seed-{number}", "teams": teams, "ranks": ranks})
                number += 1
            response = client.post(path, json={"matches": matches})
            if response.status_code != 201:
                raise RuntimeError(f"batch seeding: {response.status_code} {response.text[:300]}")


def deep_cursors(url: str, n: int, count: int, seed: int) -> list[str]:
    """Cursors after random ranks in the lower half of the big ladder.

    The cursor is opaque to clients; the benchmark builds it with the service's own encoder
    from the row at that rank, instead of walking hundreds of pages to get there.
    """
    from sqlalchemy import create_engine, text

    from app.domain.cursors import encode_cursor
    from app.storage.engine import normalize_url

    rng = random.Random(seed)
    engine = create_engine(normalize_url(url))
    cursors = []
    try:
        with engine.connect() as connection:
            for _ in range(count):
                offset = rng.randrange(n // 2, n - 100)
                row = connection.execute(
                    text(
                        "SELECT conservative, player_id FROM ratings WHERE ladder_id = :ladder"
                        " ORDER BY conservative DESC, player_id LIMIT 1 OFFSET :offset"
                    ),
                    {"ladder": BIG_LADDER, "offset": offset},
                ).one()
                cursors.append(encode_cursor([row[0], row[1]]))
    finally:
        engine.dispose()
    return cursors


# -- one measured case ------------------------------------------------------------------------


@dataclass
class Row:
    database: str
    workers: int
    case: str
    count: int = 0
    rate: float = math.nan
    unit: str = "req/s"
    p50: float = math.nan
    p95: float = math.nan
    p99: float = math.nan
    ratio: float = math.nan
    ceiling: float = math.nan
    server_cpu: float = math.nan
    db_cpu: float = math.nan
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


#: Drives the requests with wrk for ``seconds`` each (``--load-generator wrk``) instead of
#: the Python client; set by ``main``.
WRK: dict[str, float] = {}

#: wrk's script: each of its threads cycles through the requests of a file (one per line:
#: method, path, body and an ``If-None-Match`` to send, separated by tabs), thread ``i``
#: of ``T`` taking requests ``i, i + T, ...``. Past the end of the list the match ids get
#: a prefix per round, so every POSTed match is new. ``done`` prints the figures as one JSON line.
WRK_SCRIPT = r"""
local counter = 1
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  requests = {}
  for line in io.lines(args[1]) do
    local method, path, body, tag = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    requests[#requests + 1] = {method, path, body, tag}
  end
  step = tonumber(args[2])
  headers = {["Authorization"] = "Bearer " .. args[3], ["Content-Type"] = "application/json"}
  index = id - 1
end

function request()
  local n = #requests
  local r = requests[index % n + 1]
  local round = math.floor(index / n)
  index = index + step
  local body = r[3]
  if body == "" then
    body = nil
  elseif round > 0 then
    body = (body:gsub('"match_id":"', '"match_id":"r' .. round .. '-'))
  end
  if r[4] ~= "" then
    return wrk.format(r[1], r[2], {["Authorization"] = headers["Authorization"],
      ["Content-Type"] = headers["Content-Type"], ["If-None-Match"] = r[4]}, body)
  end
  return wrk.format(r[1], r[2], headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"p50":%d,"p95":%d,"p99":%d,"status_errors":%d,' ..
    '"socket_errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
"""


def wrk_threads(connections: int) -> int:
    """wrk's threads: one per core here, never more than the connections."""
    return max(1, min(2, connections))


def _wrk(
    base_url: str, key: str, connections: int, requests: list[list[Any]], seconds: float
) -> dict[str, Any]:
    """Drive ``requests`` (method, path, body and optionally an ``If-None-Match``) with wrk
    for ``seconds``: two threads (one per core here), ``connections`` keep-alive
    connections, each sending its next request as soon as the previous answer is in (a
    closed loop, like the Python client)."""
    threads = wrk_threads(connections)
    with tempfile.TemporaryDirectory(prefix="ratings-wrk-") as scratch:
        script = Path(scratch) / "requests.lua"
        script.write_text(WRK_SCRIPT)
        listing = Path(scratch) / "requests.tsv"
        listing.write_text(
            "".join(
                f"{request[0]}\t{request[1]}\t{request[2] or ''}\t"
                f"{request[3] if len(request) > 3 else ''}\n"
                for request in requests
            )
        )
        done = subprocess.run(
            [
                "wrk",
                f"-t{threads}",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--timeout",
                "120s",
                "-s",
                str(script),
                base_url,
                "--",
                str(listing),
                str(threads),
                key,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed: {done.stdout[-1000:]} {done.stderr[-1000:]}")
    figures = json.loads(lines[-1])
    count = int(figures["requests"])
    failed = int(figures["status_errors"]) + int(figures["socket_errors"])
    return {
        "count": count,
        "wall": figures["duration_us"] / 1e6,
        "p50": figures["p50"] / 1e6,
        "p95": figures["p95"] / 1e6,
        "p99": figures["p99"] / 1e6,
        "statuses": {"2xx": count - failed, "error": failed} if failed else {"2xx": count},
        "error": f"{failed} answers were errors or failed sockets (wrk)" if failed else "",
    }


def _client(
    base_url: str, key: str, connections: int, warmup: list[list[Any]], requests: list[list[Any]]
) -> dict[str, Any]:
    if WRK:
        if warmup:
            _wrk(base_url, key, connections, warmup, WRK["warmup"])
        if not requests:
            return {"count": 0, "wall": 0.0, "statuses": {}, "error": ""}
        return _wrk(base_url, key, connections, requests, WRK["seconds"])
    spec = {
        "base_url": base_url,
        "key": key,
        "connections": connections,
        "warmup": warmup,
        "requests": requests,
    }
    done = subprocess.run(
        [sys.executable, __file__, "--client"],
        input=json.dumps(spec).encode(),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"client failed: {done.stderr.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User plus system CPU time of each of the processes ``pids`` so far."""
    seconds = {}
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
            seconds[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU time spent between two readings; a process new in ``after`` started from zero
    (one that ended between them is not counted)."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def postgres_backends(url: str | None) -> list[int]:
    """The server processes serving connections to the database of ``url`` (not this one)."""
    if url is None or not url.startswith("postgresql"):
        return []
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return [int(row[0]) for row in rows]


def measure(
    server: Server,
    key: str,
    connections: int,
    warmup: list[list[Any]],
    requests: list[list[Any]],
    database_url: str | None = None,
) -> dict[str, Any]:
    """Run ``warmup`` untimed, then ``requests`` timed, with the CPU time the server's
    workers (and the PostgreSQL backends of ``database_url``) spent on them."""
    if warmup:
        _client(server.base_url, key, connections, warmup, [])
    workers = server.worker_pids()
    server_before = cpu_seconds(workers)
    db_before = cpu_seconds(postgres_backends(database_url))
    result = _client(server.base_url, key, connections, [], requests)
    result["server_cpu"] = cpu_delta(server_before, cpu_seconds(workers))
    db_after = cpu_seconds(postgres_backends(database_url))
    result["db_cpu"] = cpu_delta(db_before, db_after) if database_url else math.nan
    return result


def to_row(database: str, workers: int, case: str, result: dict[str, Any], per: int = 1) -> Row:
    ok = sum(v for k, v in result["statuses"].items() if k.startswith("2"))
    note = ""
    if ok != result["count"]:
        note = f"{result['count'] - ok} failed: {result['error'][:120]}"
    return Row(
        database=database,
        workers=workers,
        case=case,
        count=result["count"] * per,
        rate=result["count"] * per / result["wall"],
        unit="matches/s" if per > 1 or case.startswith("POST match") else "req/s",
        p50=result["p50"] * 1000,
        p95=result["p95"] * 1000,
        p99=result["p99"] * 1000,
        server_cpu=result["server_cpu"] * 1000 / (result["count"] * per),
        db_cpu=result["db_cpu"] * 1000 / (result["count"] * per),
        note=note,
    )


def progress(row: Row) -> None:
    """One finished row on stderr, so a long run shows where it is."""
    figures = [f"{row.rate:,.0f} {row.unit}"]
    if not math.isnan(row.p99):
        figures.append(f"p99 {row.p99:.1f} ms")
    figures.append(f"server CPU {row.server_cpu:.2f} ms")
    if not math.isnan(row.db_cpu):
        figures.append(f"db CPU {row.db_cpu:.2f} ms")
    if not math.isnan(row.ceiling):
        figures.append(f"{row.rate / row.ceiling:.2f} of the ceiling, {row.ceiling:,.0f}/s")
    workers = f" x{row.workers}" if row.workers else ""
    print(
        f"{row.database}{workers} {row.case}: {', '.join(figures)} {row.note}",
        file=sys.stderr,
        flush=True,
    )


def _exit_on_sigterm(_signum: int, _frame: object) -> None:
    # Runs the ``finally`` blocks: the servers are stopped, the databases dropped.
    raise SystemExit(143)


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as handle:
            return " ".join(handle.read().split()[:3])
    except OSError:
        return "?"


# -- the database's floor ---------------------------------------------------------------------

#: Matches per transaction of the floor: the most a worker writes in one transaction (its
#: group commit, ``RATINGS_WRITE_GROUP_MAX``'s default).
FLOOR_GROUP = 16

#: The repository functions whose statements are a recorded group's database work (run by
#: ``app.services.recording.record_group``): the key, the ladder and the match_ids recorded
#: already (``_KEY_AND_LADDER_SQL``), the players' row locks in id order
#: (``_LOCK_PLAYERS_SQL``), and the matches, participants, history and ratings
#: (``_WRITE_MATCHES_SQL``; on SQLite the next seqs and one executemany per table).
FLOOR_STATEMENTS = ("key_and_ladder", "lock_players", "write_recorded")

#: The tables a recording writes: the floor's database must end with the same rows in them
#: as the service's.
FLOOR_TABLES = ("matches", "participants", "rating_history", "ratings")

#: One statement as the driver was handed it: its text, its parameters, executemany or not.
Statement = tuple[str, Any, bool]


@contextlib.contextmanager
def captured_statements(engine: Any) -> Iterator[list[Statement]]:
    """Collects what the driver is handed while one of :data:`FLOOR_STATEMENTS` runs.

    The functions are wrapped where the recording service calls them (the module
    ``app.storage.repositories.recording``), and a listener on ``engine`` takes each
    statement's text and parameters at the cursor, after SQLAlchemy has compiled and
    converted them."""
    from sqlalchemy import event

    from app.storage.repositories import recording as repositories

    statements: list[Statement] = []
    depth = [0]

    def listen(
        _conn: Any, _cursor: Any, text: str, parameters: Any, _context: Any, many: bool
    ) -> None:
        if depth[0]:
            statements.append((text, parameters, many))

    def wrap(function: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] -= 1

        return wrapped

    originals = {name: getattr(repositories, name) for name in FLOOR_STATEMENTS}
    event.listen(engine, "before_cursor_execute", listen)
    for name, function in originals.items():
        setattr(repositories, name, wrap(function))
    try:
        yield statements
    finally:
        for name, function in originals.items():
            setattr(repositories, name, function)
        event.remove(engine, "before_cursor_execute", listen)


def prepare_floor(url: str, bodies: dict[str, list[dict[str, Any]]]) -> str:
    """Migrate ``url`` and make an admin key (:func:`prepare_database`), then a TrueSkill
    ladder ``floor-<shape>`` per shape, as the service runs make theirs, holding a rating at
    the prior for every player of that shape's matches (the service's own insert of new
    players: the floor measures recordings of rated players). Returns the key."""
    from datetime import UTC, datetime

    from app.domain.documents.ladders import LadderCreate
    from app.domain.ladders import ladder_config
    from app.services import ladders, recording
    from app.storage.engine import dispose_engines, get_engine, session_factory
    from app.storage.repositories import ladders as ladder_repo

    key = prepare_database(url)
    now = datetime.now(UTC)
    session = session_factory(get_engine(url))()
    try:
        for mode, matches in bodies.items():
            body = LadderCreate(id=f"floor-{mode}", algorithm="trueskill")
            ladders.create_ladder(session=session, body=body, now=now)
            ladder = ladder_repo.get_ladder(session=session, ladder_id=body.id)
            assert ladder is not None
            recording._insert_ratings(
                session=session,
                ladder=ladder,
                config=ladder_config(ladder.algorithm, ladder.params),
                players=sorted({p for match in matches for team in match["teams"] for p in team}),
                now=now,
            )
        session.commit()
    finally:
        session.close()
        dispose_engines()
    return key


def capture_floor(
    url: str, key: str, ladder_id: str, bodies: list[dict[str, Any]]
) -> list[list[Statement]]:
    """Record ``bodies`` on ``url`` with the service's ``record_group``, :data:`FLOOR_GROUP`
    a transaction in arrival order, as a worker's group commit writes them; returns each
    transaction's statements (:func:`captured_statements`)."""
    from datetime import UTC, datetime

    from app.domain.documents.matches import MatchCreate
    from app.services import auth
    from app.services.recording import Submitted, record_group
    from app.storage import unit_of_work
    from app.storage.engine import dispose_engines, get_engine, session_factory

    def work(group: list[Submitted]) -> Any:
        return lambda session: record_group(session=session, submitted=group)

    engine = get_engine(url)
    factory = session_factory(engine)
    digest = auth.hash_key(key)
    transactions: list[list[Statement]] = []
    try:
        with captured_statements(engine) as statements:
            for start in range(0, len(bodies), FLOOR_GROUP):
                group = [
                    Submitted(
                        ladder_id=ladder_id,
                        key_digest=digest,
                        body=MatchCreate.model_validate(body),
                        now=datetime.now(UTC),
                    )
                    for body in bodies[start : start + FLOOR_GROUP]
                ]
                answers = unit_of_work.run(work(group), session_factory=factory)
                refused = [a for a in answers if not isinstance(a, tuple) or not a[1]]
                if refused:
                    raise RuntimeError(f"floor: a match was not recorded: {refused[0]!r}")
                transactions.append(statements[:])
                statements.clear()
    finally:
        dispose_engines()
    return transactions


def replay_floor(
    database: str, url: str, transactions: list[list[Statement]], warmup: int
) -> dict[str, float]:
    """Run ``transactions`` on ``url`` through the bare driver, each statement with its
    captured parameters and its rows fetched (on SQLite the first statement is the service's
    ``BEGIN IMMEDIATE``), a commit after each transaction: the first
    ``warmup`` untimed, then the rest timed. Returns the wall time, this process's CPU time
    (the driver's; on SQLite the database's too) and the PostgreSQL backends' CPU time."""
    from app.storage.engine import dispose_engines, get_engine

    connection: Any
    if database == "postgresql":
        import psycopg

        connection = psycopg.connect(url)
        close = connection.close
    else:
        # sqlite3's own connection, opened by the service's engine: the same pragmas.
        pooled = get_engine(url).raw_connection()
        connection = pooled.driver_connection
        close = pooled.close

    def run(part: list[list[Statement]]) -> None:
        cursor = connection.cursor()
        for statements in part:
            for text, parameters, many in statements:
                if many:
                    cursor.executemany(text, parameters)
                else:
                    cursor.execute(text, parameters)
                if cursor.description is not None:
                    cursor.fetchall()
            connection.commit()
        cursor.close()

    db_url = url if database == "postgresql" else None
    # The captured parameters are many objects: the collector must not scan them meanwhile.
    gc.collect()
    gc.disable()
    try:
        run(transactions[:warmup])
        db_before = cpu_seconds(postgres_backends(db_url))
        cpu_before = time.process_time()
        started = time.perf_counter()
        run(transactions[warmup:])
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        db_after = cpu_seconds(postgres_backends(db_url))
    finally:
        gc.enable()
        close()
        dispose_engines()
    return {
        "wall": wall,
        "cpu": cpu,
        "db_cpu": cpu_delta(db_before, db_after) if db_url else math.nan,
    }


def same_rows(first: str, second: str) -> None:
    """Raise unless the databases ``first`` and ``second`` hold the same rows in every one of
    :data:`FLOOR_TABLES`."""
    from sqlalchemy import create_engine, text

    from app.storage.engine import normalize_url

    for table in FLOOR_TABLES:
        found = []
        for url in (first, second):
            engine = create_engine(normalize_url(url))
            try:
                with engine.connect() as connection:
                    rows = connection.execute(text(f"SELECT * FROM {table}")).all()
            finally:
                engine.dispose()
            found.append(sorted((tuple(row) for row in rows), key=repr))
        if found[0] != found[1]:
            raise RuntimeError(f"floor: {table} differs from what the service wrote")


def floor_rows(
    database: str,
    bodies: dict[str, list[dict[str, Any]]],
    warmup: int,
    workdir: Path,
    server: str = "",
) -> dict[str, Row]:
    """The database's floor for each shape of ``bodies``: the rows the service writes for
    those matches, written with its own statements through the bare driver, on a database
    of its own (the first ``warmup`` matches untimed).

    The service records every shape's matches on one database (:func:`prepare_floor`,
    :func:`capture_floor`), which was first copied (the same key, ladders and players).
    The copy then gets the same transactions through the driver alone
    (:func:`replay_floor`), timed, and must end with the same rows as the service's."""
    from app.storage.engine import dispose_engines

    names = (f"ratings_floor_{os.getpid()}", f"ratings_floor_{os.getpid()}_copy")
    if database == "sqlite":
        paths = [workdir / f"{name}.db" for name in names]
        urls = [f"sqlite:///{path}" for path in paths]
    else:
        urls = [create_postgres(server, names[0])]
    rows: dict[str, Row] = {}
    try:
        key = prepare_floor(urls[0], bodies)
        if database == "sqlite":
            import sqlite3

            source, target = sqlite3.connect(paths[0]), sqlite3.connect(paths[1])
            source.backup(target)
            source.close()
            target.close()
        else:
            urls.append(create_postgres(server, names[1], template=names[0]))
        for mode, matches in bodies.items():
            transactions = capture_floor(urls[0], key, f"floor-{mode}", matches)
            skip = warmup // FLOOR_GROUP
            result = replay_floor(database, urls[1], transactions, skip)
            n = len(matches) - skip * FLOOR_GROUP
            statements = sum(len(t) for t in transactions) / len(transactions)
            driver = "psycopg" if database == "postgresql" else "sqlite3"
            row = Row(
                database=database,
                workers=0,
                case=f"floor {mode}",
                count=n,
                rate=n / result["wall"],
                unit="matches/s",
                server_cpu=result["cpu"] * 1000 / n,
                db_cpu=result["db_cpu"] * 1000 / n,
                note=(
                    f"{driver} alone, one connection, {FLOOR_GROUP} matches and "
                    f"{statements:.0f} statements a transaction"
                ),
            )
            rows[mode] = row
            progress(row)
        same_rows(urls[0], urls[1])
    finally:
        dispose_engines()
        if database == "postgresql":
            for name in names:
                drop_postgres(server, name)
    return rows


def ceiling_rate(app: Row, floor: Row, workers: int, cores: int) -> float:
    """The truer ceiling of single-match POSTs, per second: the minimal app's server CPU per
    request ``a`` plus the floor's CPU per match, ``c`` in the process running the driver
    (with SQLite's own work on SQLite) and ``d`` in the PostgreSQL backends:
    ``min(workers / (a + c), cores / (a + c + d))``; on SQLite, where one writer at a time
    holds the database for its whole transaction, at most the floor's own rate as well."""
    a = app.server_cpu / 1000
    c = floor.server_cpu / 1000
    d = 0.0 if math.isnan(floor.db_cpu) else floor.db_cpu / 1000
    rate = min(workers / (a + c), cores / (a + c + d))
    if floor.database == "sqlite":
        rate = min(rate, floor.rate)
    return rate


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Plan:
    matches: int
    warmup: int
    batch_matches: int
    batch_size: int
    reads: int
    players: int
    #: Matches of each shape the floor writes, the first ``floor_warmup`` of them untimed.
    floor_matches: int
    floor_warmup: int


def ceiling_rows(
    args: argparse.Namespace, plan: Plan, workdir: Path, bodies: dict[str, list[Any]]
) -> dict[tuple[int, str], Row]:
    rows: dict[tuple[int, str], Row] = {}
    for workers in args.workers:
        server = ceiling_server(workdir, free_port(), workers, workdir / "ceiling.log")
        server.start()
        try:
            for mode in MODES:
                path = "/v1/ladders/ceiling/matches"
                result = measure(
                    server,
                    "none",
                    args.connections,
                    post_requests(path, bodies[mode][: plan.warmup]),
                    post_requests(path, bodies[mode][plan.warmup : plan.warmup + plan.matches]),
                )
                row = to_row("none", workers, f"ceiling POST {mode}", result)
                row.ratio = 1.0
                rows[(workers, mode)] = row
                progress(row)
            memory = server.memory()
        finally:
            server.stop()
        rows[(workers, "1v1")].extra["memory"] = memory
    return rows


def service_rows(
    args: argparse.Namespace,
    plan: Plan,
    workdir: Path,
    database: str,
    url: str,
    bodies: dict[str, list[Any]],
    ceiling: dict[tuple[int, str], Row],
    floors: dict[str, Row],
) -> list[Row]:
    import httpx

    rows: list[Row] = []
    db_url = url if database == "postgresql" else None
    key = prepare_database(url)
    seeded_via = ""
    cursors: list[str] = []
    for workers in args.workers:
        server = service_server(
            url, free_port(), workers, workdir / f"{database}-{workers}.log", args.connections
        )
        server.start()
        try:
            admin = httpx.Client(
                base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60
            )
            ladders = [f"w{workers}-{mode}" for mode in MODES] + [
                f"w{workers}-batch",
                BIG_LADDER,
            ]
            for ladder in ladders:
                response = admin.post("/v1/ladders", json={"id": ladder, "algorithm": "trueskill"})
                assert response.status_code in (200, 201), response.text
            has_batch = admin.post(
                f"/v1/ladders/w{workers}-batch/matches/batch", json={"matches": []}
            ).status_code not in (404, 405)

            if not seeded_via:
                started = time.perf_counter()
                use_batch = args.seed_via == "batch" or (args.seed_via == "auto" and has_batch)
                if use_batch:
                    seed_by_batch(server.base_url, key, plan.players, args.seed, 1000)
                    seeded_via = "batch route"
                else:
                    seed_by_insert(url, plan.players, args.seed)
                    seeded_via = "bulk INSERT"
                seeded_via += f", {time.perf_counter() - started:.0f} s"
                cursors = deep_cursors(url, plan.players, 50, args.seed)

            for mode in MODES:
                path = f"/v1/ladders/w{workers}-{mode}/matches"
                result = measure(
                    server,
                    key,
                    args.connections,
                    post_requests(path, bodies[mode][: plan.warmup]),
                    post_requests(path, bodies[mode][plan.warmup : plan.warmup + plan.matches]),
                    db_url,
                )
                row = to_row(database, workers, f"POST match {mode}", result)
                row.ratio = row.rate / ceiling[(workers, mode)].rate
                if mode in floors:
                    row.ceiling = ceiling_rate(
                        ceiling[(workers, mode)], floors[mode], workers, os.cpu_count() or 1
                    )
                rows.append(row)
                progress(row)

            if has_batch:
                batches = [
                    bodies["ffa8"][i : i + plan.batch_size]
                    for i in range(0, plan.batch_matches, plan.batch_size)
                ]
                requests = [
                    [
                        "POST",
                        f"/v1/ladders/w{workers}-batch/matches/batch",
                        json.dumps({"matches": batch}, separators=(",", ":")),
                    ]
                    for batch in batches
                ]
                result = measure(server, key, args.connections, [], requests, db_url)
                row = to_row(
                    database,
                    workers,
                    f"POST batch ffa8 x{plan.batch_size}",
                    result,
                    per=plan.batch_size,
                )
                row.ratio = row.rate / ceiling[(workers, "ffa8")].rate
                rows.append(row)
                progress(row)
            else:
                rows.append(
                    Row(database, workers, "POST batch", note="skipped: no batch route yet")
                )

            rng = random.Random(args.seed + workers)
            big = f"/v1/ladders/{BIG_LADDER}"
            n = plan.players
            reads: dict[str, list[list[Any]]] = {
                "GET leaderboard first page": [
                    ["GET", f"{big}/leaderboard?limit=50", None] for _ in range(plan.reads)
                ],
                "GET leaderboard deep page": [
                    ["GET", f"{big}/leaderboard?limit=50&cursor={rng.choice(cursors)}", None]
                    for _ in range(plan.reads)
                ],
                "GET player with rank": [
                    ["GET", f"{big}/players/q{rng.randrange(n):07d}", None]
                    for _ in range(plan.reads)
                ],
                "POST quality 4v4": [
                    [
                        "POST",
                        f"{big}/quality",
                        json.dumps(
                            {
                                "teams": [
                                    [f"q{i:07d}" for i in team]
                                    for team in (lambda s: [s[:4], s[4:]])(rng.sample(range(n), 8))
                                ]
                            }
                        ),
                    ]
                    for _ in range(plan.reads)
                ],
            }
            for case, requests in reads.items():
                warm = requests[: max(16, len(requests) // 10)]
                result = measure(server, key, args.connections, warm, requests, db_url)
                row = to_row(database, workers, f"{case} ({n:,} players)", result)
                row.ratio = row.rate / ceiling[(workers, "1v1")].rate
                rows.append(row)
                progress(row)
            admin.close()
            memory = server.memory()
        finally:
            server.stop()
        rows[-1].extra["memory"] = memory
        rows[-1].extra["seeded_via"] = seeded_via
    return rows


#: Launch day's players: each 1 v 1 draws two of them uniformly.
LAUNCH_PLAYERS = 10_000


def launch_bodies(count: int, prefix: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    bodies = []
    for n in range(count):
        a, b = rng.sample(range(LAUNCH_PLAYERS), 2)
        bodies.append(
            {"match_id": f"{prefix}-{n}", "teams": [[f"p{a:05d}"], [f"p{b:05d}"]], "ranks": [1, 2]}
        )
    return bodies


@contextlib.contextmanager
def analyzing(url: str, every_s: float) -> Iterator[None]:
    """An ``ANALYZE`` of the database at once and every ``every_s`` beside the body."""
    import psycopg

    stop = threading.Event()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ANALYZE")

    def loop() -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            while not stop.wait(every_s):
                connection.execute("ANALYZE")

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def launch_rows(args: argparse.Namespace, plan: Plan, workdir: Path) -> list[Row]:
    """Launch day (``--launch``): writes on a new database, without statistics and with."""
    rows: list[Row] = []
    workers = max(args.workers)
    name = f"ratings_bench_launch_{os.getpid()}"
    count = plan.warmup + plan.matches
    for connections in args.launch_connections:
        gathered: Row | None = None
        for analyze in (True, False):
            url = create_postgres(args.postgres, name)
            try:
                key = prepare_database(url)
                log = workdir / f"launch-{connections}-{analyze}.log"
                server = service_server(url, free_port(), workers, log, connections)
                server.start()
                try:
                    import httpx

                    created = httpx.post(
                        f"{server.base_url}/v1/ladders",
                        json={"id": "launch", "algorithm": "trueskill"},
                        headers={"Authorization": f"Bearer {key}"},
                    )
                    assert created.status_code == 201, created.text
                    bodies = launch_bodies(count, f"launch-{connections}", args.seed)
                    requests = post_requests("/v1/ladders/launch/matches", bodies)
                    # No warm-up: the first matches of a new database are the case.
                    with analyzing(url, 2.0) if analyze else contextlib.nullcontext():
                        result = measure(server, key, connections, [], requests, url)
                finally:
                    server.stop()
            finally:
                from app.storage.engine import dispose_engines

                dispose_engines()
                drop_postgres(args.postgres, name)
            case = "new database" if not analyze else "statistics gathered (ANALYZE every 2 s)"
            row = to_row(
                "postgresql", workers, f"POST match 1v1, {case}, {connections} conn", result
            )
            if analyze:
                gathered = row
            elif gathered is not None:
                row.ratio = row.rate / gathered.rate
            rows.append(row)
            progress(row)
    return rows


def format_table(rows: list[Row], markdown: bool, ratio: str = "x app") -> str:
    header = [
        "database",
        "workers",
        "case",
        "count",
        "rate",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        ratio,
        "ceiling/s",
        "x ceiling",
        "server CPU ms",
        "db CPU ms",
        "note",
    ]
    lines = []
    body = []
    for row in rows:
        body.append(
            [
                row.database,
                str(row.workers) if row.workers else "-",
                row.case,
                f"{row.count:,}" if row.count else "-",
                f"{row.rate:,.0f} {row.unit}" if not math.isnan(row.rate) else "-",
                f"{row.p50:.1f}" if not math.isnan(row.p50) else "-",
                f"{row.p95:.1f}" if not math.isnan(row.p95) else "-",
                f"{row.p99:.1f}" if not math.isnan(row.p99) else "-",
                f"{row.ratio:.2f}" if not math.isnan(row.ratio) else "-",
                f"{row.ceiling:,.0f}" if not math.isnan(row.ceiling) else "-",
                f"{row.rate / row.ceiling:.2f}" if not math.isnan(row.ceiling) else "-",
                f"{row.server_cpu:.2f}" if not math.isnan(row.server_cpu) else "-",
                f"{row.db_cpu:.2f}" if not math.isnan(row.db_cpu) else "-",
                row.note,
            ]
        )
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines.extend("| " + " | ".join(cells) + " |" for cells in body)
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    for cells in [header, *body]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    return "\n".join(lines)


def machine() -> str:
    memory = "?"
    with contextlib.suppress(OSError), open("/proc/meminfo") as handle:
        memory = f"{int(handle.readline().split()[1]) / 1024 / 1024:.1f} GiB"
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    postgres = "?"
    with contextlib.suppress(Exception):
        postgres = subprocess.run(
            ["psql", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    return (
        f"{os.cpu_count()} cores ({cpu}), {memory} memory, Python {platform.python_version()}, "
        f"{postgres}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="fewer requests, 100,000 players")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--players", type=int, help="rated players of the big ladder")
    parser.add_argument("--matches", type=int, help="timed single-match POSTs per mode")
    parser.add_argument("--seed-via", choices=["auto", "batch", "insert"], default="auto")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    parser.add_argument(
        "--load-generator",
        choices=["auto", "python", "wrk"],
        default="auto",
        help="who sends the requests: wrk (auto: when installed) or the Python client",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed wrk run")
    parser.add_argument(
        "--launch", action="store_true", help="launch day on PostgreSQL only (module docstring)"
    )
    parser.add_argument("--launch-connections", default="16,64")
    args = parser.parse_args()
    if args.client:
        return client_main()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    use_wrk = args.load_generator == "wrk" or (
        args.load_generator == "auto" and shutil.which("wrk") is not None
    )
    if use_wrk:
        WRK.update(seconds=args.seconds, warmup=max(1.0, args.seconds / 5))
    args.workers = [int(w) for w in args.workers.split(",")]
    args.launch_connections = [int(c) for c in args.launch_connections.split(",")]
    databases = [d for d in args.databases.split(",") if d]

    if args.quick:
        plan = Plan(
            matches=2000,
            warmup=200,
            batch_matches=2000,
            batch_size=100,
            reads=500,
            players=100_000,
            floor_matches=1024,
            floor_warmup=128,
        )
    else:
        plan = Plan(
            matches=3000,
            warmup=300,
            batch_matches=5000,
            batch_size=100,
            reads=2000,
            players=1_000_000,
            floor_matches=3200,
            floor_warmup=320,
        )
    if args.players:
        plan.players = args.players
    if args.matches:
        plan.matches = args.matches

    total = max(
        plan.warmup + max(plan.matches, plan.batch_matches), plan.floor_warmup + plan.floor_matches
    )
    workdir = Path(tempfile.mkdtemp(prefix="ratings-bench-http-"))
    started = time.perf_counter()
    load_before = loadavg()
    rows: list[Row] = []
    try:
        if args.launch:
            rows.extend(launch_rows(args, plan, workdir))
            databases = []
        bodies = {
            mode: match_bodies(mode, total, f"{mode}-{args.seed}", args.seed + i)
            for i, mode in enumerate(MODES)
        }
        ceiling = {} if args.launch else ceiling_rows(args, plan, workdir, bodies)
        rows.extend(ceiling.values())
        floor_count = plan.floor_warmup + plan.floor_matches
        for database in databases:
            # The floor writes the first matches the service runs post, on databases of its own.
            floors = floor_rows(
                database,
                {mode: bodies[mode][:floor_count] for mode in MODES},
                plan.floor_warmup,
                workdir,
                args.postgres,
            )
            rows.extend(floors.values())
            if database == "sqlite":
                url = f"sqlite:///{workdir / 'ratings.db'}"
                rows.extend(
                    service_rows(args, plan, workdir, database, url, bodies, ceiling, floors)
                )
            else:
                name = f"ratings_bench_{os.getpid()}"
                url = create_postgres(args.postgres, name)
                try:
                    rows.extend(
                        service_rows(args, plan, workdir, database, url, bodies, ceiling, floors)
                    )
                finally:
                    from app.storage.engine import dispose_engines

                    dispose_engines()
                    drop_postgres(args.postgres, name)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    markdown = args.format == "markdown"
    print(format_table(rows, markdown, "x gathered" if args.launch else "x app"))
    print()
    for row in rows:
        if "memory" in row.extra:
            where = "ceiling" if row.database == "none" else row.database
            figures = ", ".join(
                f"VmHWM {hwm / 1024:.0f} MB / VmRSS {rss / 1024:.0f} MB"
                for hwm, rss in row.extra["memory"]
            )
            print(f"- memory per worker, {where}, {row.workers} worker(s): {figures}")
        if row.extra.get("seeded_via"):
            print(
                f"- {row.database}: {plan.players:,} players seeded via {row.extra['seeded_via']}"
            )
    if args.launch:
        print("- launch: each case on a new database of its own, timed from its first match")
    else:
        print(
            f"- ceiling/s = min(W / (a + c), N / (a + c + d)), N = {os.cpu_count() or 1} cores, "
            "W the workers, a the minimal app's server CPU per request, c and d the floor's CPU "
            "per match in the driver's process and in PostgreSQL; on SQLite at most the floor's "
            "rate too"
        )
    print(f"- machine: {machine()}")
    if WRK:
        print(
            f"- load generator: wrk, {wrk_threads(args.connections)} thread(s), "
            f"{args.launch_connections if args.launch else args.connections} connection(s), "
            f"{WRK['seconds']:g} s per case"
            + ("" if args.launch else f" after {WRK['warmup']:g} s of warm-up")
        )
    else:
        print(
            f"- load generator: the Python client (asyncio, httpx), {args.connections} connections"
        )
    print(
        f"- load average before / after: {load_before} / {loadavg()}; "
        f"wall time {time.perf_counter() - started:.0f} s"
    )
    print(f"- command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
