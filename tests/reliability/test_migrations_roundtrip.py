"""Guarantee 9, migrations: stepping down every revision to nothing and back up, one at a
time, leaves a schema equal to the models (an empty Alembic autogenerate diff), on both
databases; the schema at head equals the models before the round trip too."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from app.storage.engine import alembic_config, downgrade, get_engine, schema_is_current, upgrade
from app.storage.models import Base
from tests.reliability.conftest import report


def _diff(url: str) -> list[object]:
    with get_engine(url).connect() as connection:
        return list(compare_metadata(MigrationContext.configure(connection), Base.metadata))


def _tables(url: str) -> set[str]:
    with get_engine(url).connect() as connection:
        return set(inspect(connection).get_table_names())


def _columns(url: str, table: str) -> set[str]:
    with get_engine(url).connect() as connection:
        return {column["name"] for column in inspect(connection).get_columns(table)}


def _glicko2_round_trip(url: str) -> None:
    """0011 adds Glicko-2 ladders and the volatility columns; its downgrade deletes the
    Glicko-2 ladders and leaves the others, their ratings and leaderboard buckets, as
    they were."""
    now = "2026-11-21 12:00:00+00:00"
    ladder = (
        "INSERT INTO ladders (id, algorithm, params, created_at, bucket_width) "
        "VALUES (:id, :algorithm, '{}', :now, 8.0)"
    )
    rating = (
        "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches, "
        "updated_at, volatility) VALUES (:ladder, 'p', 1500.0, 200.0, 1100.0, 0, :now, :vol)"
    )
    engine = get_engine(url)
    with engine.begin() as connection:
        connection.execute(text(ladder), {"id": "g", "algorithm": "glicko2", "now": now})
        connection.execute(text(ladder), {"id": "t", "algorithm": "trueskill", "now": now})
        connection.execute(text(rating), {"ladder": "g", "now": now, "vol": 0.06})
        connection.execute(text(rating), {"ladder": "t", "now": now, "vol": None})
    downgrade(url, "0010")
    assert "volatility" not in _columns(url, "ratings")
    assert not {"volatility_before", "volatility_after"} & _columns(url, "rating_history")
    with engine.begin() as connection:
        assert connection.execute(text("SELECT id FROM ladders")).scalars().all() == ["t"]
        assert connection.execute(text("SELECT ladder_id, mu FROM ratings")).all() == [
            ("t", 1500.0)
        ]
        assert connection.execute(text("SELECT sum(players) FROM rating_buckets")).scalar() == 1
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(text(ladder), {"id": "g", "algorithm": "glicko2", "now": now})
    upgrade(url)
    assert "volatility" in _columns(url, "ratings")
    assert {"volatility_before", "volatility_after"} <= _columns(url, "rating_history")
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM ladders"))


def test_every_revision_down_and_up_again(database_url: str) -> None:
    assert _diff(database_url) == []
    script = ScriptDirectory.from_config(alembic_config(database_url))
    revisions = [r.revision for r in script.walk_revisions()]  # newest first
    for revision in [*revisions[1:], "base"]:
        downgrade(database_url, revision)
    for revision in reversed(revisions):
        upgrade(database_url, revision)
    assert schema_is_current(get_engine(database_url))
    assert _diff(database_url) == []
    # 0010 adds the jobs table, and its downgrade takes it away.
    downgrade(database_url, "0009")
    assert "jobs" not in _tables(database_url)
    upgrade(database_url)
    assert "jobs" in _tables(database_url)
    assert _diff(database_url) == []
    _glicko2_round_trip(database_url)
    assert _diff(database_url) == []
    # And once more in one step each way.
    downgrade(database_url, "base")
    upgrade(database_url)
    assert _diff(database_url) == []
    report(f"migrations[{database_url.split(':')[0]}]", revisions=len(revisions), diff=0)
