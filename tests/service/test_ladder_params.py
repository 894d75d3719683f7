"""Ladder parameters through the API, on every database: inside their documented ranges a
ladder rates 1 v 1s, draws, uneven teams and free-for-alls (with and without partial
play) from the most extreme seedable ratings, and its quality, matchmaking and
leaderboard stay finite; at and just outside a bound, create and PATCH answer 422 naming
the parameter and its range, and write nothing. The OpenAPI document carries the ranges.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.rating.params import LADDER_PARAMETERS, MAX_LENGTH, MAX_MEAN, MIN_LENGTH, Parameter
from app.rating.registry import ALGORITHMS, parameters
from tests.service.helpers import assert_problem, create_ladder, table_counts

BAYESIAN = ("trueskill", "plackett_luce", "glicko2")
#: The algorithms whose ladders add ``LADDER_PARAMETERS`` (Glicko-2's model holds its own).
LADDER_LEVEL = tuple(a for a in ALGORITHMS if a not in ("elo", "glicko2"))


def _table(algorithm: str) -> tuple[Parameter, ...]:
    return parameters(algorithm) + (LADDER_PARAMETERS if algorithm in LADDER_LEVEL else ())


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return []


def _edge(spec: Parameter, side: str) -> float:
    """The bound on ``side``, or the float next to it inside where the bound is open."""
    if side == "low":
        return math.nextafter(spec.low, math.inf) if spec.low_open else spec.low
    return math.nextafter(spec.high, -math.inf) if spec.high_open else spec.high


def _inside_cases(algorithm: str) -> list[dict[str, Any]]:
    """Every number parameter at each of its bounds (the rest at their defaults), and all
    of them at their low bounds, and at their high ones, together."""
    numeric = [spec for spec in _table(algorithm) if not (spec.choices or spec.boolean)]
    cases: list[dict[str, Any]] = [
        {spec.name: _edge(spec, side)} for spec in numeric for side in ("low", "high")
    ]
    for side in ("low", "high"):
        cases.append({spec.name: _edge(spec, side) for spec in numeric})
    if algorithm == "elo":
        for case in cases:
            # The default model is logistic: k_factor is also at most the scale.
            case["k_factor"] = min(case.get("k_factor", 32.0), case.get("scale", 400.0))
        cases += [
            {"model": "gaussian", "rule": "mle", "multiplayer": "full", "beta": MIN_LENGTH,
             "k_factor": MIN_LENGTH, "initial": MAX_MEAN},
            {"model": "gaussian", "rule": "mle", "multiplayer": "pairwise_sum",
             "beta": MAX_LENGTH, "k_factor": MAX_LENGTH},
            {"multiplayer": "full", "scale": MIN_LENGTH, "k_factor": MIN_LENGTH},
        ]  # fmt: skip
    return cases


CASES = [(a, case) for a in ALGORITHMS for case in _inside_cases(a)]

#: (teams, extra body) recorded in turn: 1 v 1 won and drawn, 2 v 1, 2 v 2 with partial
#: play, a free-for-all with a tie, a weighted three-way, 3 v 2 v 1 by scores.
MATCHES: list[tuple[list[list[str]], dict[str, Any]]] = [
    ([["hi"], ["lo"]], {}),
    ([["hi"], ["mid"]], {"ranks": [1, 1]}),
    ([["a", "b"], ["lo"]], {"ranks": [2, 1]}),
    ([["hi", "a"], ["lo", "b"]], {"weights": [[1.0, 0.5], [0.25, 1.0]]}),
    ([["lo"], ["hi"], ["mid"], ["a"]], {"ranks": [1, 2, 2, 3]}),
    ([["b"], ["hi"], ["lo"]], {"weights": [[0.5], [1.0], [0.001]], "ranks": [3, 1, 2]}),
    ([["a", "b", "mid"], ["hi", "lo"], ["c"]], {"scores": [1, 5, 3]}),
]


def _seed(client: TestClient, ladder: str, bayesian: bool) -> None:
    """The most extreme ratings a seed may set: mu at +-1e9, sigma at 1e-6 and 1e6."""
    seeds = {"hi": (MAX_MEAN, MIN_LENGTH), "lo": (-MAX_MEAN, MAX_LENGTH), "mid": (0.0, MIN_LENGTH)}
    for player, (mu, sigma) in seeds.items():
        body: dict[str, float] = {"mu": mu, "sigma": sigma} if bayesian else {"mu": mu}
        response = client.put(f"/v1/ladders/{ladder}/players/{player}", json=body)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize(("algorithm", "params"), CASES)
def test_inside_the_bounds_everything_is_finite(
    client: TestClient, algorithm: str, params: dict[str, Any]
) -> None:
    ladder = create_ladder(client, "edge", algorithm=algorithm, params=params)
    assert all(ladder["params"][name] == value for name, value in params.items())
    bayesian = algorithm in BAYESIAN
    _seed(client, "edge", bayesian)
    for teams, extra in MATCHES:
        # A prediction takes the teams and the weights (no outcome).
        body = {"teams": teams, "weights": extra.get("weights")}
        predicted = client.post("/v1/ladders/edge/quality", json=body)
        assert predicted.status_code == 200, predicted.text
        prediction = predicted.json()
        assert 0.0 < prediction["quality"] <= 1.0
        assert math.fsum(prediction["win_probabilities"]) == pytest.approx(1.0)
        assert all(math.isfinite(x) for x in _numbers(predicted.json()))
        response = client.post("/v1/ladders/edge/matches", json={"teams": teams, **extra})
        assert response.status_code == 201, (teams, response.text)
        result = response.json()
        assert all(math.isfinite(x) for x in _numbers(result))
        assert 0.0 < result["quality"] <= 1.0
        if bayesian:
            assert all(p["after"]["sigma"] > 0 for t in result["teams"] for p in t["players"])
    players = ["hi", "lo", "mid", "a", "b", "c", "new-1"]
    for k in (2, 3):
        split = client.post("/v1/ladders/edge/matchmaking", json={"players": players, "teams": k})
        assert split.status_code == 200, split.text
        assert 0.0 < split.json()["quality"] <= 1.0
    board = client.get("/v1/ladders/edge/leaderboard", params={"limit": 100})
    assert board.status_code == 200
    entries = board.json()["entries"]
    assert len(entries) == 6 and all(math.isfinite(x) for x in _numbers(entries))
    keys = [e["conservative"] for e in entries]
    assert keys == sorted(keys, reverse=True)
    for rank, entry in enumerate(entries, start=1):
        player = client.get(f"/v1/ladders/edge/players/{entry['player_id']}").json()
        assert player["rank"] == rank
    # A rebuild replays every match with the same parameters: the same finite ratings.
    rebuilt = client.patch("/v1/ladders/edge", json={"rebuild": True})
    assert rebuilt.status_code == 200, rebuilt.text
    again = client.get("/v1/ladders/edge/leaderboard", params={"limit": 100}).json()
    assert [e["player_id"] for e in again["entries"]] == [e["player_id"] for e in entries]
    assert _numbers(again["entries"]) == pytest.approx(_numbers(entries), rel=1e-9)


def _outside_cases() -> list[tuple[str, str, Any]]:
    cases: list[tuple[str, str, Any]] = []
    for algorithm in ALGORITHMS:
        for spec in _table(algorithm):
            if spec.choices:
                cases += [(algorithm, spec.name, "Logistic"), (algorithm, spec.name, 1.0)]
                continue
            if spec.boolean:
                cases += [(algorithm, spec.name, "true"), (algorithm, spec.name, 1)]
                continue
            low = spec.low if spec.low_open else math.nextafter(spec.low, -math.inf)
            high = spec.high if spec.high_open else math.nextafter(spec.high, math.inf)
            cases += [(algorithm, spec.name, low), (algorithm, spec.name, high)]
            cases += [(algorithm, spec.name, "1"), (algorithm, spec.name, 10**400)]
    return cases


@pytest.mark.parametrize(("algorithm", "name", "value"), _outside_cases())
def test_outside_the_bounds_create_and_patch_are_422_naming_the_range(
    client: TestClient, database_url: str, algorithm: str, name: str, value: Any
) -> None:
    spec = next(s for s in _table(algorithm) if s.name == name)
    before = table_counts(database_url)
    response = client.post(
        "/v1/ladders", json={"id": "bad", "algorithm": algorithm, "params": {name: value}}
    )
    detail = assert_problem(response, 422, f"params.{name}")
    assert spec.range_text in detail
    assert table_counts(database_url) == before

    ladder = create_ladder(client, "good", algorithm=algorithm)
    client.post("/v1/ladders/good/matches", json={"teams": [["x"], ["y"]]})
    before = table_counts(database_url)
    board = client.get("/v1/ladders/good/leaderboard").json()
    response = client.patch("/v1/ladders/good", json={"params": {name: value}, "rebuild": True})
    detail = assert_problem(response, 422, f"params.{name}")
    assert spec.range_text in detail
    assert table_counts(database_url) == before
    assert client.get("/v1/ladders/good").json()["params"] == ladder["params"]
    assert client.get("/v1/ladders/good/leaderboard").json() == board


@pytest.mark.parametrize("model", ["logistic", "gaussian"])
def test_elo_k_factor_above_the_models_width_is_422(client: TestClient, model: str) -> None:
    width = "scale" if model == "logistic" else "beta"
    body = {"id": "k", "algorithm": "elo", "params": {"model": model, width: 40, "k_factor": 41}}
    detail = assert_problem(client.post("/v1/ladders", json=body), 422, "params.k_factor")
    assert f"at most {width}" in detail and "[1e-06, 40.0]" in detail
    body["params"]["k_factor"] = 40
    assert client.post("/v1/ladders", json=body).status_code == 201
    # Narrowing the width below the step names k_factor too.
    response = client.patch("/v1/ladders/k", json={"params": {width: 20}, "rebuild": True})
    assert_problem(response, 422, "params.k_factor")


def test_seeds_take_the_range_of_the_prior(client: TestClient) -> None:
    create_ladder(client, "seeds")
    for sigma in (math.nextafter(MIN_LENGTH, 0.0), math.nextafter(MAX_LENGTH, math.inf)):
        response = client.put("/v1/ladders/seeds/players/p", json={"mu": 0.0, "sigma": sigma})
        assert_problem(response, 422, "sigma")
    for mu in (math.nextafter(MAX_MEAN, math.inf), math.nextafter(-MAX_MEAN, -math.inf)):
        response = client.put("/v1/ladders/seeds/players/p", json={"mu": mu})
        assert_problem(response, 422, "mu")
    for sigma in (MIN_LENGTH, MAX_LENGTH):
        response = client.put("/v1/ladders/seeds/players/p", json={"mu": MAX_MEAN, "sigma": sigma})
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("model", ["logistic", "gaussian"])
def test_elo_two_against_one_at_equal_ratings_is_an_even_match(
    client: TestClient, model: str
) -> None:
    create_ladder(client, "elo", algorithm="elo", params={"model": model})
    response = client.post("/v1/ladders/elo/quality", json={"teams": [["a", "b"], ["c"]]})
    assert response.status_code == 200
    assert response.json() == {
        "quality": 1.0,
        "win_probabilities": [0.5, 0.5],
        "draw_probability": None,
        "predicted_ranks": [{"rank": 1, "probability": 0.5}, {"rank": 1, "probability": 0.5}],
    }


def test_the_openapi_document_gives_every_range(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    create = document["components"]["schemas"]["LadderCreate"]["properties"]["params"]
    shapes = {shape["title"]: shape for shape in create["anyOf"]}
    titles = {
        "trueskill": "TrueSkillParams",
        "plackett_luce": "PlackettLuceParams",
        "glicko2": "Glicko2Params",
        "bradley_terry_full": "BradleyTerryFullParams",
        "bradley_terry_part": "BradleyTerryPartParams",
        "thurstone_mosteller_full": "ThurstoneMostellerFullParams",
        "thurstone_mosteller_part": "ThurstoneMostellerPartParams",
    }
    for algorithm in ALGORITHMS:
        shape = shapes[titles.get(algorithm, "EloParams")]
        assert shape["additionalProperties"] is False
        assert set(shape["properties"]) == {spec.name for spec in _table(algorithm)}
        for spec in _table(algorithm):
            field = shape["properties"][spec.name]
            assert field["default"] == spec.default
            assert spec.range_text in field["description"]
            if spec.choices:
                assert field["enum"] == list(spec.choices)
                continue
            if spec.boolean:
                assert field["type"] == "boolean"
                continue
            assert field[("exclusiveMinimum" if spec.low_open else "minimum")] == spec.low
            assert field[("exclusiveMaximum" if spec.high_open else "maximum")] == spec.high
    update = document["components"]["schemas"]["LadderUpdate"]["properties"]["params"]
    assert create["anyOf"] == update["anyOf"][0]["anyOf"]
