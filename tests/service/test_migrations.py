"""Alembic owns the schema: upgrade, downgrade to nothing and upgrade again, on each database."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from app.storage.engine import downgrade, get_engine, schema_is_current, upgrade
from app.storage.models import Base

TABLES = {
    "api_keys",
    "ladders",
    "ratings",
    "rating_buckets",
    "rating_bucket_deltas",
    "matches",
    "participants",
    "rating_history",
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
    assert "(ladder_id, conservative DESC, player_id)" in definition.replace('"', "")
