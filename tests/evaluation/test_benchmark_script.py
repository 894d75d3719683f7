"""benchmarks/evaluate.py: the package comparison runs, and its wrappers match the core."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app.rating import Rating, TrueSkill
from tests.evaluation.conftest import WriteMatches
from tests.evaluation.test_cli import _league

pytest.importorskip("trueskill")
pytest.importorskip("openskill")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "evaluate.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_evaluate", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_trueskill_package_wrapper_agrees_with_the_core(script: ModuleType) -> None:
    package = script.TrueSkillPackage()
    core = TrueSkill()  # the package's defaults: draw probability 0.10
    teams = [[Rating(29.0, 4.0), Rating(22.0, 6.0)], [Rating(25.0, 8.0)]]
    assert package.win_probabilities(teams) == pytest.approx(core.win_probabilities(teams))
    got = package.rate(teams, ranks=[1, 2])
    want = core.rate(teams, ranks=[1, 2])
    for g_team, w_team in zip(got, want, strict=True):
        for g, w in zip(g_team, w_team, strict=True):
            assert g.mu == pytest.approx(w.mu, abs=1e-6)
            assert g.sigma == pytest.approx(w.sigma, abs=1e-6)


def test_the_package_comparison_runs(
    script: ModuleType,
    write_matches: WriteMatches,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_matches(_league(9, 60))
    out = tmp_path / "rows.json"
    args = ["packages", str(path), "--ours", "elo", "--max-evaluations", "3", "--json", str(out)]
    assert script.main(args) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert len(table) == 2 + 5  # header, rule, ours and four package models
    rows = json.loads(out.read_text())
    assert [r["system"] for r in rows][:2] == ["elo (fitted)", "trueskill (package)"]
    assert all(0.0 <= r["prediction_error"] <= 1.0 for r in rows)
