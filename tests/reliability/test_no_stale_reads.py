"""No stale read after a write's answer: two served workers, each keeping the bodies it
answered, and a client that writes through one connection and reads through others,
with the validator it last saw.

Every read that starts after a write's response arrived must show that write: never a
``304`` for the validator from before it, never a kept body of the older state. Two
readers poll meanwhile, so both workers hold bodies of every state as it passes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tests.reliability.conftest import Server, create_ladder, report

LADDER = "/v1/ladders/fresh"
ROUNDS = 25


def _poll(server: Server, stop: threading.Event, errors: list[str]) -> None:
    with server.client() as http:
        while not stop.is_set():
            for path in (f"{LADDER}/leaderboard", f"{LADDER}/players/hero"):
                status = http.get(path).status_code
                if status not in (200, 404):
                    errors.append(f"{path}: {status}")


def test_a_read_after_a_write_shows_it(start_server: Callable[..., Server]) -> None:
    server = start_server(workers=2)
    stop = threading.Event()
    errors: list[str] = []
    with server.client() as writer:
        create_ladder(writer, "fresh")
        pollers = [
            threading.Thread(target=_poll, args=(server, stop, errors), daemon=True)
            for _ in range(2)
        ]
        for poller in pollers:
            poller.start()
        tags: dict[str, str] = {}
        not_modified = 0
        try:
            for n in range(1, ROUNDS + 1):
                response = writer.post(
                    f"{LADDER}/matches", json={"teams": [["hero"], [f"villain{n}"]]}
                )
                assert response.status_code == 201, response.text
                # A new connection each time: the load balancer of uvicorn's workers
                # (the kernel) sends it to either worker.
                for path in (f"{LADDER}/players/hero", f"{LADDER}/leaderboard?limit=1000", LADDER):
                    headers = {"If-None-Match": tags[path]} if path in tags else {}
                    with server.client() as reader:
                        read = reader.get(path, headers=headers)
                    assert read.status_code == 200, (n, path, read.status_code)
                    tags[path] = read.headers["etag"]
                    body = read.json()
                    if path.endswith("hero"):
                        assert body["matches"] == n
                    elif "leaderboard" in path:
                        assert len(body["entries"]) == n + 1
                    else:
                        assert body["matches"] == n
                with server.client() as reader:
                    again = reader.get(LADDER, headers={"If-None-Match": tags[LADDER]})
                not_modified += again.status_code == 304
        finally:
            stop.set()
            for poller in pollers:
                poller.join(timeout=30)
    assert not errors, errors[:5]
    report("no_stale_reads", rounds=ROUNDS, not_modified=not_modified)
    # With no write between, a read of the validator just seen is not modified.
    assert not_modified == ROUNDS
