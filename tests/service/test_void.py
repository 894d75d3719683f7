"""Voiding a match: ratings, history, results and leaderboard equal a fresh replay of the
remaining matches (seeds kept at their places), and the voided match stays visible."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match
from tests.service.oracle import core_replay, random_matches

ALGORITHMS = [
    ("trueskill", {"tau_per_day": 0.3, "draw_probability": 0.2}),
    ("plackett_luce", {"tau_per_day": 0.1}),
    ("elo", {"k_factor": 24}),
    ("glicko2", {"deviation_per_day": 3.0, "tau": 0.8}),
]

SEED = {"mu": 31.0, "sigma": 2.0}
ELO_SEED = {"mu": 1620.0}
GLICKO2_SEED = {"mu": 1620.0, "sigma": 80.0, "volatility": 0.09}


def _batch(client: TestClient, ladder: str, bodies: list[dict[str, Any]]) -> None:
    response = client.post(f"/v1/ladders/{ladder}/matches/batch", json={"matches": bodies})
    assert response.status_code == 201, response.text


def _seed(client: TestClient, ladder: str, player: str, seed: dict[str, float]) -> None:
    response = client.put(f"/v1/ladders/{ladder}/players/{player}", json=seed)
    assert response.status_code == 200, response.text


def _state(client: TestClient, ladder: str) -> dict[str, Any]:
    """Everything a replay determines: leaderboard, histories, match results."""
    board = all_pages(client, f"/v1/ladders/{ladder}/leaderboard", limit=7)
    histories = {}
    for entry in board:
        player = entry["player_id"]
        history = all_pages(client, f"/v1/ladders/{ladder}/players/{player}/history", limit=9)
        for item in history:
            if item["kind"] != "match":
                del item["played_at"]  # when the seed or reset was made: differs by ladder
        histories[player] = history
    matches = [
        {k: v for k, v in m.items() if k not in ("ladder", "seq", "recorded_at")}
        for m in all_pages(client, f"/v1/ladders/{ladder}/matches", limit=11)
        if not m["voided"]
    ]
    return {"board": board, "histories": histories, "matches": matches}


@pytest.mark.parametrize(("algorithm", "params"), ALGORITHMS, ids=[a for a, _ in ALGORITHMS])
@pytest.mark.parametrize("voided", [0, 9, 33])
def test_void_equals_a_fresh_replay_without_the_match(
    client: TestClient, algorithm: str, params: dict[str, Any], voided: int
) -> None:
    bodies = random_matches(seed=21, count=36)
    seed = {"elo": ELO_SEED, "glicko2": GLICKO2_SEED}.get(algorithm, SEED)
    create_ladder(client, "v", algorithm=algorithm, params=params)
    _seed(client, "v", "p11", seed)  # a seed before any match of p11
    _batch(client, "v", bodies[:20])
    _seed(client, "v", "p03", seed)  # a seed between p03's matches
    _batch(client, "v", bodies[20:])
    response = client.delete(f"/v1/ladders/v/matches/{bodies[voided]['match_id']}")
    assert response.status_code == 200, response.text
    summary = response.json()
    assert summary["already_voided"] is False
    assert summary["match_id"] == bodies[voided]["match_id"]

    remaining = bodies[:voided] + bodies[voided + 1 :]
    create_ladder(client, "fresh", algorithm=algorithm, params=params)
    _seed(client, "fresh", "p11", seed)
    _batch(client, "fresh", [b for b in remaining if b in bodies[:20]])
    _seed(client, "fresh", "p03", seed)
    _batch(client, "fresh", [b for b in remaining if b in bodies[20:]])
    assert _state(client, "v") == _state(client, "fresh")
    ladder = client.get("/v1/ladders/v").json()
    assert ladder["matches"] == len(remaining)

    # And the core, one match at a time.
    split = 20 if voided >= 20 else 19
    events = [{"seed": "p11", **seed}, *remaining[:split], {"seed": "p03", **seed}]
    events += remaining[split:]
    expected = core_replay(algorithm, params, events)
    board = all_pages(client, "/v1/ladders/v/leaderboard", limit=100)
    assert {e["player_id"] for e in board} == set(expected.ratings)
    for entry in board:
        rating = expected.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(rating.mu, rel=1e-12)
        if algorithm != "elo":
            assert entry["sigma"] == pytest.approx(rating.sigma, rel=1e-12)
        assert entry["matches"] == expected.played.get(entry["player_id"], 0)
    reached = {p for b in bodies[voided:] for team in b["teams"] for p in team}
    assert summary["players_affected"] <= len(reached)
    assert summary["matches_rerated"] <= len(bodies) - voided - 1


def test_the_voided_match_stays_visible_and_marked(client: TestClient) -> None:
    create_ladder(client)
    bodies = [
        {"match_id": "m1", "teams": [["a"], ["b"]], "played_at": "2026-01-01T00:00:00Z"},
        {"match_id": "m2", "teams": [["a"], ["c"]], "played_at": "2026-01-02T00:00:00Z"},
        {"match_id": "m3", "teams": [["d"], ["e"]], "played_at": "2026-01-03T00:00:00Z"},
        {"match_id": "m4", "teams": [["c"], ["a"]], "played_at": "2026-01-04T00:00:00Z"},
    ]
    stored = [post_match(client, "test", body) for body in bodies]
    untouched = client.get("/v1/ladders/test/matches/m3").content
    response = client.delete("/v1/ladders/test/matches/m2")
    assert response.status_code == 200
    summary = response.json()
    assert (summary["matches_rerated"], summary["players_affected"]) == (1, 2)

    voided = client.get("/v1/ladders/test/matches/m2").json()
    assert voided["voided"] is True and voided["voided_at"] == summary["voided_at"]
    assert voided["teams"] == stored[1]["teams"]  # the numbers it had
    listed = all_pages(client, "/v1/ladders/test/matches", limit=2)
    assert [(m["match_id"], m["voided"]) for m in listed] == [
        ("m4", False),
        ("m3", False),
        ("m2", True),
        ("m1", False),
    ]
    of_c = all_pages(client, "/v1/ladders/test/matches", limit=5, player="c")
    assert [(m["match_id"], m["voided"]) for m in of_c] == [("m4", False), ("m2", True)]
    assert client.get("/v1/ladders/test/matches/m3").content == untouched

    a = client.get("/v1/ladders/test/players/a").json()
    assert a["matches"] == 2
    history = all_pages(client, "/v1/ladders/test/players/a/history", limit=10)
    assert [h["match_id"] for h in history] == ["m4", "m1"]
    assert history[0]["before"] == history[1]["after"]
    # c played m2 and m4: now m4 is its first match, from the prior.
    m4 = client.get("/v1/ladders/test/matches/m4").json()
    c_before = m4["teams"][0]["players"][0]["before"]
    assert c_before == {"mu": 25.0, "sigma": pytest.approx(25 / 3), "conservative": 0.0}
    assert (
        client.get("/v1/ladders/test/players/c").json()["last_played_at"].startswith("2026-01-04")
    )
    assert client.get("/v1/ladders/test").json()["matches"] == 3

    # Voiding again: nothing changes.
    again = client.delete("/v1/ladders/test/matches/m2")
    assert again.status_code == 200
    assert again.json()["already_voided"] is True
    assert again.json()["voided_at"] == summary["voided_at"]
    # A retry of the voided match's body gets its document, and applies nothing.
    retry = client.post("/v1/ladders/test/matches", json=bodies[1])
    assert retry.status_code == 200 and retry.json()["voided"] is True
    assert client.get("/v1/ladders/test/players/a").json() == a


def test_a_player_whose_only_match_is_voided_leaves_the_leaderboard(client: TestClient) -> None:
    create_ladder(client)
    post_match(client, "test", {"match_id": "x", "teams": [["a"], ["new"]]})
    post_match(client, "test", {"match_id": "y", "teams": [["a"], ["b"]]})
    assert client.delete("/v1/ladders/test/matches/x").status_code == 200
    assert_problem(client.get("/v1/ladders/test/players/new"), 404)
    board = client.get("/v1/ladders/test/leaderboard").json()["entries"]
    assert sorted(e["player_id"] for e in board) == ["a", "b"]
    of_new = client.get("/v1/ladders/test/matches", params={"player": "new"}).json()
    assert [m["match_id"] for m in of_new["entries"]] == ["x"]
    assert client.get("/v1/ladders/test").json()["players"] == 2


def test_void_errors_and_scope(client: TestClient, database_url: str) -> None:
    from app.services import auth
    from app.storage.engine import get_engine, session_factory

    create_ladder(client)
    post_match(client, "test", {"match_id": "x", "teams": [["a"], ["b"]]})
    assert_problem(client.delete("/v1/ladders/test/matches/nope"), 404, "match_id")
    assert_problem(client.delete("/v1/ladders/nope/matches/x"), 404, "ladder")
    session = session_factory(get_engine(database_url))()
    write_key = auth.create_key(session, name="writer", scope="write").key
    session.commit()
    session.close()
    response = client.delete(
        "/v1/ladders/test/matches/x", headers={"Authorization": f"Bearer {write_key}"}
    )
    assert_problem(response, 403)
    assert client.get("/v1/ladders/test/matches/x").json()["voided"] is False


def test_a_void_racing_new_matches_equals_a_replay_in_recorded_order(client: TestClient) -> None:
    """Matches posted by four threads while a match is voided: afterwards every rating and
    every stored result equals a replay, in seq order, of the matches that count."""
    import threading

    from app.rating.base import Rating
    from app.rating.registry import make_model

    create_ladder(client, "race")
    _batch(client, "race", random_matches(seed=31, count=30, players=8))
    later = [random_matches(seed=40 + t, count=6, players=8) for t in range(4)]
    for t, bodies in enumerate(later):
        for n, body in enumerate(bodies):
            body["match_id"] = f"t{t}-{n}"
            del body["played_at"]  # now: after every earlier match
    barrier = threading.Barrier(5)
    errors: list[str] = []

    def post(bodies: list[dict[str, Any]]) -> None:
        barrier.wait(timeout=30)
        for body in bodies:
            response = client.post("/v1/ladders/race/matches", json=body)
            if response.status_code != 201:
                errors.append(response.text)

    def void() -> None:
        barrier.wait(timeout=30)
        response = client.delete("/v1/ladders/race/matches/r31-2")
        if response.status_code != 200:
            errors.append(response.text)

    threads = [threading.Thread(target=post, args=(b,)) for b in later]
    threads.append(threading.Thread(target=void))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]

    matches = all_pages(client, "/v1/ladders/race/matches", limit=100)[::-1]
    assert len(matches) == 30 + 24
    model = make_model("trueskill")
    ratings: dict[str, Rating] = {}
    for match in matches:
        if match["voided"]:
            assert match["match_id"] == "r31-2"
            continue
        teams = [
            [ratings.get(p["player_id"], model.rating()) for p in team["players"]]
            for team in match["teams"]
        ]
        for team, out in zip(teams, match["teams"], strict=True):
            for rating, player in zip(team, out["players"], strict=True):
                assert (player["before"]["mu"], player["before"]["sigma"]) == pytest.approx(
                    tuple(rating), rel=1e-12
                )
        weights = [[p["weight"] for p in team["players"]] for team in match["teams"]]
        new = model.rate(teams, ranks=[team["rank"] for team in match["teams"]], weights=weights)
        for new_team, out in zip(new, match["teams"], strict=True):
            for rating, player in zip(new_team, out["players"], strict=True):
                ratings[player["player_id"]] = rating
    for player, rating in ratings.items():
        stored = client.get(f"/v1/ladders/race/players/{player}").json()
        assert (stored["mu"], stored["sigma"]) == pytest.approx(tuple(rating), rel=1e-12)


def test_void_through_copy_updates_equals_a_fresh_replay(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large re-ratings update PostgreSQL through COPY into a temporary table: the same
    numbers as the array path (every update takes that path here)."""
    from app.storage.repositories import sql as sql_repo

    monkeypatch.setattr(sql_repo, "COPY_UPDATE_ROWS", 1)
    test_void_equals_a_fresh_replay_without_the_match(
        client, "trueskill", {"tau_per_day": 0.3, "draw_probability": 0.2}, 9
    )
    # Two large updates of one table in one transaction use two temporary tables.
    response = client.delete("/v1/ladders/v/matches/r21-12")
    assert response.status_code == 200 and response.json()["matches_rerated"] > 0


def test_ladder_match_counts_leave_voided_matches_out(client: TestClient) -> None:
    """A ladder's ``matches`` is its matches less the voided ones, per ladder."""
    for ladder in ("counted", "other"):
        create_ladder(client, ladder)
        _batch(
            client,
            ladder,
            [{"match_id": f"c{i}", "teams": [["a"], [f"p{i}"]]} for i in range(5)],
        )
    for match_id in ("c1", "c3"):
        response = client.delete(f"/v1/ladders/counted/matches/{match_id}")
        assert response.status_code == 200, response.text
    assert client.get("/v1/ladders/counted").json()["matches"] == 3
    assert client.get("/v1/ladders/other").json()["matches"] == 5
    listed = {
        entry["id"]: entry["matches"] for entry in client.get("/v1/ladders").json()["entries"]
    }
    assert listed == {"counted": 3, "other": 5}
    # Voiding again changes nothing.
    client.delete("/v1/ladders/counted/matches/c1")
    assert client.get("/v1/ladders/counted").json()["matches"] == 3
