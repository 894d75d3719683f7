"""SQLite's one writer at a time, and the rest of the service: writers queued behind a long
write never hold every thread (reads and readiness go on), small writes go before bulk
ones, and a batch is rated before it takes the write lock."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.deps import SQLITE_WRITE_THREADS
from app.storage.engine import TurnLock, sqlite_file
from tests.service.helpers import create_ladder, post_match

#: More writers than the thread pool has threads (anyio's default: 40).
WRITERS = 48


@pytest.fixture
def sqlite_url(database_url: str) -> str:
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's one write lock")
    return database_url


@pytest.fixture
def held(sqlite_url: str) -> Iterator[sqlite3.Connection]:
    """SQLite's write lock, held by another connection (a long write of another process)."""
    path = sqlite_file(sqlite_url)
    assert path is not None
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    finally:
        connection.rollback()
        connection.close()


def test_reads_and_readiness_go_on_while_writers_queue(
    client: TestClient, sqlite_url: str, held: sqlite3.Connection, tmp_path: Path
) -> None:
    # The lock is taken after the ladder exists: recreate the scene with the lock released.
    held.rollback()
    create_ladder(client, "l")
    post_match(client, "l", {"teams": [["a"], ["b"]]})
    held.execute("BEGIN IMMEDIATE")
    answers: list[int] = []

    def write(n: int) -> None:
        body = {"matches": [{"teams": [[f"w{n}"], [f"v{n}"]]}]}
        answers.append(client.post("/v1/ladders/l/matches/batch", json=body).status_code)

    writers = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in writers:
        thread.start()
    time.sleep(0.5)  # every writer is queued behind the held lock
    released = threading.Event()
    reads: dict[str, Any] = {}

    def read() -> None:
        reads["board"] = client.get("/v1/ladders/l/leaderboard").status_code
        reads["ready"] = client.get("/readyz").status_code
        reads["before_release"] = not released.is_set()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(timeout=20)
    released.set()
    held.rollback()
    for thread in writers:
        thread.join(timeout=60)
    reader.join(timeout=60)
    assert reads == {"board": 200, "ready": 200, "before_release": True}
    assert answers == [201] * WRITERS  # the writers went on once the lock was free
    assert SQLITE_WRITE_THREADS < 40


def test_a_small_writer_goes_before_a_bulk_one() -> None:
    lock = TurnLock()
    assert lock.acquire(bulk=False, timeout=1)
    order: list[str] = []

    def take(kind: str) -> None:
        assert lock.acquire(bulk=kind == "bulk", timeout=10)
        order.append(kind)
        lock.release()

    bulk = threading.Thread(target=take, args=("bulk",))
    bulk.start()
    time.sleep(0.1)  # the bulk writer waits first
    small = threading.Thread(target=take, args=("small",))
    small.start()
    time.sleep(0.1)
    lock.release()
    bulk.join(timeout=10)
    small.join(timeout=10)
    assert order == ["small", "bulk"]
    assert not lock.locked()
    # A bulk writer alone takes its turn; one that cannot gives up at its timeout.
    assert lock.acquire(bulk=True, timeout=1)
    assert not lock.acquire(bulk=False, timeout=0.05)
    lock.release()
