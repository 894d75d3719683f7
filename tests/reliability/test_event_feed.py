"""The event feed never skips an event, whatever commits concurrently: writers on a server
of two worker processes record matches at once while a reader polls the feed with its
cursor; the reader sees every acknowledged match's ``match.recorded`` exactly once, in the
order the ladder's events are numbered, and nothing else."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.reliability.conftest import Server, create_ladder
from tests.reliability.invariants import random_match

WRITERS = 8
MATCHES_PER_WRITER = 30


def test_a_reader_polling_the_feed_misses_nothing_under_concurrent_writers(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(workers=2)
    clients = [server.client() for _ in range(WRITERS + 1)]
    seen: list[dict[str, Any]] = []
    polls = {"nonempty": 0}
    writing = threading.Event()
    writing.set()
    errors: list[BaseException] = []
    acknowledged: set[str] = set()
    lock = threading.Lock()
    try:
        create_ladder(clients[0], "feed")

        def read_all(after: str | None) -> str | None:
            while True:
                params = {"limit": 7} if after is None else {"limit": 7, "after": after}
                page = clients[WRITERS].get("/v1/ladders/feed/events", params=params)
                assert page.status_code == 200, page.text
                body = page.json()
                seen.extend(body["events"])
                if not body["events"]:
                    return after
                polls["nonempty"] += 1
                after = body["next_cursor"]

        def reader() -> None:
            after = None
            try:
                while writing.is_set():
                    after = read_all(after)
                    time.sleep(0.002)
                read_all(after)
            except BaseException as exc:
                errors.append(exc)

        def writer(n: int) -> None:
            rng = random.Random(n)
            try:
                for k in range(MATCHES_PER_WRITER):
                    body = random_match(rng, f"w{n}-{k}")
                    response = clients[n].post("/v1/ladders/feed/matches", json=body)
                    assert response.status_code == 201, response.text
                    with lock:
                        acknowledged.add(body["match_id"])
            except BaseException as exc:
                errors.append(exc)

        reading = threading.Thread(target=reader)
        reading.start()
        writers = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join(timeout=300)
        writing.clear()
        reading.join(timeout=60)
    finally:
        for http in clients:
            http.close()
    assert not errors, errors[:3]
    assert {event["type"] for event in seen} == {"match.recorded"}
    recorded = [event["data"]["match_id"] for event in seen]
    assert len(recorded) == len(set(recorded)), "an event was read twice"
    assert set(recorded) == acknowledged, "an event was skipped"
    assert len({event["id"] for event in seen}) == len(seen)
    # The reader read while the writers wrote, not only once they were done.
    assert polls["nonempty"] >= 5
