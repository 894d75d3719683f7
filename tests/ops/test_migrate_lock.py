"""Instances that start together on a new PostgreSQL database migrate one at a time: each
``ratings migrate`` takes a transaction-scoped advisory lock before it reads the schema's
revision, so the first migrates and the others find the schema at head (a transaction
lock, so it works through a pooler in transaction mode too)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.storage.engine import current_revisions
from tests.ops.test_cli_database import _environment

POSTGRES_URL = os.environ.get("RATINGS_TEST_POSTGRES_URL")

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason="RATINGS_TEST_POSTGRES_URL is not set"),
]


def test_instances_starting_together_migrate_one_at_a_time(new_database: str) -> None:
    command = [sys.executable, "-c", "from app.cli.main import main; raise SystemExit(main())"]
    runs = [
        subprocess.Popen(
            [*command, "--database-url", new_database, "migrate"],
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
    assert [code for code, _ in results] == [0, 0, 0, 0], results
    said = [err for _, err in results]
    assert sum("schema migrated from empty to" in err for err in said) == 1, said
    assert sum("already" in err for err in said) == 3, said
    assert current_revisions(new_database)
