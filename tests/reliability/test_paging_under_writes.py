"""Guarantee 8, paging under writes: walking the leaderboard page by page (keyset cursor)
while matches keep arriving shows every player whose rating did not change exactly once, in
order; only the players who played meanwhile may be seen twice or not at all.

Between two pages the test records two matches among 20 "active" players, so the walk and
the writes interleave at every page, deterministically. Many players share a rating (ties
broken by player id), which the cursor must also step over exactly.
"""

from __future__ import annotations

import random
from collections import Counter

from fastapi.testclient import TestClient

from tests.reliability.conftest import create_ladder, report

PLAYERS = [f"q{n:03d}" for n in range(300)]
ACTIVE = PLAYERS[::15]  # 20 players spread over the whole board
PAGE = 7


def test_keyset_walk_while_matches_arrive(app_client: TestClient) -> None:
    create_ladder(app_client, "board")
    rng = random.Random(8)
    seeding = []
    for n in range(400):
        a, b = rng.sample(PLAYERS, 2)
        seeding.append({"match_id": f"s{n}", "teams": [[a], [b]], "ranks": [1, rng.randint(1, 2)]})
    response = app_client.post("/v1/ladders/board/matches/batch", json={"matches": seeding})
    assert response.status_code == 201, response.text

    seen: list[str] = []
    cursor = None
    arrived = 0
    while True:
        params: dict[str, str | int] = {"limit": PAGE}
        if cursor is not None:
            params["cursor"] = cursor
        page = app_client.get("/v1/ladders/board/leaderboard", params=params).json()
        keys = [(-e["conservative"], e["player_id"]) for e in page["entries"]]
        assert keys == sorted(keys)
        seen.extend(e["player_id"] for e in page["entries"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
        for _ in range(2):
            teams = [[p] for p in rng.sample(ACTIVE, rng.randint(2, 4))]
            response = app_client.post("/v1/ladders/board/matches", json={"teams": teams})
            assert response.status_code == 201, response.text
            arrived += 1

    counts = Counter(seen)
    board = app_client.get("/v1/ladders/board/leaderboard", params={"limit": 1000}).json()
    final = [e["player_id"] for e in board["entries"]]
    still = [p for p in final if p not in ACTIVE]  # every player who played, bar the active
    assert len(still) > 250
    assert [p for p in still if counts[p] != 1] == []
    assert [p for p in seen if p in still] == [p for p in final if p in still]
    report(
        "paging_under_writes",
        players=len(PLAYERS),
        pages=-(-len(seen) // PAGE),
        matches_during_walk=arrived,
        active_seen_twice=sum(1 for p in ACTIVE if counts[p] > 1),
        active_missed=sum(1 for p in ACTIVE if counts[p] == 0),
    )
