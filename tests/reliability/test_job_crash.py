"""A job whose worker is killed does not stay running: it is reported failed, saying so,
and nothing of it was applied.

A served worker accepts a void as a job and runs it up to the moment before its COMMIT
(the ``pause-after-history`` fault hook), and is killed there with SIGKILL. Another
process then reads the job: on PostgreSQL once its heartbeat is older than the lease
(``RATINGS_JOB_LEASE_S``), on SQLite at once (its worker process is gone). The ladder is as
it was before, and the match can be voided again, this time to the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url, text

from app.config import get_settings
from app.storage.engine import get_engine
from tests.reliability.conftest import Server, all_pages, create_ladder, report
from tests.reliability.faults import HOOK_ENV, PAUSE_AFTER_HISTORY, SIGNAL_ENV
from tests.reliability.proxy import TcpProxy
from tests.service.oracle import random_matches

LEASE_S = 1.0


def _state(http: TestClient, ladder: str) -> dict[str, Any]:
    board = all_pages(http, f"/v1/ladders/{ladder}/leaderboard")
    matches = all_pages(http, f"/v1/ladders/{ladder}/matches")
    return {"board": board, "matches": matches}


def test_a_job_whose_worker_is_killed_is_reported_failed(
    app_client: TestClient,
    start_server: Callable[..., Server],
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RATINGS_JOB_LEASE_S", str(LEASE_S))
    get_settings.cache_clear()
    bodies = random_matches(seed=11, count=200)
    create_ladder(app_client, "l")
    response = app_client.post("/v1/ladders/l/matches/batch", json={"matches": bodies})
    assert response.status_code == 201, response.text
    before = _state(app_client, "l")
    voided = bodies[2]["match_id"]

    signal = tmp_path / "paused"
    server = start_server(
        **{
            HOOK_ENV: PAUSE_AFTER_HISTORY,
            SIGNAL_ENV: str(signal),
            "RATINGS_JOB_LEASE_S": str(LEASE_S),
        }
    )
    with server.client() as http:
        response = http.delete(
            f"/v1/ladders/l/matches/{voided}", headers={"Prefer": "respond-async"}
        )
    assert response.status_code == 202, response.text
    location = response.headers["location"]
    deadline = time.monotonic() + 60
    while not signal.exists():
        assert time.monotonic() < deadline, "the job never reached its commit"
        time.sleep(0.02)
    running = app_client.get(location).json()
    assert running["state"] == "running", running
    server.kill()

    killed = time.monotonic()
    while True:
        job = app_client.get(location).json()
        if job["state"] != "running":
            break
        assert time.monotonic() - killed < 30, job
        time.sleep(0.05)
    seconds = time.monotonic() - killed
    assert job["state"] == "failed", job
    assert job["result"] is None and job["finished_at"] is not None
    # SQLite's workers share a machine: the worker process is seen to have ended. On
    # PostgreSQL another process sees only the heartbeat stop (it may be cut off).
    detail = job["error"]["detail"]
    assert (
        "process running it ended" if database_url.startswith("sqlite") else "stopped reporting"
    ) in detail
    assert "nothing changed" in detail
    assert _state(app_client, "l") == before
    assert app_client.get(location).json() == job  # it stays failed

    again = app_client.delete(f"/v1/ladders/l/matches/{voided}")
    assert again.status_code == 200, again.text
    assert again.json()["already_voided"] is False
    get_settings.cache_clear()
    report(
        f"job_worker_killed[{database_url.split(':')[0]}]",
        reported_failed_after_s=round(seconds, 2),
    )


def test_a_job_cut_off_from_the_database_says_so(
    app_client: TestClient, database_url: str, admin_key: str, tmp_path: Path
) -> None:
    """PostgreSQL: the database goes away as the job commits, so its failure cannot be
    written when it happens; once the database is back its worker writes it, with the
    reason it knows (the database, not a killed worker), without anyone polling."""
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: SQLite has no network to lose")
    bodies = random_matches(seed=12, count=40)
    create_ladder(app_client, "l")
    assert (
        app_client.post("/v1/ladders/l/matches/batch", json={"matches": bodies}).status_code == 201
    )
    before = _state(app_client, "l")
    signal = tmp_path / "paused"
    url = make_url(database_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    server = Server(
        through,
        admin_key,
        RATINGS_JOB_LEASE_S="3",
        **{HOOK_ENV: PAUSE_AFTER_HISTORY, SIGNAL_ENV: str(signal)},
    )
    server.start()
    try:
        with server.client() as http:
            response = http.delete(
                f"/v1/ladders/l/matches/{bodies[2]['match_id']}",
                headers={"Prefer": "respond-async"},
            )
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        deadline = time.monotonic() + 60
        while not signal.exists():
            assert time.monotonic() < deadline, "the job never reached its commit"
            time.sleep(0.02)
        proxy.cut()
        signal.with_name(signal.name + ".release").touch()  # COMMIT goes to a dead connection
        time.sleep(1.0)
        proxy.restore()
        with get_engine(database_url).connect() as connection:
            while True:
                state, error = connection.execute(
                    text("SELECT state, error FROM jobs WHERE id = :id"), {"id": job_id}
                ).one()
                connection.rollback()
                if state != "running":
                    break
                assert time.monotonic() < deadline + 30, "the failure was never written"
                time.sleep(0.05)
    finally:
        server.stop()
        proxy.close()
    assert state == "failed"
    assert error["status"] == 503 and error["detail"].startswith("database: unavailable")
    assert _state(app_client, "l") == before
