"""Group commit: single matches written together in one transaction answer exactly as they
would have alone, a refused one fails alone, and concurrent POSTs of a worker are grouped."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError

from app.api import writer
from app.api.writer import GroupWriter
from app.domain.documents.matches import MatchCreate
from app.errors import Conflict, InvalidInput, NotFound, ProblemError, Unauthorized
from app.services import auth, recording
from app.services.recording import Answer, Submitted
from app.storage import unit_of_work
from app.storage.engine import get_engine, session_factory
from tests.service.helpers import create_ladder, table_counts

MATCHES: list[dict[str, Any]] = [
    {"match_id": "a", "teams": [["ann"], ["bob"]]},
    {"match_id": "b", "teams": [["bob"], ["cat"]], "ranks": [1, 1]},
    {"match_id": "c", "teams": [["ann", "cat"], ["dan", "eve"]], "scores": [3, 5]},
    {"match_id": "d", "teams": [["eve"], ["ann"], ["bob"]]},
]


def _numbers(document: str) -> dict[str, Any]:
    """What a result says of the ratings (no times, no seq)."""
    result = json.loads(document)
    return {"quality": result["quality"], "teams": result["teams"], "id": result["match_id"]}


def _group(database_url: str, key: str, items: list[tuple[str, dict[str, Any]]]) -> list[Answer]:
    now = datetime.now(UTC)
    submitted = [
        Submitted(
            ladder_id=ladder,
            key_digest=auth.hash_key(key),
            body=MatchCreate.model_validate(body),
            now=now,
        )
        for ladder, body in items
    ]
    factory = session_factory(get_engine(database_url))
    return unit_of_work.run(
        lambda session: recording.record_group(session=session, submitted=submitted),
        session_factory=factory,
    )


def test_a_group_answers_as_one_by_one(
    client: TestClient, database_url: str, admin_key: str
) -> None:
    create_ladder(client, "alone")
    create_ladder(client, "grouped")
    alone = []
    for body in MATCHES:
        response = client.post("/v1/ladders/alone/matches", json=body)
        assert response.status_code == 201, response.text
        alone.append(_numbers(response.text))
    answers = _group(database_url, admin_key, [("grouped", body) for body in MATCHES])
    grouped = []
    for answer in answers:
        assert not isinstance(answer, ProblemError)
        text_, created = answer
        assert created
        grouped.append(_numbers(text_))
    assert grouped == alone
    seqs = [json.loads(answer[0])["seq"] for answer in answers if isinstance(answer, tuple)]
    assert seqs == sorted(seqs)  # seqs in arrival order: a re-rating replays them so
    for player in ("ann", "bob", "cat", "dan", "eve"):
        mine = client.get(f"/v1/ladders/grouped/players/{player}").json()
        theirs = client.get(f"/v1/ladders/alone/players/{player}").json()
        assert (mine["mu"], mine["sigma"], mine["matches"]) == (
            theirs["mu"],
            theirs["sigma"],
            theirs["matches"],
        )


def test_a_refused_match_fails_alone(client: TestClient, database_url: str, admin_key: str) -> None:
    create_ladder(client, "solo")
    create_ladder(client, "mixed")
    assert client.post("/v1/ladders/mixed/matches", json=MATCHES[0]).status_code == 201
    assert client.post("/v1/ladders/solo/matches", json=MATCHES[0]).status_code == 201
    before = table_counts(database_url)
    refused = {"teams": [["new1", "new2"], ["new3"]], "weights": [[0.0, 0.0], [1.0]]}
    conflict = {"match_id": "a", "teams": [["zed"], ["yan"]]}
    answers = _group(
        database_url,
        admin_key,
        [
            ("mixed", MATCHES[1]),
            ("mixed", refused),  # the core refuses it: 422
            ("mixed", conflict),  # another body under a recorded match_id: 409
            ("mixed", MATCHES[0]),  # the same body again: the stored answer
            ("nope", MATCHES[2]),  # no such ladder: 404
            ("mixed", MATCHES[2]),
        ],
    )
    assert isinstance(answers[1], InvalidInput) and "weights" in answers[1].detail
    assert isinstance(answers[2], Conflict) and "match_id" in answers[2].detail
    assert isinstance(answers[4], NotFound)
    stored = answers[3]
    assert isinstance(stored, tuple) and stored[1] is False
    assert stored[0] == client.get("/v1/ladders/mixed/matches/a").text
    # The matches written equal the same matches posted alone, the refused ones absent.
    for n, body in ((0, MATCHES[1]), (5, MATCHES[2])):
        answer = answers[n]
        assert isinstance(answer, tuple) and answer[1] is True
        alone = client.post("/v1/ladders/solo/matches", json=body)
        assert _numbers(answer[0]) == _numbers(alone.text)
    after = table_counts(database_url)
    assert after["matches"] == before["matches"] + 2 + 2  # two in mixed, two in solo
    for player in ("new1", "new2", "new3", "zed", "yan"):
        assert client.get(f"/v1/ladders/mixed/players/{player}").status_code == 404


def test_a_bad_key_fails_alone(client: TestClient, database_url: str, admin_key: str) -> None:
    create_ladder(client, "keys")
    now = datetime.now(UTC)
    bodies = [MatchCreate.model_validate(body) for body in MATCHES[:2]]
    submitted = [
        Submitted(ladder_id="keys", key_digest=auth.hash_key("rk_forged"), body=bodies[0], now=now),
        Submitted(ladder_id="keys", key_digest=auth.hash_key(admin_key), body=bodies[1], now=now),
    ]
    factory = session_factory(get_engine(database_url))
    answers = unit_of_work.run(
        lambda session: recording.record_group(session=session, submitted=submitted),
        session_factory=factory,
    )
    assert isinstance(answers[0], Unauthorized)
    assert isinstance(answers[1], tuple) and answers[1][1] is True
    assert client.get("/v1/ladders/keys/players/ann").status_code == 404
    assert client.get("/v1/ladders/keys/players/cat").json()["matches"] == 1


def test_concurrent_posts_are_grouped_and_answer_like_a_replay(
    client: TestClient, database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Posts that arrive while a group is being written form the next group; the seqs give
    the order the ratings were applied in, and a replay in that order gives every answer."""
    create_ladder(client, "busy")
    sizes: list[int] = []
    original = writer._write

    def noting(group: list[Submitted]) -> list[Answer]:
        sizes.append(len(group))
        return original(group)

    monkeypatch.setattr(writer, "_write", noting)
    bodies = [
        {"match_id": f"m{n}", "teams": [[f"p{n % 5}"], [f"p{(n + 1) % 5}"]]} for n in range(24)
    ]
    bodies.append(dict(bodies[3]))  # a retry racing its first post
    app = client.app

    async def post_all() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {admin_key}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", headers=headers
        ) as http:
            return await asyncio.gather(
                *(http.post("/v1/ladders/busy/matches", json=body) for body in bodies)
            )

    responses = asyncio.run(post_all())
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [201] * 24, [r.text for r in responses if r.status_code >= 300]
    assert max(sizes) > 1, sizes
    assert responses[-1].text == responses[3].text
    # Replayed one by one in seq order on a fresh ladder, every answer is the same.
    create_ladder(client, "replay")
    results = sorted((json.loads(r.text) for r in responses[:-1]), key=lambda result: result["seq"])
    for result in results:
        body = next(b for b in bodies if b["match_id"] == result["match_id"])
        again = client.post("/v1/ladders/replay/matches", json=body)
        assert _numbers(again.text) == _numbers(json.dumps(result))


