"""Guarantee 2, exactly once: a POST retried with the same match_id is applied once and
every reply is byte for byte the first one; the same id with another body is refused (409)
and writes nothing. For single matches and for batches, sequentially and 16 at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.reliability.conftest import create_ladder
from tests.reliability.invariants import check_ladder
from tests.service.helpers import table_counts

AT_ONCE = 16
MATCH = {"match_id": "g-1", "teams": [["p0"], ["p1", "p2"], ["p3"]], "ranks": [2, 1, 2]}
OTHER_BODY = {**MATCH, "ranks": [1, 2, 3]}
BATCH = {
    "matches": [
        {"match_id": "b-1", "teams": [["p0"], ["p1"]]},
        {"match_id": "b-2", "teams": [["p1"], ["p2"]], "ranks": [1, 1]},
        {"match_id": "b-3", "teams": [["p2", "p0"], ["p3", "p1"]], "ranks": [2, 1]},
    ]
}


def _at_once(send: Callable[[], httpx.Response]) -> list[httpx.Response]:
    barrier = threading.Barrier(AT_ONCE)
    replies: list[httpx.Response] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=30)
            replies.append(send())
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(AT_ONCE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]
    return replies


def _acknowledged(*bodies: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for body in bodies:
        full = {"ranks": list(range(1, len(body["teams"]) + 1)), **body}
        out[body["match_id"]] = full
    return out


@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "at-once"])
def test_a_retried_match_is_applied_once(
    app_client: TestClient, database_url: str, concurrent: bool
) -> None:
    create_ladder(app_client, "once")

    def send() -> httpx.Response:
        return app_client.post("/v1/ladders/once/matches", json=MATCH)

    replies = _at_once(send) if concurrent else [send() for _ in range(AT_ONCE)]
    assert sorted(r.status_code for r in replies) == [200] * (AT_ONCE - 1) + [201]
    assert len({r.content for r in replies}) == 1
    counts = table_counts(database_url)
    assert (counts["matches"], counts["participants"], counts["rating_history"]) == (1, 4, 4)

    conflicting = app_client.post("/v1/ladders/once/matches", json=OTHER_BODY)
    assert conflicting.status_code == 409
    assert conflicting.headers["content-type"] == "application/problem+json"
    assert table_counts(database_url) == counts
    check_ladder(app_client, "once", _acknowledged(MATCH))


@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "at-once"])
def test_a_retried_batch_is_applied_once(
    app_client: TestClient, database_url: str, concurrent: bool
) -> None:
    create_ladder(app_client, "once")

    def send() -> httpx.Response:
        return app_client.post("/v1/ladders/once/matches/batch", json=BATCH)

    replies = _at_once(send) if concurrent else [send() for _ in range(AT_ONCE)]
    assert {r.status_code for r in replies} == {201}
    assert len({r.content for r in replies}) == 1
    counts = table_counts(database_url)
    assert (counts["matches"], counts["participants"], counts["rating_history"]) == (3, 8, 8)

    # One match of the batch with another body: the whole batch is refused, nothing written.
    changed = {"matches": [*BATCH["matches"][:2], {**BATCH["matches"][2], "ranks": [1, 2]}]}
    changed["matches"].append({"match_id": "b-4", "teams": [["p5"], ["p6"]]})
    conflicting = app_client.post("/v1/ladders/once/matches/batch", json=changed)
    assert conflicting.status_code == 409
    assert "matches.2" in conflicting.json()["detail"]
    assert table_counts(database_url) == counts

    # A single retry of a match first recorded in a batch gets the batch's result for it.
    single = app_client.post("/v1/ladders/once/matches", json=BATCH["matches"][1])
    assert single.status_code == 200
    assert single.json() == replies[0].json()["results"][1]
    check_ladder(app_client, "once", _acknowledged(*BATCH["matches"]))


def test_one_id_with_different_bodies_at_once_applies_one(
    app_client: TestClient, database_url: str
) -> None:
    """16 bodies over disjoint players share one match_id: the players' locks do not
    serialise them, the unique match_id does. One is applied, the others are 409s."""
    create_ladder(app_client, "once")
    bodies = iter([{"match_id": "x", "teams": [[f"a{n}"], [f"b{n}"]]} for n in range(AT_ONCE)])
    lock = threading.Lock()

    def send() -> httpx.Response:
        with lock:
            body = next(bodies)
        return app_client.post("/v1/ladders/once/matches", json=body)

    replies = _at_once(send)
    codes = sorted(r.status_code for r in replies)
    assert codes == [201] + [409] * (AT_ONCE - 1), [r.text for r in replies if r.status_code >= 500]
    counts = table_counts(database_url)
    assert (counts["matches"], counts["participants"], counts["rating_history"]) == (1, 2, 2)
    winner = next(r for r in replies if r.status_code == 201).json()
    body = {
        "match_id": "x",
        "teams": [[p["player_id"]] for p in (t["players"][0] for t in winner["teams"])],
    }
    check_ladder(app_client, "once", _acknowledged(body))
