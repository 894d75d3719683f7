"""Guarantee 3, crash safety: a match is all there or not there at all, whatever moment
the server dies at, and a retry after the restart applies it exactly once.

The fault hook (``tests/reliability/faults.py``) holds a match's transaction open after
every row of it (history included) has been written and before COMMIT; the server is
SIGKILLed there and restarted. Then a server with two workers is SIGKILLed while 8 writers
post matches: after the restart every acknowledged match is present and complete.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from app.storage.engine import get_engine
from tests.reliability.conftest import Server, all_pages, create_ladder, report
from tests.reliability.faults import HOOK_ENV, PAUSE_AFTER_HISTORY, SIGNAL_ENV
from tests.reliability.invariants import check_ladder, random_match


def _rows_of(database_url: str, match_id: str) -> dict[str, int]:
    queries = {
        "matches": "SELECT count(*) FROM matches WHERE match_id = :m",
        "participants": "SELECT count(*) FROM participants p JOIN matches m "
        "ON m.seq = p.match_seq WHERE m.match_id = :m",
        "rating_history": "SELECT count(*) FROM rating_history h JOIN matches m "
        "ON m.seq = h.match_seq WHERE m.match_id = :m",
    }
    with get_engine(database_url).connect() as connection:
        return {
            name: int(connection.scalar(text(sql), {"m": match_id}) or 0)
            for name, sql in queries.items()
        }


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def test_killed_between_history_and_commit_leaves_no_trace(
    start_server: Callable[..., Server], database_url: str, tmp_path: Path
) -> None:
    signal_file = tmp_path / "paused"
    release_file = tmp_path / "paused.release"
    release_file.touch()  # the setup matches go straight through
    env = {HOOK_ENV: PAUSE_AFTER_HISTORY, SIGNAL_ENV: str(signal_file)}
    server = start_server(**env)
    rng = random.Random(7)
    acknowledged: dict[str, Any] = {}
    with server.client() as http:
        create_ladder(http, "crash")
        for n in range(20):
            body = random_match(rng, f"setup-{n}")
            assert http.post("/v1/ladders/crash/matches", json=body).status_code == 201
            acknowledged[body["match_id"]] = body
        before = {e["player_id"]: e for e in all_pages(http, "/v1/ladders/crash/leaderboard")}

    victim = {"match_id": "victim", "teams": [["p0", "p1"], ["p2", "p3"]], "ranks": [1, 2]}
    release_file.unlink()
    signal_file.unlink()
    outcome: list[Any] = []

    def post_victim() -> None:
        with server.client() as http:
            try:
                outcome.append(http.post("/v1/ladders/crash/matches", json=victim))
            except httpx.TransportError as exc:
                outcome.append(exc)

    poster = threading.Thread(target=post_victim)
    poster.start()
    _wait_for(signal_file)  # the match's rows are written; COMMIT is not sent
    server.kill()
    poster.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.TransportError)
    assert _rows_of(database_url, "victim") == {
        "matches": 0,
        "participants": 0,
        "rating_history": 0,
    }

    restarted = start_server()  # no hook this time
    with restarted.client() as http:
        assert http.get("/readyz").status_code == 200
        assert http.get("/v1/ladders/crash/matches/victim").status_code == 404
        after = {e["player_id"]: e for e in all_pages(http, "/v1/ladders/crash/leaderboard")}
        assert after == before
        check_ladder(http, "crash", acknowledged)

        first = http.post("/v1/ladders/crash/matches", json=victim)
        again = http.post("/v1/ladders/crash/matches", json=victim)
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.content == again.content
        acknowledged["victim"] = victim
        check_ladder(http, "crash", acknowledged)
    assert _rows_of(database_url, "victim") == {
        "matches": 1,
        "participants": 4,
        "rating_history": 4,
    }


def test_killed_under_load_keeps_every_acknowledged_match(
    start_server: Callable[..., Server], database_url: str
) -> None:
    writers, kill_after = 8, 120
    server = start_server(workers=2)
    with server.client() as http:
        create_ladder(http, "load")
    sent: dict[str, Any] = {}
    acknowledged: set[str] = set()
    lock = threading.Lock()
    enough = threading.Event()

    def writer(n: int) -> None:
        rng = random.Random(100 + n)
        with server.client() as http:
            for k in range(1000):
                body = random_match(rng, f"w{n}-{k}")
                with lock:
                    sent[body["match_id"]] = body
                try:
                    response = http.post("/v1/ladders/load/matches", json=body)
                except httpx.TransportError:
                    return  # the server is gone
                if response.status_code == 201:
                    with lock:
                        acknowledged.add(body["match_id"])
                        if len(acknowledged) >= kill_after:
                            enough.set()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    assert enough.wait(timeout=120)
    server.kill()
    for thread in threads:
        thread.join(timeout=60)

    restarted = start_server()
    with restarted.client() as http:
        stored = {m["match_id"] for m in all_pages(http, "/v1/ladders/load/matches")}
        assert acknowledged <= stored
        # Matches in flight at the kill are either complete or absent.
        check_ladder(http, "load", {match_id: sent[match_id] for match_id in stored})
        in_flight = [match_id for match_id in sent if match_id not in acknowledged]
        for match_id in in_flight:  # the clients' retries: each applies once at most
            response = http.post("/v1/ladders/load/matches", json=sent[match_id])
            assert response.status_code == (200 if match_id in stored else 201), response.text
        replayed = check_ladder(http, "load", sent)
    report(
        f"crash_under_load[{database_url.split(':')[0]}]",
        acknowledged=len(acknowledged),
        committed_unacknowledged=len(stored - acknowledged),
        in_flight=len(in_flight),
        replayed=replayed,
    )
