"""Webhook benchmark: does delivery keep up with recording?

    .venv/bin/python benchmarks/webhooks.py [--seconds 10] [--connections 16] [--workers 2]
        [--backlog 20000] [--databases sqlite,postgresql] [--postgres postgresql://postgres@127.0.0.1:5432]
        [--format table|markdown]

Each database is made fresh; the service runs in uvicorn (``--workers``), a receiver (a
minimal ASGI app that counts what it gets) in a uvicorn process of its own, registered for
``match.recorded`` of every ladder. wrk (or, without it, ``--connections`` Python
threads) records single 1 v 1 matches over ``--connections`` connections as fast as the
service takes them for ``--seconds``; meanwhile and
after, the receiver's count is read every 0.1 s. The table gives matches recorded a
second, events delivered a second while the writers ran, the events still to deliver
when they stopped, and how long those took. Then a backlog (``--backlog`` matches recorded
by batches of 1,000, far faster than single matches come): how fast it was recorded, and
how fast the receiver got it all (the delivery's own pace, one receiver of one ladder,
whose events go one after the other). Delivery keeps up when it delivers at least as many
a second as are recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from app.domain.documents.ladders import LadderCreate  # noqa: E402
from app.services import auth, ladders  # noqa: E402
from app.storage.engine import dispose_engines, get_engine, session_factory, upgrade  # noqa: E402
from benchmarks.databases import fresh_database, http_benchmark, print_table  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"
LADDER = "hooked"

RECEIVER = textwrap.dedent(
    """
    received = 0

    async def app(scope, receive, send):
        global received
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        if scope["method"] == "POST":
            received += 1
            body = b""
        else:
            body = str(received).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    """
)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def uvicorn(app: str, env: dict[str, str], workers: int, cwd: Path) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", app, "--port", str(port), "--log-level", "warning"]
    if workers > 1:
        command += ["--workers", str(workers)]
    process = subprocess.Popen(command, cwd=cwd, env={**os.environ, **env})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit(f"{app} did not start") from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def events_of(service: str, headers: dict[str, str]) -> int:
    """The matches the ladder holds (each one event)."""
    return int(httpx.get(f"{service}/v1/ladders/{LADDER}", headers=headers).json()["matches"])


def run(
    kind: str, url: str, seconds: float, connections: int, workers: int, backlog: int
) -> tuple[str, ...]:
    upgrade(url)
    with session_factory(get_engine(url))() as session:
        ladders.create_ladder(
            session=session,
            body=LadderCreate(id=LADDER, algorithm="trueskill"),
            now=datetime.now(UTC),
        )
        key = auth.create_key(session, name="bench", scope="admin").key
        session.commit()
    dispose_engines()
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "receiver_app.py").write_text(RECEIVER)
        with (
            uvicorn("receiver_app:app", {}, 1, Path(folder)) as sink,
            uvicorn("app.main:app", {"RATINGS_DATABASE_URL": url}, workers, ROOT) as service,
        ):
            headers = {"Authorization": f"Bearer {key}"}
            made = httpx.post(
                f"{service}/v1/webhooks",
                headers=headers,
                json={"url": f"{sink}/hooks", "events": ["match.recorded"]},
            )
            made.raise_for_status()
            recorded = [0] * connections
            stop = threading.Event()

            def writer(n: int) -> None:
                rng = random.Random(n)
                with httpx.Client(base_url=service, headers=headers, timeout=60) as http:
                    while not stop.is_set():
                        a, b = rng.sample(range(10_000), 2)
                        body = {"teams": [[f"p{a}"], [f"p{b}"]]}
                        if http.post(f"/v1/ladders/{LADDER}/matches", json=body).status_code == 201:
                            recorded[n] += 1

            def delivered() -> int:
                return int(httpx.get(f"{sink}/count").text)

            started = time.perf_counter()
            if shutil.which("wrk"):
                rng = random.Random(3)
                requests = [
                    [
                        "POST",
                        f"/v1/ladders/{LADDER}/matches",
                        json.dumps(
                            {
                                "match_id": f"w{n}",
                                "teams": [[f"p{rng.randrange(10_000)}"], [f"q{n % 9_973}"]],
                            }
                        ),
                    ]
                    for n in range(50_000)
                ]
                figures = http_benchmark()._wrk(service, key, connections, requests, seconds)
                wrote_for = time.perf_counter() - started
                at_stop = delivered()
                total = events_of(service, headers)
            else:
                threads = [threading.Thread(target=writer, args=(n,)) for n in range(connections)]
                for thread in threads:
                    thread.start()
                time.sleep(seconds)
                stop.set()
                for thread in threads:
                    thread.join()
                wrote_for = time.perf_counter() - started
                total = sum(recorded)
                at_stop = delivered()
                figures = {}
            del figures
            while delivered() < total:
                time.sleep(0.1)
            drained = time.perf_counter() - started - wrote_for
            # A backlog: matches recorded by batches far faster than single matches come,
            # then the time the receiver takes to get them all (its delivery capacity).
            with httpx.Client(base_url=service, headers=headers, timeout=600) as http:
                begun = time.perf_counter()
                for start in range(0, backlog, 1000):
                    batch = [
                        {"teams": [[f"p{n % 9973}"], [f"q{n % 9967}"]]}
                        for n in range(start, min(start + 1000, backlog))
                    ]
                    batch_path = f"/v1/ladders/{LADDER}/matches/batch"
                    http.post(batch_path, json={"matches": batch}).raise_for_status()
                batched = time.perf_counter() - begun
                while delivered() < total + backlog:
                    time.sleep(0.05)
                emptied = time.perf_counter() - begun
    dispose_engines()
    return (
        kind,
        f"{total / wrote_for:,.0f}",
        f"{at_stop / wrote_for:,.0f}",
        f"{total - at_stop:,}",
        f"{drained:.1f}",
        f"{backlog / batched:,.0f}",
        f"{backlog / emptied:,.0f}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backlog", type=int, default=20_000)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    rows = []
    for kind in args.databases.split(","):
        with fresh_database(kind, args.postgres, "webhooks") as url:
            rows.append(run(kind, url, args.seconds, args.connections, args.workers, args.backlog))
    header = (
        "database",
        "recorded/s",
        "delivered/s while writing",
        "behind at the end",
        "drained in s",
        "backlog recorded/s",
        "backlog delivered/s",
    )
    print_table(header, rows, args.format)
    return 0


if __name__ == "__main__":
    sys.exit(main())
