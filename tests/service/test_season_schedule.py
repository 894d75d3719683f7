"""Scheduled seasons: a season given ``starts_at`` is opened by the service itself at that
time, exactly once whatever the number of workers and instances, and a failure at the
moment of opening neither loses nor doubles it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.config import get_settings
from app.errors import InvalidInput
from app.services import seasons
from app.storage.engine import get_engine, session_factory
from app.storage.models import RatingHistory, ScheduledSeason
from app.storage.unit_of_work import transactor
from tests.service.helpers import assert_problem, create_ladder, post_match, table_counts


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture
def quick_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("RATINGS_SEASON_CLOCK_S", "0.05")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _app_client(database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    from app.main import create_app

    client = TestClient(create_app(), raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {admin_key}"
    return client


def _wait_for(check: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.05)


def test_a_scheduled_season_opens_by_itself(
    quick_clock: None, database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _app_client(database_url, admin_key, monkeypatch) as client:
        create_ladder(client, "s")
        post_match(client, "s", {"match_id": "m1", "teams": [["a"], ["b"]]})
        starts = datetime.now(UTC) + timedelta(seconds=1.5)
        response = client.post(
            "/v1/ladders/s/seasons", json={"id": "two", "keep": 0.5, "starts_at": _iso(starts)}
        )
        assert response.status_code == 201, response.text
        scheduled = response.json()
        assert (scheduled["state"], scheduled["ordinal"], scheduled["started_at"]) == (
            "scheduled",
            2,
            None,
        )
        assert datetime.fromisoformat(scheduled["starts_at"]) == starts
        listed = client.get("/v1/ladders/s/seasons").json()["entries"]
        assert [(e["id"], e["state"]) for e in listed] == [("two", "scheduled"), ("1", "open")]
        # Until it opens, matches record into the first season.
        post_match(client, "s", {"match_id": "m2", "teams": [["a"], ["c"]]})

        def opened() -> bool:
            entries = client.get("/v1/ladders/s/seasons").json()["entries"]
            return bool(entries[0]["state"] == "open")

        _wait_for(opened)
        listed = client.get("/v1/ladders/s/seasons").json()["entries"]
        assert [(e["id"], e["state"]) for e in listed] == [("two", "open"), ("1", "closed")]
        started = datetime.fromisoformat(listed[0]["started_at"])
        assert starts <= started < starts + timedelta(seconds=10)
        player = client.get("/v1/ladders/s/players/a").json()
        assert player["season"] == "two"
        history = client.get("/v1/ladders/s/players/a/history").json()["entries"]
        kinds = [(e["kind"], e["season"]) for e in reversed(history)]
        # m2 was recorded before the season opened (or, on a slow machine, after).
        assert kinds in (
            [("match", "1"), ("match", "1"), ("season_reset", "two")],
            [("match", "1"), ("season_reset", "two"), ("match", "two")],
        )
        assert listed[1]["matches"] == kinds.count(("match", "1"))
        reset = next(e for e in history if e["kind"] == "season_reset")
        assert reset["after"]["mu"] == 25.0 + 0.5 * (reset["before"]["mu"] - 25.0)


def test_bad_schedules_are_refused(client: TestClient, database_url: str) -> None:
    create_ladder(client, "b")
    now = datetime.now(UTC)
    later = _iso(now + timedelta(days=30))
    counts = table_counts(database_url)
    past = client.post("/v1/ladders/b/seasons", json={"id": "x", "starts_at": _iso(now)})
    assert_problem(past, 422, "starts_at")
    for bad in ("soon", 12, "2027-13-01T00:00:00Z"):
        response = client.post("/v1/ladders/b/seasons", json={"id": "x", "starts_at": bad})
        assert_problem(response, 422, "starts_at")
    assert_problem(
        client.post("/v1/ladders/b/seasons", json={"id": "1", "starts_at": later}), 409, "id"
    )
    assert table_counts(database_url) == counts

    first = client.post("/v1/ladders/b/seasons", json={"id": "x", "starts_at": later})
    assert first.status_code == 201, first.text
    counts = table_counts(database_url)
    again = client.post("/v1/ladders/b/seasons", json={"id": "y", "starts_at": later})
    assert "DELETE" in assert_problem(again, 409, "starts_at")
    # Opening the scheduled id now is refused too: it is taken.
    assert_problem(client.post("/v1/ladders/b/seasons", json={"id": "x"}), 409, "id")
    assert_problem(client.delete("/v1/ladders/b/seasons/1"), 409, "season")
    assert_problem(client.delete("/v1/ladders/b/seasons/zz"), 404, "season")
    assert table_counts(database_url) == counts

    cancelled = client.delete("/v1/ladders/b/seasons/x")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "scheduled"
    listed = client.get("/v1/ladders/b/seasons").json()["entries"]
    assert [e["id"] for e in listed] == ["1"]
    assert_problem(client.delete("/v1/ladders/b/seasons/x"), 404, "season")


def _schedule_due(database_url: str, ladder: str, season: str) -> None:
    """A scheduled season whose time has come (written as the API writes it, then made
    due by moving its time back)."""
    factory = session_factory(get_engine(database_url))
    with factory() as session:
        session.execute(
            ScheduledSeason.__table__.update()  # type: ignore[attr-defined]
            .where(ScheduledSeason.ladder_id == ladder)
            .values(starts_at=datetime.now(UTC) - timedelta(seconds=1))
        )
        session.commit()


def _resets(database_url: str) -> int:
    with get_engine(database_url).connect() as connection:
        query = select(func.count()).where(RatingHistory.reset.is_(True))
        return int(connection.scalar(query) or 0)


def test_many_workers_open_a_due_season_once(client: TestClient, database_url: str) -> None:
    create_ladder(client, "once")
    for n in range(6):
        post_match(client, "once", {"match_id": f"m{n}", "teams": [[f"p{n}"], [f"q{n}"]]})
    later = _iso(datetime.now(UTC) + timedelta(days=1))
    assert (
        client.post("/v1/ladders/once/seasons", json={"id": "two", "starts_at": later}).status_code
        == 201
    )
    _schedule_due(database_url, "once", "two")

    transact = transactor(session_factory(get_engine(database_url)))
    opened: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def worker() -> None:
        try:
            start.wait()
            opened.append(len(seasons.open_due_seasons(transact=transact)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(opened) == [0, 0, 0, 0, 0, 1]
    listed = client.get("/v1/ladders/once/seasons").json()["entries"]
    assert [(e["id"], e["state"]) for e in listed] == [("two", "open"), ("1", "closed")]
    assert _resets(database_url) == 12  # one per player, once


def test_a_failure_at_the_moment_of_opening_leaves_it_for_the_next_round(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_ladder(client, "crash")
    post_match(client, "crash", {"match_id": "m", "teams": [["a"], ["b"]]})
    later = _iso(datetime.now(UTC) + timedelta(days=1))
    body = {"id": "two", "keep": 0.0, "starts_at": later}
    assert client.post("/v1/ladders/crash/seasons", json=body).status_code == 201
    _schedule_due(database_url, "crash", "two")
    transact = transactor(session_factory(get_engine(database_url)))
    original = seasons.season_repo.start_opening

    def failing(**kwargs: Any) -> None:
        original(**kwargs)  # the season is current in the transaction when it fails
        raise InvalidInput("the process died here")

    monkeypatch.setattr(seasons.season_repo, "start_opening", failing)
    with pytest.raises(InvalidInput):
        seasons.open_due_seasons(transact=transact)
    assert _resets(database_url) == 0
    listed = client.get("/v1/ladders/crash/seasons").json()["entries"]
    assert [(e["id"], e["state"]) for e in listed] == [("two", "scheduled"), ("1", "open")]

    monkeypatch.setattr(seasons.season_repo, "start_opening", original)
    assert len(seasons.open_due_seasons(transact=transact)) == 1
    assert seasons.open_due_seasons(transact=transact) == []
    assert _resets(database_url) == 2
    assert client.get("/v1/ladders/crash/players/a").json()["mu"] == 25.0  # keep 0


def test_an_opening_whose_worker_died_mid_steps_is_taken_over(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_ladder(client, "died")
    for n in range(5):
        post_match(client, "died", {"match_id": f"m{n}", "teams": [[f"p{n}"], [f"q{n}"]]})
    later = _iso(datetime.now(UTC) + timedelta(days=1))
    body = {"id": "two", "keep": 0.0, "starts_at": later}
    assert client.post("/v1/ladders/died/seasons", json=body).status_code == 201
    _schedule_due(database_url, "died", "two")
    transact = transactor(session_factory(get_engine(database_url)))
    original = seasons._write_resets

    def failing(**kwargs: Any) -> None:
        raise InvalidInput("the process died here")

    monkeypatch.setattr(seasons, "_write_resets", failing)
    with pytest.raises(InvalidInput):
        seasons.open_due_seasons(transact=transact)
    monkeypatch.setattr(seasons, "_write_resets", original)
    # The season is current; its steps wait for the lease to run out.
    listed = client.get("/v1/ladders/died/seasons").json()["entries"]
    assert [(e["id"], e["state"], e["opening"]) for e in listed] == [
        ("two", "open", True),
        ("1", "closed", False),
    ]
    assert_problem(client.get("/v1/ladders/died/seasons/1/leaderboard"), 409, "archived")
    assert seasons.open_due_seasons(transact=transact) == []
    assert _resets(database_url) == 0  # its lease still holds it
    later_clock = datetime.now(UTC) + seasons.lease() + timedelta(seconds=1)
    assert seasons.open_due_seasons(transact=transact, clock=lambda: later_clock) == []
    assert _resets(database_url) == 10
    listed = client.get("/v1/ladders/died/seasons").json()["entries"]
    assert [(e["id"], e["opening"]) for e in listed] == [("two", False), ("1", False)]
    archive = client.get("/v1/ladders/died/seasons/1/leaderboard").json()["entries"]
    assert [entry["rank"] for entry in archive] == list(range(1, 11))
    assert client.get("/v1/ladders/died/players/p0").json()["mu"] == 25.0  # keep 0
