"""Malformed and impossible requests: a 4xx problem naming the field, and nothing written."""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.helpers import assert_problem, create_ladder, post_match, table_counts

GOOD: dict[str, Any] = {"match_id": "x1", "teams": [["a"], ["b"]]}


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


#: (case, body, field the detail must name). Bodies are JSON text where JSON can't say it.
MATCH_CASES: list[tuple[str, Any, str]] = [
    ("one team", _with(teams=[["a"]]), "teams"),
    ("no teams", _with(teams=[]), "teams"),
    ("empty team", _with(teams=[[], ["b"]]), "teams"),
    ("65 teams", _with(teams=[[f"p{n}"] for n in range(65)]), "teams"),
    (
        "257 players",
        _with(teams=[[f"a{n}" for n in range(129)], [f"b{n}" for n in range(128)]]),
        "teams",
    ),
    ("player twice", _with(teams=[["a"], ["b", "a"]]), "teams"),
    ("player id too long", _with(teams=[["a" * 129], ["b"]]), "teams"),
    ("empty player id", _with(teams=[[""], ["b"]]), "teams"),
    ("player id not a string", _with(teams=[[1], ["b"]]), "teams"),
    ("control character in id", _with(teams=[["a\n"], ["b"]]), "teams"),
    ("teams not a list", _with(teams="a,b"), "teams"),
    ("teams missing", {"match_id": "x1"}, "teams"),
    ("ranks too short", _with(ranks=[1]), "ranks"),
    ("ranks too long", _with(ranks=[1, 2, 3]), "ranks"),
    ("scores too short", _with(scores=[1]), "scores"),
    ("ranks and scores", _with(ranks=[1, 2], scores=[2, 1]), "scores"),
    ("rank NaN", '{"match_id": "x1", "teams": [["a"], ["b"]], "ranks": [NaN, 1]}', "ranks"),
    (
        "rank Infinity",
        '{"match_id": "x1", "teams": [["a"], ["b"]], "ranks": [1, Infinity]}',
        "ranks",
    ),
    ("score 1e309", '{"match_id": "x1", "teams": [["a"], ["b"]], "scores": [1e309, 1]}', "scores"),
    (
        "score -Infinity",
        '{"match_id": "x1", "teams": [["a"], ["b"]], "scores": [-Infinity, 1]}',
        "scores",
    ),
    ("absurd score", _with(scores=[1e300, 1]), "scores"),
    ("rank a string", _with(ranks=["1", 2]), "ranks"),
    ("rank a boolean", _with(ranks=[True, False]), "ranks"),
    ("weights missing a team", _with(weights=[[1.0]]), "weights"),
    ("weights wrong team size", _with(weights=[[1.0, 1.0], [1.0]]), "weights"),
    ("weight above 1", _with(weights=[[1.5], [1.0]]), "weights"),
    ("weight below 0", _with(weights=[[-0.1], [1.0]]), "weights"),
    (
        "weight NaN",
        '{"match_id": "x1", "teams": [["a"], ["b"]], "weights": [[NaN], [1]]}',
        "weights",
    ),
    ("misspelt ranks", _with(rank=[2, 1]), "rank"),
    ("unknown field", _with(winner="b"), "winner"),
    ("meta too large", _with(meta={"blob": "x" * 4100}), "meta"),
    ("meta not an object", _with(meta=[1, 2]), "meta"),
    ("meta NaN", '{"match_id": "x1", "teams": [["a"], ["b"]], "meta": {"x": NaN}}', "meta"),
    ("meta too deep", _with(meta={"a": json.loads("[" * 40 + "]" * 40)}), "meta"),
    ("match id too long", _with(match_id="m" * 129), "match_id"),
    ("empty match id", _with(match_id=""), "match_id"),
    ("played_at not a time", _with(played_at="yesterday"), "played_at"),
    ("played_at a number", _with(played_at=1700000000), "played_at"),
    ("played_at out of range", _with(played_at="0001-01-01T00:00:00+05:00"), "played_at"),
    ("body a list", [GOOD], "body"),
    ("body not JSON", '{"teams": [["a"], ["b"]', "body"),
]


