"""Ranks inside long ties, counted by rating blocks (migration 0016, ``app.storage.blocks``).

Hundreds of players share one rating, as at a game's launch. Their ranks are exact
(ordered by id) before and after the blocks are cut, through writes that move players in
and out of the tie, with concurrent writers and cuts, and the blocks always equal their
recount. On PostgreSQL a rank reads one block of the tie, not the whole tie.
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from app.cli.main import main
from app.storage import blocks
from app.storage.engine import get_engine, session_factory
from app.storage.models import RatingBlock
from app.storage.repositories.ratings import TIE_WALK, _count_ahead_statement, count_ahead
from tests.service.helpers import create_ladder
from tests.service.test_rank import (
    BUMP_BY_HAND,
    _deadlocks,
    _ratings,
    assert_blocks_exact,
    assert_ranks_exact,
    brute_rank,
    seed,
)

#: The tie's rating: inside bucket 40 of a TrueSkill ladder (width 0.25), off its edges.
TIE = 10.1


def _insert(url: str, ladder: str, rows: list[tuple[str, float]]) -> None:
    """Ratings (id, conservative) straight into the table, as a bulk load would."""
    now = datetime.now(UTC).isoformat()
    with get_engine(url).begin() as connection:
        connection.execute(
            text(
                "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches,"
                " updated_at) VALUES (:l, :p, :c, 1.0, :c, 1, :now)"
            ),
            [{"l": ladder, "p": p, "c": c, "now": now} for p, c in rows],
        )
        connection.execute(text(BUMP_BY_HAND.replace("'p'", f"'{ladder}'")))


def _every_rank_exact(url: str, ladder: str) -> None:
    """Each player's rank from ``count_ahead`` (the read's statement) equals the brute
    count, for every player of the ladder."""
    ratings = _ratings(url, ladder)
    with session_factory(get_engine(url))() as session:
        for conservative, player_id in ratings:
            ahead = count_ahead(
                session=session,
                ladder_id=ladder,
                bucket_width=0.25,
                conservative=conservative,
                player_id=player_id,
                min_matches=0,
            )
            assert ahead + 1 == brute_rank(ratings, conservative, player_id), player_id


def _tie(n: int, seed: int) -> list[tuple[str, float]]:
    """``n`` players at :data:`TIE` with ids in shuffled order, and untied players of the
    same bucket on both sides of it and at the floats next to it."""
    rng = random.Random(seed)
    ids = [f"t{k:04d}" for k in range(n)]
    rng.shuffle(ids)
    rows = [(player, TIE) for player in ids]
    rows += [(f"u{k:02d}", rng.choice([10.0, 10.05, 10.2, 10.2499])) for k in range(30)]
    rows += [("v0", 10.100000000000001), ("v1", 10.099999999999998), ("w0", 10.25)]
    return rows


def test_a_long_tie_is_counted_by_its_blocks(client: TestClient, database_url: str) -> None:
    create_ladder(client, "t")
    _insert(database_url, "t", _tie(700, seed=1))
    _every_rank_exact(database_url, "t")  # one block a bucket: the tie is walked
    with session_factory(get_engine(database_url)).begin() as session:
        cut = blocks.cut(session=session, ladder_id="t", full_row=4)
    assert cut >= 1
    assert_blocks_exact(database_url)
    with get_engine(database_url).connect() as connection:
        fences = connection.scalar(
            text("SELECT count(DISTINCT first_id) FROM rating_blocks WHERE ladder_id = 't'")
        )
    assert fences > 10
    _every_rank_exact(database_url, "t")
    assert_ranks_exact(client, database_url, "t", players=["t0000", "t0350", "t0699", "u00"])

    # Matches move tied players out of the tie; new players join it; seeds jump in and out.
    for a, b in [("t0001", "t0500"), ("t0600", "u03"), ("t0002", "t0003")]:
        assert client.post("/v1/ladders/t/matches", json={"teams": [[a], [b]]}).status_code == 201
    _insert(database_url, "t", [(f"t{k:04d}x", TIE) for k in range(0, 700, 9)])
    assert seed(client, "t", "t0002", mu=TIE + 3.0, sigma=1.0)["conservative"] == TIE
    # A seed's rank is read in its own transaction, its block change still pending.
    before = _ratings(database_url, "t")
    joined = seed(client, "t", "t0699z", mu=TIE + 3.0, sigma=1.0)
    assert joined["rank"] == brute_rank(before, TIE, "t0699z") > TIE_WALK
    seed(client, "t", "t0401", mu=40.0, sigma=1.0)
    with get_engine(database_url).begin() as connection:
        connection.execute(text("DELETE FROM ratings WHERE player_id LIKE 't01%'"))
        connection.execute(text(BUMP_BY_HAND.replace("'p'", "'t'")))
    assert_blocks_exact(database_url)
    _every_rank_exact(database_url, "t")
    # Cut again (the new pieces start at ids that arrived after the first cut).
    with session_factory(get_engine(database_url)).begin() as session:
        blocks.cut(session=session, ladder_id="t", full_row=2)
    assert_blocks_exact(database_url)
    _every_rank_exact(database_url, "t")
    assert_ranks_exact(client, database_url, "t", players=["t0000", "t0699", "t0002", "v1"])


def test_the_service_cuts_full_blocks_after_a_write(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk load leaves one full block; the next writes cut it (here every commit looks)."""
    monkeypatch.setattr(blocks, "CHECK_EVERY", 1)
    create_ladder(client, "s")
    many = 1500 if database_url.startswith("postgresql") else 300
    _insert(database_url, "s", _tie(many, seed=2))
    with session_factory(get_engine(database_url))() as session:
        assert blocks.full(session=session, ladder_id="s")
    # Up to CUTS_AT_ONCE blocks a commit: one write is enough here.
    response = client.post("/v1/ladders/s/matches", json={"teams": [["t0001"], ["t0002"]]})
    assert response.status_code == 201, response.text
    with session_factory(get_engine(database_url))() as session:
        assert not blocks.full(session=session, ladder_id="s")
    assert_blocks_exact(database_url)
    _every_rank_exact(database_url, "s")


