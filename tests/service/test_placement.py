"""Placement: a player with fewer counted matches in the current season than the ladder's
``placement_matches`` is provisional: no rank, no tier, off the leaderboard unless
``include_provisional=true``, and counted in no one's rank. A new season places everyone
again; voids and rebuilds keep the season's counts exact."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.storage import blocks
from app.storage.engine import get_engine, session_factory
from app.storage.repositories.ratings import count_ahead
from tests.service.helpers import all_pages, assert_problem, create_ladder, table_counts
from tests.service.oracle import random_matches
from tests.service.test_rank import assert_buckets_exact, brute_rank
from tests.service.test_rank_blocks import TIE, _insert, _tie
from tests.service.test_void import _batch

PLACEMENT = 7
TIERS = [{"name": "Gold", "min": 12.0}, {"name": "Rest", "min": -1000.0}]


def _played(bodies: list[dict[str, Any]]) -> Counter[str]:
    return Counter(player for body in bodies for team in body["teams"] for player in team)


def _board(client: TestClient, ladder: str, limit: int = 5, **query: Any) -> list[dict[str, Any]]:
    return all_pages(client, f"/v1/ladders/{ladder}/leaderboard", limit=limit, **query)


def _check(client: TestClient, url: str, ladder: str, season_matches: Counter[str]) -> None:
    """Every answer agrees with the season's match counts ``season_matches``, and the
    rating buckets and blocks count the placed players exactly."""
    assert_buckets_exact(url)
    everyone = _board(client, ladder, limit=100, include_provisional="true")
    ranked = [e for e in everyone if season_matches[e["player_id"]] >= PLACEMENT]
    for entry in everyone:
        provisional = season_matches[entry["player_id"]] < PLACEMENT
        assert entry["provisional"] is provisional
        if provisional:
            assert (entry["rank"], entry["tier"]) == (None, None)
    # Ranks count the ranked players only, 1, 2, 3... in leaderboard order, whichever way
    # the board is paged, and the default board is exactly the ranked players.
    assert [e["rank"] for e in ranked] == list(range(1, len(ranked) + 1))
    for limit in (1, 3, 50):
        assert _board(client, ladder, limit=limit) == ranked
        assert _board(client, ladder, limit=limit, include_provisional="true") == everyone
    for entry in everyone:
        player = client.get(f"/v1/ladders/{ladder}/players/{entry['player_id']}").json()
        assert player["season_matches"] == season_matches[entry["player_id"]]
        assert player["provisional"] is entry["provisional"]
        assert player["rank"] == entry["rank"]
        assert player["tier"] == entry["tier"]
    # A page around a player: ranked ones on the default board; provisional ones only on
    # the board that shows them.
    for entry in everyone:
        around = {"around": entry["player_id"], "limit": 3}
        response = client.get(f"/v1/ladders/{ladder}/leaderboard", params=around)
        if entry["provisional"]:
            assert_problem(response, 404, "around")
        else:
            assert entry in response.json()["entries"]
        page = client.get(
            f"/v1/ladders/{ladder}/leaderboard", params={**around, "include_provisional": "true"}
        ).json()
        assert entry in page["entries"]


def test_provisional_players_place_then_rank_each_season(
    client: TestClient, database_url: str
) -> None:
    made = create_ladder(client, "p", placement_matches=PLACEMENT, tiers=TIERS)
    assert made["placement_matches"] == PLACEMENT
    first = random_matches(seed=5, count=40, players=16)
    _batch(client, "p", first)
    played = _played(first)
    assert {n < PLACEMENT for n in played.values()} == {True, False}  # both kinds
    _check(client, database_url, "p", played)

    # A new season: everyone places again, so nobody is ranked until they have played.
    response = client.post("/v1/ladders/p/seasons", json={"id": "s2", "keep": 0.5})
    assert response.status_code == 201, response.text
    assert _board(client, "p") == []
    _check(client, database_url, "p", Counter())
    second = random_matches(seed=6, count=30, players=16)
    for body in second:
        body["match_id"] = "s2-" + body["match_id"]
    _batch(client, "p", second)
    _check(client, database_url, "p", _played(second))

    # A void in the closed season leaves this season's counts alone; one in this season
    # takes its match away from them. A rebuild finds the same.
    assert client.delete(f"/v1/ladders/p/matches/{first[7]['match_id']}").status_code == 200
    _check(client, database_url, "p", _played(second))
    assert client.delete(f"/v1/ladders/p/matches/{second[4]['match_id']}").status_code == 200
    remaining = [body for n, body in enumerate(second) if n != 4]
    _check(client, database_url, "p", _played(remaining))
    before = _board(client, "p", limit=100, include_provisional="true")
    assert client.patch("/v1/ladders/p?rebuild=true", json={}).status_code == 200
    assert _board(client, "p", limit=100, include_provisional="true") == before
    _check(client, database_url, "p", _played(remaining))


def test_placement_changes_at_once_and_zero_is_no_placement(
    client: TestClient, database_url: str
) -> None:
    create_ladder(client, "q")
    bodies = random_matches(seed=9, count=20, players=10)
    _batch(client, "q", bodies)
    plain = _board(client, "q", limit=100)
    assert all(e["provisional"] is False for e in plain)
    player = client.get(f"/v1/ladders/q/players/{plain[-1]['player_id']}").json()
    assert (player["provisional"], player["season_matches"]) == (False, player["matches"])

    response = client.patch("/v1/ladders/q", json={"placement_matches": PLACEMENT})
    assert response.status_code == 200, response.text
    assert response.json()["ladder"]["placement_matches"] == PLACEMENT
    _check(client, database_url, "q", _played(bodies))
    assert client.patch("/v1/ladders/q", json={"placement_matches": 0}).status_code == 200
    assert _board(client, "q", limit=100) == plain


@pytest.mark.parametrize("value", [-1, 1001, 2**40, "3", 2.5, True, None])
def test_bad_placement_is_refused_and_changes_nothing(
    client: TestClient, database_url: str, value: Any
) -> None:
    before = table_counts(database_url)
    response = client.post(
        "/v1/ladders", json={"id": "b", "algorithm": "trueskill", "placement_matches": value}
    )
    if value is None:  # null: the default
        assert response.status_code == 201
        assert response.json()["placement_matches"] == 0
        return
    assert_problem(response, 422, "placement_matches")
    assert table_counts(database_url) == before
    create_ladder(client, "b")
    before = table_counts(database_url)
    response = client.patch("/v1/ladders/b", json={"placement_matches": value})
    assert_problem(response, 422, "placement_matches")
    assert table_counts(database_url) == before
    assert client.get("/v1/ladders/b").json()["placement_matches"] == 0


def _placed_ranks_exact(url: str, ladder: str, placement: int) -> None:
    """Each player's count of placed players ahead (``count_ahead``, the read's statement)
    equals the brute count, placed or not."""
    with get_engine(url).connect() as connection:
        rows = connection.execute(
            text(
                "SELECT conservative, player_id, matches - season_base FROM ratings"
                " WHERE ladder_id = :l"
            ),
            {"l": ladder},
        ).all()
    placed = [(float(c), str(p)) for c, p, n in rows if n >= placement]
    with session_factory(get_engine(url))() as session:
        for conservative, player_id, _ in rows:
            ahead = count_ahead(
                session=session,
                ladder_id=ladder,
                bucket_width=0.25,
                conservative=conservative,
                player_id=player_id,
                min_matches=0,
                placement=placement,
            )
            assert ahead + 1 == brute_rank(placed, conservative, player_id), player_id


def test_a_long_tie_of_placed_and_provisional_players(
    client: TestClient, database_url: str
) -> None:
    """The buckets and blocks count the placed players of a long tie: a change of
    placement counts the ladder again, cut blocks hold placed players only, and players
    who place, seeds and a new season move in and out of the counts exactly."""
    create_ladder(client, "t")
    rows = _tie(700, seed=3)
    _insert(database_url, "t", rows)
    with get_engine(database_url).begin() as connection:  # a third placed last season only
        connection.execute(
            text("UPDATE ratings SET season_base = 1 WHERE ladder_id = 't' AND player_id < 't0233'")
        )
    assert client.patch("/v1/ladders/t", json={"placement_matches": 1}).status_code == 200
    assert_buckets_exact(database_url)
    _placed_ranks_exact(database_url, "t", 1)
    with session_factory(get_engine(database_url)).begin() as session:
        assert blocks.cut(session=session, ladder_id="t", full_row=4) >= 1
    assert_buckets_exact(database_url)
    _placed_ranks_exact(database_url, "t", 1)

    # Provisional players place; placed ones move; a seed joins the tie, placing.
    for a, b in [("t0001", "t0500"), ("t0002", "t0003"), ("t0600", "u03")]:
        assert client.post("/v1/ladders/t/matches", json={"teams": [[a], [b]]}).status_code == 201
    seeded = client.put("/v1/ladders/t/players/t0100z", json={"mu": TIE + 3.0, "sigma": 1.0})
    assert seeded.json()["provisional"] is True and seeded.json()["rank"] is None
    assert_buckets_exact(database_url)
    _placed_ranks_exact(database_url, "t", 1)
    board = client.get("/v1/ladders/t/leaderboard", params={"limit": 1000}).json()["entries"]
    assert [e["rank"] for e in board] == list(range(1, len(board) + 1))
    assert client.get("/v1/ladders/t").json()["players"] == len(board)

    # A new season: nobody is placed, so nothing is counted, until they play.
    assert client.post("/v1/ladders/t/seasons", json={"id": "s2"}).status_code == 201
    assert_buckets_exact(database_url)
    assert client.get("/v1/ladders/t").json()["players"] == 0
    assert (
        client.post("/v1/ladders/t/matches", json={"teams": [["t0004"], ["t0005"]]}).status_code
        == 201
    )
    assert_buckets_exact(database_url)
    _placed_ranks_exact(database_url, "t", 1)
    # And with placement gone, every player counts again.
    assert client.patch("/v1/ladders/t", json={"placement_matches": 0}).status_code == 200
    assert_buckets_exact(database_url)
    _placed_ranks_exact(database_url, "t", 0)