@pytest.mark.parametrize(("case", "body", "field"), MATCH_CASES, ids=[c[0] for c in MATCH_CASES])
def test_bad_match_is_422_and_writes_nothing(
    client: TestClient, database_url: str, case: str, body: Any, field: str
) -> None:
    create_ladder(client)
    post_match(client, "test", {"teams": [["a"], ["c"]]})
    before = table_counts(database_url)
    if isinstance(body, str):
        response = client.post(
            "/v1/ladders/test/matches",
            content=body.encode(),
            headers={"content-type": "application/json"},
        )
    else:
        response = client.post("/v1/ladders/test/matches", json=body)
    detail = assert_problem(response, 422, field)
    assert len(detail) < 2000  # a huge or odd input is never echoed whole
    assert table_counts(database_url) == before
    # The same request done right goes through.
    assert client.post("/v1/ladders/test/matches", json=GOOD).status_code == 201


LADDER_CASES: list[tuple[str, Any, str]] = [
    ("id with capitals", {"id": "Halo", "algorithm": "trueskill"}, "id"),
    ("id with a space", {"id": "a b", "algorithm": "trueskill"}, "id"),
    ("id too long", {"id": "a" * 65, "algorithm": "trueskill"}, "id"),
    ("empty id", {"id": "", "algorithm": "trueskill"}, "id"),
    ("unknown algorithm", {"id": "a", "algorithm": "glicko"}, "algorithm"),
    ("unknown parameter", {"id": "a", "algorithm": "trueskill", "params": {"kappa": 1}}, "params"),
    ("negative sigma", {"id": "a", "algorithm": "trueskill", "params": {"sigma": -1}}, "sigma"),
    ("NaN parameter", '{"id": "a", "algorithm": "trueskill", "params": {"mu": NaN}}', "params"),
    ("absurd mu", {"id": "a", "algorithm": "trueskill", "params": {"mu": 1e300}}, "params"),
    (
        "negative tau_per_day",
        {"id": "a", "algorithm": "trueskill", "params": {"tau_per_day": -1}},
        "tau_per_day",
    ),
    (
        "draw probability 1",
        {"id": "a", "algorithm": "trueskill", "params": {"draw_probability": 1}},
        "draw_probability",
    ),
    ("unknown field", {"id": "a", "algorithm": "trueskill", "parameters": {}}, "parameters"),
    ("NUL in description", {"id": "a", "algorithm": "elo", "description": "\x00"}, "description"),
    (
        "tuning knob not a ladder parameter",
        {"id": "a", "algorithm": "trueskill", "params": {"ep_tolerance": 0.001}},
        "ep_tolerance",
    ),
    (
        "elo has no tau_per_day",
        {"id": "a", "algorithm": "elo", "params": {"tau_per_day": 1}},
        "tau_per_day",
    ),
    ("elo unknown model", {"id": "a", "algorithm": "elo", "params": {"model": "x"}}, "model"),
    ("sigma too large", {"id": "a", "algorithm": "trueskill", "params": {"sigma": 1e7}}, "sigma"),
    (
        "beta that underflows",
        {"id": "a", "algorithm": "trueskill", "params": {"beta": 1e-300}},
        "params",
    ),
    (
        "elo scale that underflows",
        {"id": "a", "algorithm": "elo", "params": {"scale": 1e-300}},
        "params",
    ),
    (
        "integer too large",
        {"id": "a", "algorithm": "elo", "params": {"k_factor": 10**12}},
        "k_factor",
    ),
]


@pytest.mark.parametrize(("case", "body", "field"), LADDER_CASES, ids=[c[0] for c in LADDER_CASES])
def test_bad_ladder_is_422_and_writes_nothing(
    client: TestClient, database_url: str, case: str, body: Any, field: str
) -> None:
    before = table_counts(database_url)
    if isinstance(body, str):
        response = client.post(
            "/v1/ladders", content=body.encode(), headers={"content-type": "application/json"}
        )
    else:
        response = client.post("/v1/ladders", json=body)
    assert_problem(response, 422, field)
    assert table_counts(database_url) == before


