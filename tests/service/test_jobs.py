"""Long re-ratings as jobs: a void or a rebuild answered with 202 and a job, polled at
``GET /v1/jobs/{id}`` until it has succeeded (the same summary and the same ratings as
inline) or failed (nothing changed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
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
        if job["state"] in ("succeeded", "failed"):
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
