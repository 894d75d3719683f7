"""benchmarks/http.py: the database's floor writes the rows the service writes, with the
service's own statements, and the truer ceiling follows its stated formula."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "http.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_http", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_floor_writes_what_the_service_writes(script: ModuleType, tmp_path: Path) -> None:
    bodies = {
        mode: script.match_bodies(mode, 3 * script.FLOOR_GROUP, f"{mode}-1", 1 + i)
        for i, mode in enumerate(script.MODES)
    }
    # Raises unless the driver alone left the same rows as the service's recording.
    rows = script.floor_rows("sqlite", bodies, script.FLOOR_GROUP, tmp_path)
    assert list(rows) == list(script.MODES)
    for mode, row in rows.items():
        assert row.case == f"floor {mode}"
        assert row.count == 2 * script.FLOOR_GROUP
        assert row.rate > 0 and row.server_cpu > 0


def test_the_floor_notices_other_rows(script: ModuleType, tmp_path: Path) -> None:
    import sqlite3

    from app.storage.engine import upgrade

    urls = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.db"
        upgrade(f"sqlite:///{path}")
        urls.append(f"sqlite:///{path}")
    script.same_rows(*urls)
    with sqlite3.connect(tmp_path / "b.db") as connection:
        connection.execute(
            "INSERT INTO ladders (id, algorithm, params, created_at) "
            "VALUES ('x', 'elo', '{}', '2026-01-01')"
        )
        connection.execute(
            "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches,"
            " updated_at) VALUES ('x', 'p', 1500, NULL, 1500, 0, '2026-01-01')"
        )
    with pytest.raises(RuntimeError, match="ratings"):
        script.same_rows(*urls)


@pytest.mark.parametrize(
    ("workers", "database", "db_cpu", "floor_rate", "expected"),
    [
        # min(1 / (0.3 + 0.2), 2 / (0.3 + 0.2 + 0.1)) per ms: the one worker's core.
        (1, "postgresql", 0.1, 100.0, 1 / 0.0005),
        # min(2 / (0.3 + 0.2), 2 / (0.3 + 0.2 + 1.0)) per ms: the cores shared with the database.
        (2, "postgresql", 1.0, 100.0, 2 / 0.0015),
        # SQLite: one writer at a time, so at most the floor's own rate.
        (2, "sqlite", float("nan"), 1000.0, 1000.0),
    ],
)
def test_the_ceiling_formula(
    script: ModuleType,
    workers: int,
    database: str,
    db_cpu: float,
    floor_rate: float,
    expected: float,
) -> None:
    app = script.Row("none", workers, "ceiling POST 1v1", server_cpu=0.3)
    floor = script.Row(database, 0, "floor 1v1", rate=floor_rate, server_cpu=0.2, db_cpu=db_cpu)
    assert script.ceiling_rate(app, floor, workers, 2) == pytest.approx(expected)
