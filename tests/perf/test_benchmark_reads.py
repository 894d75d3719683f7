"""benchmarks/reads.py: the launch ladder is a game's first day (every player at one of the
two ratings a first 1 v 1 gives), and its table shows what it measured."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from app.rating.trueskill import TrueSkill

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "reads.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_reads", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_launch_ladder_is_two_ratings(script: ModuleType) -> None:
    rows = list(script.launch_ratings(10_000, 1))
    assert len({pid for pid, *_ in rows}) == 10_000
    shares = Counter((mu, sigma) for _, mu, sigma, _ in rows)
    model = TrueSkill()
    winner, loser = model.rate_1vs1(model.rating(), model.rating())
    assert set(shares) == {(winner.mu, winner.sigma), (loser.mu, loser.sigma)}
    assert 4_800 < shares[winner.mu, winner.sigma] < 5_200
    for _, mu, sigma, conservative in rows:
        assert conservative == mu - 3.0 * sigma


def test_the_table_has_a_row_per_case(script: ModuleType) -> None:
    row = {
        "ladder": "big (10)",
        "connections": 64,
        "case": "first page",
        "bytes": 9_467,
        "rate": 2_000.0,
        "p50": 20.0,
        "p99": 100.0,
        "server_cpu": 0.5,
        "db_cpu": 0.1,
        "app_rate": 16_000.0,
        "app_cpu": 0.08,
        "x_app": 0.125,
        "errors": 0,
        "stall": 3.4,
    }
    lines = script.table([row, {**row, "errors": 2}], markdown=True).splitlines()
    assert lines[0].startswith("| ladder | conn | case |")
    assert lines[2] == (
        "| big (10) | 64 | first page | 9,467 | 2,000 | 20.0 | 100.0 | 0.50 | 0.10 | 16,000 "
        "| 0.08 | 0.12 | 3 |"
    )
    assert lines[3].endswith("| 0.12 (2 errors) | 3 |")
