"""Exact leaderboard ranks from the rating buckets.

After writes through every path (single matches, batches, the importer, voids, rebuilds,
seeding, direct inserts and deletes, concurrent writers) the bucket table equals a
recomputation from the ratings, and every rank (a player's, a leaderboard page's) equals
the brute-force count of the players ahead.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from app.cli.main import main
from app.domain.ladders import bucket_width
from app.storage.blocks import BUCKET_LIMIT, rating_bucket
from app.storage.engine import downgrade, get_engine, upgrade
from app.storage.repositories.ratings import _count_ahead_statement
from tests.service.helpers import all_pages, create_ladder
from tests.service.oracle import random_matches


def _ratings(url: str, ladder: str) -> list[tuple[float, str]]:
    with get_engine(url).connect() as connection:
        rows = connection.execute(
            text("SELECT conservative, player_id FROM ratings WHERE ladder_id = :l"), {"l": ladder}
        )
        return [(float(c), str(p)) for c, p in rows]


#: The ratings the buckets and blocks count: a ladder with placement counts its placed
#: players only.
COUNTED = (
    " FROM ratings AS r JOIN ladders AS l ON l.id = r.ladder_id"
    " WHERE r.matches - r.season_base >= l.placement_matches"
)


def assert_buckets_exact(url: str) -> None:
    """``rating_buckets`` (stripes added up) equals a GROUP BY of the ratings (the placed
    ones, on a ladder with placement), for every ladder, and no change waits uncommitted."""
    with get_engine(url).connect() as connection:
        widths = dict(connection.execute(text("SELECT id, bucket_width FROM ladders")).all())
        ratings = connection.execute(text(f"SELECT r.ladder_id, r.conservative{COUNTED}")).all()
        stored = connection.execute(
            text(
                "SELECT ladder_id, bucket, sum(players) FROM rating_buckets"
                " GROUP BY ladder_id, bucket"
            )
        ).all()
        pending = connection.scalar(text("SELECT count(*) FROM rating_bucket_deltas"))
    expected = Counter(
        (ladder, rating_bucket(float(c), float(widths[ladder]))) for ladder, c in ratings
    )
    assert {(ladder, int(b)): int(n) for ladder, b, n in stored if n} == dict(expected)
    assert pending == 0
    assert_blocks_exact(url)


def assert_blocks_exact(url: str) -> None:
    """Every ``rating_blocks`` row counts the players of its bucket and stripe whose id is
    at or after its fence and before the bucket's next one (the placed ones, on a ladder
    with placement); no rating lies outside a block. Counted in SQL, in the database's own
    order of ids."""
    with get_engine(url).connect() as connection:
        dialect = connection.dialect.name
        stripe = "(hashtext(r.player_id) & 7)" if dialect == "postgresql" else "0"
        widths = dict(connection.execute(text("SELECT id, bucket_width FROM ladders")).all())
        ratings = connection.execute(
            text(f"SELECT r.ladder_id, r.player_id, r.conservative, {stripe}{COUNTED}")
        ).all()
        fences: dict[tuple[str, int], list[str]] = {}
        stored: dict[tuple[str, int, str, int], int] = {}
        for ladder, bucket, first_id, row_stripe, players in connection.execute(
            text("SELECT ladder_id, bucket, first_id, stripe, players FROM rating_blocks")
        ):
            fences.setdefault((ladder, int(bucket)), []).append(first_id)
            if players:
                stored[ladder, int(bucket), first_id, int(row_stripe)] = int(players)
        # Ids in the database's order: each rating's block is the last fence not above it.
        ids = [str(p) for p in connection.scalars(text("SELECT DISTINCT player_id FROM ratings"))]
        fence_ids = [f for found in fences.values() for f in found]
        ordered = list(
            connection.scalars(
                text(
                    "SELECT v FROM (SELECT player_id AS v FROM ratings UNION"
                    " SELECT first_id FROM rating_blocks UNION SELECT '') AS u ORDER BY v"
                )
            )
        )
    place = {value: n for n, value in enumerate(ordered)}
    assert set(ids) | set(fence_ids) | {""} == set(place)
    expected: Counter[tuple[str, int, str, int]] = Counter()
    for ladder, player_id, conservative, row_stripe in ratings:
        bucket = rating_bucket(float(conservative), float(widths[ladder]))
        below = [f for f in fences.get((ladder, bucket), [""]) if place[f] <= place[player_id]]
        block = max(below, key=place.__getitem__, default="")
        expected[ladder, bucket, block, int(row_stripe)] += 1
    assert stored == dict(expected)


#: What a change made by hand must do for the reads' validators (app.storage.versions).
BUMP_BY_HAND = (
    "INSERT INTO ladder_versions (ladder_id, stripe, version) VALUES ('p', 0, 1) "
    "ON CONFLICT (ladder_id, stripe) DO UPDATE SET version = ladder_versions.version + 1"
)


def brute_rank(ratings: list[tuple[float, str]], conservative: float, player_id: str) -> int:
    return 1 + sum(
        1 for c, p in ratings if c > conservative or (c == conservative and p < player_id)
    )


def assert_ranks_exact(
    client: TestClient, url: str, ladder: str, players: list[str] | None = None
) -> None:
    """Every player's rank, and every leaderboard page's (small pages: many cursors), equals
    the count of the players ahead; then the buckets equal their recomputation."""
    ratings = _ratings(url, ladder)
    order = sorted(ratings, key=lambda row: (-row[0], row[1]))
    board = all_pages(client, f"/v1/ladders/{ladder}/leaderboard", limit=3)
    assert [(e["rank"], e["player_id"]) for e in board] == [
        (n + 1, p) for n, (_, p) in enumerate(order)
    ]
    for player_id in players if players is not None else [p for _, p in ratings]:
        found = client.get(f"/v1/ladders/{ladder}/players/{player_id}").json()
        assert found["rank"] == brute_rank(ratings, found["conservative"], player_id), found
    # The ladder's player count is the buckets' sum: it must equal the rows.
    assert client.get(f"/v1/ladders/{ladder}").json()["players"] == len(ratings)
    assert_buckets_exact(url)


def seed(client: TestClient, ladder: str, player: str, **body: float) -> dict[str, Any]:
    response = client.put(f"/v1/ladders/{ladder}/players/{player}", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_bucket_of_a_rating_is_floor_of_the_quotient() -> None:
    assert rating_bucket(0.0, 0.25) == 0
    assert rating_bucket(-0.0, 0.25) == 0
    assert rating_bucket(0.25, 0.25) == 1
    assert rating_bucket(0.2499999, 0.25) == 0
    assert rating_bucket(-1e-300, 0.25) == -1
    assert rating_bucket(-5e-324, 4.0) == -1
    assert rating_bucket(-0.25, 0.25) == -1
    assert rating_bucket(-0.2500001, 0.25) == -2
    assert rating_bucket(1e300, 2.0**-40) == BUCKET_LIMIT
    assert rating_bucket(-1e300, 2.0**-40) == -BUCKET_LIMIT
    assert bucket_width("trueskill", {"sigma": 25 / 3}) == 0.25
    assert bucket_width("elo", {"scale": 400.0}) == 4.0
    assert bucket_width("plackett_luce", {"sigma": 1e-9}) == 2.0**-35


def test_reads_leave_the_unlogged_deltas_alone() -> None:
    """A streaming replica cannot read an unlogged table: only a transaction that wrote
    ratings reads ``rating_bucket_deltas``."""
    dialect = postgresql.dialect()
    for qualified in (False, True):
        read = str(_count_ahead_statement("postgresql", qualified, False).compile(dialect=dialect))
        assert "rating_bucket_deltas" not in read
    written = _count_ahead_statement("postgresql", False, True).compile(dialect=dialect)
    assert "rating_bucket_deltas" in str(written)


def test_ladders_store_their_bucket_width(client: TestClient, database_url: str) -> None:
    create_ladder(client, "ts")
    create_ladder(client, "elo", algorithm="elo", params={"scale": 1000.0})
    create_ladder(client, "narrow", params={"mu": 0.0, "sigma": 0.001})
    with get_engine(database_url).connect() as connection:
        widths = dict(connection.execute(text("SELECT id, bucket_width FROM ladders")).all())
    assert widths == {"ts": 0.25, "elo": 8.0, "narrow": 2.0**-15}
    # A rebuild with other parameters keeps the width: it only tunes speed.
    client.post("/v1/ladders/ts/matches", json={"teams": [["a"], ["b"]]})
    response = client.patch("/v1/ladders/ts?rebuild=true", json={"params": {"sigma": 100.0}})
    assert response.status_code == 200, response.text
    with get_engine(database_url).connect() as connection:
        assert connection.scalar(text("SELECT bucket_width FROM ladders WHERE id = 'ts'")) == 0.25
    assert_ranks_exact(client, database_url, "ts")


def test_every_write_path_keeps_ranks_exact(
    client: TestClient,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    create_ladder(client, "l", params={"tau_per_day": 0.05})
    bodies = random_matches(seed=3, count=60, players=25)
    for body in bodies[:15]:  # single matches
        assert client.post("/v1/ladders/l/matches", json=body).status_code == 201
    assert_ranks_exact(client, database_url, "l")

    response = client.post("/v1/ladders/l/matches/batch", json={"matches": bodies[15:35]})
    assert response.status_code == 201, response.text
    assert_ranks_exact(client, database_url, "l")

    lines = tmp_path / "more.jsonl"
    lines.write_text("".join(json.dumps(body) + "\n" for body in bodies[35:]), encoding="utf-8")
    assert main(["import", str(lines), "--ladder", "l", "--chunk", "7"]) == 0, capsys.readouterr()
    assert_ranks_exact(client, database_url, "l")

    # A seed's response carries its rank, read in the transaction that wrote it.
    ratings = _ratings(database_url, "l")
    found = seed(client, "l", "p03", mu=31.0, sigma=2.0)
    others = [(c, p) for c, p in ratings if p != "p03"]
    assert found["rank"] == brute_rank(others, found["conservative"], "p03")
    new = seed(client, "l", "newcomer", mu=-40.0)
    assert new["rank"] == len(ratings) + 1
    assert_ranks_exact(client, database_url, "l")

    for match in ("r3-2", "r3-20", "r3-50"):  # voids re-rate every later match
        assert client.delete(f"/v1/ladders/l/matches/{match}").status_code == 200
        assert_ranks_exact(client, database_url, "l")

    response = client.patch("/v1/ladders/l?rebuild=true", json={"params": {"beta": 7.0}})
    assert response.status_code == 200, response.text
    assert_ranks_exact(client, database_url, "l")
    assert main(["rebuild", "--ladder", "l"]) == 0, capsys.readouterr()
    assert_ranks_exact(client, database_url, "l")


def test_a_player_whose_matches_are_all_voided_leaves_the_buckets(
    client: TestClient, database_url: str
) -> None:
    create_ladder(client, "v")
    client.post("/v1/ladders/v/matches", json={"match_id": "m1", "teams": [["a"], ["b"]]})
    client.post("/v1/ladders/v/matches", json={"match_id": "m2", "teams": [["a"], ["c"]]})
    assert client.delete("/v1/ladders/v/matches/m1").status_code == 200
    assert client.get("/v1/ladders/v/players/b").status_code == 404
    assert_ranks_exact(client, database_url, "v")


def test_ties_at_bucket_edges_negative_ratings_and_elo(
    client: TestClient, database_url: str
) -> None:
    """Elo ladder (sigma NULL, conservative = mu, width 4): ratings on bucket edges, equal
    ratings ordered by id, negative ones, and the tiniest values either side of zero."""
    create_ladder(client, "e", algorithm="elo")
    values = [8.0, 4.0, 4.0, 4.0, 3.9999999999, 0.0, -0.0, 5e-324, -5e-324, -1e-300]
    values += [-4.0, -4.0, -4.0000000001, -8.0, -12.5, 1e9, -1e9, 12.0, 11.999999]
    for n, value in enumerate(values):
        seed(client, "e", f"x{n:02d}", mu=value)
    for n in range(6):  # ties on an edge, ids in both orders
        seed(client, "e", f"t{5 - n}", mu=4.0)
    assert_ranks_exact(client, database_url, "e")
    # Moving players across edges, both ways.
    seed(client, "e", "x01", mu=-4.0)
    seed(client, "e", "x10", mu=4.0)
    seed(client, "e", "t0", mu=3.9999999999)
    assert_ranks_exact(client, database_url, "e")


def test_extreme_ratings_fall_in_the_open_ended_buckets(
    client: TestClient, database_url: str
) -> None:
    """A width of 2**-25 puts ratings beyond +-2**28 into the two clamped buckets."""
    create_ladder(client, "x", params={"mu": 0.0, "sigma": 1e-6, "beta": 1e-6, "tau": 0.0})
    for n, mu in enumerate([1e9, 9e8, 9e8, 5e8, 3e8, 1.0, 0.0, -1.0, -3e8, -5e8, -1e9, -1e9]):
        seed(client, "x", f"y{n:02d}", mu=mu, sigma=1e-6)
    assert_ranks_exact(client, database_url, "x")
    with get_engine(database_url).connect() as connection:
        buckets = set(
            connection.scalars(text("SELECT bucket FROM rating_buckets WHERE players > 0"))
        )
    assert {BUCKET_LIMIT, -BUCKET_LIMIT} <= buckets


def test_many_players_at_exactly_the_prior(client: TestClient, database_url: str) -> None:
    """New players all share the prior's conservative rating (within a float of zero, on
    a bucket edge): their ranks are ordered by id alone."""
    create_ladder(client, "p")
    players = [f"n{n:03d}" for n in range(120)]
    # Free-for-alls then put them in and out of the prior bucket; most stay at the prior.
    response = client.post(
        "/v1/ladders/p/matches/batch",
        json={
            "matches": [
                {"teams": [[a], [b]]} for a, b in zip(players[:10], players[10:20], strict=True)
            ]
        },
    )
    assert response.status_code == 201, response.text
    for player in players[20:]:
        seed(client, "p", player, mu=25.0)
    now = datetime.now(UTC).isoformat()
    with get_engine(database_url).begin() as connection:
        connection.execute(
            text(
                "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches,"
                " updated_at) VALUES ('p', :p, 25.0, :s, :c, 0, :now)"
            ),
            [
                {"p": f"d{n:03d}", "s": 25.0 / 3.0, "c": 25.0 - 3.0 * (25.0 / 3.0), "now": now}
                for n in range(50)
            ],
        )
        # A change by hand moves the ladder's version, as the service's own do.
        connection.execute(text(BUMP_BY_HAND))
    assert_ranks_exact(client, database_url, "p", players=[*players[::7], "d000", "d049"])
    with get_engine(database_url).begin() as connection:
        connection.execute(text("DELETE FROM ratings WHERE player_id LIKE 'd0%'"))
        connection.execute(text("UPDATE ratings SET conservative = conservative + 0.125"))
        connection.execute(text(BUMP_BY_HAND))
    assert_ranks_exact(client, database_url, "p", players=players[::11])


def test_min_matches_counts_only_qualified_players(client: TestClient, database_url: str) -> None:
    create_ladder(client, "m")
    bodies = random_matches(seed=5, count=40, players=15)
    assert client.post("/v1/ladders/m/matches/batch", json={"matches": bodies}).status_code == 201
    ratings = _ratings(database_url, "m")
    played = {
        e["player_id"]: e["matches"] for e in all_pages(client, "/v1/ladders/m/leaderboard", 100)
    }
    board = all_pages(client, "/v1/ladders/m/leaderboard", limit=2, min_matches=5)
    qualified = [(c, p) for c, p in ratings if played[p] >= 5]
    assert [e["player_id"] for e in board] == [
        p for _, p in sorted(qualified, key=lambda row: (-row[0], row[1]))
    ]
    for entry in board:
        assert entry["rank"] == brute_rank(qualified, entry["conservative"], entry["player_id"])


def test_deleting_a_ladder_removes_its_buckets(client: TestClient, database_url: str) -> None:
    create_ladder(client, "gone")
    create_ladder(client, "kept")
    for ladder in ("gone", "kept"):
        response = client.post(f"/v1/ladders/{ladder}/matches", json={"teams": [["a"], ["b"]]})
        assert response.status_code == 201, response.text
    with get_engine(database_url).begin() as connection:
        connection.execute(text("DELETE FROM ladders WHERE id = 'gone'"))
    assert_buckets_exact(database_url)
    with get_engine(database_url).connect() as connection:
        ladders = set(connection.scalars(text("SELECT DISTINCT ladder_id FROM rating_buckets")))
    assert ladders == {"kept"}


WRITERS = 16


def test_concurrent_writers_neither_deadlock_nor_miscount(
    client: TestClient, database_url: str
) -> None:
    """Sixteen writers at once over a pool of players: matches move them between buckets
    (many start at the prior, on the same bucket row stripes), new players join at the
    prior, seeds jump. No transaction is lost to a deadlock, and the counts are exact.

    The pool exists beforehand: new players are each writer's own, so the one lock taken
    before a writer waits for another's rows is on its own new rating, and a bucket lock
    taken there (rather than at commit) would show up here as a deadlock.
    """
    if not database_url.startswith("postgresql"):
        pytest.skip("row locks and concurrent writers: PostgreSQL")
    create_ladder(client, "c")
    pool = [f"q{i:02d}" for i in range(40)]
    for player in pool:
        seed(client, "c", player, mu=25.0)
    deadlocks = _deadlocks(client)
    barrier = threading.Barrier(WRITERS)
    errors: list[str] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        barrier.wait(timeout=30)
        for k in range(12):
            players = rng.sample(pool, rng.choice([2, 4, 6]))
            if rng.random() < 0.5:
                players[-1] = f"w{n:02d}-{k}"
            if rng.random() < 0.15:
                response = client.put(
                    f"/v1/ladders/c/players/{players[0]}", json={"mu": rng.uniform(0, 50)}
                )
                ok = response.status_code == 200
            elif rng.random() < 0.3:
                half = len(players) // 2
                matches = [
                    {"teams": [players[:half], players[half:]]},
                    {"teams": [[players[0]], [players[1]]]},
                ]
                response = client.post("/v1/ladders/c/matches/batch", json={"matches": matches})
                ok = response.status_code == 201
            else:
                response = client.post(
                    "/v1/ladders/c/matches", json={"teams": [[p] for p in players]}
                )
                ok = response.status_code == 201
            if not ok:
                errors.append(response.text)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    assert _deadlocks(client) == deadlocks
    assert_ranks_exact(client, database_url, "c", players=pool)


def _deadlocks(client: TestClient) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith('ratings_transaction_retries_total{reason="deadlock"}'):
            return float(line.split()[-1])
    return 0.0


def test_the_migration_counts_the_ratings_of_an_existing_database(database_url: str) -> None:
    """Upgrading a populated database (revision 0003) fills the buckets and the widths."""
    downgrade(database_url, "0003")
    now = datetime.now(UTC).isoformat()
    rng = random.Random(4)
    ladders = {"ts": ("trueskill", {"sigma": 8.0}), "elo": ("elo", {"scale": 400.0})}
    with get_engine(database_url).begin() as connection:
        for ladder, (algorithm, params) in ladders.items():
            connection.execute(
                text(
                    "INSERT INTO ladders (id, algorithm, params, created_at)"
                    " VALUES (:id, :a, :p, :now)"
                ),
                {"id": ladder, "a": algorithm, "p": json.dumps(params), "now": now},
            )
            connection.execute(
                text(
                    "INSERT INTO ratings (ladder_id, player_id, mu, conservative, matches,"
                    " updated_at) VALUES (:l, :p, :c, :c, 1, :now)"
                ),
                [
                    {
                        "l": ladder,
                        "p": f"p{n}",
                        "c": rng.choice([0.0, 4.0, -8.0, 1e6]) + rng.uniform(-30, 30) * (n % 2),
                        "now": now,
                    }
                    for n in range(300)
                ],
            )
    upgrade(database_url)
    with get_engine(database_url).connect() as connection:
        widths = dict(connection.execute(text("SELECT id, bucket_width FROM ladders")).all())
    assert widths == {"ts": 0.25, "elo": 4.0}
    assert_buckets_exact(database_url)
    # The triggers run from the start: the next writes keep the counts.
    with get_engine(database_url).begin() as connection:
        connection.execute(text("UPDATE ratings SET conservative = -conservative"))
        connection.execute(text("DELETE FROM ratings WHERE player_id LIKE 'p1%'"))
    assert_buckets_exact(database_url)
