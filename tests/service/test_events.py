"""Events in the outbox: each change a consumer acts on is an event written with the change
(none for a change refused or rolled back), paged oldest first by a cursor; an erasure
renames the player in the events about their matches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.config import get_settings
from app.services import events
from app.storage import unit_of_work
from app.storage.engine import get_engine, session_factory
from app.storage.models import Event
from tests.service.helpers import assert_problem, create_ladder, post_match, table_counts


def _events(client: TestClient, ladder: str, **params: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = None
    while True:
        query = {"limit": 4, **params, **({"after": after} if after else {})}
        response = client.get(f"/v1/ladders/{ladder}/events", params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        events += page["events"]
        if not page["events"]:
            return events
        after = page["next_cursor"]


def test_every_change_is_an_event_with_its_document(client: TestClient) -> None:
    create_ladder(client, "l", algorithm="elo")
    one = post_match(client, "l", {"match_id": "a", "teams": [["x"], ["y"]]})
    batch = client.post(
        "/v1/ladders/l/matches/batch",
        json={
            "matches": [
                {"match_id": "b", "teams": [["x"], ["z"]]},
                {"match_id": "c", "teams": [["y"], ["z"]], "ranks": [2, 1]},
            ]
        },
    )
    assert batch.status_code == 201
    voided = client.delete("/v1/ladders/l/matches/b").json()
    rebuilt = client.patch("/v1/ladders/l?rebuild=true", json={"params": {"k_factor": 24}})
    assert rebuilt.status_code == 200, rebuilt.text
    season = client.post("/v1/ladders/l/seasons", json={"id": "s2"}).json()

    events = _events(client, "l")
    assert [e["type"] for e in events] == [
        "match.recorded",
        "match.recorded",
        "match.recorded",
        "match.voided",
        "ladder.rebuilt",
        "season.started",
    ]
    assert all(e["ladder"] == "l" for e in events)
    assert len({e["id"] for e in events}) == len(events)
    # The documents: what each request answered.
    assert events[0]["data"] == one
    assert [e["data"] for e in events[1:3]] == batch.json()["results"]
    assert events[3]["data"] == voided
    assert events[4]["data"] == rebuilt.json()["rebuild"]
    # Written as the season opened: its opening (archive, resets) was then under way.
    assert events[5]["data"] == {**season, "opening": True}
    assert events[0]["created_at"] == one["recorded_at"]


def test_a_refused_change_leaves_no_event(client: TestClient, database_url: str) -> None:
    create_ladder(client, "l")
    post_match(client, "l", {"match_id": "a", "teams": [["x"], ["y"]]})
    before = table_counts(database_url)
    # Another body under a recorded match_id: the batch is refused whole.
    refused = client.post(
        "/v1/ladders/l/matches/batch",
        json={
            "matches": [
                {"match_id": "n", "teams": [["p"], ["q"]]},
                {"match_id": "a", "teams": [["y"], ["x"]]},
            ]
        },
    )
    assert_problem(refused, 409)
    assert_problem(client.post("/v1/ladders/l/matches", json={"teams": [["x"], ["x"]]}), 422)
    assert_problem(client.delete("/v1/ladders/l/matches/nope"), 404)
    # A retry of a recorded match answers as first recorded and writes nothing more.
    assert (
        client.post(
            "/v1/ladders/l/matches", json={"match_id": "a", "teams": [["x"], ["y"]]}
        ).status_code
        == 200
    )
    # Voiding a voided match changes nothing.
    client.delete("/v1/ladders/l/matches/a")
    again = client.delete("/v1/ladders/l/matches/a")
    assert again.json()["already_voided"] is True
    after = table_counts(database_url)
    assert after["events"] == before["events"] + 1  # the one void
    assert [e["type"] for e in _events(client, "l")] == ["match.recorded", "match.voided"]


def test_the_feed_pages_by_its_cursor_and_polls_with_it(client: TestClient) -> None:
    create_ladder(client, "l")
    for n in range(5):
        post_match(client, "l", {"match_id": f"m{n}", "teams": [["x"], [f"y{n}"]]})
    first = client.get("/v1/ladders/l/events", params={"limit": 3}).json()
    assert [e["data"]["match_id"] for e in first["events"]] == ["m0", "m1", "m2"]
    rest = client.get("/v1/ladders/l/events", params={"after": first["next_cursor"]}).json()
    assert [e["data"]["match_id"] for e in rest["events"]] == ["m3", "m4"]
    # Nothing new: the same cursor back, to poll with.
    idle = client.get("/v1/ladders/l/events", params={"after": rest["next_cursor"]}).json()
    assert idle == {"events": [], "next_cursor": rest["next_cursor"]}
    post_match(client, "l", {"match_id": "m5", "teams": [["x"], ["y5"]]})
    new = client.get("/v1/ladders/l/events", params={"after": rest["next_cursor"]}).json()
    assert [e["data"]["match_id"] for e in new["events"]] == ["m5"]
    # Ladders have feeds of their own.
    create_ladder(client, "other")
    assert client.get("/v1/ladders/other/events").json()["events"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [({"after": "not-a-cursor"}, "after"), ({"limit": 0}, "limit"), ({"limit": 100_000}, "limit")],
)
def test_a_bad_feed_request_is_a_422(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    create_ladder(client, "l")
    assert_problem(client.get("/v1/ladders/l/events", params=params), 422, field)
    assert_problem(client.get("/v1/ladders/nope/events"), 404, "nope")


def test_the_feed_is_a_read_with_a_validator(client: TestClient) -> None:
    create_ladder(client, "l")
    post_match(client, "l", {"teams": [["x"], ["y"]]})
    page = client.get("/v1/ladders/l/events")
    anonymous = client.get("/v1/ladders/l/events", headers={"Authorization": ""})
    assert anonymous.status_code == 200 and anonymous.json() == page.json()
    etag = page.headers["etag"]
    assert client.get("/v1/ladders/l/events", headers={"If-None-Match": etag}).status_code == 304
    post_match(client, "l", {"teams": [["x"], ["y"]]})
    assert client.get("/v1/ladders/l/events", headers={"If-None-Match": etag}).status_code == 200


def test_an_erasure_renames_the_player_in_earlier_events(client: TestClient) -> None:
    create_ladder(client, "l")
    post_match(
        client, "l", {"match_id": "a", "teams": [["gone"], ["stays"]], "meta": {"mvp": "gone"}}
    )
    post_match(client, "l", {"match_id": "b", "teams": [["other"], ["stays"]]})
    erased = client.delete("/v1/ladders/l/players/gone")
    assert erased.status_code == 200
    events = _events(client, "l")
    assert [e["type"] for e in events] == ["match.recorded", "match.recorded", "player.erased"]
    first = events[0]["data"]
    assert first == client.get("/v1/ladders/l/matches/a").json()  # the stored, renamed match
    names = [p["player_id"] for team in first["teams"] for p in team["players"]]
    assert "gone" not in names and "stays" in names and first["meta"]["mvp"] != "gone"
    # The erasure's own event names the id, for the systems that mirrored it to erase it.
    assert events[2]["data"] == erased.json()
    assert events[2]["data"]["player_id"] == "gone"


def test_events_past_their_retention_are_deleted_oldest_first(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_ladder(client, "l")
    for n in range(4):
        post_match(client, "l", {"match_id": f"m{n}", "teams": [["x"], [f"y{n}"]]})
    engine = get_engine(database_url)
    month_ago = datetime.now(UTC) - timedelta(days=31)
    with engine.begin() as connection:
        connection.execute(update(Event).where(Event.seq <= 2).values(created_at=month_ago))
    transact = unit_of_work.transactor(session_factory(engine))
    # Kept for ever: no retention.
    monkeypatch.setenv("RATINGS_EVENT_RETENTION_S", "0")
    get_settings.cache_clear()
    events.run_event_chores(transact, datetime.now(UTC))
    assert len(_events(client, "l")) == 4
    # The default, 30 days: the two older ones go; the feed goes on from the others.
    monkeypatch.delenv("RATINGS_EVENT_RETENTION_S")
    get_settings.cache_clear()
    events.run_event_chores(transact, datetime.now(UTC))
    assert [e["data"]["match_id"] for e in _events(client, "l")] == ["m2", "m3"]
