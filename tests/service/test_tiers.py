"""Tiers: names over ranges of the conservative rating, on players, leaderboard entries,
history entries (a tier change is visible) and archives; ``?tier=`` pages one tier."""

from __future__ import annotations

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
from tests.service.oracle import random_matches
from tests.service.test_void import _batch

TIERS = [
    {"name": "Diamond", "min": 17.0},
    {"name": "Gold", "min": 13.0},
    {"name": "Silver", "min": 0.0},
]


def _tier(conservative: float, tiers: list[dict[str, Any]]) -> str | None:
    return next((t["name"] for t in tiers if conservative >= t["min"]), None)


@pytest.fixture
def ladder(client: TestClient) -> list[dict[str, Any]]:
    made = create_ladder(client, "t", tiers=TIERS)
    assert made["tiers"] == TIERS
    _batch(client, "t", random_matches(seed=8, count=60, players=24))
    board = all_pages(client, "/v1/ladders/t/leaderboard", limit=100)
    assert {e["tier"] for e in board} == {"Diamond", "Gold", "Silver", None}
    return board


def test_every_rating_carries_its_tier(client: TestClient, ladder: list[dict[str, Any]]) -> None:
    for entry in ladder:
        assert entry["tier"] == _tier(entry["conservative"], TIERS)
        player = client.get(f"/v1/ladders/t/players/{entry['player_id']}").json()
        assert player["tier"] == entry["tier"]
        history = all_pages(client, f"/v1/ladders/t/players/{entry['player_id']}/history", 50)
        for item in history:
            assert item["tier_before"] == _tier(item["before"]["conservative"], TIERS)
            assert item["tier_after"] == _tier(item["after"]["conservative"], TIERS)
        assert history[0]["tier_after"] == entry["tier"]
    changes = [
        item
        for entry in ladder
        for item in all_pages(client, f"/v1/ladders/t/players/{entry['player_id']}/history", 50)
        if item["tier_before"] != item["tier_after"]
    ]
    assert changes  # some players moved between tiers, and their history shows where


@pytest.mark.parametrize("limit", [1, 3, 50])
def test_a_tier_pages_alone_ranked_on_the_whole_leaderboard(
    client: TestClient, ladder: list[dict[str, Any]], limit: int
) -> None:
    for tier in ("Diamond", "Gold", "Silver"):
        expected = [e for e in ladder if e["tier"] == tier]
        assert all_pages(client, "/v1/ladders/t/leaderboard", limit=limit, tier=tier) == expected
        first = client.get("/v1/ladders/t/leaderboard", params={"tier": tier, "limit": limit})
        assert first.json()["prev_cursor"] is None
    _pages_back_up(client, "t", "Gold", [e for e in ladder if e["tier"] == "Gold"])


def _pages_back_up(client: TestClient, ladder: str, tier: str, expected: list[Any]) -> None:
    """Paging down a tier two at a time, then back up from its last page with the
    ``prev_cursor``, gives the tier's entries, and stops at the tier's top."""
    path = f"/v1/ladders/{ladder}/leaderboard"
    page = client.get(path, params={"tier": tier, "limit": 2}).json()
    assert page["prev_cursor"] is None
    while page["next_cursor"] is not None:
        page = client.get(path, params={"tier": tier, "limit": 2, "cursor": page["next_cursor"]})
        page = page.json()
    query = {"tier": tier, "limit": 100, "cursor": page["prev_cursor"]}
    back = client.get(path, params=query).json()
    assert back["entries"] + page["entries"] == expected
    assert back["prev_cursor"] is None


def test_changing_tiers_needs_no_rebuild(client: TestClient, ladder: list[dict[str, Any]]) -> None:
    new = [{"name": "Top", "min": 15.0}, {"name": "Rest", "min": -1000.0}]
    response = client.patch("/v1/ladders/t", json={"tiers": new})
    assert response.status_code == 200, response.text
    assert response.json()["rebuild"] is None
    board = all_pages(client, "/v1/ladders/t/leaderboard", limit=100)
    assert [{**e, "tier": None} for e in board] == [{**e, "tier": None} for e in ladder]
    assert [e["tier"] for e in board] == [_tier(e["conservative"], new) for e in board]
    assert client.patch("/v1/ladders/t", json={"tiers": []}).status_code == 200
    assert client.get("/v1/ladders/t").json()["tiers"] is None
    assert {e["tier"] for e in all_pages(client, "/v1/ladders/t/leaderboard", limit=100)} == {None}
    assert_problem(client.get("/v1/ladders/t/leaderboard?tier=Top"), 422, "tier")


