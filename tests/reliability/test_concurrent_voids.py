"""Voids of one ladder at once, while matches keep arriving: re-ratings of a ladder never
overlap, and none meets a concurrent match half-way.

Four admins each void three different matches of one ladder at the same moment as four
writers post new matches over the same six players (so every void reaches every player).
Every request succeeds (no 5xx, no deadlock surfacing), and afterwards the ratings, the
histories and the leaderboard equal a replay, in recorded order, of the matches left
(``check_ladder``). In process (threads through the app's thread pool) and over loopback
to a uvicorn server with two worker processes.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
from fastapi.testclient import TestClient

from tests.reliability.conftest import Server, all_pages, create_ladder, report
from tests.reliability.invariants import check_ladder, random_match

FIRST = 60
ADMINS = 4
VOIDS_PER_ADMIN = 3
WRITERS = 4
MATCHES_PER_WRITER = 8


def _race(client_for: Callable[[int], httpx.Client | TestClient], ladder: str) -> Counter[str]:
    """Record FIRST matches, then void and post at once; check the ladder; the statuses."""
    http = client_for(0)
    create_ladder(http, ladder)
    rng = random.Random(7)
    first = {f"m{n}": random_match(rng, f"m{n}") for n in range(FIRST)}
    response = http.post(f"/v1/ladders/{ladder}/matches/batch", json={"matches": [*first.values()]})
    assert response.status_code == 201, response.text

    # Different matches for each admin, spread over the ladder (early ones reach far).
    picks = rng.sample(sorted(first), ADMINS * VOIDS_PER_ADMIN)
    to_void = [picks[n::ADMINS] for n in range(ADMINS)]
    acknowledged = {match_id: body for match_id, body in first.items() if match_id not in picks}
    statuses: Counter[str] = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(ADMINS + WRITERS)

    def admin(n: int) -> None:
        client = client_for(n)
        try:
            barrier.wait(timeout=60)
            for match_id in to_void[n]:
                response = client.delete(f"/v1/ladders/{ladder}/matches/{match_id}")
                with lock:
                    statuses[f"void {response.status_code}"] += 1
                assert response.status_code == 200, response.text
                assert response.json()["already_voided"] is False
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    def writer(n: int) -> None:
        client = client_for(ADMINS + n)
        own = random.Random(100 + n)
        try:
            barrier.wait(timeout=60)
            for k in range(MATCHES_PER_WRITER):
                body = random_match(own, f"w{n}-{k}")
                response = client.post(f"/v1/ladders/{ladder}/matches", json=body)
                with lock:
                    statuses[f"post {response.status_code}"] += 1
                assert response.status_code == 201, response.text
                with lock:
                    acknowledged[body["match_id"]] = body
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=admin, args=(n,)) for n in range(ADMINS)]
    threads += [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, (errors[:3], statuses)
    assert statuses == {
        "void 200": ADMINS * VOIDS_PER_ADMIN,
        "post 201": WRITERS * MATCHES_PER_WRITER,
    }

    assert check_ladder(http, ladder, acknowledged) == len(acknowledged)
    _check_leaderboard(http, ladder, acknowledged)
    assert http.get(f"/v1/ladders/{ladder}").json()["matches"] == len(acknowledged)
    return statuses


def _check_leaderboard(
    http: httpx.Client | TestClient, ladder: str, acknowledged: dict[str, Any]
) -> None:
    """The leaderboard holds the players of the matches left, each with its stored rating,
    by conservative rating then id; a player whose every match was voided is not rated."""
    players = {p for body in acknowledged.values() for team in body["teams"] for p in team}
    board = all_pages(http, f"/v1/ladders/{ladder}/leaderboard")
    assert {entry["player_id"] for entry in board} == players
    assert [entry["rank"] for entry in board] == list(range(1, len(board) + 1))
    assert board == sorted(board, key=lambda e: (-e["conservative"], e["player_id"]))
    for entry in board:
        stored = http.get(f"/v1/ladders/{ladder}/players/{entry['player_id']}").json()
        assert (entry["mu"], entry["sigma"], entry["matches"]) == (
            stored["mu"],
            stored["sigma"],
            stored["matches"],
        )


def test_threads_void_and_post_at_once(app_client: TestClient, database_url: str) -> None:
    statuses = _race(lambda n: app_client, "voids")
    report(f"concurrent_voids[threads,{database_url.split(':')[0]}]", responses=dict(statuses))


def test_two_worker_processes_void_and_post_at_once(
    start_server: Callable[..., Server], database_url: str
) -> None:
    server = start_server(workers=2)
    clients = [server.client() for _ in range(ADMINS + WRITERS)]
    try:
        statuses = _race(lambda n: clients[n], "voids")
    finally:
        for http in clients:
            http.close()
    report(f"concurrent_voids[2 workers,{database_url.split(':')[0]}]", responses=dict(statuses))
