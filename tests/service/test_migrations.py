"""Alembic owns the schema: upgrade, downgrade to nothing and upgrade again, on each database."""

from __future__ import annotations

import json
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text

from app.storage.engine import downgrade, get_engine, schema_is_current, upgrade
from app.storage.models import Base
from tests.service.helpers import all_pages, create_ladder, post_match

TABLES = {
    "api_keys",
    "ladders",
    "ratings",
    "rating_buckets",
    "rating_bucket_deltas",
    "rating_blocks",
    "rating_bucket_commits",
    "matches",
    "participants",
    "rating_history",
    "jobs",
    "ladder_accuracy",
    "ladder_versions",
    "console_sessions",
    "seasons",
    "season_standings",
    "season_openings",
    "rating_trigger_pauses",
    "season_schedule",
    "aging_passes",
    "ladder_event_counters",
    "events",
    "webhooks",
    "webhook_cursors",
    "webhook_deliveries",
}


def _tables(url: str) -> set[str]:
    with get_engine(url).connect() as connection:
        return set(inspect(connection).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(database_url: str) -> None:
    engine = get_engine(database_url)
    assert schema_is_current(engine)
    assert _tables(database_url) == TABLES

    downgrade(database_url, "base")
    assert _tables(database_url) == set()
    assert not schema_is_current(engine)

    upgrade(database_url)
    assert _tables(database_url) == TABLES
    assert schema_is_current(engine)


def test_models_match_the_migrations(database_url: str) -> None:
    """The migrated schema is exactly what the models describe (``alembic check``)."""
    with get_engine(database_url).connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_leaderboard_index_orders_by_conservative_rating(database_url: str) -> None:
    engine = get_engine(database_url)
    if engine.dialect.name == "sqlite":
        sql = "SELECT sql FROM sqlite_master WHERE name = 'ix_ratings_leaderboard'"
    else:
        sql = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_ratings_leaderboard'"
    with engine.connect() as connection:
        definition = str(connection.scalar(text(sql)))
    # The order, then the match counts a rank of placed players reads from it (0023).
    expected = "(ladder_id, conservative DESC, player_id, matches, season_base)"
    assert expected in definition.replace('"', "")


def _recorded(client: TestClient) -> list[dict[str, Any]]:
    """Matches of two ladders (Bayesian and Elo) with meta, a seed and a voided match; their
    result documents."""
    create_ladder(client, "ts")
    create_ladder(client, "elo", algorithm="elo")
    for ladder in ("ts", "elo"):
        post_match(client, ladder, {"match_id": "a", "teams": [["p1"], ["p2"]]})
        post_match(
            client,
            ladder,
            {
                "match_id": "b",
                "teams": [["p1", "p3"], ["p2", "p4"]],
                "scores": [3, 5],
                "weights": [[1.0, 0.5], [0.25, 1.0]],
                "meta": {"map": "dust", "é": [1, 2.5, None]},
            },
        )
        seed = {"mu": 30.0} if ladder == "ts" else {"mu": 1600.0}
        assert client.put(f"/v1/ladders/{ladder}/players/p2", json=seed).status_code == 200
        post_match(client, ladder, {"match_id": "c", "teams": [["p2"], ["p3"], ["p1"]]})
        assert client.delete(f"/v1/ladders/{ladder}/matches/a").status_code == 200
    return [
        match
        for ladder in ("ts", "elo")
        for match in all_pages(client, f"/v1/ladders/{ladder}/matches", limit=10)
    ]


def test_downgrade_puts_back_what_was_dropped(client: TestClient, database_url: str) -> None:
    """Columns later revisions dropped as repeats come back from what was kept, exactly:
    the participants' ratings from the history rows, or (a voided match) the document, and
    their teams, places, ranks and weights from the document; the matches' meta from their
    requests; the history rows' kind and match_id from their matches."""
    documents = _recorded(client)
    assert any(document["voided"] for document in documents)
    downgrade(database_url, "0005")
    with get_engine(database_url).connect() as connection:
        participants = {
            (seq, player): tuple(numbers)
            for seq, player, *numbers in connection.execute(
                text(
                    "SELECT match_seq, player_id, team, position, rank, weight, mu_before, "
                    "sigma_before, mu_after, sigma_after FROM participants"
                )
            )
        }
        history = connection.execute(
            text("SELECT kind, match_seq, match_id FROM rating_history")
        ).all()
        metas = {
            seq: json.loads(meta)
            for seq, meta in connection.execute(text("SELECT seq, CAST(meta AS TEXT) FROM matches"))
        }
    expected = {
        (document["seq"], player["player_id"]): (
            j,
            i,
            team["rank"],
            player["weight"],
            player["before"]["mu"],
            player["before"]["sigma"],
            player["after"]["mu"],
            player["after"]["sigma"],
        )
        for document in documents
        for j, team in enumerate(document["teams"])
        for i, player in enumerate(team["players"])
    }
    assert participants == expected
    assert metas == {document["seq"]: document["meta"] for document in documents}
    assert any(meta is not None for meta in metas.values())
    match_ids = {document["seq"]: document["match_id"] for document in documents}
    assert {kind for kind, _, _ in history} == {"match", "adjustment"}
    for kind, seq, match_id in history:
        if kind == "match":
            assert match_id == match_ids[seq]
        else:
            assert (seq, match_id) == (None, None)
    upgrade(database_url)
    assert schema_is_current(get_engine(database_url))
    post_match(client, "ts", {"match_id": "d", "teams": [["p1"], ["p4"]]})
