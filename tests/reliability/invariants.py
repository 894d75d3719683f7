"""What must hold of a ladder after any mix of concurrent writes, retries and crashes.

``check_ladder`` reads everything back over HTTP and asserts:

* the matches that count (not voided) are exactly the acknowledged ones (by match_id),
  each with its body;
* each player's ``matches`` count is the number of acknowledged matches they played in;
* each player's history is an unbroken chain: the oldest entry starts at the prior, every
  ``before`` is the previous ``after``, the newest ``after`` is the stored rating;
* replaying the stored matches in recorded order (``seq``) with the rating core, one match
  at a time, reproduces every stored before, after and final rating exactly (bit for bit).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
from fastapi.testclient import TestClient

from app.rating.base import Rating
from app.rating.registry import make_model
from tests.reliability.conftest import all_pages

PLAYERS = [f"p{n}" for n in range(6)]


def random_match(rng: random.Random, match_id: str, players: Sequence[str] = PLAYERS) -> Any:
    """A match over some of ``players``: 2 to 4 teams of one or two, random ranks."""
    chosen = rng.sample(list(players), rng.randint(2, len(players)))
    teams: list[list[str]] = []
    while chosen:
        size = 2 if len(chosen) >= 4 and rng.random() < 0.4 else 1
        teams.append(chosen[:size])
        chosen = chosen[size:]
    ranks = [rng.randint(1, len(teams)) for _ in teams]
    return {"match_id": match_id, "teams": teams, "ranks": ranks}


def check_ladder(
    http: httpx.Client | TestClient,
    ladder: str,
    acknowledged: dict[str, Any],
    algorithm: str = "trueskill",
) -> int:
    """Assert the invariants above for ``acknowledged`` (match_id -> body); returns the
    number of matches replayed."""
    listed = all_pages(http, f"/v1/ladders/{ladder}/matches")[::-1]  # oldest first
    matches = [m for m in listed if not m["voided"]]
    assert sorted(m["match_id"] for m in matches) == sorted(acknowledged)
    seqs = [m["seq"] for m in matches]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    played: Counter[str] = Counter()
    for body in acknowledged.values():
        played.update(p for team in body["teams"] for p in team)

    model = make_model(algorithm)
    prior = model.rating()
    ratings: dict[str, Rating] = {}
    for match in matches:
        body = acknowledged[match["match_id"]]
        assert [[p["player_id"] for p in t["players"]] for t in match["teams"]] == body["teams"]
        teams = [[ratings.get(p, prior) for p in team] for team in body["teams"]]
        for team, out in zip(teams, match["teams"], strict=True):
            for rating, player in zip(team, out["players"], strict=True):
                assert (player["before"]["mu"], player["before"]["sigma"]) == tuple(rating)
        new = model.rate(teams, ranks=body["ranks"])
        for new_team, out in zip(new, match["teams"], strict=True):
            for rating, player in zip(new_team, out["players"], strict=True):
                assert (player["after"]["mu"], player["after"]["sigma"]) == tuple(rating)
                ratings[player["player_id"]] = rating

    for player_id, count in played.items():
        stored = http.get(f"/v1/ladders/{ladder}/players/{player_id}").json()
        assert stored["matches"] == count
        assert (stored["mu"], stored["sigma"]) == tuple(ratings[player_id])
        history = all_pages(http, f"/v1/ladders/{ladder}/players/{player_id}/history")[::-1]
        assert len(history) == count
        assert (history[0]["before"]["mu"], history[0]["before"]["sigma"]) == tuple(prior)
        for previous, entry in itertools.pairwise(history):
            assert entry["before"] == previous["after"]
        assert (history[-1]["after"]["mu"], history[-1]["after"]["sigma"]) == (
            stored["mu"],
            stored["sigma"],
        )
    return len(matches)
