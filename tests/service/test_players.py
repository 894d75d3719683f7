"""Players, history and the leaderboard: order, keyset paging, rank, seeding."""

from __future__ import annotations

import itertools
import random
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.storage.engine import get_engine, session_factory
from app.storage.models import Ladder, PlayerRating
from app.storage.repositories import ratings as rating_repo
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match


def _seed(client: TestClient, ladder: str, player: str, mu: float, sigma: float | None) -> Any:
    body: dict[str, Any] = {"mu": mu} if sigma is None else {"mu": mu, "sigma": sigma}
    response = client.put(f"/v1/ladders/{ladder}/players/{player}", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _key(entry: dict[str, Any]) -> tuple[float, str]:
    return (-entry["conservative"], entry["player_id"])


def test_leaderboard_order_paging_and_rank(client: TestClient) -> None:
    create_ladder(client)
    rng = random.Random(3)
    for n in range(23):
        # Ties on purpose: several players share a conservative rating.
        _seed(client, "test", f"p{n:02d}", float(rng.choice([20, 25, 30])), 1.0 + n % 2)
    every = all_pages(client, "/v1/ladders/test/leaderboard", limit=5)
    assert len(every) == 23
    assert len({e["player_id"] for e in every}) == 23
    assert every == sorted(every, key=_key)
    assert [e["rank"] for e in every] == list(range(1, 24))
    for entry in every[::4]:
        player = client.get(f"/v1/ladders/test/players/{entry['player_id']}").json()
        assert player["rank"] == entry["rank"]
        assert player["conservative"] == entry["conservative"]


def test_keyset_paging_is_stable_while_matches_arrive(client: TestClient) -> None:
    create_ladder(client)
    for n in range(10):
        _seed(client, "test", f"p{n}", 40.0 - n, 1.0)
    first = client.get("/v1/ladders/test/leaderboard", params={"limit": 4}).json()
    assert [e["player_id"] for e in first["entries"]] == ["p0", "p1", "p2", "p3"]
    # Players already shown move; the next page continues after the last key shown.
    post_match(client, "test", {"teams": [["p9"], ["p0"]]})
    second = client.get(
        "/v1/ladders/test/leaderboard", params={"limit": 4, "cursor": first["next_cursor"]}
    ).json()
    names = [e["player_id"] for e in second["entries"]]
    assert names == ["p4", "p5", "p6", "p7"]
    assert second["entries"][0]["rank"] == 1 + sum(
        1
        for e in all_pages(client, "/v1/ladders/test/leaderboard", limit=100)
        if _key(e) < _key(second["entries"][0])
    )


def test_min_matches_filters_the_leaderboard(client: TestClient) -> None:
    create_ladder(client)
    post_match(client, "test", {"teams": [["a"], ["b"]]})
    post_match(client, "test", {"teams": [["a"], ["c"]]})
    _seed(client, "test", "seeded", 50.0, 1.0)
    two = all_pages(client, "/v1/ladders/test/leaderboard", limit=10, min_matches=2)
    assert [(e["player_id"], e["rank"], e["matches"]) for e in two] == [("a", 1, 2)]
    everyone = all_pages(client, "/v1/ladders/test/leaderboard", limit=10)
    assert next(e["player_id"] for e in everyone) == "seeded"


def test_player_view_and_unknown_player(client: TestClient) -> None:
    create_ladder(client)
    post_match(client, "test", {"teams": [["a"], ["b"]], "played_at": "2026-11-20T09:00:00Z"})
    a = client.get("/v1/ladders/test/players/a").json()
    assert a["rank"] == 1 and a["matches"] == 1
    assert a["last_played_at"] == "2026-11-20T09:00:00Z"
    assert client.get("/v1/ladders/test/players/b").json()["rank"] == 2
    assert_problem(client.get("/v1/ladders/test/players/zed"), 404, "player_id")
    assert_problem(client.get("/v1/ladders/test/players/zed/history"), 404, "player_id")


def test_history_is_a_chain_newest_first(client: TestClient) -> None:
    create_ladder(client)
    for n in range(6):
        post_match(client, "test", {"match_id": f"g{n}", "teams": [["a"], [f"o{n % 3}"]]})
    _seed(client, "test", "a", 30.0, 2.0)
    post_match(client, "test", {"match_id": "g6", "teams": [["o1"], ["a"]]})
    history = all_pages(client, "/v1/ladders/test/players/a/history", limit=3)
    assert [h["match_id"] for h in history] == ["g6", None, "g5", "g4", "g3", "g2", "g1", "g0"]
    assert [h["kind"] for h in history][:3] == ["match", "adjustment", "match"]
    oldest_first = history[::-1]
    assert oldest_first[0]["before"] == {
        "mu": 25.0,
        "sigma": pytest.approx(25 / 3),
        "conservative": 0.0,
        "volatility": None,
    }
    for previous, entry in itertools.pairwise(oldest_first):
        assert entry["before"] == previous["after"]
    assert oldest_first[-2]["after"] == {
        "mu": 30.0,
        "sigma": 2.0,
        "conservative": 24.0,
        "volatility": None,
    }
    player = client.get("/v1/ladders/test/players/a").json()
    assert history[0]["after"] == {
        k: player[k] for k in ("mu", "sigma", "conservative", "volatility")
    }


def test_seeding_creates_or_overwrites_and_is_an_adjustment(client: TestClient) -> None:
    create_ladder(client)
    seeded = _seed(client, "test", "new", 31.5, 2.5)
    assert seeded == {
        "ladder": "test",
        "player_id": "new",
        "mu": 31.5,
        "sigma": 2.5,
        "conservative": 24.0,
        "rank": 1,
        "matches": 0,
        "last_played_at": None,
        "volatility": None,  # Glicko-2 ladders only
        "season": "1",
        "tier": None,  # no tiers
        "season_matches": 0,
        "provisional": False,  # no placement
        "as_of": None,  # the ladder does not age ratings
    }
    default_sigma = _seed(client, "test", "other", 20.0, None)
    assert default_sigma["sigma"] == pytest.approx(25 / 3)
    history = client.get("/v1/ladders/test/players/new/history").json()["entries"]
    assert len(history) == 1 and history[0]["kind"] == "adjustment"
    assert history[0]["match_id"] is None
    assert history[0]["before"]["mu"] == 25.0 and history[0]["after"]["mu"] == 31.5
    # The seeded belief is what the next match starts from.
    result = post_match(client, "test", {"teams": [["new"], ["other"]]})
    assert result["teams"][0]["players"][0]["before"] == {
        "mu": 31.5,
        "sigma": 2.5,
        "conservative": 24.0,
    }


def test_elo_seed_has_no_sigma(client: TestClient) -> None:
    pytest.importorskip("app.rating.elo")
    create_ladder(client, "elo", algorithm="elo")
    seeded = _seed(client, "elo", "a", 1720.0, None)
    assert (seeded["mu"], seeded["sigma"], seeded["conservative"]) == (1720.0, None, 1720.0)
    response = client.put("/v1/ladders/elo/players/a", json={"mu": 1700.0, "sigma": 50.0})
    assert_problem(response, 422, "sigma")


def test_seeding_needs_an_admin_key(client: TestClient) -> None:
    create_ladder(client)
    response = client.put(
        "/v1/ladders/test/players/a", json={"mu": 1.0}, headers={"Authorization": ""}
    )
    assert_problem(response, 401)


def test_leaderboard_pages_are_index_range_scans(database_url: str) -> None:
    """The leaderboard query, as the repository sends it, is served by the index in order."""
    engine = get_engine(database_url)
    now = datetime.now(UTC)
    with session_factory(engine)() as session:
        session.add(Ladder(id="l", algorithm="trueskill", params={}, created_at=now))
        session.flush()
        session.add_all(
            PlayerRating(
                ladder_id="l",
                player_id=f"p{n}",
                mu=25.0,
                sigma=1.0,
                conservative=float(n % 17),
                matches=n % 3,
                updated_at=now,
            )
            for n in range(200)
        )
        session.commit()
    statements: list[tuple[str, Any]] = []

    def capture(*args: Any) -> None:
        statements.append((args[2], args[3]))  # statement, parameters

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with session_factory(engine)() as session:
            rows = rating_repo.leaderboard(
                session=session, ladder_id="l", after=(10.0, "p5"), limit=10, min_matches=1
            )
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert len(rows) == 10 and all(r.conservative <= 10.0 for r in rows)
    statement, parameters = next(s for s in statements if "FROM ratings" in s[0])
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            # A table this small might be sorted in memory; ask whether the index can serve:
            # with the alternatives priced out, a plan without a Sort exists only if it can.
            # With statistics, as autovacuum keeps them: unanalyzed, a tie of the key's
            # rating is priced as one row, and its range ties with the primary key's.
            connection.exec_driver_sql("ANALYZE ratings")
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                connection.exec_driver_sql(f"SET LOCAL {setting} = off")
            plan = connection.exec_driver_sql("EXPLAIN " + statement, parameters).scalars().all()
        else:
            plan = [
                row[-1]
                for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            ]
        connection.rollback()
    text_plan = "\n".join(str(line) for line in plan)
    assert "ix_ratings_leaderboard" in text_plan, text_plan
    # The rest of the key's tie is a range of the index that starts at the key (its
    # player id bounds the scan), not a walk from the tie's first player.
    tie_range = re.compile(r"conservative\W*=.*player_id\W*(::text)?\W*>")
    assert any(tie_range.search(line) for line in text_plan.splitlines()), text_plan
    # Nothing reads the table whole; what is sorted is the two ranges' pages, not the ladder.
    assert "Seq Scan" not in text_plan and "SCAN ratings" not in text_plan, text_plan
    lines = text_plan.splitlines()
    for n, line in enumerate(lines):
        if line.strip().removeprefix("->").strip().startswith("Sort  "):
            child = next(below for below in lines[n + 1 :] if "->" in below)
            assert "Limit" in child, text_plan
    # The page starts at the cursor inside the index, not at the top of the ladder.
    bounded = [line for line in plan if "conservative" in str(line) and "Filter" not in str(line)]
    assert bounded, text_plan


def test_a_seed_without_sigma_keeps_the_players_sigma(client: TestClient) -> None:
    """A new player gets the prior's sigma; a rated one keeps the sigma it has (a seed of
    mu alone moves the mean, it does not make the rating uncertain again)."""
    create_ladder(client)
    new = _seed(client, "test", "n", 30.0, None)
    assert new["sigma"] == pytest.approx(25.0 / 3.0)
    post_match(client, "test", {"teams": [["a"], ["b"]]})
    sigma = client.get("/v1/ladders/test/players/a").json()["sigma"]
    assert sigma < 25.0 / 3.0
    moved = _seed(client, "test", "a", 40.0, None)
    assert (moved["mu"], moved["sigma"]) == (40.0, sigma)
    history = client.get("/v1/ladders/test/players/a/history").json()["entries"]
    assert history[0]["before"]["sigma"] == history[0]["after"]["sigma"] == sigma
