"""Large bodies and the rest of a worker: ``/healthz`` while four clients send bodies.

    .venv/bin/python benchmarks/bodies.py [--polls 100] [--format table|markdown]

``ratings serve`` with one worker on a fresh SQLite file. A client polls ``GET /healthz``
every 20 ms (``--polls`` times) while four others, in a process of their own, each send
one body at once, again and again until the polls end; the table gives the polls' median
and slowest time, and how the body requests were answered:

- ``none``: the polls alone, nothing else sent;
- ``keyless 16 MB``: a 15.4 MB JSON array of 1.1 million small objects (the costliest
  kind to check for duplicate keys) to a write route, the batch route, an admin route and
  a path no route takes, without a key: refused before the body is read;
- ``keyless 256 KiB``: a body at the limit of a request without a key, to the open
  quality query: read, checked in the thread pool, refused by the route (422);
- ``made-up key 16 MB``: the 15.4 MB body to the batch route with a key nobody made:
  refused once its body outgrows a keyless one;
- ``valid key 16 MB``: the same with a real write key, for comparison: read whole, checked
  for duplicate keys in the thread pool, then parsed and validated by the route (422).

The target: ``/healthz`` under 100 ms while four keyless bodies arrive.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This folder holds http.py, which must not shadow the standard library's http.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks.databases import http_benchmark, print_table  # noqa: E402

BIG = ("[" + ",".join(['{"a":1,"b":2}'] * 1_100_000) + "]").encode()
SMALL = ("[" + ",".join(['{"a":1,"b":2}'] * 18_700) + "]").encode()

CASES: list[tuple[str, bytes, list[str], str | None]] = [
    ("none", b"", [], None),
    (
        "keyless 16 MB",
        BIG,
        ["/v1/ladders/x/matches", "/v1/ladders/x/matches/batch", "/v1/ladders", "/nope"],
        None,
    ),
    ("keyless 256 KiB", SMALL, ["/v1/ladders/x/quality"] * 4, None),
    ("made-up key 16 MB", BIG, ["/v1/ladders/x/matches/batch"] * 4, "rk_made_up"),
    ("valid key 16 MB", BIG, ["/v1/ladders/x/matches/batch"] * 4, "valid"),
]


async def _sender(
    client: httpx.AsyncClient, path: str, body: bytes, key: str | None, until: float
) -> list[int]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    statuses = []
    while time.monotonic() < until:
        try:
            response = await client.post(path, content=body, headers=headers)
            statuses.append(response.status_code)
        except httpx.TransportError:
            statuses.append(0)
    return statuses


async def _send(base: str, body: bytes, paths: list[str], key: str | None, seconds: float) -> None:
    until = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        tasks = [_sender(client, path, body, key, until) for path in paths]
        found = await asyncio.gather(*tasks)
    QUEUE.put([status for statuses in found for status in statuses])


QUEUE: multiprocessing.Queue[list[int]] = multiprocessing.Queue()


def _poll(base: str, polls: int) -> list[float]:
    times = []
    with httpx.Client(base_url=base, timeout=120) as client:
        client.get("/healthz")
        for _ in range(polls):
            start = time.perf_counter()
            assert client.get("/healthz").status_code == 200
            times.append(time.perf_counter() - start)
            time.sleep(0.02)
    return times


def _case(
    base: str, body: bytes, paths: list[str], key: str | None, polls: int
) -> tuple[list[float], list[int]]:
    """The polls, while a process of its own sends the bodies (so that the client's own
    work on them does not delay the polls)."""
    if not paths:
        return _poll(base, polls), []
    seconds = polls * 0.03 + 1.0
    sender = multiprocessing.Process(
        target=lambda: asyncio.run(_send(base, body, paths, key, seconds))
    )
    sender.start()
    time.sleep(0.5)
    times = _poll(base, polls)
    statuses = QUEUE.get()
    sender.join()
    return times, statuses


def run(polls: int) -> list[list[str]]:
    bench: Any = http_benchmark()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/bodies.db"
        server = bench.service_server(url, bench.free_port(), 1, Path(folder) / "log", 16)
        server.start()
        try:
            from app.services import auth
            from app.storage.engine import get_engine, session_factory

            with session_factory(get_engine(url))() as session:
                valid = auth.create_key(session, name="bench", scope="write").key
                session.commit()
            for name, body, paths, key in CASES:
                times, statuses = _case(
                    server.base_url, body, paths, valid if key == "valid" else key, polls
                )
                ms = sorted(1000 * t for t in times)
                answered = ", ".join(
                    f"{status or 'reset'} x{statuses.count(status)}"
                    for status in sorted(set(statuses))
                )
                rows.append(
                    [
                        name,
                        f"{statistics.median(ms):.1f}",
                        f"{ms[-1]:.1f}",
                        answered or "-",
                    ]
                )
        finally:
            server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--polls", type=int, default=100)
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    args = parser.parse_args()
    print_table(
        ["bodies sent", "healthz p50 ms", "healthz max ms", "body requests answered"],
        run(args.polls),
        args.format,
    )


if __name__ == "__main__":
    main()
