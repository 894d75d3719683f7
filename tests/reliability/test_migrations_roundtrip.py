"""Guarantee 9, migrations: stepping down every revision to nothing and back up, one at a
time, leaves a schema equal to the models (an empty Alembic autogenerate diff), on both
databases; the schema at head equals the models before the round trip too."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from app.storage.engine import alembic_config, downgrade, get_engine, schema_is_current, upgrade
from app.storage.models import Base
from tests.reliability.conftest import report


def _diff(url: str) -> list[object]:
    with get_engine(url).connect() as connection:
        return list(compare_metadata(MigrationContext.configure(connection), Base.metadata))


def _tables(url: str) -> set[str]:
    with get_engine(url).connect() as connection:
        return set(inspect(connection).get_table_names())


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
    # And once more in one step each way.
    downgrade(database_url, "base")
    upgrade(database_url)
    assert _diff(database_url) == []
    report(f"migrations[{database_url.split(':')[0]}]", revisions=len(revisions), diff=0)
