"""Long re-ratings as jobs: a void or a rebuild answered with 202 and a job, polled at
``GET /v1/jobs/{id}`` until it has succeeded (the same summary and the same ratings as
inline) or failed (nothing changed)."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.config import get_settings
from app.services import auth, jobs, rerate
from app.storage.engine import get_engine, session_factory
from tests.reliability import faults
from tests.service.helpers import all_pages, assert_problem, create_ladder, table_counts
from tests.service.oracle import random_matches

ASYNC = {"Prefer": "respond-async"}


def _ladder(client: TestClient, ladder: str, bodies: list[dict[str, Any]]) -> None:
    create_ladder(client, ladder, params={"tau_per_day": 0.2})
    if bodies:
        response = client.post(f"/v1/ladders/{ladder}/matches/batch", json={"matches": bodies})
        assert response.status_code == 201, response.text


def _state(client: TestClient, ladder: str) -> dict[str, Any]:
    """Everything a re-rating rewrites: leaderboard, histories, the matches that count."""
    board = all_pages(client, f"/v1/ladders/{ladder}/leaderboard", limit=50)
    histories = {
        entry["player_id"]: all_pages(
            client, f"/v1/ladders/{ladder}/players/{entry['player_id']}/history", limit=100
        )
        for entry in board
    }
    matches = [
        {k: v for k, v in m.items() if k not in ("ladder", "seq", "recorded_at")}
        for m in all_pages(client, f"/v1/ladders/{ladder}/matches", limit=100)
        if not m["voided"]
    ]
    return {"board": board, "histories": histories, "matches": matches}


def _finished(client: TestClient, location: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(location)
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.02)


def _accepted(response: Any, prefer: bool = True) -> dict[str, Any]:
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert response.headers.get("preference-applied") == ("respond-async" if prefer else None)
    assert job["state"] in ("queued", "running", "succeeded")
    assert job["result"] is None and job["error"] is None
    return job


@pytest.fixture
def inline_max(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every re-rating of a match or more is a job (``RATINGS_REBUILD_INLINE_MAX=0``)."""
    monkeypatch.setenv("RATINGS_REBUILD_INLINE_MAX", "0")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_a_void_as_a_job_equals_the_inline_void(client: TestClient) -> None:
    bodies = random_matches(seed=5, count=40)
    _ladder(client, "inline", bodies)
    _ladder(client, "job", bodies)
    voided = bodies[6]["match_id"]

    inline = client.delete(f"/v1/ladders/inline/matches/{voided}")
    assert inline.status_code == 200, inline.text
    response = client.delete(f"/v1/ladders/job/matches/{voided}", headers=ASYNC)
    accepted = _accepted(response)
    assert (accepted["kind"], accepted["ladder"]) == ("void", "job")

    job = _finished(client, response.headers["location"])
    assert job["state"] == "succeeded", job
    assert job["error"] is None
    summary, expected = job["result"], inline.json()
    assert {k: v for k, v in summary.items() if k not in ("ladder", "voided_at")} == {
        k: v for k, v in expected.items() if k not in ("ladder", "voided_at")
    }
    assert summary["ladder"] == "job" and summary["matches_rerated"] > 0
    assert job["progress"] == {"done": summary["matches_rerated"], "total": 33}
    assert job["created_at"] <= job["started_at"] <= job["finished_at"]
    assert _state(client, "job") == _state(client, "inline")
    voided_match = client.get(f"/v1/ladders/job/matches/{voided}").json()
    assert voided_match["voided"] is True

    # Voiding it again is answered at once: nothing to re-rate, no job.
    again = client.delete(f"/v1/ladders/job/matches/{voided}", headers=ASYNC)
    assert again.status_code == 200 and again.json()["already_voided"] is True


