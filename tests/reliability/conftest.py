"""Fixtures of the reliability tests: real uvicorn servers that can be killed and restarted,
an in-process client, keys of each scope, and a counter of the database errors that a
retry would have to absorb (deadlocks, serialization failures, a locked SQLite file).

Every server listens on loopback only and runs in its own process group, so a test can
SIGKILL it (and its workers) without touching any other process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from app.services import auth
from app.storage.engine import get_engine, session_factory

ROOT = Path(__file__).resolve().parents[2]

#: What the servers run: ``app.main:app`` with the test-only fault hook installed.
SERVED_APP = "tests.reliability.served:app"

#: SQLSTATEs of the PostgreSQL errors a transaction retry is for.
RETRYABLE_SQLSTATES = {"40P01": "deadlock", "40001": "serialization_failure"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """``uvicorn tests.reliability.served:app`` (the service's app, with the fault hook
    named by ``RATINGS_FAULT_HOOK`` installed) in a subprocess of its own process group."""

    def __init__(self, database_url: str, key: str, workers: int = 1, **env: str) -> None:
        self.database_url = database_url
        self.key = key
        self.workers = workers
        self.env = env
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, log_path: Path | None = None) -> None:
        env = {**os.environ, "RATINGS_DATABASE_URL": self.database_url, **self.env}
        self.log_path = log_path
        output = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        command = [sys.executable, "-m", "uvicorn", SERVED_APP, "--host", "127.0.0.1"]
        level = env.get("RATINGS_LOG_LEVEL", "warning")
        command += ["--port", str(self.port), "--log-level", level]
        if self.workers > 1:
            command += ["--workers", str(self.workers)]
        self.process = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=output, stderr=output, start_new_session=True
        )
        if log_path is not None:
            output.close()  # type: ignore[union-attr]
        self.wait_healthy()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.base_url, timeout=5) as http:
            while time.monotonic() < deadline:
                assert self.process.poll() is None, "the server exited while starting"
                try:
                    if http.get("/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        raise AssertionError("the server did not start")

    def client(self, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        kwargs.setdefault("timeout", 60)
        return httpx.Client(base_url=self.base_url, headers=headers, **kwargs)

    def kill(self) -> None:
        """SIGKILL the server and its workers: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self.process = None


@pytest.fixture
def start_server(database_url: str, admin_key: str) -> Iterator[Callable[..., Server]]:
    """``start_server(workers=1, **env)``: a running server on ``database_url``; every
    server started is stopped at the end of the test."""
    servers: list[Server] = []

    def start(workers: int = 1, log_path: Path | None = None, **env: str) -> Server:
        server = Server(database_url, admin_key, workers=workers, **env)
        servers.append(server)
        server.start(log_path)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def make_key(database_url: str) -> Callable[[str, str], str]:
    """``make_key(scope, name)``: a committed key's plaintext."""

    def make(scope: str, name: str) -> str:
        session = session_factory(get_engine(database_url))()
        try:
            key = auth.create_key(session, name=name, scope=scope).key
            session.commit()
            return key
        finally:
            session.close()

    return make


@pytest.fixture
def app_client(client: TestClient) -> TestClient:
    """The app in process on ``database_url``, sending the admin key with every request
    (the suite-wide ``client`` fixture, named apart from the servers' HTTP clients here)."""
    return client


@pytest.fixture
def database_errors() -> Iterator[Counter[str]]:
    """Counts, by kind, the database errors raised in this process while the test runs."""
    counts: Counter[str] = Counter()

    def on_error(context: Any) -> None:
        original = context.original_exception
        state = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
        if state in RETRYABLE_SQLSTATES:
            counts[RETRYABLE_SQLSTATES[state]] += 1
        elif "database is locked" in str(original):
            counts["sqlite_locked"] += 1
        else:
            counts[type(original).__name__] += 1

    event.listen(Engine, "handle_error", on_error)
    yield counts
    event.remove(Engine, "handle_error", on_error)


def create_ladder(http: httpx.Client | TestClient, ladder: str, **config: Any) -> None:
    body = {"id": ladder, "algorithm": "trueskill", **config}
    response = http.post("/v1/ladders", json=body)
    assert response.status_code == 201, response.text


def all_pages(http: httpx.Client | TestClient, path: str, limit: int = 1000) -> list[Any]:
    """Every entry of a paged list, following ``next_cursor``."""
    entries: list[Any] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = http.get(path, params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        entries.extend(page["entries"])
        cursor = page["next_cursor"]
        if cursor is None:
            return entries


def report(test: str, **figures: Any) -> None:
    """Print a test's figures, and append them as one line to the file named by
    ``RATINGS_RELIABILITY_REPORT`` when it is set (docs/reliability.md quotes them)."""
    line = f"{test}: " + ", ".join(f"{name}={value}" for name, value in figures.items())
    print(line)
    path = os.environ.get("RATINGS_RELIABILITY_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")
