"""Inactivity on the leaderboard: on a ladder that ages ratings, every rating shows as it
stands at the ladder's ``as_of`` (its sigma widened for the time since the player's last
match: sigma^2 + tau_per_day^2 * days, Glicko-2's up to its prior deviation), the
leaderboard orders by that conservative rating, and the daily pass brings ``as_of``
forward in steps, once across workers, resumed by another worker when one stops."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.services import inactivity
from app.storage.engine import get_engine, session_factory
from app.storage.unit_of_work import Transact, transactor
from tests.service.helpers import all_pages, create_ladder, post_match
from tests.service.oracle import random_matches
from tests.service.test_rank import assert_buckets_exact
from tests.service.test_void import _batch

DAY = timedelta(days=1)
T = datetime(2026, 6, 1, tzinfo=UTC)
LADDERS = {
    "trueskill": ({"tau_per_day": 0.5}, 0.5, None),
    "glicko2": ({"deviation_per_day": 30.0}, 30.0, 350.0),
}


def _transact(url: str) -> Transact:
    return transactor(session_factory(get_engine(url)))


def _age(url: str, at: datetime, size: int = 5, **options: Any) -> list[str]:
    return inactivity.age_due_ladders(
        transact=_transact(url), clock=lambda: at, every=DAY, size=size, **options
    )


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _check(client: TestClient, url: str, ladder: str, as_of: datetime | None) -> None:
    """Every rating as it stands at ``as_of``, computed here from the player's rating
    (their history's latest entry) and last match; the leaderboard in that order, ranked;
    each player's answer the same; the rank counts exact."""
    made = client.get(f"/v1/ladders/{ladder}").json()
    _, tau, ceiling = LADDERS[made["algorithm"]]
    k = made["params"]["conservative_k"]
    board = all_pages(client, f"/v1/ladders/{ladder}/leaderboard", limit=4)
    page = client.get(f"/v1/ladders/{ladder}/leaderboard").json()
    assert _when(page["as_of"]) == as_of
    expected = []
    for entry in board:
        history = client.get(f"/v1/ladders/{ladder}/players/{entry['player_id']}/history")
        rating = history.json()["entries"][0]["after"]
        sigma = rating["sigma"]
        last = _when(entry["last_played_at"])
        if as_of is not None and last is not None and as_of > last:
            days = (as_of - last).total_seconds() / 86_400
            widened = math.sqrt(sigma**2 + tau**2 * days)
            sigma = widened if ceiling is None else min(widened, max(sigma, ceiling))
        assert entry["mu"] == rating["mu"]
        assert entry["sigma"] == pytest.approx(sigma, rel=1e-12)
        assert entry["conservative"] == pytest.approx(rating["mu"] - k * sigma, rel=1e-12)
        expected.append((-entry["conservative"], entry["player_id"]))
        player = client.get(f"/v1/ladders/{ladder}/players/{entry['player_id']}").json()
        assert _when(player["as_of"]) == as_of
        assert (player["sigma"], player["conservative"], player["rank"]) == (
            entry["sigma"],
            entry["conservative"],
            entry["rank"],
        )
    assert [e["player_id"] for e in board] == [p for _, p in sorted(expected)]
    assert [e["rank"] for e in board] == list(range(1, len(board) + 1))
    assert_buckets_exact(url)


@pytest.mark.parametrize("algorithm", sorted(LADDERS))
def test_every_write_path_stores_ratings_as_they_stand(
    client: TestClient, database_url: str, algorithm: str
) -> None:
    params = LADDERS[algorithm][0]
    create_ladder(client, "a", algorithm=algorithm, params=params)
    bodies = random_matches(seed=4, count=40, players=12)
    _batch(client, "a", bodies)
    _check(client, database_url, "a", None)  # no pass yet: as recorded

    assert _age(database_url, T) == ["a"]
    _check(client, database_url, "a", T)
    assert _age(database_url, T + timedelta(hours=1)) == []  # not due again for a day
    with get_engine(database_url).connect() as connection:
        assert connection.scalar(text("SELECT count(*) FROM aging_passes")) == 0

    # A match after the pass: its players as it left them; the rest as they stand.
    post_match(
        client,
        "a",
        {"match_id": "late", "teams": [["p00"], ["p01"]], "played_at": "2026-06-01T02:00:00Z"},
    )
    # One reported late, played before the pass: its players stand at the pass's time.
    post_match(
        client,
        "a",
        {"match_id": "old", "teams": [["p02"], ["p03"]], "played_at": "2026-05-01T00:00:00Z"},
    )
    _check(client, database_url, "a", T)
    # A void, a rebuild, a seed and a season's reset write ratings as they stand too.
    assert client.delete(f"/v1/ladders/a/matches/{bodies[30]['match_id']}").status_code == 200
    _check(client, database_url, "a", T)
    assert client.patch("/v1/ladders/a?rebuild=true", json={}).status_code == 200
    _check(client, database_url, "a", T)
    seed = {"mu": 30.0, "sigma": 2.0} if algorithm == "trueskill" else {"mu": 1700.0}
    assert client.put("/v1/ladders/a/players/p04", json=seed).status_code == 200
    _check(client, database_url, "a", T)
    assert client.post("/v1/ladders/a/seasons", json={"id": "s2", "keep": 0.5}).status_code == 201
    _check(client, database_url, "a", T)

    # A day on, the next pass brings them all forward.
    assert _age(database_url, T + DAY + timedelta(minutes=1)) == ["a"]
    _check(client, database_url, "a", T + DAY + timedelta(minutes=1))


def test_an_inactive_player_sinks_below_active_ones(client: TestClient, database_url: str) -> None:
    create_ladder(client, "s", params={"tau_per_day": 0.5})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(12):  # the veteran beats newcomers, long ago
        when = (start + timedelta(hours=n)).isoformat()
        post_match(client, "s", {"teams": [["veteran"], [f"new{n}"]], "played_at": when})
    for n in range(6):  # the active one wins a little, lately
        when = (start + timedelta(days=150, hours=n)).isoformat()
        post_match(client, "s", {"teams": [["active"], [f"late{n}"]], "played_at": when})
    board = [e["player_id"] for e in all_pages(client, "/v1/ladders/s/leaderboard", limit=50)]
    assert board.index("veteran") < board.index("active")
    assert _age(database_url, start + timedelta(days=160)) == ["s"]
    board = [e["player_id"] for e in all_pages(client, "/v1/ladders/s/leaderboard", limit=50)]
    assert board.index("active") < board.index("veteran")
    veteran = client.get("/v1/ladders/s/players/veteran").json()
    assert veteran["rank"] == board.index("veteran") + 1
    _check(client, database_url, "s", start + timedelta(days=160))
    # The console's leaderboard says when its ratings stand.
    console = client.get("/console/ladders/s").text
    assert f"each as it stands at {start + timedelta(days=160):%Y-%m-%d %H:%M} UTC" in console


def test_a_stopped_pass_is_taken_over_after_its_lease(
    client: TestClient, database_url: str
) -> None:
    create_ladder(client, "r", params={"tau_per_day": 0.5})
    _batch(client, "r", random_matches(seed=5, count=30, players=14))
    steps = iter(range(100))
    # A worker that stops after two steps of three players: the pass stays half done.
    assert _age(database_url, T, size=3, stopping=lambda: next(steps) >= 2) == []
    with get_engine(database_url).connect() as connection:
        cursor = connection.scalar(text("SELECT after_id FROM aging_passes"))
    assert cursor not in (None, "")
    # Its lease holds the pass a while: nobody else runs it, nor starts another.
    assert _age(database_url, T + timedelta(seconds=30)) == []
    # Then another worker goes on from the cursor and finishes, to the pass's time.
    assert _age(database_url, T + timedelta(minutes=2), size=3) == ["r"]
    _check(client, database_url, "r", T)


def test_a_ladder_that_does_not_age_is_never_aged(client: TestClient, database_url: str) -> None:
    create_ladder(client, "n")
    create_ladder(client, "e", algorithm="elo")
    _batch(client, "n", random_matches(seed=6, count=10))
    assert _age(database_url, T) == []
    assert client.get("/v1/ladders/n/leaderboard").json()["as_of"] is None


@pytest.mark.postgres
def test_one_pass_across_concurrent_workers(client: TestClient, database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("concurrent workers: PostgreSQL")
    create_ladder(client, "c", params={"tau_per_day": 0.5})
    _batch(client, "c", random_matches(seed=7, count=40, players=30))
    finished: list[list[str]] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        finished.append(_age(database_url, T, size=4))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(finished) == [[], [], [], ["c"]]
    _check(client, database_url, "c", T)