def test_archives_carry_tiers(client: TestClient, ladder: list[dict[str, Any]]) -> None:
    assert client.post("/v1/ladders/t/seasons", json={"id": "two", "keep": 0.0}).status_code == 201
    archive = all_pages(client, "/v1/ladders/t/seasons/1/leaderboard", limit=100)
    assert [e["tier"] for e in archive] == [e["tier"] for e in ladder]
    # After a hard reset everyone is at the prior: conservative 0, Silver (its min is 0).
    board = all_pages(client, "/v1/ladders/t/leaderboard", limit=100)
    assert {e["tier"] for e in board} == {"Silver"}


BAD_TIERS: list[tuple[Any, str]] = [
    ([{"name": "A", "min": 1.0}, {"name": "B", "min": 2.0}], "tiers.1.min"),  # ascending
    ([{"name": "A", "min": 1.0}, {"name": "B", "min": 1.0}], "tiers.1.min"),  # overlapping
    ([{"name": "A", "min": 2.0}, {"name": "A", "min": 1.0}], "tiers.1.name"),
    ([{"name": "", "min": 1.0}], "name"),
    ([{"name": "a\nb", "min": 1.0}], "name"),
    ([{"name": "x" * 33, "min": 1.0}], "name"),
    ([{"name": "A"}], "min"),
    ([{"name": "A", "min": "high"}], "min"),
    ([{"name": "A", "min": 1.0, "max": 3.0}], "max"),
    ([{"name": f"t{n}", "min": float(-n)} for n in range(33)], "tiers"),
    ({"name": "A", "min": 1.0}, "tiers"),
    ([{"name": "A", "min_percentile": 50.0}, {"name": "B", "min": 1.0}], "tiers.1"),  # mixed
    ([{"name": "A", "min": 1.0, "min_percentile": 50.0}], "min_percentile"),  # both
    ([{"name": "A", "min_percentile": 100.0}], "min_percentile"),
    ([{"name": "A", "min_percentile": -1.0}], "min_percentile"),
    ([{"name": "A", "min_percentile": 10.0}, {"name": "B", "min_percentile": 50.0}], "tiers.1"),
    ([{"name": "A", "min_percentile": "top"}], "min_percentile"),
]


