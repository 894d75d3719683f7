"""Guarantee 1, no lost update: 16 writers post 50 random matches each over 6 shared
players, at once. Every acknowledged match is applied once, every history is an unbroken
chain, and a replay in recorded order reproduces the stored ratings bit for bit.

In process (16 threads through the app's thread pool) and over loopback to a uvicorn
server with two worker processes (16 threads, one HTTP client each). A 503 (the database
busy, or a deadlock or serialization failure surfacing) is retried by the writer with the
same match_id at most ``MAX_RETRIES`` times and counted; the idempotency key makes the
retry safe. The figures are reported.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from tests.reliability.conftest import Server, create_ladder, report
from tests.reliability.invariants import check_ladder, random_match

WRITERS = 16
MATCHES_PER_WRITER = 50
MAX_RETRIES = 5


def post_all(
    client_for: Callable[[int], httpx.Client | TestClient], ladder: str
) -> tuple[dict[str, Any], Counter[str]]:
    """Every writer posts its matches at once; returns the acknowledged bodies and counts."""
    barrier = threading.Barrier(WRITERS)
    acknowledged: dict[str, Any] = {}
    counts: Counter[str] = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        rng = random.Random(n)
        http = client_for(n)
        try:
            barrier.wait(timeout=60)
            for k in range(MATCHES_PER_WRITER):
                body = random_match(rng, f"w{n}-{k}")
                for attempt in range(MAX_RETRIES + 1):
                    response = http.post(f"/v1/ladders/{ladder}/matches", json=body)
                    with lock:
                        counts[str(response.status_code)] += 1
                    if response.status_code != 503 or attempt == MAX_RETRIES:
                        break
                    with lock:
                        counts["retries"] += 1
                    time.sleep(0.05 * (attempt + 1))
                assert response.status_code in (200, 201), response.text
                with lock:
                    acknowledged[body["match_id"]] = body
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, errors[:3]
    assert len(acknowledged) == WRITERS * MATCHES_PER_WRITER
    return acknowledged, counts


def _metric(text: str, name: str) -> float:
    """The sum of every sample of ``name`` in Prometheus exposition ``text``."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def test_threads_lose_no_update(
    app_client: TestClient, database_url: str, database_errors: Counter[str]
) -> None:
    create_ladder(app_client, "race")
    retried = _metric(app_client.get("/metrics").text, "ratings_transaction_retries_total")
    started = time.monotonic()
    acknowledged, counts = post_all(lambda n: app_client, "race")
    elapsed = time.monotonic() - started
    replayed = check_ladder(app_client, "race", acknowledged)
    assert replayed == WRITERS * MATCHES_PER_WRITER
    report(
        f"no_lost_update[threads,{database_url.split(':')[0]}]",
        matches=replayed,
        responses=dict(counts),
        database_errors=dict(database_errors),
        server_retries=_metric(app_client.get("/metrics").text, "ratings_transaction_retries_total")
        - retried,
        seconds=round(elapsed, 1),
    )


def test_two_worker_processes_lose_no_update(
    start_server: Callable[..., Server], database_url: str, tmp_path: Path
) -> None:
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    # prometheus-client's multiprocess mode: /metrics sums both workers.
    server = start_server(workers=2, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    clients = [server.client() for _ in range(WRITERS)]
    try:
        create_ladder(clients[0], "race")
        started = time.monotonic()
        acknowledged, counts = post_all(lambda n: clients[n], "race")
        elapsed = time.monotonic() - started
        replayed = check_ladder(clients[0], "race", acknowledged)
        metrics = clients[0].get("/metrics").text
    finally:
        for http in clients:
            http.close()
    assert replayed == WRITERS * MATCHES_PER_WRITER
    assert _metric(metrics, "ratings_matches_recorded_total") == replayed
    report(
        f"no_lost_update[2 workers,{database_url.split(':')[0]}]",
        matches=replayed,
        responses=dict(counts),
        server_retries=_metric(metrics, "ratings_transaction_retries_total"),
        seconds=round(elapsed, 1),
    )
