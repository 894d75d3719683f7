"""The matchmaking endpoint: the core's split for stored ratings and the prior for unknown
players, the quality ``/quality`` gives for it, its validation, and that it writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import get_settings
from app.rating.base import Rating
from app.rating.matchmaking import balanced_split
from app.rating.registry import make_model
from app.services import auth
from app.storage.engine import get_engine, session_factory
from tests.service.helpers import assert_problem, create_ladder, post_match, table_counts

ALGORITHMS = ["trueskill", "plackett_luce", "elo", "glicko2"]


def _play_some_matches(client: TestClient, ladder: str) -> None:
    for teams in (
        [["a", "b"], ["c", "d"]],
        [["a"], ["e"]],
        [["f"], ["a"], ["c"]],
        [["b", "e"], ["d", "f"]],
        [["a"], ["b"]],
    ):
        post_match(client, ladder, {"teams": teams})


def _stored(client: TestClient, ladder: str, player: str) -> Rating:
    p = client.get(f"/v1/ladders/{ladder}/players/{player}").json()
    return Rating(p["mu"], p["sigma"] if p["sigma"] is not None else 0.0)


def _matchmake(client: TestClient, ladder: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/v1/ladders/{ladder}/matchmaking", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(("new_players", "teams"), [(2, 2), (3, 3), (10, 4)])
def test_the_split_is_the_cores_with_unknown_players_at_the_prior(
    client: TestClient, database_url: str, algorithm: str, new_players: int, teams: int
) -> None:
    create_ladder(client, "l", algorithm=algorithm)
    _play_some_matches(client, "l")
    known = ["a", "b", "c", "d", "e", "f"]
    players = known + [f"new-{i}" for i in range(new_players)]
    model = make_model(algorithm)
    ratings = {p: _stored(client, "l", p) for p in known}
    pool = [ratings.get(p, model.rating()) for p in players]
    before = table_counts(database_url)

    got = _matchmake(client, "l", {"players": players, "teams": teams})

    expected = balanced_split(model, pool, teams)
    assert got["teams"] == [[players[i] for i in team] for team in expected.teams]
    assert got["quality"] == pytest.approx(expected.quality, rel=1e-12)
    assert got["exact"] is (len(players) <= 12) is expected.exact
    assert sorted(p for team in got["teams"] for p in team) == sorted(players)
    sizes = [len(team) for team in got["teams"]]
    assert len(sizes) == teams and max(sizes) - min(sizes) <= 1
    # The reported quality is what the quality endpoint says of the same teams.
    quality = client.post("/v1/ladders/l/quality", json={"teams": got["teams"]}).json()
    assert got["quality"] == pytest.approx(quality["quality"], rel=1e-12)
    assert table_counts(database_url) == before  # nothing written, not even the new players


@pytest.mark.parametrize("teams", [2, 8, 64])
def test_glicko2_splits_the_largest_pool_with_the_heuristic(client: TestClient, teams: int) -> None:
    # Glicko-2's quality has a fast team-sum form like the others, so the largest pool the
    # contract takes is split by the heuristic's vectorised search, not model by model.
    create_ladder(client, "g", algorithm="glicko2")
    _play_some_matches(client, "g")
    players = ["a", "b", "c", "d", "e", "f"] + [f"p{i:03}" for i in range(250)]
    model = make_model("glicko2")
    pool = [_stored(client, "g", p) if p in "abcdef" else model.rating() for p in players]

    got = _matchmake(client, "g", {"players": players, "teams": teams})

    expected = balanced_split(model, pool, teams)
    assert got["exact"] is False
    assert got["teams"] == [[players[i] for i in team] for team in expected.teams]
    assert got["quality"] == pytest.approx(expected.quality, rel=1e-12)


def test_new_players_of_a_fresh_ladder_are_all_equal(client: TestClient) -> None:
    create_ladder(client)
    got = _matchmake(client, "test", {"players": ["w", "x", "y", "z"]})  # teams default to 2
    assert got["teams"] == [["w", "x"], ["y", "z"]]  # every split ties: players in order
    beta, sigma = 25 / 6, 25 / 3
    # Equation 7 for two teams of two at the prior: sqrt(4 beta^2 / (4 beta^2 + 4 sigma^2)).
    assert got["quality"] == pytest.approx((beta**2 / (beta**2 + sigma**2)) ** 0.5, rel=1e-12)
    assert got["exact"] is True


def test_stronger_players_are_spread_over_the_teams(client: TestClient) -> None:
    create_ladder(client, "e", algorithm="elo")
    for player, mu in {"s1": 2000.0, "s2": 1990.0, "w1": 1000.0, "w2": 1010.0}.items():
        response = client.put(f"/v1/ladders/e/players/{player}", json={"mu": mu})
        assert response.status_code == 200, response.text
    got = _matchmake(client, "e", {"players": ["s1", "s2", "w1", "w2"], "teams": 2})
    assert got["teams"] == [["s1", "w1"], ["s2", "w2"]]  # sums 3000 and 3000


def test_more_than_twelve_players_use_the_heuristic(client: TestClient, database_url: str) -> None:
    create_ladder(client)
    _play_some_matches(client, "test")
    players = [chr(ord("a") + i) for i in range(6)] + [f"p{i}" for i in range(14)]
    before = table_counts(database_url)
    first = _matchmake(client, "test", {"players": players, "teams": 3})
    assert first["exact"] is False
    assert [len(team) for team in first["teams"]] == [7, 7, 6]
    assert sorted(p for team in first["teams"] for p in team) == sorted(players)
    assert _matchmake(client, "test", {"players": players, "teams": 3}) == first  # deterministic
    quality = client.post("/v1/ladders/test/quality", json={"teams": first["teams"]}).json()
    assert first["quality"] == pytest.approx(quality["quality"], rel=1e-12)
    assert table_counts(database_url) == before


def test_the_largest_request(client: TestClient) -> None:
    create_ladder(client)
    players = [f"player-{i}" for i in range(256)]
    got = _matchmake(client, "test", {"players": players, "teams": 64})
    assert len(got["teams"]) == 64 and all(len(team) == 4 for team in got["teams"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"players": ["a", "b", "a"], "teams": 2}, "players"),  # a player twice
        ({"players": ["a", "b", "c"], "teams": 4}, "players"),  # fewer players than teams
        ({"players": ["a"], "teams": 2}, "players"),
        ({"players": ["a", "b"], "teams": 1}, "teams"),
        ({"players": ["a", "b"], "teams": 0}, "teams"),
        ({"players": [f"p{i}" for i in range(70)], "teams": 65}, "teams"),
        ({"players": [f"p{i}" for i in range(257)], "teams": 2}, "players"),  # too many
        ({"players": ["a", "x" * 129], "teams": 2}, "players"),  # an id too long
        ({"players": ["a", ""], "teams": 2}, "players"),
        ({"players": ["a", "b"], "teams": "2"}, "teams"),
        ({"players": ["a", "b"], "teams": 2.5}, "teams"),
        ({"players": "ab", "teams": 2}, "players"),
        ({"teams": 2}, "players"),
        ({"players": ["a", "b"], "team": 2}, "team"),  # an unknown field
    ],
)
def test_bad_input_is_a_problem_naming_the_field(
    client: TestClient, database_url: str, body: dict[str, Any], field: str
) -> None:
    create_ladder(client)
    before = table_counts(database_url)
    response = client.post("/v1/ladders/test/matchmaking", json=body)
    assert_problem(response, 422, field)
    assert table_counts(database_url) == before


def test_unknown_ladder_is_404(client: TestClient) -> None:
    response = client.post("/v1/ladders/nope/matchmaking", json={"players": ["a", "b"]})
    assert_problem(response, 404, "ladder")


def test_a_read_key_is_enough_and_reads_may_need_one(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_ladder(client)
    body = {"players": ["a", "b"], "teams": 2}
    anonymous = {"Authorization": ""}
    assert client.post("/v1/ladders/test/matchmaking", json=body, headers=anonymous).is_success
    session = session_factory(get_engine(database_url))()
    try:
        key = auth.create_key(session, name="reader", scope="read").key
        session.commit()
    finally:
        session.close()
    monkeypatch.setenv("RATINGS_REQUIRE_READ_KEY", "true")
    get_settings.cache_clear()
    response = client.post("/v1/ladders/test/matchmaking", json=body, headers=anonymous)
    assert_problem(response, 401)
    read = {"Authorization": f"Bearer {key}"}
    assert client.post("/v1/ladders/test/matchmaking", json=body, headers=read).status_code == 200


def test_the_route_is_documented(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/v1/ladders/{ladder}/matchmaking"]["post"]
    assert "heuristic" in operation["description"]
    schemas = document["components"]["schemas"]
    for name in ("MatchmakingRequest", "MatchmakingOut"):
        assert schemas[name]["examples"], name
    from app.domain.documents.matchmaking import MatchmakingOut, MatchmakingRequest

    for model in (MatchmakingRequest, MatchmakingOut):
        for example in model.model_json_schema()["examples"]:
            model.model_validate(example)
