"""Ladders: creation with every default filled in, idempotent creation, listing, counts."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.rating.registry import make_model
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match


def test_trueskill_ladder_has_the_papers_defaults(client: TestClient) -> None:
    ladder = create_ladder(client, "halo-ffa", description="Halo free-for-all")
    assert ladder["algorithm"] == "trueskill"
    assert ladder["description"] == "Halo free-for-all"
    params = ladder["params"]
    assert params["mu"] == 25.0
    assert params["sigma"] == pytest.approx(25 / 3)
    assert params["beta"] == pytest.approx(25 / 6)
    assert params["tau"] == pytest.approx(25 / 300)
    assert params["draw_probability"] == pytest.approx(0.10)
    assert params["tau_per_day"] == 0.0
    assert params["conservative_k"] == 3.0
    assert ladder["players"] == 0 and ladder["matches"] == 0


@pytest.mark.parametrize("algorithm", ["trueskill", "plackett_luce", "elo"])
def test_every_parameter_is_returned(client: TestClient, algorithm: str) -> None:
    pytest.importorskip(f"app.rating.{algorithm}")
    ladder = create_ladder(client, f"l-{algorithm}", algorithm=algorithm)
    expected = dict(make_model(algorithm).params)
    if algorithm != "elo":
        expected.update(tau_per_day=0.0, conservative_k=3.0)
    assert ladder["params"] == pytest.approx(expected)


def test_given_parameters_are_kept(client: TestClient) -> None:
    ladder = create_ladder(
        client, "custom", params={"mu": 1000, "sigma": 100, "tau_per_day": 0.5, "conservative_k": 2}
    )
    params = ladder["params"]
    assert (params["mu"], params["sigma"], params["tau_per_day"]) == (1000.0, 100.0, 0.5)
    assert params["conservative_k"] == 2.0
    # The rest are the model's own defaults for these values.
    assert params["beta"] == make_model("trueskill", {"mu": 1000, "sigma": 100}).params["beta"]


def test_same_config_is_200_and_different_is_409(client: TestClient) -> None:
    first = create_ladder(client, "dup", params={"draw_probability": 0.2})
    again = client.post(
        "/v1/ladders",
        json={"id": "dup", "algorithm": "trueskill", "params": {"draw_probability": 0.2}},
    )
    assert again.status_code == 200
    assert again.json() == first
    # Spelling out a default is the same configuration.
    explicit = client.post(
        "/v1/ladders",
        json={"id": "dup", "algorithm": "trueskill", "params": {**first["params"]}},
    )
    assert explicit.status_code == 200
    other = client.post("/v1/ladders", json={"id": "dup", "algorithm": "trueskill"})
    assert_problem(other, 409, "id")
    other_algorithm = client.post("/v1/ladders", json={"id": "dup", "algorithm": "plackett_luce"})
    assert_problem(other_algorithm, 409, "id")


def test_get_and_list_with_counts(client: TestClient) -> None:
    for name in ("b-ladder", "a-ladder", "c-ladder"):
        create_ladder(client, name)
    post_match(client, "b-ladder", {"teams": [["x"], ["y"], ["z"]]})
    post_match(client, "b-ladder", {"teams": [["x"], ["w"]]})
    one = client.get("/v1/ladders/b-ladder").json()
    assert (one["players"], one["matches"]) == (4, 2)
    listed = all_pages(client, "/v1/ladders", limit=2)
    assert [entry["id"] for entry in listed] == ["a-ladder", "b-ladder", "c-ladder"]
    assert listed[1] == one


def test_unknown_ladder_is_404(client: TestClient) -> None:
    assert_problem(client.get("/v1/ladders/nope"), 404, "ladder")
    assert_problem(client.get("/v1/ladders/nope/leaderboard"), 404, "ladder")
    assert_problem(client.post("/v1/ladders/nope/matches", json={"teams": [["a"], ["b"]]}), 404)


def test_creating_a_ladder_needs_an_admin_key(client: TestClient) -> None:
    response = client.post(
        "/v1/ladders",
        json={"id": "x", "algorithm": "trueskill"},
        headers={"Authorization": ""},
    )
    assert_problem(response, 401)


@pytest.mark.parametrize(
    ("algorithm", "params", "name"),
    [
        ("trueskill", {"sigma": 5e-324}, "sigma"),
        ("plackett_luce", {"sigma": 5e-324}, "sigma"),
        ("elo", {"scale": 5e-324}, "scale"),
        ("trueskill", {"sigma": 1e-300, "beta": 1e-300}, "sigma"),
    ],
)
def test_the_smallest_scales_are_a_422_naming_the_range(
    client: TestClient, algorithm: str, params: dict[str, float], name: str
) -> None:
    """A scale as small as a float gets (5e-324) once failed computing the ladder's rating
    buckets (500); it is below the documented range [1e-06, 1e+06]."""
    response = client.post(
        "/v1/ladders", json={"id": "tiny", "algorithm": algorithm, "params": params}
    )
    detail = assert_problem(response, 422, f"params.{name}")
    assert "[1e-06, 1e+06]" in detail


def test_a_draw_probability_with_an_infinite_margin_is_a_422(client: TestClient) -> None:
    body = {"id": "draws", "algorithm": "trueskill", "params": {"draw_probability": 1 - 2**-53}}
    detail = assert_problem(client.post("/v1/ladders", json=body), 422, "params.draw_probability")
    assert "[0, 0.9999999999999998]" in detail
    body["params"] = {"draw_probability": 1 - 2**-52}
    assert client.post("/v1/ladders", json=body).status_code == 201
