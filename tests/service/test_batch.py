"""Batch ingest: in order, all or nothing, idempotent per match, equal to posting one by one
and to a replay with the core."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match, table_counts
from tests.service.oracle import core_replay, random_matches

ALGORITHMS = [
    ("trueskill", {"tau_per_day": 0.3, "draw_probability": 0.2}),
    ("plackett_luce", {"tau_per_day": 0.1}),
    ("elo", {"k_factor": 24}),
]


def post_batch(client: TestClient, ladder: str, bodies: list[dict[str, Any]]) -> list[Any]:
    response = client.post(f"/v1/ladders/{ladder}/matches/batch", json={"matches": bodies})
    assert response.status_code == 201, response.text
    results: list[Any] = response.json()["results"]
    assert len(results) == len(bodies)
    return results


def _numbers(result: dict[str, Any]) -> Any:
    """A result without what differs between two ladders: ladder, seq, recorded_at."""
    return {k: v for k, v in result.items() if k not in ("ladder", "seq", "recorded_at")}


@pytest.mark.parametrize(("algorithm", "params"), ALGORITHMS, ids=[a for a, _ in ALGORITHMS])
def test_a_batch_equals_one_by_one_and_the_core(
    client: TestClient, algorithm: str, params: dict[str, Any]
) -> None:
    bodies = random_matches(seed=7, count=40)
    create_ladder(client, "batch", algorithm=algorithm, params=params)
    create_ladder(client, "single", algorithm=algorithm, params=params)
    batched = post_batch(client, "batch", bodies)
    singles = [post_match(client, "single", body) for body in bodies]
    # Exactly the single-match documents, number for number.
    assert [_numbers(r) for r in batched] == [_numbers(r) for r in singles]
    seqs = [r["seq"] for r in batched]
    assert seqs == sorted(seqs)

    expected = core_replay(algorithm, params, bodies)
    bayesian = algorithm != "elo"
    for result in batched:
        assert result["quality"] == pytest.approx(expected.quality[result["match_id"]], rel=1e-12)
        changes = expected.changes[result["match_id"]]
        for team in result["teams"]:
            for entry in team["players"]:
                old, new = changes[entry["player_id"]]
                assert entry["before"]["mu"] == pytest.approx(old.mu, rel=1e-12)
                assert entry["after"]["mu"] == pytest.approx(new.mu, rel=1e-12)
                if bayesian:
                    assert entry["after"]["sigma"] == pytest.approx(new.sigma, rel=1e-12)
                else:
                    assert entry["after"]["sigma"] is None
    boards = {
        ladder: all_pages(client, f"/v1/ladders/{ladder}/leaderboard", limit=5)
        for ladder in ("batch", "single")
    }
    assert boards["batch"] == boards["single"]
    assert len(boards["batch"]) == len(expected.ratings)
    for entry in boards["batch"]:
        rating = expected.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(rating.mu, rel=1e-12)
        assert entry["matches"] == expected.played[entry["player_id"]]
    for player in ("p00", "p05"):
        histories = [
            all_pages(client, f"/v1/ladders/{ladder}/players/{player}/history", limit=50)
            for ladder in ("batch", "single")
        ]
        assert histories[0] == histories[1]
        assert len(histories[0]) == expected.played[player]


def test_batch_after_single_matches_continues_from_stored_ratings(client: TestClient) -> None:
    bodies = random_matches(seed=3, count=20)
    params = {"tau_per_day": 0.5}
    create_ladder(client, "mixed", params=params)
    for body in bodies[:5]:
        post_match(client, "mixed", body)
    post_batch(client, "mixed", bodies[5:12])
    for body in bodies[12:15]:
        post_match(client, "mixed", body)
    post_batch(client, "mixed", bodies[15:])
    expected = core_replay("trueskill", params, bodies)
    for entry in all_pages(client, "/v1/ladders/mixed/leaderboard", limit=100):
        rating = expected.ratings[entry["player_id"]]
        assert (entry["mu"], entry["sigma"]) == pytest.approx(tuple(rating), rel=1e-12)


def test_recorded_matches_are_returned_as_stored_and_not_applied(client: TestClient) -> None:
    create_ladder(client)
    bodies = random_matches(seed=11, count=6)
    first = client.post("/v1/ladders/test/matches", json=bodies[2])
    assert first.status_code == 201
    response = client.post("/v1/ladders/test/matches/batch", json={"matches": bodies})
    assert response.status_code == 201
    results = response.json()["results"]
    assert results[2] == first.json()
    assert first.text in response.text  # the stored bytes, verbatim
    assert client.get("/v1/ladders/test").json()["matches"] == 6
    # The whole batch again: every match is a retry, nothing changes.
    board = client.get("/v1/ladders/test/leaderboard").json()
    again = client.post("/v1/ladders/test/matches/batch", json={"matches": bodies})
    assert again.status_code == 201 and again.json() == response.json()
    assert client.get("/v1/ladders/test/leaderboard").json() == board
    assert client.get("/v1/ladders/test").json()["matches"] == 6
    expected = core_replay("trueskill", {}, [bodies[2], *bodies[:2], *bodies[3:]])
    for entry in board["entries"]:
        assert entry["matches"] == expected.played[entry["player_id"]]
        assert entry["mu"] == pytest.approx(expected.ratings[entry["player_id"]].mu, rel=1e-12)


def test_a_recorded_id_with_another_body_is_409_naming_the_index(
    client: TestClient, database_url: str
) -> None:
    create_ladder(client)
    bodies = random_matches(seed=5, count=8)
    post_match(client, "test", bodies[4])
    before = table_counts(database_url)
    changed = [*bodies[:4], bodies[5], {**bodies[6], "match_id": bodies[4]["match_id"]}]
    response = client.post("/v1/ladders/test/matches/batch", json={"matches": changed})
    assert_problem(response, 409, "matches.5.match_id")
    assert table_counts(database_url) == before


def test_an_id_twice_in_one_batch_is_422(client: TestClient, database_url: str) -> None:
    create_ladder(client)
    bodies = random_matches(seed=5, count=5)
    bodies[3] = {**bodies[3], "match_id": bodies[1]["match_id"]}
    before = table_counts(database_url)
    response = client.post("/v1/ladders/test/matches/batch", json={"matches": bodies})
    detail = assert_problem(response, 422, "matches.3.match_id")
    assert "matches.1" in detail
    assert table_counts(database_url) == before


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"teams": [["x"]]}, "body.matches.5.teams"),
        ({"teams": [["x"], ["y"]], "weights": [[2.0], [1.0]]}, "body.matches.5.weights"),
        ({"teams": [["x", "y"], ["z"]], "weights": [[0.0, 0.0], [1.0]]}, "matches.5.weights"),
        ({"teams": [["x"], ["y"]], "ranks": [1]}, "body.matches.5.ranks"),
    ],
    ids=["one team", "weight above 1", "team of zero weight (the model refuses)", "ranks"],
)
def test_one_bad_match_among_many_writes_nothing(
    client: TestClient, database_url: str, bad: dict[str, Any], field: str
) -> None:
    create_ladder(client)
    post_match(client, "test", {"teams": [["a"], ["b"]]})
    before = table_counts(database_url)
    bodies = random_matches(seed=9, count=9)
    bodies[5] = bad
    response = client.post("/v1/ladders/test/matches/batch", json={"matches": bodies})
    assert_problem(response, 422, field)
    assert table_counts(database_url) == before
    assert_problem(client.get("/v1/ladders/test/players/x"), 404)


def test_batch_limits(client: TestClient, database_url: str) -> None:
    create_ladder(client, "elo", algorithm="elo")
    body = {"teams": [["a"], ["b"]]}
    response = client.post("/v1/ladders/elo/matches/batch", json={"matches": [body] * 10_001})
    assert_problem(response, 422, "body.matches")
    assert "10000" in response.json()["detail"]
    assert table_counts(database_url)["matches"] == 0
    assert_problem(client.post("/v1/ladders/elo/matches/batch", json={"matches": []}), 422)
    assert_problem(client.post("/v1/ladders/elo/matches/batch", json=[body]), 422, "body")
    results = post_batch(client, "elo", [body] * 10_000)
    assert len({r["match_id"] for r in results}) == 10_000
    assert client.get("/v1/ladders/elo/players/a").json()["matches"] == 10_000


def test_batch_needs_a_write_key(client: TestClient) -> None:
    create_ladder(client)
    response = client.post(
        "/v1/ladders/test/matches/batch",
        json={"matches": [{"teams": [["a"], ["b"]]}]},
        headers={"Authorization": ""},
    )
    assert_problem(response, 401)


def test_unknown_ladder_is_404(client: TestClient) -> None:
    response = client.post(
        "/v1/ladders/nope/matches/batch", json={"matches": [{"teams": [["a"], ["b"]]}]}
    )
    assert_problem(response, 404, "ladder")