def test_a_rebuild_over_the_threshold_is_a_job(client: TestClient, inline_max: None) -> None:
    bodies = random_matches(seed=8, count=30)
    _ladder(client, "job", bodies)
    _ladder(client, "fresh", [])
    params = {"tau_per_day": 0.5, "beta": 3.0}
    response = client.patch("/v1/ladders/job?rebuild=true", json={"params": params})
    accepted = _accepted(response, prefer=False)
    assert accepted["kind"] == "rebuild"
    job = _finished(client, response.headers["location"])
    assert job["state"] == "succeeded", job
    players = len({p for body in bodies for team in body["teams"] for p in team})
    assert job["result"]["rebuild"] == {"ladder": "job", "matches_rerated": 30, "players": players}
    assert job["result"]["ladder"]["params"]["beta"] == 3.0
    assert job["progress"] == {"done": 30, "total": 30}
    assert client.get("/v1/ladders/job").json()["params"] == job["result"]["ladder"]["params"]

    # The same as a ladder made with those parameters from the start.
    fresh = client.patch("/v1/ladders/fresh?rebuild=true", json={"params": params})
    assert fresh.status_code == 200, fresh.text  # nothing to re-rate: inline
    response = client.post("/v1/ladders/fresh/matches/batch", json={"matches": bodies})
    assert response.status_code == 201, response.text
    assert _state(client, "job") == _state(client, "fresh")

    # Refused at once, as inline: a bad parameter (422), a change without rebuild (409).
    assert_problem(
        client.patch("/v1/ladders/job?rebuild=true", json={"params": {"bogus": 1}}), 422, "bogus"
    )
    assert_problem(client.patch("/v1/ladders/job", json={"params": {"beta": 2.0}}), 409, "rebuild")


def test_a_failing_job_reports_failed_and_changes_nothing(
    client: TestClient, database_url: str
) -> None:
    bodies = random_matches(seed=9, count=30)
    _ladder(client, "l", bodies)
    before = _state(client, "l")
    counts = table_counts(database_url)
    # Every transaction that writes ratings loses a conflict: the job's three runs too.
    faults.install(faults.CONFLICT_AFTER_HISTORY, times=100)
    try:
        response = client.delete(f"/v1/ladders/l/matches/{bodies[3]['match_id']}", headers=ASYNC)
        _accepted(response)
        job = _finished(client, response.headers["location"])
    finally:
        faults.uninstall()
    assert job["state"] == "failed", job
    assert job["result"] is None
    assert job["error"]["status"] == 503
    assert "nothing was changed" in job["error"]["detail"]
    assert job["finished_at"] is not None
    assert _state(client, "l") == before
    assert client.get(f"/v1/ladders/l/matches/{bodies[3]['match_id']}").json()["voided"] is False
    assert table_counts(database_url) == {**counts, "jobs": counts["jobs"] + 1}


def test_unknown_jobs_are_404(client: TestClient) -> None:
    assert_problem(client.get("/v1/jobs/0123456789abcdef0123456789abcdef"), 404, "job_id")
    assert_problem(client.get("/v1/jobs/nope"), 404, "job_id")


def _key(scope: str) -> str:
    session = session_factory(get_engine())()
    try:
        key = auth.create_key(session, name=f"k-{scope}", scope=scope).key
        session.commit()
    finally:
        session.close()
    return key


def test_jobs_are_for_admin_keys(client: TestClient) -> None:
    _ladder(client, "l", random_matches(seed=2, count=5))
    response = client.delete("/v1/ladders/l/matches/r2-1", headers=ASYNC)
    location = _accepted(response)["id"]
    _finished(client, f"/v1/jobs/{location}")
    keys = {scope: _key(scope) for scope in ("read", "write")}
    anonymous = {"Authorization": ""}
    assert_problem(client.get(f"/v1/jobs/{location}", headers=anonymous), 401)
    for key in keys.values():
        headers = {"Authorization": f"Bearer {key}"}
        assert_problem(client.get(f"/v1/jobs/{location}", headers=headers), 403, "admin")
        denied = client.delete("/v1/ladders/l/matches/r2-2", headers={**headers, **ASYNC})
        assert_problem(denied, 403, "admin")
    assert client.get(f"/v1/jobs/{location}").status_code == 200


