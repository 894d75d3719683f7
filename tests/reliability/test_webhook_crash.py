"""A worker killed (SIGKILL) while it delivers webhooks loses nothing: once the service is
back, the receiver has every event, each at least once, in the ladder's order."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from tests.reliability.conftest import Server, create_ladder
from tests.service.receiver import receiver

MATCHES = 60


def test_a_worker_killed_mid_delivery_loses_nothing(start_server: Callable[..., Server]) -> None:
    env = {"RATINGS_WEBHOOK_POLL_S": "0.05", "RATINGS_WEBHOOK_LEASE_S": "1"}
    server = start_server(**env)
    with receiver() as target, server.client() as http:
        create_ladder(http, "hooked")
        made = http.post("/v1/webhooks", json={"url": target.url, "events": ["match.recorded"]})
        assert made.status_code == 201, made.text
        posted = []
        killed = False
        for n in range(MATCHES):
            if not killed and len(target.received) >= 15:
                server.kill()  # SIGKILL: mid-delivery, the receiver busy with the next event
                killed = True
                server.start()
            body = {"match_id": f"m{n}", "teams": [["x"], [f"y{n}"]]}
            assert http.post("/v1/ladders/hooked/matches", json=body).status_code == 201
            posted.append(body["match_id"])
            time.sleep(0.01)
        assert killed, "the receiver got too few events before the end to kill mid-way"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = {json.loads(r.body)["data"]["match_id"] for r in target.received}
            if got >= set(posted):
                break
            time.sleep(0.1)
        received = [json.loads(r.body) for r in target.received]
    ids = [event["data"]["match_id"] for event in received]
    assert set(ids) == set(posted), "an event was lost"
    # In order: each event first arrives after every event before it.
    first_seen = list(dict.fromkeys(ids))
    assert first_seen == posted
    # At least once: a repeat carries the same event id (the receiver's key to drop it).
    by_match: dict[str, set[str]] = {}
    for event in received:
        by_match.setdefault(event["data"]["match_id"], set()).add(event["id"])
    assert all(len(event_ids) == 1 for event_ids in by_match.values())