def test_the_command_cuts_every_full_block(
    client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    create_ladder(client, "c")
    _insert(database_url, "c", _tie(1500, seed=3))
    assert main(["ladders", "blocks", "c"]) == 0
    assert "rating blocks cut" in capsys.readouterr().out
    with session_factory(get_engine(database_url))() as session:
        assert not blocks.full(session=session, ladder_id="c")
    assert_blocks_exact(database_url)
    assert main(["ladders", "blocks", "nope"]) == 1
    assert "no ladder 'nope'" in capsys.readouterr().err


def test_a_rank_reads_one_block_of_the_tie(client: TestClient, database_url: str) -> None:
    """EXPLAIN ANALYZE of the rank statement for the last of 5,000 tied players: the index
    entries it reads are about a block and the short walk, not the tie."""
    if not database_url.startswith("postgresql"):
        pytest.skip("EXPLAIN ANALYZE: PostgreSQL")
    create_ladder(client, "e")
    _insert(database_url, "e", [(f"t{k:04d}", TIE) for k in range(5000)])
    with session_factory(get_engine(database_url)).begin() as session:
        blocks.cut(session=session, ladder_id="e")
    statement = _count_ahead_statement("postgresql", False, False)
    parameters: dict[str, Any] = {
        "ladder_id": "e",
        "conservative": TIE,
        "player_id": "t4999",
        "width": 0.25,
    }
    bound = statement.bindparams(**parameters).compile(
        dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}
    )
    with get_engine(database_url).connect() as connection:
        assert connection.exec_driver_sql(str(bound)).scalar_one() == 4999
        plan = connection.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {bound}").scalar_one()
    read = _rows_read(plan[0]["Plan"])
    assert TIE_WALK <= read < TIE_WALK + 2 * blocks.FULL_ROW * blocks.STRIPES["postgresql"]


def _rows_read(node: dict[str, Any]) -> int:
    """Rows the plan's scans of ``ratings`` returned, over all their loops."""
    own = 0
    if node.get("Relation Name") == "ratings":
        own = int(node["Actual Rows"]) * int(node["Actual Loops"])
    return own + sum(_rows_read(child) for child in node.get("Plans", []))


WRITERS = 8


