"""Real match data through the service equals a replay with the core, time decay included.

The samples (``data/``, CC0) have date-only ``played_at`` values, draws, years between
matches, races of up to 35 drivers, and shared drives the service refuses.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.rating.base import Rating, age
from app.rating.registry import make_model
from tests.service.helpers import all_pages, create_ladder, post_match

DATA = Path(__file__).parent / "data"


def _matches(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _when(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "algorithm", "params"),
    [
        ("intl_football_sample.jsonl", "trueskill", {"tau_per_day": 0.01}),
        ("f1_races_sample.jsonl", "plackett_luce", {"tau_per_day": 0.05}),
    ],
)
def test_real_matches_equal_a_replay(
    client: TestClient, name: str, algorithm: str, params: dict[str, float]
) -> None:
    create_ladder(client, "real", algorithm=algorithm, params=params)
    matches = []
    for body in _matches(name):
        players = [player for team in body["teams"] for player in team]
        if len(set(players)) < len(players):
            # Early F1 had shared drives: one driver in two cars. A player plays once.
            response = client.post("/v1/ladders/real/matches", json=body)
            assert response.status_code == 422 and "appears twice" in response.text
            continue
        post_match(client, "real", body)
        matches.append(body)
    again = client.post("/v1/ladders/real/matches", json=matches[0])
    assert again.status_code == 200  # the data's own match ids are idempotency keys

    model = make_model(algorithm)
    tau_per_day = params["tau_per_day"]
    ratings: dict[str, Rating] = {}
    last: dict[str, datetime] = {}
    for body in matches:
        when = _when(body["played_at"])
        teams = []
        for team in body["teams"]:
            members = []
            for player in team:
                rating = ratings.get(player, model.rating())
                if player in last:
                    rating = age(rating, tau_per_day, (when - last[player]).total_seconds() / 86400)
                members.append(rating)
            teams.append(members)
        new = model.rate(teams, ranks=body["ranks"])
        for team, new_team in zip(body["teams"], new, strict=True):
            for player, rating in zip(team, new_team, strict=True):
                ratings[player] = rating
                last[player] = max(when, last.get(player, when))

    board = all_pages(client, "/v1/ladders/real/leaderboard", limit=1000)
    assert len(board) == len(ratings)
    for entry in board:
        expected = ratings[entry["player_id"]]
        assert (entry["mu"], entry["sigma"]) == pytest.approx(tuple(expected), rel=1e-9)
    assert client.get("/v1/ladders/real").json()["matches"] == len(matches)
    stored = client.get(f"/v1/ladders/real/matches/{matches[-1]['match_id']}").json()
    assert stored["meta"] == matches[-1]["meta"]
