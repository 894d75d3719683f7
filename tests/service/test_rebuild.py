"""Rebuilding a ladder: PATCH with new parameters (409 unless a rebuild is asked for) and
``ratings rebuild``; the result equals a fresh ladder with those parameters."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.cli.main import main
from tests.service.helpers import assert_problem, create_ladder
from tests.service.oracle import core_replay, random_matches
from tests.service.test_void import _batch, _seed, _state


def test_new_params_need_a_rebuild(client: TestClient) -> None:
    create_ladder(client, "l", params={"tau_per_day": 0.1})
    bodies = random_matches(seed=4, count=12)
    _batch(client, "l", bodies)
    state = _state(client, "l")
    response = client.patch("/v1/ladders/l", json={"params": {"tau_per_day": 0.5}})
    assert_problem(response, 409, "rebuild")
    assert client.get("/v1/ladders/l").json()["params"]["tau_per_day"] == 0.1
    assert _state(client, "l") == state
    assert_problem(
        client.patch("/v1/ladders/l?rebuild=true", json={"params": {"bogus": 1}}), 422, "bogus"
    )
    # A description alone needs no rebuild.
    response = client.patch("/v1/ladders/l", json={"description": "season 2"})
    assert response.status_code == 200, response.text
    assert response.json()["rebuild"] is None
    assert response.json()["ladder"]["description"] == "season 2"


@pytest.mark.parametrize("ask", ["query", "body"])
def test_rebuild_with_new_params_equals_a_fresh_ladder(client: TestClient, ask: str) -> None:
    old = {"tau_per_day": 0.1, "draw_probability": 0.1}
    new = {"tau_per_day": 0.4, "draw_probability": 0.25, "beta": 5.0}
    bodies = random_matches(seed=8, count=30)
    create_ladder(client, "l", params=old)
    _batch(client, "l", bodies[:10])
    _seed(client, "l", "p02", {"mu": 30.0, "sigma": 3.0})
    _batch(client, "l", bodies[10:])
    assert client.delete(f"/v1/ladders/l/matches/{bodies[4]['match_id']}").status_code == 200

    if ask == "query":
        response = client.patch("/v1/ladders/l?rebuild=true", json={"params": new})
    else:
        response = client.patch("/v1/ladders/l", json={"params": new, "rebuild": True})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["rebuild"]["matches_rerated"] == 29
    assert result["ladder"]["params"]["beta"] == 5.0
    assert result["ladder"]["params"]["tau_per_day"] == 0.4

    remaining = [b for n, b in enumerate(bodies) if n != 4]
    create_ladder(client, "fresh", params=new)
    _batch(client, "fresh", remaining[:9])
    _seed(client, "fresh", "p02", {"mu": 30.0, "sigma": 3.0})
    _batch(client, "fresh", remaining[9:])
    assert _state(client, "l") == _state(client, "fresh")

    expected = core_replay(
        "trueskill",
        new,
        [*remaining[:9], {"seed": "p02", "mu": 30.0, "sigma": 3.0}, *remaining[9:]],
    )
    board = client.get("/v1/ladders/l/leaderboard", params={"limit": 100}).json()["entries"]
    for entry in board:
        rating = expected.ratings[entry["player_id"]]
        assert (entry["mu"], entry["sigma"]) == pytest.approx(tuple(rating), rel=1e-12)


@pytest.mark.parametrize("algorithm", ["trueskill", "plackett_luce", "elo"])
def test_command_line_rebuild_leaves_an_unchanged_ladder_as_it_is(
    client: TestClient, capsys: pytest.CaptureFixture[str], algorithm: str
) -> None:
    create_ladder(client, "l", algorithm=algorithm)
    _batch(client, "l", random_matches(seed=2, count=25))
    state = _state(client, "l")
    assert main(["rebuild", "--ladder", "l"]) == 0
    out = capsys.readouterr().out
    assert "25 matches replayed" in out
    assert _state(client, "l") == state
    assert main(["rebuild", "--ladder", "nope"]) == 1
    assert "ladder" in capsys.readouterr().err


def test_a_rebuild_writes_each_document_again_byte_for_byte(client: TestClient) -> None:
    """Re-rating writes the result documents again from the stored requests, meta included:
    with unchanged parameters each is the same text, which a retry answers."""
    create_ladder(client, "l")
    metas = [
        {"map": "dust", "é": [1, 2.5, None], "x": 0.1 + 0.2, "tiny": 5e-324},
        None,
        {"nested": {"quote": 'a"b\\c', "big": 2**62, "neg": -0.0}, "t": True},
    ]
    teams = [["a"], ["b"], ["c"], ["d"]]
    bodies = [
        {"match_id": f"m{n}", "teams": teams[n % 3 :], "meta": meta}
        for n, meta in enumerate(metas * 2)
    ]
    texts = []
    for body in bodies:
        response = client.post("/v1/ladders/l/matches", json=body)
        assert response.status_code == 201, response.text
        texts.append(response.text)
    response = client.patch("/v1/ladders/l?rebuild=true", json={})
    assert response.status_code == 200, response.text
    assert response.json()["rebuild"]["matches_rerated"] == len(bodies)
    for body, text in zip(bodies, texts, strict=True):
        assert client.get(f"/v1/ladders/l/matches/{body['match_id']}").text == text
        retry = client.post("/v1/ladders/l/matches", json=body)
        assert (retry.status_code, retry.text) == (200, text)
