"""Matches posted at once by many clients: atomic, serialised per player, replayable.

Eight threads post matches that share players. Afterwards every player's history must be
an unbroken chain (each "before" is the previous "after"), and the final ratings must equal
a sequential replay, with the rating core, of the matches in the order the service records
(``seq``). On PostgreSQL this exercises the ordered row locks; on SQLite, BEGIN IMMEDIATE.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.rating.base import Rating
from app.rating.registry import make_model
from tests.service.helpers import all_pages, create_ladder

THREADS = 8
MATCHES_PER_THREAD = 6
PLAYERS = [f"p{n}" for n in range(7)]


def _bodies(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    bodies = []
    for n in range(MATCHES_PER_THREAD):
        players = rng.sample(PLAYERS, rng.choice([2, 3, 4]))
        if len(players) == 4 and rng.random() < 0.5:
            teams = [players[:2], players[2:]]
        else:
            teams = [[p] for p in players]
        ranks = [rng.randint(1, len(teams)) for _ in teams]
        bodies.append({"match_id": f"t{seed}-{n}", "teams": teams, "ranks": ranks})
    return bodies


def race(http: httpx.Client, ladder: str) -> None:
    """Post every thread's matches at once through ``http``, then check chains and replay."""
    barrier = threading.Barrier(THREADS)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            barrier.wait(timeout=30)
            for body in _bodies(seed):
                response = http.post(f"/v1/ladders/{ladder}/matches", json=body)
                statuses.append(response.status_code)
                if response.status_code != 201:
                    errors.append(AssertionError(response.text))
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]
    assert statuses == [201] * (THREADS * MATCHES_PER_THREAD)

    # The recorded order: every match, by seq.
    matches = all_pages(http, f"/v1/ladders/{ladder}/matches", limit=20)[::-1]
    assert len(matches) == THREADS * MATCHES_PER_THREAD
    seqs = [m["seq"] for m in matches]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    # Replay with the core, in that order: each match saw exactly the replayed ratings.
    model = make_model("trueskill")
    ratings: dict[str, Rating] = {}
    for match in matches:
        teams = [
            [ratings.get(p["player_id"], model.rating()) for p in t["players"]]
            for t in match["teams"]
        ]
        for team, out in zip(teams, match["teams"], strict=True):
            for rating, player in zip(team, out["players"], strict=True):
                assert (player["before"]["mu"], player["before"]["sigma"]) == pytest.approx(
                    tuple(rating), rel=1e-12
                )
        new = model.rate(teams, ranks=[t["rank"] for t in match["teams"]])
        for new_team, out in zip(new, match["teams"], strict=True):
            for rating, player in zip(new_team, out["players"], strict=True):
                ratings[player["player_id"]] = rating

    for player_id, rating in ratings.items():
        stored = http.get(f"/v1/ladders/{ladder}/players/{player_id}").json()
        assert (stored["mu"], stored["sigma"]) == pytest.approx(tuple(rating), rel=1e-12)
        history = all_pages(http, f"/v1/ladders/{ladder}/players/{player_id}/history", limit=50)
        oldest_first = history[::-1]
        assert oldest_first[0]["before"]["mu"] == 25.0
        for previous, entry in itertools.pairwise(oldest_first):
            assert entry["before"] == previous["after"]
        assert oldest_first[-1]["after"]["mu"] == stored["mu"]
        assert oldest_first[-1]["after"]["sigma"] == stored["sigma"]
        assert stored["matches"] == len(history)


def test_concurrent_matches_equal_a_sequential_replay(client: TestClient) -> None:
    create_ladder(client, "race")
    race(client, "race")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server(database_url: str, admin_key: str) -> Iterator[httpx.Client]:
    """The service under uvicorn with two worker processes on ``database_url``."""
    port = _free_port()
    env = {**os.environ, "RATINGS_DATABASE_URL": database_url}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:app",
            "--workers",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60
        ) as http:
            for _ in range(300):
                try:
                    if http.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert process.poll() is None, "the server exited"
                time.sleep(0.05)
            yield http
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_two_worker_processes_equal_a_sequential_replay(server: httpx.Client) -> None:
    response = server.post("/v1/ladders", json={"id": "race", "algorithm": "trueskill"})
    assert response.status_code == 201, response.text
    race(server, "race")


def test_concurrent_retries_of_one_match_apply_it_once(client: TestClient) -> None:
    create_ladder(client, "retry")
    body = {"match_id": "same", "teams": [["a"], ["b"], ["c"]]}
    barrier = threading.Barrier(THREADS)
    responses: list[Any] = []

    def worker() -> None:
        barrier.wait(timeout=30)
        responses.append(client.post("/v1/ladders/retry/matches", json=body))

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] * (THREADS - 1) + [201]
    assert len({r.content for r in responses}) == 1
    assert client.get("/v1/ladders/retry").json()["matches"] == 1
    assert client.get("/v1/ladders/retry/players/a").json()["matches"] == 1