def test_progress_is_seen_while_the_transaction_is_open(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job is held at a report half-way: a poll sees that progress then (on PostgreSQL
    in the job's row, written by a transaction of its own, for every worker to read)."""
    bodies = random_matches(seed=3, count=60)
    _ladder(client, "l", bodies)
    monkeypatch.setattr(rerate, "PROGRESS_STEP", 10)
    reported = threading.Event()
    release = threading.Event()
    report = jobs._Reporter.__call__

    def held(self: Any, done: int, total: int) -> None:
        report(self, done, total)
        if 0 < done < total and not reported.is_set():
            reported.set()
            release.wait(timeout=60)

    monkeypatch.setattr(jobs._Reporter, "__call__", held)
    response = client.delete(f"/v1/ladders/l/matches/{bodies[0]['match_id']}", headers=ASYNC)
    location = response.headers["location"]
    try:
        assert reported.wait(timeout=60)
        job = client.get(location).json()
        assert job["state"] == "running"
        assert job["started_at"] is not None and job["finished_at"] is None
        assert 0 < job["progress"]["done"] < job["progress"]["total"]
        if get_engine(database_url).dialect.name == "postgresql":
            with get_engine(database_url).connect() as connection:
                row = connection.execute(
                    text("SELECT state, done, total FROM jobs WHERE id = :id"), {"id": job["id"]}
                ).one()
            assert tuple(row) == ("running", job["progress"]["done"], job["progress"]["total"])
    finally:
        release.set()
    job = _finished(client, location)
    assert job["state"] == "succeeded"
    assert job["progress"]["done"] == job["progress"]["total"] == job["result"]["matches_rerated"]


def test_rerating_of_a_ladder_with_a_job_pending_queues_behind_it(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a small void of a ladder whose job runs is a job too, answered at once
    (its request does not wait for the ladder); on SQLite, whose one writer the job is, it
    waits and then runs inline. The two never overlap: the ladder ends as both voids in
    turn leave it."""
    bodies = random_matches(seed=4, count=40)
    _ladder(client, "l", bodies)
    _ladder(client, "fresh", [b for n, b in enumerate(bodies) if n not in (0, 38)])
    reported = threading.Event()
    release = threading.Event()
    report = jobs._Reporter.__call__

    def held(self: Any, done: int, total: int) -> None:
        report(self, done, total)
        if not reported.is_set():
            reported.set()
            release.wait(timeout=60)

    monkeypatch.setattr(jobs._Reporter, "__call__", held)
    first = client.delete(f"/v1/ladders/l/matches/{bodies[0]['match_id']}", headers=ASYNC)
    second: list[Any] = []
    other = threading.Thread(
        target=lambda: second.append(
            client.delete(f"/v1/ladders/l/matches/{bodies[38]['match_id']}")
        )
    )
    try:
        assert reported.wait(timeout=60)
        other.start()
        if get_engine(database_url).dialect.name == "postgresql":
            other.join(timeout=60)
            _accepted(second[0], prefer=False)
    finally:
        release.set()
        other.join(timeout=60)
    assert _finished(client, first.headers["location"])["state"] == "succeeded"
    if second[0].status_code == 202:
        assert _finished(client, second[0].headers["location"])["state"] == "succeeded"
    else:
        assert second[0].status_code == 200, second[0].text
    assert _state(client, "l") == _state(client, "fresh")


def _held_at_first_report(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[threading.Event, threading.Event]:
    """Jobs stop at their first report half-way, before it is made, until released."""
    monkeypatch.setattr(rerate, "PROGRESS_STEP", 10)
    reported = threading.Event()
    release = threading.Event()
    report = jobs._Reporter.__call__

    def held(self: Any, done: int, total: int) -> None:
        if 0 < done < total and not reported.is_set():
            reported.set()
            release.wait(timeout=60)
        report(self, done, total)

    monkeypatch.setattr(jobs._Reporter, "__call__", held)
    return reported, release


def test_a_cancelled_job_applies_nothing(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled half-way: on PostgreSQL at once (200), on SQLite, whose one writer the job
    is, asked (202) and ended by the job at its next report; either way nothing of it."""
    bodies = random_matches(seed=5, count=60)
    _ladder(client, "l", bodies)
    before = _state(client, "l")
    reported, release = _held_at_first_report(monkeypatch)
    location = client.delete(
        f"/v1/ladders/l/matches/{bodies[0]['match_id']}", headers=ASYNC
    ).headers["location"]
    try:
        assert reported.wait(timeout=60)
        cancelled = client.delete(location)
        if get_engine(database_url).dialect.name == "postgresql":
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["state"] == "cancelled"
            assert cancelled.json()["finished_at"] is not None
        else:
            assert cancelled.status_code == 202, cancelled.text
            assert cancelled.headers["location"] == location
            assert cancelled.json()["state"] == "running"
    finally:
        release.set()
    job = _finished(client, location)
    assert job["state"] == "cancelled" and job["result"] is None and job["error"] is None
    assert _state(client, "l") == before
    assert not client.get(f"/v1/ladders/l/matches/{bodies[0]['match_id']}").json()["voided"]
    assert_problem(client.delete(location), 409, "ended")
    assert client.get(location).json() == job  # it stays cancelled


def test_cancelling_needs_an_admin_key_and_a_job_that_has_not_ended(
    client: TestClient, database_url: str, inline_max: None
) -> None:
    bodies = random_matches(seed=6, count=8)
    _ladder(client, "l", bodies)
    location = client.delete(f"/v1/ladders/l/matches/{bodies[0]['match_id']}").headers["location"]
    assert _finished(client, location)["state"] == "succeeded"
    assert_problem(client.delete(location), 409, "succeeded")
    assert_problem(client.delete("/v1/jobs/nope"), 404, "job_id")
    session = session_factory(get_engine(database_url))()
    write = auth.create_key(session, name="w", scope="write").key
    session.commit()
    session.close()
    assert_problem(client.delete(location, headers={"Authorization": f"Bearer {write}"}), 403)
    assert_problem(client.delete(location, headers={"Authorization": ""}), 401)


def test_a_request_waits_for_a_held_ladder_at_most_its_bound(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: while another transaction holds the ladder (a running re-rating), a void,
    a rebuild and an erasure each get 503 with Retry-After once the statement timeout has
    passed, nothing changed; a job waits its turn and then runs."""
    if get_engine(database_url).dialect.name != "postgresql":
        pytest.skip("PostgreSQL: SQLite's writers wait for its one lock (busy timeout)")
    bodies = random_matches(seed=7, count=12)
    _ladder(client, "l", bodies)
    before = _state(client, "l")
    monkeypatch.setenv("RATINGS_STATEMENT_TIMEOUT_MS", "300")
    get_settings.cache_clear()
    holder = get_engine(database_url).connect()
    holder.execute(text("SELECT id FROM ladders WHERE id = 'l' FOR UPDATE"))
    # Without a bound the requests below would wait for this release, and succeed late.
    watchdog = threading.Timer(30, holder.rollback)
    watchdog.start()
    try:
        player = bodies[0]["teams"][0][0]
        for response in (
            client.delete(f"/v1/ladders/l/matches/{bodies[1]['match_id']}"),
            client.patch("/v1/ladders/l?rebuild=true", json={}),
            client.delete(f"/v1/ladders/l/players/{player}"),
        ):
            detail = assert_problem(response, 503, "ladder")
            assert "held" in detail
            assert response.headers["retry-after"] == "5"
        queued = client.delete(f"/v1/ladders/l/matches/{bodies[1]['match_id']}", headers=ASYNC)
        job = _accepted(queued)
        time.sleep(0.6)  # past the requests' bound: the job still waits
        assert client.get(queued.headers["location"]).json()["state"] in ("queued", "running")
        assert _state(client, "l") == before
    finally:
        watchdog.cancel()
        holder.rollback()
        holder.close()
    assert _finished(client, f"/v1/jobs/{job['id']}")["state"] == "succeeded"


def _orphan(database_url: str, heartbeat_age_s: float) -> str:
    """A running job of a worker process that no longer exists (on this host), with a
    heartbeat this old: what a worker killed mid-job leaves."""
    job_id = uuid.uuid4().hex
    now = datetime.now(UTC)
    with get_engine(database_url).begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (id, kind, ladder_id, request, state, done, total, owner,"
                " created_at, started_at, heartbeat_at) VALUES (:id, 'rebuild', 'l', '{}',"
                " 'running', 0, NULL, :owner, :now, :now, :beat)"
            ),
            {
                "id": job_id,
                "owner": f"{socket.gethostname()[:64]}:999999999:-",
                "now": now,
                "beat": now - timedelta(seconds=heartbeat_age_s),
            },
        )
    return job_id


def _job_row(database_url: str, job_id: str) -> Any:
    with get_engine(database_url).connect() as connection:
        return connection.execute(
            text("SELECT state, error FROM jobs WHERE id = :id"), {"id": job_id}
        ).one()


def test_a_dead_workers_job_is_reaped_without_a_poll(
    database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker reaps stale jobs every third of the lease: nobody polls this one."""
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    monkeypatch.setenv("RATINGS_JOB_LEASE_S", "0.6")
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app()) as client:
        client.headers["Authorization"] = f"Bearer {admin_key}"
        create_ladder(client, "l")
        job_id = _orphan(database_url, heartbeat_age_s=60)
        deadline = time.monotonic() + 30
        while (row := _job_row(database_url, job_id)).state == "running":
            assert time.monotonic() < deadline, "the job was never reaped"
            time.sleep(0.05)
    get_settings.cache_clear()
    assert row.state == "failed"
    error = row.error if isinstance(row.error, dict) else __import__("json").loads(row.error)
    assert error["type"] == "/problems/job-abandoned"
    if database_url.startswith("sqlite"):
        assert "process running it ended" in error["detail"]  # seen on this machine
    else:
        assert "stopped reporting for 0.6 s" in error["detail"]  # only its silence is seen
