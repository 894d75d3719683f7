"""benchmarks/fit.py: its synthetic file is seeded, valid and has the drift it promises, and
the script runs ``ratings fit`` end to end."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from app.evaluation.data import read_matches

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fit.py"

pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_fit", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_file_is_seeded_one_on_one_and_in_time_order(
    script: ModuleType, tmp_path: Path
) -> None:
    one, two, other = tmp_path / "one.jsonl", tmp_path / "two.jsonl", tmp_path / "other.jsonl"
    script.generate(one, matches=4000, players=300, seed=3)
    script.generate(two, matches=4000, players=300, seed=3)
    script.generate(other, matches=4000, players=300, seed=4)
    assert one.read_bytes() == two.read_bytes() != other.read_bytes()
    bodies = [json.loads(line) for line in one.read_text().splitlines()]
    assert len(bodies) == 4000
    assert all(len(b["teams"]) == 2 and b["teams"][0] != b["teams"][1] for b in bodies)
    played = [b["played_at"] for b in bodies]
    assert played == sorted(played)
    draws = sum(b["ranks"] == [1, 1] for b in bodies) / len(bodies)
    assert 0.05 < draws < 0.15
    match_file = read_matches(one)
    assert match_file.skipped == 0 and len(match_file.players) <= 300
    # A few players play most: the activity is heavy-tailed.
    counts = np.bincount([p for m in match_file.matches for t in m.teams for p in t])
    assert counts.max() > 10 * np.median(counts)


def test_the_script_times_fit(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--dir", str(tmp_path), "--matches", "600", "--players", "60"]
    assert script.main([*argv, "--algorithms", "elo,auto", "--jobs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("600 one-on-one matches, 60 players")
    assert lines[1].split()[:3] == ["algorithm", "seconds", "minutes"]
    assert lines[2].split()[0] == "elo"
    assert lines[3].split()[0] == "auto"
    assert (tmp_path / "fit-600-60-1.jsonl").exists()
