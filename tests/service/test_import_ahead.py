"""An import rates its next chunk while the last one is written (``batches.rate_ahead``);
the chunk's transaction writes those numbers only if its players' ratings are still the
ones they were rated from, else it records the chunk as usual: either way the ratings equal
a replay of every match in the order recorded."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from app.domain.documents.matches import MatchCreate
from app.services import batches
from app.storage import unit_of_work
from app.storage.engine import get_engine, session_factory
from app.storage.models import Ladder
from app.storage.repositories import recording as recording_repo
from tests.service.helpers import create_ladder

FIRST = [
    {"match_id": "a1", "teams": [["ann"], ["bob"]]},
    {"match_id": "a2", "teams": [["bob"], ["cat"]], "ranks": [1, 1]},
]
SECOND = [
    {"match_id": "b1", "teams": [["ann"], ["cat"]]},
    {"match_id": "b2", "teams": [["dan"], ["ann"], ["bob"]]},
]
BETWEEN = {"match_id": "x1", "teams": [["cat"], ["ann"]]}


def _bodies(raw: list[dict[str, Any]]) -> list[MatchCreate]:
    return [MatchCreate.model_validate(body) for body in raw]


def _numbers(text: str) -> Any:
    result = json.loads(text)
    return result["match_id"], result["quality"], result["teams"]


def _ahead(
    database_url: str, ladder_id: str, raw: list[dict[str, Any]], now: datetime
) -> batches.Ahead:
    factory = session_factory(get_engine(database_url))
    known = unit_of_work.run(
        lambda session: batches.ratings_of(
            session=session,
            ladder_id=ladder_id,
            players=sorted({p for body in raw for team in body["teams"] for p in team}),
        ),
        session_factory=factory,
    )
    params = unit_of_work.run(
        lambda session: (
            recording_repo.key_and_ladder(session=session, key_hash="", ladder_id=ladder_id).params
        ),
        session_factory=factory,
    )
    assert params is not None
    ladder = Ladder(id=ladder_id, algorithm="trueskill", params=json.loads(params))
    ahead = batches.rate_ahead(
        ladder=ladder,
        algorithm="trueskill",
        params=params,
        bodies=_bodies(raw),
        now=now,
        known=known,
    )
    assert ahead is not None
    return ahead


def _record(database_url: str, ladder_id: str, raw: list[dict[str, Any]], now: datetime) -> Any:
    return unit_of_work.run(
        lambda session: batches.record_matches(
            session=session, ladder_id=ladder_id, bodies=_bodies(raw), now=now
        ),
        session_factory=session_factory(get_engine(database_url)),
    )


def _ratings(client: TestClient, ladder: str) -> dict[str, tuple[float, float, int]]:
    entries = client.get(f"/v1/ladders/{ladder}/leaderboard").json()["entries"]
    return {e["player_id"]: (e["mu"], e["sigma"], e["matches"]) for e in entries}


def test_a_chunk_rated_ahead_is_written_as_recorded(client: TestClient, database_url: str) -> None:
    create_ladder(client, "ahead")
    create_ladder(client, "usual")
    now = datetime.now(UTC)
    for ladder in ("ahead", "usual"):
        _record(database_url, ladder, FIRST, now)
    ahead = _ahead(database_url, "ahead", SECOND, now)
    written = unit_of_work.run(
        lambda session: batches.record_ahead(session=session, ahead=ahead),
        session_factory=session_factory(get_engine(database_url)),
    )
    assert written is not None
    usual = _record(database_url, "usual", SECOND, now)
    assert [_numbers(text) for text, _ in written] == [_numbers(text) for text, _ in usual]
    assert _ratings(client, "ahead") == _ratings(client, "usual")


def test_a_chunk_whose_players_changed_meanwhile_is_recorded_as_usual(
    client: TestClient, database_url: str
) -> None:
    create_ladder(client, "moved")
    create_ladder(client, "replay")
    now = datetime.now(UTC)
    _record(database_url, "moved", FIRST, now)
    ahead = _ahead(database_url, "moved", SECOND, now)
    # Another writer rates two of the chunk's players after it was rated ahead.
    assert client.post("/v1/ladders/moved/matches", json=BETWEEN).status_code == 201
    written = unit_of_work.run(
        lambda session: batches.record_ahead(session=session, ahead=ahead),
        session_factory=session_factory(get_engine(database_url)),
    )
    assert written is None
    results = _record(database_url, "moved", SECOND, now)
    # The replay in the order recorded: the first chunk, the match between, the second.
    _record(database_url, "replay", FIRST, now)
    assert client.post("/v1/ladders/replay/matches", json=BETWEEN).status_code == 201
    again = _record(database_url, "replay", SECOND, now)
    assert [_numbers(text) for text, _ in results] == [_numbers(text) for text, _ in again]
    assert _ratings(client, "moved") == _ratings(client, "replay")


def test_a_chunk_with_a_recorded_match_id_is_recorded_as_usual(
    client: TestClient, database_url: str
) -> None:
    create_ladder(client, "again")
    now = datetime.now(UTC)
    _record(database_url, "again", FIRST, now)
    ahead = _ahead(database_url, "again", [FIRST[0], *SECOND], now)
    written = unit_of_work.run(
        lambda session: batches.record_ahead(session=session, ahead=ahead),
        session_factory=session_factory(get_engine(database_url)),
    )
    assert written is None
