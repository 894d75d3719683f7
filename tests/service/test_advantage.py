"""Advantage and margin through the service: matches carry each team's share and scores,
ladders the sizes.

Recorded singly, in batches or imported, re-rated by a void or a rebuild, a ladder with an
``advantage`` gives exactly the core's numbers for the same matches; predictions take the
shares too; a match without shares keeps its identity (idempotency hash).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cli.main import main
from app.rating import make_model
from app.rating.registry import ALGORITHMS
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match
from tests.service.oracle import core_replay, random_matches
from tests.service.test_void import _batch, _state

VENUE = Path(__file__).parent / "data" / "intl_football_venue_sample.jsonl"

#: A size for each algorithm on its own scale.
SIZE = {"elo": 80.0, "glicko2": 60.0}


def _params(algorithm: str) -> dict[str, float]:
    return {"advantage": SIZE.get(algorithm, 1.5)}


def _board(client: TestClient, ladder: str) -> dict[str, dict[str, Any]]:
    return {e["player_id"]: e for e in all_pages(client, f"/v1/ladders/{ladder}/leaderboard", 50)}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_recording_and_rebuilding_give_the_cores_numbers(
    client: TestClient, algorithm: str
) -> None:
    params = _params(algorithm)
    created = create_ladder(client, "l", algorithm=algorithm, params=params)
    assert created["params"]["advantage"] == params["advantage"]
    bodies = random_matches(seed=41, count=90, advantage=True)
    assert sum("advantage" in b for b in bodies) > 40
    for body in bodies[:10]:
        post_match(client, "l", body)
    _batch(client, "l", bodies[10:])
    expected = core_replay(algorithm, params, bodies)
    board = _board(client, "l")
    assert len(board) == len(expected.ratings)
    for player, rating in expected.ratings.items():
        entry = board[player]
        assert (entry["mu"], entry["sigma"] or 0.0) == pytest.approx(tuple(rating)[:2], rel=1e-9)
    # The shares matter: the same matches without them rate differently.
    plain = core_replay(algorithm, params, [{**b, "advantage": None} for b in bodies])
    assert any(abs(plain.ratings[p].mu - expected.ratings[p].mu) > 1e-6 for p in expected.ratings)
    # A void and a rebuild with another size equal a fresh ladder of what is left.
    assert client.delete(f"/v1/ladders/l/matches/{bodies[3]['match_id']}").status_code == 200
    bigger = {"advantage": 2 * params["advantage"]}
    response = client.patch("/v1/ladders/l?rebuild=true", json={"params": bigger})
    assert response.status_code == 200, response.text
    create_ladder(client, "fresh", algorithm=algorithm, params=bigger)
    _batch(client, "fresh", [b for n, b in enumerate(bodies) if n != 3])
    assert _state(client, "l") == _state(client, "fresh")


@pytest.mark.parametrize(
    ("algorithm", "params"),
    [("trueskill", {"margin": 0.8, "advantage": 1.0}), ("elo", {"margin": 0.7})],
)
def test_a_margin_counts_on_every_path(
    client: TestClient, algorithm: str, params: dict[str, float]
) -> None:
    create_ladder(client, "l", algorithm=algorithm, params=params)
    bodies = random_matches(seed=43, count=80, advantage=True)
    two_team_scores = [b for b in bodies if "scores" in b and len(b["teams"]) == 2]
    assert len(two_team_scores) >= 5
    for body in bodies[:6]:
        post_match(client, "l", body)
    _batch(client, "l", bodies[6:])
    expected = core_replay(algorithm, params, bodies)
    board = _board(client, "l")
    for player, rating in expected.ratings.items():
        entry = board[player]
        assert (entry["mu"], entry["sigma"] or 0.0) == pytest.approx(tuple(rating), rel=1e-9)
    without = core_replay(algorithm, {**params, "margin": 0.0}, bodies)
    assert any(abs(without.ratings[p].mu - r.mu) > 1e-6 for p, r in expected.ratings.items())
    response = client.patch("/v1/ladders/l?rebuild=true", json={"params": {"margin": 1.2}})
    assert response.status_code == 200, response.text
    create_ladder(client, "fresh", algorithm=algorithm, params={**params, "margin": 1.2})
    _batch(client, "fresh", bodies)
    assert _state(client, "l") == _state(client, "fresh")


@pytest.mark.parametrize("algorithm", ["trueskill", "elo", "glicko2", "bradley_terry_full"])
def test_predictions_take_the_shares(client: TestClient, algorithm: str) -> None:
    params = _params(algorithm)
    create_ladder(client, "l", algorithm=algorithm, params=params)
    _batch(client, "l", random_matches(seed=42, count=20))
    board = _board(client, "l")
    players = sorted(board)[:3]
    teams = [[p] for p in players]
    model = make_model(algorithm, params)
    rated = [[model.rating(board[p]["mu"], board[p]["sigma"])] for p in players]
    shares = [0.0, 1.0, 0.5]
    answer = client.post("/v1/ladders/l/quality", json={"teams": teams, "advantage": shares})
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["quality"] == pytest.approx(model.quality(rated, None, shares), rel=1e-12)
    assert got["win_probabilities"] == pytest.approx(
        model.win_probabilities(rated, None, shares), rel=1e-12
    )
    without = client.post("/v1/ladders/l/quality", json={"teams": teams}).json()
    assert without["win_probabilities"] != got["win_probabilities"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"teams": [["a"], ["b"]], "advantage": [1]}, "advantage"),
        ({"teams": [["a"], ["b"]], "advantage": [1.5, 0]}, "advantage"),
        ({"teams": [["a"], ["b"]], "advantage": ["home", 0]}, "advantage"),
        ({"teams": [["a"], ["b"]], "advantage": [None, 0]}, "advantage"),
    ],
)
def test_bad_shares_are_a_422_that_changes_nothing(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    create_ladder(client, "l", params={"advantage": 1.0})
    for path in ("/v1/ladders/l/matches", "/v1/ladders/l/quality"):
        assert_problem(client.post(path, json=body), 422, field)
    batch = client.post("/v1/ladders/l/matches/batch", json={"matches": [body]})
    assert_problem(batch, 422)
    assert all_pages(client, "/v1/ladders/l/matches", 10) == []


def test_shares_are_part_of_a_matchs_identity(client: TestClient) -> None:
    create_ladder(client, "l", params={"advantage": 1.0})
    body = {"match_id": "m1", "teams": [["a"], ["b"]], "advantage": [1, 0]}
    first = post_match(client, "l", body)
    again = client.post("/v1/ladders/l/matches", json=body)
    assert again.status_code == 200 and again.json() == first
    other = client.post("/v1/ladders/l/matches", json={**body, "advantage": [0, 1]})
    assert_problem(other, 409, "match_id")
    plain = {"match_id": "m2", "teams": [["a"], ["b"]]}
    post_match(client, "l", plain)
    assert client.post("/v1/ladders/l/matches", json=plain).status_code == 200


def test_import_of_the_venue_file_equals_the_core(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    params = {"advantage": 80.0, "k_factor": 40.0}
    create_ladder(client, "football", algorithm="elo", params=params)
    assert main(["import", str(VENUE), "--ladder", "football", "--chunk", "60"]) == 0
    capsys.readouterr()
    lines = [json.loads(line) for line in VENUE.read_text(encoding="utf-8").splitlines()]
    assert sum("advantage" in line for line in lines) > 80
    expected = core_replay("elo", params, lines)
    board = all_pages(client, "/v1/ladders/football/leaderboard", limit=1000)
    assert len(board) == len(expected.ratings)
    for entry in board:
        assert entry["mu"] == pytest.approx(expected.ratings[entry["player_id"]].mu, rel=1e-12)