def test_concurrent_writers_and_cuts_keep_the_blocks_exact(
    client: TestClient, database_url: str
) -> None:
    """Writers move players in and out of a long tie and add new ones at it while another
    thread cuts the ladder's blocks over and over: no deadlock, no lost count."""
    if not database_url.startswith("postgresql"):
        pytest.skip("row locks and concurrent writers: PostgreSQL")
    create_ladder(client, "k")
    _insert(database_url, "k", _tie(400, seed=4))
    pool = [f"t{k:04d}" for k in range(400)]
    deadlocks = _deadlocks(client)
    done = threading.Event()
    errors: list[str] = []
    engine = get_engine(database_url)

    def cutter() -> None:
        sessions = session_factory(engine)
        while not done.is_set():
            with sessions.begin() as session:
                blocks.cut(session=session, ladder_id="k", full_row=2)

    def writer(n: int) -> None:
        rng = random.Random(n)
        for k in range(15):
            players = rng.sample(pool, 2)
            if rng.random() < 0.4:
                players[1] = f"t{rng.randrange(400):04d}n{n}-{k}"
                response = client.put(
                    f"/v1/ladders/k/players/{players[1]}", json={"mu": TIE + 3.0, "sigma": 1.0}
                )
                if response.status_code != 200:
                    errors.append(response.text)
            response = client.post("/v1/ladders/k/matches", json={"teams": [[p] for p in players]})
            if response.status_code != 201:
                errors.append(response.text)

    cutting = threading.Thread(target=cutter)
    cutting.start()
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    done.set()
    cutting.join(timeout=60)
    assert errors == []
    assert _deadlocks(client) == deadlocks
    assert_blocks_exact(database_url)
    _every_rank_exact(database_url, "k")


def test_a_transaction_applies_its_deltas_once(client: TestClient, database_url: str) -> None:
    """However many statements and delta rows a transaction has, the deferred apply runs
    once (migration 0004's ran once per delta row, all but the first finding nothing)."""
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's deferred trigger")
    create_ladder(client, "o")
    _insert(database_url, "o", _tie(300, seed=5))
    with get_engine(database_url).connect() as connection:
        connection.execute(text("SET track_functions = 'pl'"))
        for k in range(0, 300, 10):  # 30 statements, about 60 delta rows
            connection.execute(
                text(
                    "UPDATE ratings SET conservative = :c WHERE ladder_id = 'o' AND player_id = :p"
                ),
                {"c": k / 7.0, "p": f"t{k:04d}"},
            )
        assert connection.scalar(text("SELECT count(*) FROM rating_bucket_deltas")) > 20
        connection.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
        calls = connection.scalar(
            text(
                "SELECT calls FROM pg_stat_xact_user_functions"
                " WHERE funcname = 'rating_buckets_apply'"
            )
        )
        assert connection.scalar(text("SELECT count(*) FROM rating_bucket_deltas")) == 0
        connection.commit()
    assert calls == 1
    assert_blocks_exact(database_url)
    _every_rank_exact(database_url, "o")


def test_the_full_blocks_index_holds_what_the_service_looks_for() -> None:
    """``blocks.full`` probes the partial index: its predicate must be the service's bound."""
    (index,) = [i for i in RatingBlock.__table__.indexes if i.name == "ix_rating_blocks_full"]
    for dialect in ("postgresql", "sqlite"):
        assert str(index.dialect_options[dialect]["where"]) == f"players > {blocks.FULL_ROW}"


def test_batches_leave_no_full_block_behind(client: TestClient, database_url: str) -> None:
    """A launch: batches of new players who each played one match, so half of them share
    the winners' rating and half the losers'. Each batch fills those two blocks again;
    the service cuts what each filled right after it (not one commit in CHECK_EVERY), so a
    rank reads small blocks with nothing run by hand."""
    create_ladder(client, "launch")
    per_batch = 1500 if database_url.startswith("postgresql") else 400
    for batch in range(2):
        bodies = [
            {"teams": [[f"w{batch}-{n:05d}"], [f"l{batch}-{n:05d}"]]} for n in range(per_batch)
        ]
        response = client.post("/v1/ladders/launch/matches/batch", json={"matches": bodies})
        assert response.status_code == 201, response.text
        with session_factory(get_engine(database_url))() as session:
            assert not blocks.full(session=session, ladder_id="launch"), batch
    assert_blocks_exact(database_url)
    assert_ranks_exact(client, database_url, "launch", players=["w0-00000", "l1-00399"])


def test_a_void_and_a_rebuild_cut_what_they_filled(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild rewrites every rating in one commit: its blocks are cut after it even when
    the sampling would not pick the commit."""
    monkeypatch.setattr(blocks, "CHECK_EVERY", 10**9)
    create_ladder(client, "re")
    many = 1500 if database_url.startswith("postgresql") else 400
    _insert(database_url, "re", _tie(many, seed=4))
    client.post("/v1/ladders/re/matches", json={"match_id": "m", "teams": [["a"], ["b"]]})
    with session_factory(get_engine(database_url))() as session:
        assert blocks.full(session=session, ladder_id="re")  # loaded by hand: not cut yet
    rebuilt = client.patch("/v1/ladders/re?rebuild=true", json={"params": {"beta": 5.0}})
    assert rebuilt.status_code == 200, rebuilt.text
    with session_factory(get_engine(database_url))() as session:
        assert not blocks.full(session=session, ladder_id="re")
    assert_blocks_exact(database_url)
