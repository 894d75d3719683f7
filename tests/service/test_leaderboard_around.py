"""A player's neighbourhood: ``?around=`` pages centred on the player, and cursors both
ways (``prev_cursor``), equal to the slices of the whole leaderboard, ties included."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match


def _ladder(client: TestClient) -> list[dict[str, Any]]:
    """Forty players, many of them tied (seeded), and a few with matches."""
    create_ladder(client, "n")
    for n in range(40):
        body = {"mu": 20.0 + (n % 7), "sigma": 2.0}
        assert client.put(f"/v1/ladders/n/players/p{n:02d}", json=body).status_code == 200
    for n in range(0, 12, 2):
        post_match(client, "n", {"match_id": f"m{n}", "teams": [[f"p{n:02d}"], [f"p{n + 1:02d}"]]})
    return all_pages(client, "/v1/ladders/n/leaderboard", limit=1000)


def _window(board: list[dict[str, Any]], at: int, limit: int) -> list[dict[str, Any]]:
    """Centred on ``at``, as near the centre as the ends allow."""
    below = len(board) - at - 1
    ahead = min(at, max((limit - 1) // 2, limit - 1 - below))
    start = at - ahead
    return board[start : start + limit]


def _walk(client: TestClient, page: dict[str, Any], key: str, **query: Any) -> list[dict[str, Any]]:
    """Every entry reached by following ``key`` (``next_cursor`` or ``prev_cursor``) from
    ``page``, in the order reached, pages kept in leaderboard order."""
    pages = []
    while page[key] is not None:
        response = client.get("/v1/ladders/n/leaderboard", params={**query, "cursor": page[key]})
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append(page["entries"])
    if key == "prev_cursor":
        pages.reverse()
    return [entry for entries in pages for entry in entries]


@pytest.mark.parametrize("limit", [1, 2, 5, 8])
def test_around_is_the_centred_slice_and_its_cursors_reach_the_rest(
    client: TestClient, limit: int
) -> None:
    board = _ladder(client)
    assert [e["rank"] for e in board] == list(range(1, 41))
    for at in (0, 1, 7, 19, 20, 33, 38, 39):
        player = board[at]["player_id"]
        query = {"around": player, "limit": limit}
        page = client.get("/v1/ladders/n/leaderboard", params=query).json()
        window = _window(board, at, limit)
        assert page["entries"] == window
        assert player in [e["player_id"] for e in page["entries"]]
        first = board.index(window[0])
        last = first + len(window)
        assert (page["prev_cursor"] is None) == (first == 0)
        assert (page["next_cursor"] is None) == (last == len(board))
        assert _walk(client, page, "next_cursor", limit=limit) == board[last:]
        assert _walk(client, page, "prev_cursor", limit=limit) == board[:first]


def test_paging_back_up_from_the_last_page(client: TestClient) -> None:
    board = _ladder(client)
    pages = [client.get("/v1/ladders/n/leaderboard", params={"limit": 6}).json()]
    assert pages[0]["prev_cursor"] is None
    while pages[-1]["next_cursor"] is not None:
        query = {"limit": 6, "cursor": pages[-1]["next_cursor"]}
        pages.append(client.get("/v1/ladders/n/leaderboard", params=query).json())
    assert all(page["prev_cursor"] is not None for page in pages[1:])
    assert _walk(client, pages[-1], "prev_cursor", limit=6) == board[:36]


def test_around_with_min_matches_counts_only_those(client: TestClient) -> None:
    _ladder(client)
    qualified = all_pages(client, "/v1/ladders/n/leaderboard", limit=5, min_matches=1)
    assert len(qualified) == 12
    player = qualified[6]["player_id"]
    query = {"around": player, "limit": 3, "min_matches": 1}
    page = client.get("/v1/ladders/n/leaderboard", params=query).json()
    assert page["entries"] == qualified[5:8]
    # A player without enough matches is not on that leaderboard.
    response = client.get("/v1/ladders/n/leaderboard", params={"around": "p39", "min_matches": 1})
    assert_problem(response, 404, "around")


def test_bad_around_requests(client: TestClient) -> None:
    board = _ladder(client)
    assert_problem(client.get("/v1/ladders/n/leaderboard?around=nobody"), 404, "around")
    assert_problem(client.get("/v1/ladders/n/leaderboard?around="), 422, "around")
    assert_problem(client.get("/v1/ladders/n/leaderboard?around=a%2Fb"), 422, "around")
    cursor = client.get("/v1/ladders/n/leaderboard?limit=2").json()["next_cursor"]
    response = client.get("/v1/ladders/n/leaderboard", params={"around": "p01", "cursor": cursor})
    assert_problem(response, 422, "around")
    assert_problem(client.get("/v1/ladders/n/leaderboard?cursor=WzEsImEiLCJ4Il0"), 422, "cursor")
    assert len(board) == 40
