"""Batch benchmark: the largest batches the limits let through, posted to a served worker.

    .venv/bin/python benchmarks/batch.py [--databases sqlite,postgresql]
        [--shapes 1v1,1v1-shared,2x128,64x4,64x4-shared,ffa64,1v1-meta] [--slots N]
        [--algorithm trueskill] [--postgres postgresql://postgres@127.0.0.1:5432]
        [--format table|markdown]

For each database and each shape, a fresh database (a temporary SQLite file; a PostgreSQL
database made on the server given by ``--postgres`` and dropped afterwards) is migrated and
given one ladder, and ``ratings serve`` runs one worker on it with the default settings
(the PostgreSQL statement timeout and SQLite busy timeout included). After a warm-up batch
of one match, one batch of the shape is posted and timed, and while it runs single
matches of two other players are posted to the same ladder one after the other: the
slowest of them is how long the batch kept another writer waiting. Printed per run: the
batch's matches, player slots (players summed over its matches), the body's and the
answer's size, the status, the seconds, the worker's
resident memory before the batch, its peak while the batch ran (``VmHWM``, reset before
the batch) and what it kept afterwards (``VmRSS`` a second after the answer), and the
slowest single match's seconds.

The shapes fill the bounds (``--slots``, by default ``MAX_BATCH_SLOTS``; at most
``MAX_BATCH`` matches), with every player and match id 128 characters long (the largest
body and rows the limits allow):

- ``1v1``: the most matches, 2 new players each;
- ``1v1-shared``: as many, among 200 players (each match waits for the one before);
- ``2x128``, ``64x4``: the fewest matches, 256 new players each, two teams of 128 or 64
  teams of 4 (message passing over 64 teams);
- ``64x4-shared``: as many matches of the same 256 players;
- ``ffa64``: free-for-alls of 64 new players (the most 64-team matches);
- ``1v1-meta``: one on one matches of new players, each with ``meta`` of just under 4 KB
  of numbers, as many as the default body limit (16 MiB) lets through: the most parsed
  JSON a request can hold.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# benchmarks/http.py would shadow the standard library's ``http``: drop this folder from
# the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.config import Settings  # noqa: E402
from app.domain.documents.matches import MAX_BATCH, MAX_BATCH_SLOTS  # noqa: E402
from app.domain.documents.shared import MAX_ID_LENGTH, MAX_META_BYTES  # noqa: E402
from benchmarks.databases import fresh_database, print_table  # noqa: E402
from benchmarks.http import (  # noqa: E402
    Server,
    free_port,
    prepare_database,
    service_server,
)

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"
LADDER = "bench-batch"
ID_LENGTH = MAX_ID_LENGTH


@dataclass(frozen=True)
class Shape:
    """Matches of ``teams`` teams of ``size`` players; new players in every match, or
    drawn from ``pool`` players."""

    teams: int
    size: int
    pool: int | None = None
    meta: bool = False

    @property
    def players(self) -> int:
        return self.teams * self.size


SHAPES = {
    "1v1": Shape(2, 1),
    "1v1-shared": Shape(2, 1, pool=200),
    "2x128": Shape(2, 128),
    "64x4": Shape(64, 4),
    "64x4-shared": Shape(64, 4, pool=256),
    "ffa64": Shape(64, 1),
    "1v1-meta": Shape(2, 1, meta=True),
}

#: ``meta`` of just under ``MAX_META_BYTES`` as compact JSON, of the values that cost the
#: most memory once parsed (a float object for every four bytes).
META = {"samples": [0.5] * ((MAX_META_BYTES - 16) // 4)}


def long_id(prefix: str, n: int) -> str:
    """An id of exactly ``ID_LENGTH`` characters."""
    return f"{prefix}{n}-".ljust(ID_LENGTH, "x")


def batch_body(shape: Shape, slots: int, tag: str) -> tuple[bytes, int]:
    """The body of the largest batch of ``shape`` within ``slots``, ``MAX_BATCH`` and the
    default body limit, and its match count."""
    count = min(MAX_BATCH, slots // shape.players)
    if shape.meta:
        one, _ = batch_body(Shape(shape.teams, shape.size), shape.players, tag)
        # A match's text, its meta and the comma before it, without the body's wrapper.
        meta = len(',"meta":') + len(json.dumps(META, separators=(",", ":")))
        per_match = len(one) - len('{"matches":[]}') + meta + 1
        count = min(count, (Settings().max_body_bytes - len('{"matches":[]}')) // per_match)
    matches: list[dict[str, Any]] = []
    player = 0
    for m in range(count):
        teams: list[list[str]] = []
        for _ in range(shape.teams):
            team = []
            for _ in range(shape.size):
                n = player % shape.pool if shape.pool else player
                team.append(long_id(f"{tag}p", n))
                player += 1
            teams.append(team)
        if shape.pool:
            player = (player + 1) % shape.pool  # a different pairing next time
        ranks = [(m + t) % shape.teams + 1 for t in range(shape.teams)]
        match: dict[str, Any] = {"match_id": long_id(f"{tag}m", m), "teams": teams, "ranks": ranks}
        if shape.meta:
            match["meta"] = META
        matches.append(match)
    return json.dumps({"matches": matches}, separators=(",", ":")).encode(), count


def _status_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            name, _, value = line.partition(":")
            if name in ("VmHWM", "VmRSS"):
                out[name] = int(value.split()[0])
    return out


def _reset_peak(pid: int) -> None:
    """Set ``VmHWM`` back to the current ``VmRSS`` (Linux: ``clear_refs`` 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as handle:
        handle.write("5")


@dataclass
class Run:
    database: str
    shape: str
    matches: int
    slots: int
    body_mb: float
    answer_mb: float
    status: int
    seconds: float
    rss_before_mb: float
    peak_mb: float
    rss_after_mb: float
    other_writer_s: float | None


def measure(database: str, url: str, shape_name: str, slots: int, algorithm: str) -> Run:
    import httpx

    shape = SHAPES[shape_name]
    key = prepare_database(url)
    body, count = batch_body(shape, slots, "b")
    with tempfile.TemporaryDirectory() as folder:
        server: Server = service_server(url, free_port(), 1, Path(folder) / "serve.log", 10)
        server.start()
        try:
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            client = httpx.Client(base_url=server.base_url, headers=headers, timeout=900)
            created = client.post("/v1/ladders", json={"id": LADDER, "algorithm": algorithm})
            assert created.status_code == 201, created.text
            path = f"/v1/ladders/{LADDER}/matches"
            warm = {"matches": [{"teams": [["w1"], ["w2"]]}]}
            assert client.post(path + "/batch", json=warm).status_code == 201
            (pid,) = server.worker_pids()
            time.sleep(0.5)
            before = _status_kb(pid)["VmRSS"]
            _reset_peak(pid)
            other: list[float] = []

            answered = threading.Event()

            def single() -> None:
                time.sleep(0.3)  # the batch's body is on its way
                with httpx.Client(base_url=server.base_url, headers=headers, timeout=900) as one:
                    n = 0
                    while not answered.is_set():
                        started = time.perf_counter()
                        teams = [[f"o{n}a"], [f"o{n}b"]]
                        answer = one.post(path, json={"teams": teams})
                        if answer.status_code == 201:
                            other.append(time.perf_counter() - started)
                        n += 1

            thread = threading.Thread(target=single)
            started = time.perf_counter()
            thread.start()
            response = client.post(path + "/batch", content=body)
            seconds = time.perf_counter() - started
            answered.set()
            thread.join()
            answer_size = len(response.content)
            status = response.status_code
            del response
            time.sleep(1.0)
            after = _status_kb(pid)
            client.close()
        finally:
            server.stop()
    slots_sent = count * shape.players
    return Run(
        database=database,
        shape=shape_name,
        matches=count,
        slots=slots_sent,
        body_mb=len(body) / 1e6,
        answer_mb=answer_size / 1e6,
        status=status,
        seconds=seconds,
        rss_before_mb=before / 1024,
        peak_mb=after["VmHWM"] / 1024,
        rss_after_mb=after["VmRSS"] / 1024,
        other_writer_s=max(other) if other else None,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument(
        "--slots",
        type=int,
        default=MAX_BATCH_SLOTS,
        help="player slots of the largest batch (default: the service's bound)",
    )
    parser.add_argument("--algorithm", default="trueskill")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL server URL")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    unknown = set(args.shapes.split(",")) - set(SHAPES)
    if unknown:
        raise SystemExit(f"unknown shapes {sorted(unknown)}: choose from {', '.join(SHAPES)}")
    runs: list[Run] = []
    load_at_start = os.getloadavg()[0]
    for database in args.databases.split(","):
        for shape in args.shapes.split(","):
            with fresh_database(database, args.postgres, "batch") as url:
                run = measure(database, url, shape, args.slots, args.algorithm)
            runs.append(run)
            print(f"# {run}", file=sys.stderr, flush=True)
    header = (
        "database",
        "shape",
        "matches",
        "slots",
        "body MB",
        "answer MB",
        "status",
        "seconds",
        "RSS before MB",
        "peak RSS MB",
        "RSS after MB",
        "single match s",
    )
    cells = [
        (
            r.database,
            r.shape,
            f"{r.matches:,}",
            f"{r.slots:,}",
            f"{r.body_mb:.1f}",
            f"{r.answer_mb:.1f}",
            str(r.status),
            f"{r.seconds:.2f}",
            f"{r.rss_before_mb:.0f}",
            f"{r.peak_mb:.0f}",
            f"{r.rss_after_mb:.0f}",
            "-" if r.other_writer_s is None else f"{r.other_writer_s:.2f}",
        )
        for r in runs
    ]
    print_table(header, cells, args.format)
    print(
        f"\n{args.algorithm}, {os.cpu_count()} cores, load average (1 min) "
        f"{load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