def test_a_conflict_found_at_write_time_fails_alone(
    client: TestClient, database_url: str, admin_key: str
) -> None:
    """Another transaction commits a match_id after the group looked it up: the group's
    insert fails, and its matches are written one by one: that one gets its 409, the
    others their 201."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite's write lock lets no other writer in meanwhile")
    create_ladder(client, "race")
    engine = get_engine(database_url)
    sneaked = threading.Event()

    def sneak_in(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if sneaked.is_set() or not statement.lstrip().upper().startswith("SELECT R.PLAYER_ID"):
            return
        sneaked.set()
        # Another writer, with other players, commits match "b" now.
        other = _group(database_url, admin_key, [("race", {**MATCHES[1], "teams": [["x"], ["y"]]})])
        assert isinstance(other[0], tuple)

    event.listen(engine, "before_cursor_execute", sneak_in)
    try:
        group = [
            Submitted(
                ladder_id="race",
                key_digest=auth.hash_key(admin_key),
                body=MatchCreate.model_validate(body),
                now=datetime.now(UTC),
            )
            for body in MATCHES[:3]
        ]
        with pytest.raises(IntegrityError):
            unit_of_work.run(
                lambda session: recording.record_group(session=session, submitted=group),
                session_factory=session_factory(engine),
            )
        sneaked.clear()
        sneaked.set()  # no second sneak
        answers = writer._write(group)
    finally:
        event.remove(engine, "before_cursor_execute", sneak_in)
    assert isinstance(answers[0], tuple) and answers[0][1] is True
    assert isinstance(answers[1], Conflict)
    assert isinstance(answers[2], tuple) and answers[2][1] is True
    with engine.connect() as connection:
        count = connection.scalar(text("SELECT count(*) FROM matches WHERE ladder_id = 'race'"))
    assert count == 3


def test_a_lone_request_goes_straight_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle writer starts at once: the first request is a group of one."""
    seen: list[int] = []

    def write(group: list[Submitted]) -> list[Answer]:
        seen.append(len(group))
        return [("{}", True)] * len(group)

    monkeypatch.setattr(writer, "_write", write)

    async def scenario() -> tuple[str, bool]:
        body = MatchCreate.model_validate(MATCHES[0])
        submitted = Submitted(ladder_id="x", key_digest="d", body=body, now=datetime.now(UTC))
        return await GroupWriter(max_group=16).record(submitted)

    assert asyncio.run(scenario()) == ("{}", True)
    assert seen == [1]
