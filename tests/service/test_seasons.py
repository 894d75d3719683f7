"""Seasons: opening the next one resets every rating toward the prior (``rating-models.md``
section 8) and archives the closed season's standings; voids, rebuilds and erasures replay
matches, seeds and resets in order, so ratings, histories and archives always equal a
fresh replay of what was recorded."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.helpers import (
    all_pages,
    assert_problem,
    create_ladder,
    post_match,
    table_counts,
)
from tests.service.oracle import core_replay, random_matches
from tests.service.test_erasure import PSEUDONYM, _others
from tests.service.test_void import ALGORITHMS, ELO_SEED, GLICKO2_SEED, SEED, _batch, _seed, _state


def _open(client: TestClient, ladder: str, season: str, keep: float) -> dict[str, Any]:
    response = client.post(f"/v1/ladders/{ladder}/seasons", json={"id": season, "keep": keep})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _archive(client: TestClient, ladder: str, season: str) -> list[dict[str, Any]]:
    path = f"/v1/ladders/{ladder}/seasons/{season}/leaderboard"
    entries = all_pages(client, path, limit=5)
    for entry in entries:
        entry.pop("last_played_at")  # the service's clock on matches without played_at
    return entries


def test_a_new_season_resets_every_rating_and_archives_the_last(client: TestClient) -> None:
    create_ladder(client, "r", params={"mu": 25.0, "sigma": 8.0})
    bodies = random_matches(seed=3, count=12, players=6)
    _batch(client, "r", bodies)
    board = all_pages(client, "/v1/ladders/r/leaderboard", limit=100)

    opened = _open(client, "r", "2027-s1", 0.5)
    assert opened["id"] == "2027-s1"
    assert (opened["ordinal"], opened["state"], opened["keep"]) == (2, "open", 0.5)
    assert opened["ended_at"] is None
    assert (opened["matches"], opened["players"]) == (0, len(board))

    # Every rating: mu' = 25 + 0.5 (mu - 25), sigma'^2 = 0.5 sigma^2 + 0.5 * 64.
    for entry in board:
        player = client.get(f"/v1/ladders/r/players/{entry['player_id']}").json()
        assert player["season"] == "2027-s1"
        assert player["mu"] == pytest.approx(25.0 + 0.5 * (entry["mu"] - 25.0), rel=1e-15)
        sigma = math.sqrt(0.5 * entry["sigma"] ** 2 + 0.5 * 64.0)
        assert player["sigma"] == pytest.approx(sigma, rel=1e-15)
        assert player["matches"] == entry["matches"]  # a reset plays no match
        history = client.get(f"/v1/ladders/r/players/{entry['player_id']}/history").json()
        reset, last_match = history["entries"][:2]
        assert reset["kind"] == "season_reset" and reset["match_id"] is None
        assert reset["season"] == "2027-s1" and last_match["season"] == "1"
        assert reset["before"]["mu"] == entry["mu"]
        assert reset["after"]["mu"] == player["mu"]

    # The archive is the leaderboard as it stood, with the season's matches.
    archive = all_pages(client, "/v1/ladders/r/seasons/1/leaderboard", limit=4)
    assert archive == board
    seasons = client.get("/v1/ladders/r/seasons").json()
    assert [s["id"] for s in seasons["entries"]] == ["2027-s1", "1"]
    first = seasons["entries"][1]
    assert (first["state"], first["matches"], first["players"]) == ("closed", 12, len(board))
    assert first["ended_at"] == opened["started_at"]

    # Matches from now on belong to the new season; its archive counts only them.
    post_match(client, "r", {"match_id": "late", "teams": [["p00"], ["p01"]]})
    history = client.get("/v1/ladders/r/players/p00/history").json()["entries"]
    assert (history[0]["kind"], history[0]["season"]) == ("match", "2027-s1")
    _open(client, "r", "2027-s2", 1.0)
    archive = {e["player_id"]: e for e in _archive(client, "r", "2027-s1")}
    assert archive["p00"]["matches"] == archive["p01"]["matches"] == 1
    assert archive["p02"]["matches"] == 0
    assert [e["rank"] for e in archive.values()] == list(range(1, len(archive) + 1))
    # keep = 1 carries every rating over exactly.
    for entry in all_pages(client, "/v1/ladders/r/leaderboard", limit=100):
        assert entry["mu"] == archive[entry["player_id"]]["mu"]
        assert entry["sigma"] == archive[entry["player_id"]]["sigma"]


@pytest.mark.parametrize(("algorithm", "params"), ALGORITHMS, ids=[a for a, _ in ALGORITHMS])
def test_keep_zero_is_the_prior_and_elo_and_glicko2_reset_as_documented(
    client: TestClient, algorithm: str, params: dict[str, Any]
) -> None:
    create_ladder(client, "k", algorithm=algorithm, params=params)
    _batch(client, "k", random_matches(seed=4, count=8, players=5))
    before = {e["player_id"]: e for e in all_pages(client, "/v1/ladders/k/leaderboard", limit=9)}
    _open(client, "k", "hard", 0.0)
    ladder = client.get("/v1/ladders/k").json()["params"]
    prior_mu = ladder.get("mu", ladder.get("initial", ladder.get("rating")))
    prior_sigma = ladder.get("sigma", ladder.get("deviation"))
    for player, old in before.items():
        now = client.get(f"/v1/ladders/k/players/{player}").json()
        assert now["mu"] == prior_mu
        if algorithm == "elo":
            assert now["sigma"] is None
        else:
            assert now["sigma"] == prior_sigma
        if algorithm == "glicko2":
            assert now["volatility"] == old["volatility"]  # kept


def test_bad_seasons_are_refused_and_change_nothing(client: TestClient, database_url: str) -> None:
    create_ladder(client, "b")
    post_match(client, "b", {"match_id": "m", "teams": [["a"], ["b"]]})
    _open(client, "b", "two", 0.5)
    counts = table_counts(database_url)
    cases = [
        ({"id": "two"}, 409, "id"),
        ({"id": "1"}, 409, "id"),
        ({"id": "x", "keep": 1.5}, 422, "keep"),
        ({"id": "x", "keep": -0.1}, 422, "keep"),
        ({"id": "x", "keep": "half"}, 422, "keep"),
        ({"id": "a/b"}, 422, "id"),
        ({"id": ""}, 422, "id"),
        ({"id": "x" * 65}, 422, "id"),
        ({"keep": 0.5}, 422, "id"),
        ({"id": "x", "starts": "soon"}, 422, "starts"),
    ]
    for body, status, field in cases:
        assert_problem(client.post("/v1/ladders/b/seasons", json=body), status, field)
    assert_problem(client.post("/v1/ladders/nope/seasons", json={"id": "x"}), 404, "ladder")
    assert table_counts(database_url) == counts
    assert_problem(client.get("/v1/ladders/b/seasons/two/leaderboard"), 409, "season")
    assert_problem(client.get("/v1/ladders/b/seasons/zz/leaderboard"), 404, "season")
    assert_problem(client.get("/v1/ladders/b/seasons/1/leaderboard?cursor=WzFd1"), 422, "cursor")
    # Opening a season is an admin's.
    response = client.post(
        "/v1/ladders/b/seasons", json={"id": "x"}, headers={"Authorization": "Bearer nope"}
    )
    assert response.status_code == 401
    assert table_counts(database_url) == counts


def _season_events(
    bodies: list[dict[str, Any]], seed: dict[str, float], cuts: tuple[int, int, int]
) -> list[dict[str, Any]]:
    """A history with two seeds and two seasons between the matches (the order both
    ladders and the core replay)."""
    first, second, third = cuts
    return [
        {"seed": "p11", **seed},
        *bodies[:first],
        {"season": "s2", "keep": 0.5},
        *bodies[first:second],
        {"seed": "p03", **seed},
        *bodies[second:third],
        {"season": "s3", "keep": 0.25},
        *bodies[third:],
    ]


def _play(client: TestClient, ladder: str, events: list[dict[str, Any]]) -> None:
    matches: list[dict[str, Any]] = []
    for event in [*events, {"end": True}]:
        if "teams" in event:
            matches.append(event)
            continue
        if matches:
            _batch(client, ladder, matches)
            matches = []
        if "seed" in event:
            _seed(client, ladder, event["seed"], {k: v for k, v in event.items() if k != "seed"})
        elif "season" in event:
            _open(client, ladder, event["season"], event["keep"])


def _everything(client: TestClient, ladder: str) -> dict[str, Any]:
    return {
        **_state(client, ladder),
        "archives": {season: _archive(client, ladder, season) for season in ("1", "s2")},
    }


@pytest.mark.parametrize(("algorithm", "params"), ALGORITHMS, ids=[a for a, _ in ALGORITHMS])
@pytest.mark.parametrize("voided", [2, 14, 30])
def test_a_void_replays_through_the_resets_as_a_fresh_ladder(
    client: TestClient, algorithm: str, params: dict[str, Any], voided: int
) -> None:
    """A void in the first season, the second or the current one: ratings, histories,
    match documents and both archives equal a ladder that never had the match, and the
    rating core replaying the same events."""
    bodies = random_matches(seed=31, count=36)
    seed = {"elo": ELO_SEED, "glicko2": GLICKO2_SEED}.get(algorithm, SEED)
    cuts = (10, 20, 26)
    create_ladder(client, "v", algorithm=algorithm, params=params)
    _play(client, "v", _season_events(bodies, seed, cuts))
    response = client.delete(f"/v1/ladders/v/matches/{bodies[voided]['match_id']}")
    assert response.status_code == 200, response.text

    gone = bodies[voided]["match_id"]
    events = [e for e in _season_events(bodies, seed, cuts) if e.get("match_id") != gone]
    create_ladder(client, "fresh", algorithm=algorithm, params=params)
    _play(client, "fresh", events)
    assert _everything(client, "v") == _everything(client, "fresh")

    # A rebuild replays the same events again: nothing moves.
    assert client.patch("/v1/ladders/v?rebuild=true", json={}).status_code == 200
    assert _everything(client, "v") == _everything(client, "fresh")

    expected = core_replay(algorithm, params, events)
    rel = 1e-9 if algorithm == "glicko2" else 1e-12
    board = all_pages(client, "/v1/ladders/v/leaderboard", limit=100)
    assert {e["player_id"] for e in board} == set(expected.ratings)
    for entry in board:
        rating = expected.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(rating.mu, rel=rel)
        if algorithm != "elo":
            assert entry["sigma"] == pytest.approx(rating.sigma, rel=rel)
        history = all_pages(client, f"/v1/ladders/v/players/{entry['player_id']}/history", 50)
        kinds = [kind for kind, *_ in expected.history[entry["player_id"]]]
        assert [item["kind"] for item in reversed(history)] == kinds


def test_a_void_of_the_only_match_before_a_season_takes_its_reset_away(
    client: TestClient,
) -> None:
    def match(match_id: str, *players: str) -> dict[str, Any]:
        day = match_id[1:]
        teams = [[p] for p in players]
        return {"match_id": match_id, "teams": teams, "played_at": f"2026-01-0{day}T00:00:00Z"}

    create_ladder(client, "o")
    post_match(client, "o", match("m1", "a", "b"))
    post_match(client, "o", match("m2", "a", "c"))
    _open(client, "o", "two", 0.5)
    post_match(client, "o", match("m3", "b", "d"))
    assert client.delete("/v1/ladders/o/matches/m1").status_code == 200
    # b was rated only by m1 when "two" opened: no reset, no archived standing.
    kinds = [e["kind"] for e in client.get("/v1/ladders/o/players/b/history").json()["entries"]]
    assert kinds == ["match"]
    archive = _archive(client, "o", "1")
    assert [(e["rank"], e["player_id"], e["matches"]) for e in archive] == [
        (1, "a", 1),
        (2, "c", 1),
    ]
    create_ladder(client, "f")
    post_match(client, "f", match("m2", "a", "c"))
    _open(client, "f", "two", 0.5)
    post_match(client, "f", match("m3", "b", "d"))
    assert _everything_but_ids(client, "o") == _everything_but_ids(client, "f")


def _everything_but_ids(client: TestClient, ladder: str) -> dict[str, Any]:
    state = _state(client, ladder)
    return {**state, "archive": _archive(client, ladder, "1")}


@pytest.mark.parametrize(
    ("algorithm", "params"), ALGORITHMS[:3], ids=[a for a, _ in ALGORITHMS[:3]]
)
def test_an_erased_player_is_reset_in_replays_as_before(
    client: TestClient, algorithm: str, params: dict[str, Any]
) -> None:
    """An erased player (a pseudonym in the matches, no history) still passes through the
    resets when a void or a rebuild replays them: the others rate as on a ladder that kept
    the player, and the archives close ranks over the gap."""
    bodies = random_matches(seed=41, count=30, players=8)
    seed = ELO_SEED if algorithm == "elo" else SEED
    events: list[dict[str, Any]] = [
        *bodies[:8],
        {"seed": "p05", **seed},
        {"season": "s2", "keep": 0.5},
        *bodies[8:20],
        {"season": "s3", "keep": 0.25},
        *bodies[20:],
    ]
    for ladder in ("v", "fresh"):
        create_ladder(client, ladder, algorithm=algorithm, params=params)
        _play(client, ladder, events)
    assert client.delete("/v1/ladders/v/players/p05").status_code == 200
    pseudonym = PSEUDONYM.findall(client.get("/v1/ladders/v/matches?limit=100").text)[0]
    for season in ("1", "s2"):
        kept = [e for e in _archive(client, "fresh", season) if e["player_id"] != "p05"]
        closed_up = [{**e, "rank": n} for n, e in enumerate(kept, start=1)]
        assert _archive(client, "v", season) == closed_up
    for voided in (bodies[1]["match_id"], bodies[12]["match_id"], None):
        for ladder in ("v", "fresh"):
            if voided is None:
                response = client.patch(f"/v1/ladders/{ladder}?rebuild=true", json={})
            else:
                response = client.delete(f"/v1/ladders/{ladder}/matches/{voided}")
            assert response.status_code == 200, response.text
        assert _others(client, "v", pseudonym) == _others(client, "fresh", "p05")
        for season in ("1", "s2"):
            kept = [e for e in _archive(client, "fresh", season) if e["player_id"] != "p05"]
            archive = _archive(client, "v", season)
            assert [e["player_id"] for e in archive] == [e["player_id"] for e in kept]
            for mine, theirs in zip(archive, kept, strict=True):
                assert {**mine, "rank": 0} == {**theirs, "rank": 0}


def test_the_ladders_season_keep_is_the_default(client: TestClient, database_url: str) -> None:
    made = create_ladder(client, "d", season_keep=0.5)
    assert made["season_keep"] == 0.5
    post_match(client, "d", {"match_id": "m", "teams": [["a"], ["b"]]})
    a = client.get("/v1/ladders/d/players/a").json()
    opened = client.post("/v1/ladders/d/seasons", json={"id": "two"}).json()
    assert opened["keep"] == 0.5
    after = client.get("/v1/ladders/d/players/a").json()
    assert after["mu"] == 25.0 + 0.5 * (a["mu"] - 25.0)
    assert client.patch("/v1/ladders/d", json={"season_keep": 0.0}).status_code == 200
    assert client.post("/v1/ladders/d/seasons", json={"id": "three"}).json()["keep"] == 0.0
    assert client.get("/v1/ladders/d/players/a").json()["mu"] == 25.0
    counts = table_counts(database_url)
    for bad in (1.5, -0.5, "half", None):
        body = {"id": "e", "algorithm": "trueskill", "season_keep": bad}
        if bad is None:
            continue
        assert_problem(client.post("/v1/ladders", json=body), 422, "season_keep")
        assert_problem(client.patch("/v1/ladders/d", json={"season_keep": bad}), 422, "season_keep")
    other = {"id": "d", "algorithm": "trueskill", "season_keep": 0.25}
    assert_problem(client.post("/v1/ladders", json=other), 409, "id")
    assert table_counts(database_url) == counts


def test_an_archive_closes_its_ranks_when_a_void_takes_a_player_out(client: TestClient) -> None:
    """The voided match's other player is erased (a pseudonym: no reset of its own to
    replay), so nothing else re-ranks the archive the unrated player leaves."""
    create_ladder(client, "g")
    post_match(client, "g", {"match_id": "m1", "teams": [["b"], ["x"]]})
    post_match(client, "g", {"match_id": "m2", "teams": [["a"], ["c"]]})
    _open(client, "g", "two", 0.5)
    assert [e["player_id"] for e in _archive(client, "g", "1")] == ["a", "b", "c", "x"]
    assert client.delete("/v1/ladders/g/players/x").status_code == 200
    assert client.delete("/v1/ladders/g/matches/m1").status_code == 200
    archive = _archive(client, "g", "1")
    assert [(e["rank"], e["player_id"]) for e in archive] == [(1, "a"), (2, "c")]
