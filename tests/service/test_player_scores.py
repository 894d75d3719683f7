"""``player_scores`` on a match: validated with the other fields, stored with the match
(part of its identity), rated as evidence on a ladder whose ``stat_scale`` is above 0 (the
ratings are the core's replay of the same bodies), replayed by a void and a rebuild, and
exported and imported back to the same ratings."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.helpers import assert_problem, create_ladder, table_counts
from tests.service.oracle import core_replay, random_matches

PARAMS = {"stat_scale": 3.0, "stat_noise": 2.0}


def _with_scores(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    bodies = random_matches(seed=seed, count=count, players=10)
    for n, body in enumerate(bodies):
        if n % 5 == 3:
            continue  # some matches give no statistics
        body["player_scores"] = [
            [None if rng.random() < 0.15 else float(rng.randrange(0, 12)) for _ in team]
            for team in body["teams"]
        ]
    return bodies


def _ratings(client: TestClient, ladder: str) -> dict[str, float]:
    lines = client.get(f"/v1/ladders/{ladder}/export/ratings").text.splitlines()
    out = {}
    for r in map(json.loads, lines):
        out[r["player_id"] + ".mu"] = r["mu"]
        out[r["player_id"] + ".sigma"] = r["sigma"]
    return out


def _expected(params: dict[str, Any], bodies: list[dict[str, Any]]) -> dict[str, float]:
    ladder_params = {"tau_per_day": 0.0, **params}
    out = core_replay("trueskill", ladder_params, bodies).ratings
    flat = {}
    for p, r in out.items():
        flat[p + ".mu"] = r.mu
        flat[p + ".sigma"] = r.sigma
    return flat


def test_statistics_are_evidence_replayed_by_voids_and_rebuilds(client: TestClient) -> None:
    create_ladder(client, "s", algorithm="trueskill", params=PARAMS)
    bodies = _with_scores(seed=5, count=40)
    for body in bodies[:10]:
        response = client.post("/v1/ladders/s/matches", json=body)
        assert response.status_code == 201, response.text
    batch = client.post("/v1/ladders/s/matches/batch", json={"matches": bodies[10:]})
    assert batch.status_code == 201, batch.text
    ladder = client.get("/v1/ladders/s").json()
    assert _ratings(client, "s") == pytest.approx(_expected(ladder["params"], bodies))
    # Without the evidence the ratings differ: it counted.
    plain = [{k: v for k, v in b.items() if k != "player_scores"} for b in bodies]
    assert _ratings(client, "s") != pytest.approx(_expected(ladder["params"], plain))

    voided = bodies[4]["match_id"]
    assert client.delete(f"/v1/ladders/s/matches/{voided}").status_code == 200
    rest = [b for b in bodies if b["match_id"] != voided]
    assert _ratings(client, "s") == pytest.approx(_expected(ladder["params"], rest))
    rebuilt = client.patch("/v1/ladders/s?rebuild=true", json={"params": {"stat_scale": 1.0}})
    assert rebuilt.status_code == 200, rebuilt.text
    params = client.get("/v1/ladders/s").json()["params"]
    assert params["stat_scale"] == 1.0
    assert _ratings(client, "s") == pytest.approx(_expected(params, rest))

    # The export carries them, and importing it gives the same ratings.
    exported = [json.loads(x) for x in client.get("/v1/ladders/s/export/matches").text.split()]
    assert [e.get("player_scores") for e in exported] == [b.get("player_scores") for b in rest]
    made = client.post(
        "/v1/ladders", json={"id": "copy", "algorithm": "trueskill", "params": params}
    )
    assert made.status_code == 201, made.text
    assert (
        client.post("/v1/ladders/copy/matches/batch", json={"matches": exported}).status_code == 201
    )
    assert _ratings(client, "copy") == _ratings(client, "s")


def test_statistics_are_part_of_a_matchs_identity(client: TestClient) -> None:
    create_ladder(client, "i", params=PARAMS)
    body = {"match_id": "m", "teams": [["a"], ["b"]], "player_scores": [[3], [1]]}
    assert client.post("/v1/ladders/i/matches", json=body).status_code == 201
    assert client.post("/v1/ladders/i/matches", json=body).status_code == 200
    other = {**body, "player_scores": [[1], [3]]}
    assert_problem(client.post("/v1/ladders/i/matches", json=other), 409, "different body")


@pytest.mark.parametrize(
    ("scores", "field"),
    [
        ([[1]], "player_scores"),
        ([[1, 2], [3]], "player_scores[0]"),
        ([["x"], [1]], "player_scores"),
        ([[1], [True]], "player_scores"),
        ("many", "player_scores"),
    ],
)
def test_a_bad_statistic_is_a_422_naming_it(
    client: TestClient, database_url: str, scores: object, field: str
) -> None:
    create_ladder(client, "b", params=PARAMS)
    before = table_counts(database_url)
    body = {"teams": [["a"], ["b"]], "player_scores": scores}
    assert_problem(client.post("/v1/ladders/b/matches", json=body), 422, field)
    assert table_counts(database_url) == before


def test_a_non_finite_statistic_is_a_422(client: TestClient) -> None:
    create_ladder(client, "n", params=PARAMS)
    text = '{"teams": [["a"], ["b"]], "player_scores": [[NaN], [1]]}'
    response = client.post(
        "/v1/ladders/n/matches", content=text, headers={"Content-Type": "application/json"}
    )
    assert response.status_code in (400, 422), response.text


def test_the_console_shows_each_matchs_statistic(client: TestClient) -> None:
    create_ladder(client, "c", params=PARAMS)
    client.post(
        "/v1/ladders/c/matches",
        json={"match_id": "m1", "teams": [["ann"], ["bo"]], "player_scores": [[17], [4.5]]},
    )
    client.post("/v1/ladders/c/matches", json={"match_id": "m2", "teams": [["ann"], ["bo"]]})
    page = client.get("/console/ladders/c/players/bo").text
    assert '<th scope="col" class="n" title="The player\'s own statistic' in page
    assert '<td class="n">4.5</td>' in page and '<td class="n">\u2013</td>' in page
    plain = client.get("/console/ladders/c/players/bo?limit=1").text  # m2 alone: no column
    assert "own statistic" not in plain
