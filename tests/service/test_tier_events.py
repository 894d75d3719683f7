"""``player.tier_changed``: every write that moves a player to another tier by threshold
(a match, a void, a rebuild, a seed, the inactivity pass; placement included) says so in
the same transaction, so that folding a ladder's events gives every player's tier on the
leaderboard; an erasure renames the player in them; tiers by percentile have none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from app.services import inactivity
from app.storage.engine import get_engine, session_factory
from app.storage.unit_of_work import transactor
from tests.service.helpers import all_pages, create_ladder, post_match
from tests.service.oracle import random_matches
from tests.service.test_events import _events
from tests.service.test_void import _batch, _seed

TIERS = [
    {"name": "Diamond", "min": 17.0},
    {"name": "Gold", "min": 13.0},
    {"name": "Silver", "min": 0.0},
]


def _tier_events(client: TestClient, ladder: str) -> list[dict[str, Any]]:
    return [e["data"] for e in _events(client, ladder) if e["type"] == "player.tier_changed"]


def _folded(client: TestClient, ladder: str) -> dict[str, str | None]:
    """Each player's tier as the events leave it: each event moves a player from the tier
    the one before left them in (none at first) to another."""
    tiers: dict[str, str | None] = {}
    for change in _tier_events(client, ladder):
        assert change["from"] != change["to"], change
        assert tiers.get(change["player_id"]) == change["from"], change
        tiers[change["player_id"]] = change["to"]
    return tiers


def _assert_events_give_the_board(client: TestClient, ladder: str) -> None:
    board = {
        e["player_id"]: e["tier"]
        for e in all_pages(
            client, f"/v1/ladders/{ladder}/leaderboard", limit=100, include_provisional="true"
        )
    }
    folded = _folded(client, ladder)
    assert {p: folded.get(p) for p in board} == board
    assert all(board.get(p) == tier for p, tier in folded.items())


def test_every_write_path_says_who_changed_tier(client: TestClient) -> None:
    create_ladder(client, "t", tiers=TIERS)
    _batch(client, "t", random_matches(seed=8, count=60, players=24))
    _assert_events_give_the_board(client, "t")
    batch_changes = _tier_events(client, "t")
    assert batch_changes and {c["cause"] for c in batch_changes} == {"match.recorded"}
    assert all(c["season"] == "1" for c in batch_changes)

    # A single match: its tier changes follow its own event and name it.
    strong = all_pages(client, "/v1/ladders/t/leaderboard", limit=100)[0]["player_id"]
    one = post_match(client, "t", {"match_id": "fresh", "teams": [[strong], ["newcomer"]]})
    after = _events(client, "t")
    last_match = max(n for n, e in enumerate(after) if e["type"] == "match.recorded")
    assert after[last_match]["data"] == one
    for event in after[last_match + 1 :]:
        assert event["type"] == "player.tier_changed"
        assert event["data"]["match_id"] == "fresh"
        assert event["data"]["player_id"] in (strong, "newcomer")
    newcomer = [e["data"] for e in after[last_match + 1 :] if e["data"]["player_id"] == "newcomer"]
    if one["teams"][1]["players"][0]["after"]["conservative"] >= 0.0:  # into Silver from no tier
        assert newcomer == [
            {
                "player_id": "newcomer",
                "from": None,
                "to": "Silver",
                "conservative": one["teams"][1]["players"][0]["after"]["conservative"],
                "season": "1",
                "cause": "match.recorded",
                "match_id": "fresh",
            }
        ]
    _assert_events_give_the_board(client, "t")

    # A void re-rates the later matches; a seed sets one rating; a rebuild with another
    # conservative_k moves many.
    matches = all_pages(client, "/v1/ladders/t/matches", limit=100)
    oldest = min(matches, key=lambda m: m["seq"])
    assert client.delete(f"/v1/ladders/t/matches/{oldest['match_id']}").status_code == 200
    _assert_events_give_the_board(client, "t")
    _seed(client, "t", "seeded", {"mu": 40.0, "sigma": 1.0})
    _seed(client, "t", strong, {"mu": 0.0, "sigma": 1.0})
    _assert_events_give_the_board(client, "t")
    rebuilt = client.patch("/v1/ladders/t?rebuild=true", json={"params": {"conservative_k": 1.0}})
    assert rebuilt.status_code == 200, rebuilt.text
    _assert_events_give_the_board(client, "t")
    causes = [c["cause"] for c in _tier_events(client, "t")]
    for cause in ("match.voided", "player.seeded", "ladder.rebuilt"):
        assert cause in causes
    seeded = [c for c in _tier_events(client, "t") if c["player_id"] == "seeded"]
    assert seeded[0] == {
        "player_id": "seeded",
        "from": None,
        "to": "Diamond",
        "conservative": 37.0,
        "season": "1",
        "cause": "player.seeded",
        "match_id": None,
    }


def test_placing_enters_a_tier_and_a_void_leaves_it(client: TestClient) -> None:
    create_ladder(client, "p", tiers=TIERS, placement_matches=2)
    post_match(client, "p", {"match_id": "m1", "teams": [["a"], ["b"]]})
    assert _tier_events(client, "p") == []  # both still provisional
    second = post_match(client, "p", {"match_id": "m2", "teams": [["a"], ["b"]]})
    placed = {c["player_id"]: c for c in _tier_events(client, "p")}
    winner = second["teams"][0]["players"][0]["after"]["conservative"]
    assert winner >= 0.0
    assert placed["a"]["from"] is None and placed["a"]["to"] == "Silver"
    assert placed["a"]["match_id"] == "m2"
    _assert_events_give_the_board(client, "p")
    assert client.delete("/v1/ladders/p/matches/m2").status_code == 200
    left = [c for c in _tier_events(client, "p") if c["cause"] == "match.voided"]
    assert {c["player_id"] for c in left} == set(placed)
    assert all(c["to"] is None and c["match_id"] == "m2" for c in left)
    _assert_events_give_the_board(client, "p")


def test_time_away_moves_a_tier_in_the_inactivity_pass(
    client: TestClient, database_url: str
) -> None:
    create_ladder(client, "s", tiers=[{"name": "Top", "min": 20.0}], params={"tau_per_day": 0.5})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(12):
        when = (start + timedelta(hours=n)).isoformat()
        post_match(client, "s", {"teams": [["veteran"], [f"new{n}"]], "played_at": when})
    assert _folded(client, "s")["veteran"] == "Top"
    transact = transactor(session_factory(get_engine(database_url)))
    aged = inactivity.age_due_ladders(
        transact=transact, clock=lambda: start + timedelta(days=160), every=timedelta(days=1)
    )
    assert aged == ["s"]
    fell = _tier_events(client, "s")[-1]
    assert fell["player_id"] == "veteran"
    assert (fell["from"], fell["to"], fell["cause"]) == ("Top", None, "ratings.aged")
    _assert_events_give_the_board(client, "s")


def test_an_erasure_renames_the_player_in_their_tier_events(client: TestClient) -> None:
    create_ladder(client, "e", tiers=TIERS)
    _seed(client, "e", "alice", {"mu": 40.0, "sigma": 1.0})
    post_match(client, "e", {"teams": [["alice"], ["bob"]]})
    assert client.delete("/v1/ladders/e/players/alice").status_code == 200
    feed = _events(client, "e")
    assert "alice" not in {str(e["data"].get("player_id")) for e in feed[:-1]}
    renamed = [e["data"] for e in feed if e["type"] == "player.tier_changed"]
    assert renamed[0]["player_id"] != "alice" and renamed[0]["to"] == "Diamond"
    assert feed[-1]["type"] == "player.erased"


def test_tiers_by_percentile_have_no_tier_events(client: TestClient) -> None:
    tiers = [{"name": "Top", "min_percentile": 50.0}, {"name": "Rest", "min_percentile": 0.0}]
    create_ladder(client, "q", tiers=tiers)
    _batch(client, "q", random_matches(seed=3, count=20, players=8))
    assert {e["type"] for e in _events(client, "q")} == {"match.recorded"}