def test_bad_tiers_are_refused_and_change_nothing(client: TestClient, database_url: str) -> None:
    create_ladder(client, "t", tiers=TIERS)
    counts = table_counts(database_url)
    for tiers, field in BAD_TIERS:
        body = {"id": "u", "algorithm": "trueskill", "tiers": tiers}
        assert_problem(client.post("/v1/ladders", json=body), 422, field)
        assert_problem(client.patch("/v1/ladders/t", json={"tiers": tiers}), 422, field)
    # NaN is not JSON the API takes.
    response = client.post(
        "/v1/ladders",
        content='{"id": "u", "algorithm": "trueskill", "tiers": [{"name": "A", "min": NaN}]}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422
    # The same id with other tiers is another configuration.
    other = {"id": "t", "algorithm": "trueskill", "tiers": TIERS[:1]}
    assert_problem(client.post("/v1/ladders", json=other), 409, "id")
    same = {"id": "t", "algorithm": "trueskill", "tiers": TIERS}
    assert client.post("/v1/ladders", json=same).status_code == 200
    assert table_counts(database_url) == counts
    assert client.get("/v1/ladders/t").json()["tiers"] == TIERS


PERCENTILES = [
    {"name": "Top", "min_percentile": 90.0},
    {"name": "Upper", "min_percentile": 62.5},
    {"name": "Empty", "min_percentile": 62.4999},
    {"name": "Rest", "min_percentile": 0.0},
]


def _percentile_tier(rank: int, ranked: int) -> str:
    """Brute force: the first tier whose min_percentile the rank's share below reaches."""
    share = 100 * (ranked - rank) / ranked
    return next(t["name"] for t in PERCENTILES if share >= t["min_percentile"])


def _cutoff_tier(board: list[dict[str, Any]], conservative: float, player_id: str) -> str | None:
    """Brute force: the tier of a leaderboard key, by the current board's players."""
    ranked = len(board)
    for tier in PERCENTILES:
        last = [e for e in board if _percentile_tier(e["rank"], ranked) == tier["name"]]
        if not last:
            continue
        cutoff = (last[-1]["conservative"], last[-1]["player_id"])
        if conservative > cutoff[0] or (conservative == cutoff[0] and player_id <= cutoff[1]):
            return str(tier["name"])
    return None


@pytest.mark.parametrize("placement", [0, 4])
def test_tiers_by_percentile(client: TestClient, placement: int) -> None:
    """Tiers by percentile of the ranked players: on entries, players, history entries,
    tier pages and archives, each equal to a brute count over the leaderboard."""
    made = create_ladder(client, "p", tiers=PERCENTILES, placement_matches=placement)
    assert made["tiers"] == PERCENTILES
    _batch(client, "p", random_matches(seed=12, count=60, players=40))
    board = all_pages(client, "/v1/ladders/p/leaderboard", limit=100)
    ranked = len(board)
    assert client.get("/v1/ladders/p").json()["players"] == ranked
    everyone = all_pages(client, "/v1/ladders/p/leaderboard", limit=100, include_provisional=True)
    assert (len(everyone) > ranked) is (placement > 0)
    for entry in everyone:
        expected = None if entry["provisional"] else _percentile_tier(entry["rank"], ranked)
        assert entry["tier"] == expected
        player = client.get(f"/v1/ladders/p/players/{entry['player_id']}").json()
        assert player["tier"] == expected
        history = all_pages(client, f"/v1/ladders/p/players/{entry['player_id']}/history", 50)
        for item in history:
            for side in ("before", "after"):
                found = _cutoff_tier(board, item[side]["conservative"], entry["player_id"])
                assert item[f"tier_{side}"] == found
    assert {e["tier"] for e in board} == {"Top", "Upper", "Rest"}
    # A board of the players with two matches or more ranks them among themselves; their
    # tiers stay those of the whole leaderboard.
    tiers = {e["player_id"]: e["tier"] for e in board}
    seasoned = all_pages(client, "/v1/ladders/p/leaderboard", limit=7, min_matches=2)
    assert 0 < len(seasoned) < len(everyone)
    assert [e["tier"] for e in seasoned] == [tiers[e["player_id"]] for e in seasoned]
    for tier in ("Top", "Upper", "Empty", "Rest"):
        expected_page = [e for e in board if e["tier"] == tier]
        for limit in (1, 3, 50):
            assert all_pages(client, "/v1/ladders/p/leaderboard", limit=limit, tier=tier) == (
                expected_page
            )
    _pages_back_up(client, "p", "Rest", [e for e in board if e["tier"] == "Rest"])

    # A tier's bounds, kept between writes, move with the next write: a player climbs.
    climber = board[-1]["player_id"]
    for n in range(6):
        post_match(client, "p", {"teams": [[climber], [board[n]["player_id"]]]})
    board = all_pages(client, "/v1/ladders/p/leaderboard", limit=100)
    assert [e["tier"] for e in board] == [_percentile_tier(e["rank"], len(board)) for e in board]
    for tier in ("Top", "Upper", "Rest"):
        expected_page = [e for e in board if e["tier"] == tier]
        assert all_pages(client, "/v1/ladders/p/leaderboard", limit=5, tier=tier) == expected_page

    # The closed season's archive: percentiles of its own standings.
    assert client.post("/v1/ladders/p/seasons", json={"id": "two"}).status_code == 201
    archive = all_pages(client, "/v1/ladders/p/seasons/1/leaderboard", limit=100)
    assert [e["tier"] for e in archive] == [
        _percentile_tier(e["rank"], len(archive)) for e in archive
    ]
