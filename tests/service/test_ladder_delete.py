"""Deleting a ladder: every row of it goes, in one transaction, and nothing of any other
ladder changes, even while matches are being posted to it."""

from __future__ import annotations

import threading
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, text

from app.storage.engine import get_engine
from app.storage.models import Base
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match
from tests.service.oracle import random_matches
from tests.service.test_access import _key
from tests.service.test_void import _batch, _seed


def _rows(url: str) -> dict[str, list[dict[str, Any]]]:
    with get_engine(url).connect() as connection:
        return {
            name: sorted(
                (dict(row._mapping) for row in connection.execute(select(table))), key=repr
            )
            for name, table in Base.metadata.tables.items()
        }


def _of(ladder: str, row: dict[str, Any]) -> bool:
    return row.get("ladder_id", row.get("id") if "algorithm" in row else None) == ladder


def _orphans(url: str) -> dict[str, int]:
    """Rows whose match, rating or ladder is gone (foreign keys should make these 0)."""
    checks = {
        "participants": "SELECT count(*) FROM participants AS p "
        "WHERE NOT EXISTS (SELECT 1 FROM matches AS m WHERE m.seq = p.match_seq)",
        "history without match": "SELECT count(*) FROM rating_history AS h WHERE h.match_seq "
        "IS NOT NULL AND NOT EXISTS (SELECT 1 FROM matches AS m WHERE m.seq = h.match_seq)",
        "history without rating": "SELECT count(*) FROM rating_history AS h WHERE NOT EXISTS "
        "(SELECT 1 FROM ratings AS r WHERE r.ladder_id = h.ladder_id "
        "AND r.player_id = h.player_id)",
    }
    for table in ("ratings", "matches", "participants", "rating_history", "rating_buckets"):
        checks[table + " without ladder"] = (
            f"SELECT count(*) FROM {table} AS t "
            "WHERE NOT EXISTS (SELECT 1 FROM ladders AS l WHERE l.id = t.ladder_id)"
        )
    with get_engine(url).connect() as connection:
        return {name: int(connection.scalar(text(sql)) or 0) for name, sql in checks.items()}


def test_deleting_a_ladder_removes_every_row_of_it(client: TestClient, database_url: str) -> None:
    for ladder, algorithm in (("gone", "trueskill"), ("kept", "elo")):
        create_ladder(client, ladder, algorithm=algorithm)
        _seed(client, ladder, "p01", {"mu": 30.0} if algorithm == "trueskill" else {"mu": 1600.0})
        _batch(client, ladder, random_matches(seed=3, count=20, players=6))
        assert client.delete(f"/v1/ladders/{ladder}/matches/r3-4").status_code == 200
    kept_before = client.get("/v1/ladders/kept/leaderboard").content
    before = _rows(database_url)

    response = client.delete("/v1/ladders/gone")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "ladder": "gone",
        "players": sum(1 for row in before["ratings"] if row["ladder_id"] == "gone"),
        "matches": 20,  # the voided one too
        "history_entries": sum(1 for row in before["rating_history"] if row["ladder_id"] == "gone"),
    }
    assert response.json()["players"] == 6

    after = _rows(database_url)
    for rows in (before["api_keys"], after["api_keys"]):
        for key in rows:
            del key["last_used_at"]  # every request writes it
    for name, rows in before.items():
        assert after[name] == [row for row in rows if not _of("gone", row)], name
    assert _orphans(database_url) == dict.fromkeys(_orphans(database_url), 0)
    assert client.get("/v1/ladders/kept/leaderboard").content == kept_before

    assert_problem(client.get("/v1/ladders/gone"), 404, "ladder")
    assert_problem(client.get("/v1/ladders/gone/players/p01"), 404, "ladder")
    assert_problem(client.delete("/v1/ladders/gone"), 404, "ladder")
    assert [ladder["id"] for ladder in all_pages(client, "/v1/ladders", limit=5)] == ["kept"]
    # The id is free again: a new ladder starts empty.
    create_ladder(client, "gone", algorithm="plackett_luce")
    assert client.get("/v1/ladders/gone").json()["players"] == 0
    assert client.get("/v1/ladders/gone/matches").json()["entries"] == []
    post_match(client, "gone", {"match_id": "r3-0", "teams": [["p01"], ["p02"]]})


def test_deleting_a_ladder_needs_an_admin_key(client: TestClient, database_url: str) -> None:
    create_ladder(client, "l")
    write = _key(database_url, "write")
    assert_problem(client.delete("/v1/ladders/l", headers={"Authorization": ""}), 401)
    assert_problem(client.delete("/v1/ladders/l", headers=write), 403)
    assert client.get("/v1/ladders/l").status_code == 200
    assert client.delete("/v1/ladders/l").status_code == 200
    # Keys belong to no ladder: the write key still records elsewhere.
    create_ladder(client, "m")
    match = {"teams": [["a"], ["b"]]}
    assert client.post("/v1/ladders/m/matches", json=match, headers=write).status_code == 201


def test_a_ladder_deleted_while_matches_arrive_leaves_nothing_behind(
    client: TestClient, database_url: str
) -> None:
    """Writers post single matches, batches and seeds to the ladder while it is deleted:
    each is answered (recorded before the delete, or 404 after it; never a 5xx), and no
    row of the ladder is left."""
    create_ladder(client, "doomed")
    create_ladder(client, "other")
    _batch(client, "other", random_matches(seed=9, count=10, players=5))
    other_before = {
        name: [row for row in rows if _of("other", row)]
        for name, rows in _rows(database_url).items()
    }
    writers = 6
    started = threading.Barrier(writers + 1)
    some_recorded = threading.Event()
    statuses: list[int] = []
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            started.wait(timeout=30)
            bodies = random_matches(seed=100 + n, count=40, players=8)
            for k, body in enumerate(bodies):
                body["match_id"] = f"w{n}-{k}"
                if k % 7 == 3:
                    response = client.post(
                        "/v1/ladders/doomed/matches/batch",
                        json={"matches": [body, {**body, "match_id": f"w{n}-{k}b"}]},
                    )
                elif k % 11 == 5:
                    response = client.put(f"/v1/ladders/doomed/players/s{n}-{k}", json={"mu": 20.0})
                else:
                    response = client.post("/v1/ladders/doomed/matches", json=body)
                statuses.append(response.status_code)
                if response.status_code in (200, 201) and len(statuses) >= 12:
                    some_recorded.set()
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    started.wait(timeout=30)
    assert some_recorded.wait(timeout=60)
    deleted = client.delete("/v1/ladders/doomed")
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["matches"] > 0
    assert set(statuses) <= {200, 201, 404, 409}, sorted(set(statuses))
    assert 404 in statuses  # some writers came after the delete

    # Whatever was recorded before the delete went with it; nothing came after it.
    after = _rows(database_url)
    for name, rows in after.items():
        assert [row for row in rows if _of("doomed", row)] == [], name
        assert [row for row in rows if _of("other", row)] == other_before[name], name
    assert _orphans(database_url) == dict.fromkeys(_orphans(database_url), 0)
