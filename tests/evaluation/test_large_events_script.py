"""benchmarks/large_events.py: the synthetic file has the shape it promises, and the
timing table comes out of a small run."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from app.evaluation.data import read_matches

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "large_events.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_large_events", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_team_counts_have_the_median_and_the_largest(script: ModuleType) -> None:
    counts = script.team_counts(990, 222, 15_794, np.random.default_rng(1))
    assert len(counts) == 990
    assert statistics.median(counts) == 222
    assert max(counts) == 15_794
    assert min(counts) >= 2
    assert counts != sorted(counts)  # shuffled
    assert counts == script.team_counts(990, 222, 15_794, np.random.default_rng(1))


def test_the_file_is_a_season_of_recurring_single_players(
    script: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    shape = script.write_file(path, events=40, median=12, largest=300, players=800, seed=3)
    f = read_matches(path)
    assert len(f.matches) == shape["events"] == 40
    assert max(len(m.teams) for m in f.matches) == 300
    assert all(len(team) == 1 for m in f.matches for team in m.teams)
    entries = sum(len(m.teams) for m in f.matches)
    assert entries == shape["entries"]
    assert len(f.players) < entries  # players come back
    played = Counter(i for m in f.matches for team in m.teams for i in team)
    assert played.most_common(1)[0][1] >= 10
    ties = sum(len(m.ranks) - len(set(m.ranks)) for m in f.matches)
    assert 0 < ties < 0.1 * entries
    # Ranks are places: 1 is best, a tie shares the better place, the next one skips.
    for m in f.matches:
        ranks = sorted(m.ranks)
        assert ranks[0] == 1.0
        assert all(r <= place + 1 for place, r in enumerate(ranks))
    # The same seed writes the same file.
    again = tmp_path / "again.jsonl"
    script.write_file(again, events=40, median=12, largest=300, players=800, seed=3)
    assert again.read_bytes() == path.read_bytes()


def test_better_players_finish_ahead(script: ModuleType, tmp_path: Path) -> None:
    # Skill matters: the replayed ratings order most pairs right.
    from app.evaluation.runner import evaluate_file

    path = tmp_path / "events.jsonl"
    script.write_file(path, events=60, median=20, largest=200, players=300, seed=5)
    (row,) = evaluate_file(read_matches(path), ["plackett_luce"], start=30).results
    assert row["prediction_error"] < 0.4


def test_a_small_run_prints_the_tables(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "small.jsonl"
    args = [str(path), "--events", "8", "--median", "6", "--largest", "40", "--players", "100"]
    args += ["--algorithms", "trueskill,elo", "--fit", "elo", "--max-evaluations", "2"]
    assert script.main(args) == 0
    out = capsys.readouterr().out
    assert "| trueskill |" not in out  # a plain table by default
    lines = out.splitlines()
    assert lines[0] == "ratings evaluate --algorithms trueskill,elo"
    assert lines[2].startswith("trueskill") and lines[3].startswith("elo")
    assert lines[4].startswith("whole command")
    assert any(line.startswith("elo ") and " 2 " in line for line in lines[6:])