def _cursor(key: str) -> str:
    """A cursor as this service writes them (URL-safe base64 of JSON), of any ``key``."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


OTHER_CASES: list[tuple[str, str, str, Any, str]] = [
    ("seed NaN", "PUT", "/v1/ladders/test/players/a", '{"mu": NaN}', "mu"),
    ("seed absurd mu", "PUT", "/v1/ladders/test/players/a", {"mu": 1e10}, "mu"),
    ("seed zero sigma", "PUT", "/v1/ladders/test/players/a", {"mu": 1, "sigma": 0}, "sigma"),
    ("seed huge sigma", "PUT", "/v1/ladders/test/players/a", {"mu": 1, "sigma": 2e6}, "sigma"),
    ("seed no mu", "PUT", "/v1/ladders/test/players/a", {"sigma": 1}, "mu"),
    ("seed unknown field", "PUT", "/v1/ladders/test/players/a", {"mu": 1, "sd": 1}, "sd"),
    ("seed id too long", "PUT", "/v1/ladders/test/players/" + "p" * 129, {"mu": 1}, "player_id"),
    ("quality one team", "POST", "/v1/ladders/test/quality", {"teams": [["a"]]}, "teams"),
    (
        "quality bad weights",
        "POST",
        "/v1/ladders/test/quality",
        {"teams": [["a"], ["b"]], "weights": [[2], [1]]},
        "weights",
    ),
    ("leaderboard limit 0", "GET", "/v1/ladders/test/leaderboard?limit=0", None, "limit"),
    ("leaderboard limit 1001", "GET", "/v1/ladders/test/leaderboard?limit=1001", None, "limit"),
    ("leaderboard bad cursor", "GET", "/v1/ladders/test/leaderboard?cursor=%%%", None, "cursor"),
    (
        "leaderboard foreign cursor",
        "GET",
        "/v1/ladders/test/leaderboard?cursor=WzNd",
        None,
        "cursor",
    ),
    (
        "leaderboard negative min",
        "GET",
        "/v1/ladders/test/leaderboard?min_matches=-1",
        None,
        "min_matches",
    ),
    (
        "history bad cursor",
        "GET",
        "/v1/ladders/test/players/a/history?cursor=bm9wZQ",
        None,
        "cursor",
    ),
    ("matches bad cursor", "GET", "/v1/ladders/test/matches?cursor=WyJ4Il0", None, "cursor"),
    ("ladders bad cursor", "GET", "/v1/ladders?cursor=WzEsMl0", None, "cursor"),
    ("rebuild a number", "PATCH", "/v1/ladders/test", {"rebuild": 0}, "rebuild"),
    ("rebuild a string", "PATCH", "/v1/ladders/test", {"rebuild": "true"}, "rebuild"),
    ("apply a number", "POST", "/v1/ladders/test/fit", {"apply": 0}, "apply"),
    ("NUL in player path", "GET", "/v1/ladders/test/players/a%00", None, "player_id"),
    ("NUL in history path", "GET", "/v1/ladders/test/players/%00/history", None, "player_id"),
    ("NUL in seed path", "PUT", "/v1/ladders/test/players/%00", {"mu": 1}, "player_id"),
    ("NUL in match path", "GET", "/v1/ladders/test/matches/%00", None, "match_id"),
    ("NUL in player filter", "GET", "/v1/ladders/test/matches?player=%00", None, "player"),
    (
        "NUL in a cursor",
        "GET",
        "/v1/ladders/test/leaderboard?cursor=WzEuMCwgIlx1MDAwMCJd",
        None,
        "cursor",
    ),
    *(
        (f"{name} cursor on {route}", "GET", f"{path}?cursor={_cursor(key)}", None, "cursor")
        for name, key in (
            ("int64 overflow", "[9223372036854775808]"),
            ("lone surrogate", '["\\ud800"]'),
            ("400-digit", "[" + "9" * 400 + "]"),
            ("400-digit float", "[" + "9" * 400 + ', "a"]'),
            ("lone surrogate in a leaderboard", '[1.0, "\\ud800"]'),
        )
        for route, path in (
            ("ladders", "/v1/ladders"),
            ("leaderboard", "/v1/ladders/test/leaderboard"),
            ("matches", "/v1/ladders/test/matches"),
            ("history", "/v1/ladders/test/players/a/history"),
        )
    ),
]


@pytest.mark.parametrize(
    ("case", "method", "path", "body", "field"), OTHER_CASES, ids=[c[0] for c in OTHER_CASES]
)
def test_other_bad_requests(
    client: TestClient, database_url: str, case: str, method: str, path: str, body: Any, field: str
) -> None:
    create_ladder(client)
    post_match(client, "test", {"teams": [["a"], ["b"]]})
    before = table_counts(database_url)
    if isinstance(body, str):
        response = client.request(
            method, path, content=body.encode(), headers={"content-type": "application/json"}
        )
    elif body is None:
        response = client.request(method, path)
    else:
        response = client.request(method, path, json=body)
    assert_problem(response, 422, field)
    assert table_counts(database_url) == before


def test_unknown_or_impossible_ladder_id_is_404(client: TestClient) -> None:
    assert_problem(client.get("/v1/ladders/%00"), 404, "ladder")
    assert_problem(client.get("/v1/ladders/" + "a" * 65), 404, "ladder")
    assert_problem(client.get("/v1/ladders/Caps/leaderboard"), 404, "ladder")


def test_a_match_the_core_refuses_is_rolled_back(client: TestClient, database_url: str) -> None:
    """The players are created before the update is computed; a refused update removes them."""
    create_ladder(client)
    before = table_counts(database_url)
    body = {"teams": [["new1", "new2"], ["new3"]], "weights": [[0.0, 0.0], [1.0]]}
    assert_problem(client.post("/v1/ladders/test/matches", json=body), 422, "weights")
    assert table_counts(database_url) == before
    assert_problem(client.get("/v1/ladders/test/players/new1"), 404)


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        (
            "/v1/ladders/test/matches",
            '{"teams": [["a"], ["b"]], "ranks": [1, 2], "ranks": [2, 1]}',
            "ranks",
        ),
        (
            "/v1/ladders/test/matches",
            '{"teams": [["a"], ["b"]], "meta": {"map": 1, "map": 2}}',
            "map",
        ),
        ("/v1/ladders/test/matches/batch", '{"matches": [], "matches": []}', "matches"),
        ("/v1/ladders", '{"id": "x", "id": "y", "algorithm": "elo"}', "id"),
    ],
)
def test_a_key_twice_in_one_object_is_refused(
    client: TestClient, database_url: str, path: str, body: str, key: str
) -> None:
    """A JSON parser keeps the last of two equal keys silently ({"ranks": [NaN, 1],
    "ranks": [2, 1]} passed as the second): refused, naming the key, nothing written."""
    create_ladder(client)
    before = table_counts(database_url)
    response = client.post(
        path, content=body.encode(), headers={"content-type": "application/json"}
    )
    assert_problem(response, 422, key)
    assert "twice" in response.json()["detail"]
    assert table_counts(database_url) == before


def test_a_trailing_slash_is_a_404_problem_not_an_empty_redirect(client: TestClient) -> None:
    create_ladder(client)
    for method, path in (("GET", "/v1/ladders/"), ("POST", "/v1/ladders/test/matches/")):
        response = client.request(method, path, follow_redirects=False)
        assert response.status_code == 404, (method, path, response.status_code)
        assert response.headers["content-type"] == "application/problem+json"


def test_a_detail_names_its_field_once(client: TestClient) -> None:
    create_ladder(client)
    response = client.post("/v1/ladders/test/matches", json={"teams": [["a"], ["b"]], "ranks": [1]})
    assert_problem(response, 422, "ranks")
    assert response.json()["detail"] == "body.ranks: expected 2 values (one per team), got 1"


def test_changing_the_algorithm_says_a_new_ladder_is_the_way(client: TestClient) -> None:
    create_ladder(client)
    response = client.patch("/v1/ladders/test", json={"algorithm": "elo"})
    assert_problem(response, 422, "algorithm")
    assert "new ladder" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"match_id": "2026/11/21-g7", "teams": [["a"], ["b"]]}, "match_id"),
        ({"teams": [["eu/alice"], ["b"]]}, "teams.0.0"),
        ({"teams": [[".."], ["b"]]}, "teams.0.0"),
        ({"teams": [["a"], ["."]]}, "teams.1.0"),
    ],
)
def test_an_id_no_route_could_address_is_refused(
    client: TestClient, database_url: str, body: dict[str, Any], field: str
) -> None:
    """A "/" (even percent-encoded) splits a path segment and clients drop "." and ".."
    segments: such an id could be posted but never read, voided or erased afterwards."""
    create_ladder(client)
    before = table_counts(database_url)
    assert_problem(client.post("/v1/ladders/test/matches", json=body), 422, field)
    assert table_counts(database_url) == before


def test_every_id_that_is_accepted_is_addressable(client: TestClient) -> None:
    create_ladder(client)
    odd = "eu:alice?#&= ü"
    body = {"match_id": "g 7?#&", "teams": [[odd], ["b"]]}
    assert client.post("/v1/ladders/test/matches", json=body).status_code == 201
    quoted = urllib.parse.quote(odd, safe="")
    assert client.get(f"/v1/ladders/test/players/{quoted}").json()["player_id"] == odd
    assert client.get(f"/v1/ladders/test/players/{quoted}/history").status_code == 200
    match = urllib.parse.quote("g 7?#&", safe="")
    assert client.get(f"/v1/ladders/test/matches/{match}").json()["match_id"] == "g 7?#&"
    assert client.delete(f"/v1/ladders/test/matches/{match}").status_code == 200
