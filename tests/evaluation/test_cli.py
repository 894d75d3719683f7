"""The evaluate and fit commands, run through ``app.cli.evaluate.main``."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli.evaluate import main
from app.evaluation.data import read_matches
from app.evaluation.fit import fit
from tests.evaluation.conftest import WriteMatches


def _league(seed: int, matches: int, players: int = 24, spread: float = 12.0) -> list[Any]:
    """1 vs 1 and 2 vs 2 matches between players of fixed skill N(25, spread^2).

    Performances N(skill, 2^2): the skills are far more spread out than TrueSkill's
    default prior and beta assume, so fitted parameters should predict better.
    """
    rng = np.random.default_rng(seed)
    skill = rng.normal(25.0, spread, players)
    bodies: list[Any] = []
    for i in range(matches):
        size = 1 if i % 3 else 2
        who = rng.choice(players, 2 * size, replace=False)
        teams = [who[:size].tolist(), who[size:].tolist()]
        perf = [sum(skill[p] + rng.normal(0.0, 2.0) for p in t) for t in teams]
        bodies.append(
            {
                "match_id": str(i),
                "played_at": f"2024-01-01T00:00:{i % 60:02d}",
                "teams": [[f"p{p}" for p in t] for t in teams],
                "ranks": [1, 2] if perf[0] > perf[1] else [2, 1],
            }
        )
    bodies.sort(key=lambda b: b["played_at"])
    return bodies


def test_evaluate_json_has_one_row_per_file_and_algorithm(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    one = write_matches(_league(1, 60), name="one.jsonl")
    two = write_matches(_league(2, 30), name="two.jsonl.gz")
    status = main(
        [
            "evaluate",
            str(one),
            str(two),
            "--algorithms",
            "trueskill,elo-paper",
            "--params",
            '{"trueskill": {"beta": 3}}',
            "--format",
            "json",
        ]
    )
    assert status == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["results"]
    assert [(Path(r["file"]).name, r["algorithm"]) for r in rows] == [
        ("one.jsonl", "trueskill"),
        ("one.jsonl", "elo-paper"),
        ("two.jsonl.gz", "trueskill"),
        ("two.jsonl.gz", "elo-paper"),
    ]
    for row in rows:
        for key in ("prediction_error", "log_loss", "brier", "seconds", "draw_probability"):
            assert isinstance(row[key], float)
        assert 0.0 <= row["prediction_error"] <= 1.0
        assert row["skipped"] == 0
        assert set(row["challenged"]) == {"trueskill", "elo-paper"} - {row["algorithm"]}
    assert [r["matches"] for r in rows] == [60, 60, 30, 30]
    assert rows[0]["params"]["beta"] == 3
    # No draws in these files: the empirical draw probability, and TrueSkill's, is 0.
    assert rows[0]["draw_probability"] == 0.0 == rows[0]["params"]["draw_probability"]
    assert rows[1]["params"]["model"] == "gaussian"


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_evaluate_tables(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    path = write_matches(_league(3, 40))
    assert main(["evaluate", str(path), "--algorithms", "elo,plackett_luce", "--format", fmt]) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    # The table (Markdown: with its rule), then a legend of the short names in its headers.
    assert len(lines) == (6 if fmt == "markdown" else 4)
    last_row = lines[-3] if fmt == "markdown" else lines[-2]
    assert "plackett_luce" in last_row and "%" in last_row
    assert lines[-1].startswith("@X: ") and "PL = plackett_luce" in lines[-1]
    assert "40 matches" in captured.err


def test_progress_goes_to_stderr_only_when_asked(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_matches(_league(10, 300))
    command = ["evaluate", str(path), "--algorithms", "elo,trueskill", "--format", "json"]
    assert main(command) == 0
    quiet = capsys.readouterr()
    assert "%" not in quiet.err  # stderr is no terminal here: no bar unless asked
    assert main([*command, "--progress"]) == 0
    shown = capsys.readouterr()
    assert len(json.loads(shown.out)["results"]) == 2  # stdout holds the JSON alone
    for name in ("elo", "trueskill"):
        final = [part for part in shown.err.split("\r") if part.startswith(name)][-1]
        assert "100%" in final and "300/300" in final, final


def test_a_malformed_file_exits_2_naming_the_line(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_matches(['{"teams": [["a"], ["b"]]}', '{"teams": [["a"], ["b"]], "ranks": [1]}'])
    assert main(["evaluate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{path}:2: ranks: expected 2 values" in captured.err
    assert main(["fit", str(path), "--algorithm", "elo"]) == 2
    assert f"{path}:2:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--algorithms", "glicko"],
        ["--params", "{oops"],
        ["--params", '{"trueskill": 4}'],
        ["--params", '{"glicko": {}}'],
        ["--params", '{"trueskill": {"beta": -1}}'],
    ],
)
def test_bad_options_exit_2(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    path = write_matches(_league(4, 10))
    assert main(["evaluate", str(path), *args]) == 2
    assert capsys.readouterr().err.startswith("ratings: ")


def test_fit_improves_log_loss_on_the_training_part(write_matches: WriteMatches) -> None:
    f = read_matches(write_matches(_league(5, 400)))
    result = fit(f, "trueskill", max_evaluations=25)
    assert result.train_matches == 200 and result.test_matches == 200
    assert result.train_loss < result.train_loss_default - 0.01
    assert set(result.params) == {
        "mu",
        "sigma",
        "beta",
        "tau",
        "draw_probability",
        "advantage",
        "margin",
        "stat_scale",
        "stat_noise",
        "stat_spread",
    }
    # Tighter performances than the default beta 25/6 describe these players.
    assert float(result.params["beta"]) < 25.0 / 6.0
    later_default = result.test["default"]["pair_log_loss"]
    later_fitted = result.test["fitted"]["pair_log_loss"]
    assert later_fitted < later_default


def test_fit_command_prints_ladder_params(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_matches(_league(6, 200))
    assert main(["fit", str(path), "--algorithm", "elo", "--max-evaluations", "8"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-2] == "ladder params:"
    ladder = json.loads(out[-1])
    assert ladder["algorithm"] == "elo" and ladder["params"]["k_factor"] > 0
    assert (
        main(
            [
                "fit",
                str(path),
                "--algorithm",
                "elo",
                "--format",
                "json",
                "--max-evaluations",
                "4",
                "--train-fraction",
                "0.25",
            ]
        )
        == 0
    )
    body = json.loads(capsys.readouterr().out)
    assert body["train_matches"] == 50 and body["test_matches"] == 150
    assert body["train_log_loss"] <= body["train_log_loss_default"]
    assert math.isfinite(body["test"]["fitted"]["prediction_error"])
    assert main(["fit", str(path), "--algorithm", "elo", "--train-fraction", "1.5"]) == 2


def test_plots_are_written(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    bodies = _league(7, 80)
    for body in bodies[::5]:
        body["ranks"] = [1, 1]  # some draws for the match-quality figure
    path = write_matches(bodies, name="league.jsonl")
    out = tmp_path / "figures"
    assert main(["evaluate", str(path), "--algorithms", "trueskill,elo", "--plots", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "league-calibration.png",
        "league-error.png",
        "league-quality.png",
        "league-trajectories.png",
    ]
    for p in out.iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


@pytest.mark.parametrize(
    ("package", "command"),
    [
        ("scipy", ["fit", "{file}", "--algorithm", "elo"]),
        ("matplotlib", ["evaluate", "{file}", "--algorithms", "elo", "--plots", "{figures}"]),
    ],
)
def test_a_missing_extra_is_named_not_a_traceback(
    write_matches: WriteMatches,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    package: str,
    command: list[str],
) -> None:
    from app.cli.main import main as ratings

    path = write_matches(_league(9, 20))
    figures = tmp_path / "figures"
    monkeypatch.setitem(sys.modules, package, None)  # what an install without the extra sees
    argv = [arg.format(file=path, figures=figures) for arg in command]
    assert ratings(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"ratings: {command[0] if package == 'scipy' else '--plots'} needs {package}, "
        "which is not installed: pip install 'ratings[eval]'\n"
    )
    assert not figures.exists()  # refused before any replay


def test_the_commands_plug_into_the_ratings_parser(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    # What app/cli/main.py's build_parser does with one more line: add_parsers(commands).
    import argparse

    from app.cli.evaluate import add_parsers
    from app.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if "evaluate" not in commands.choices:
        add_parsers(commands)
    path = write_matches(_league(8, 20))
    args = parser.parse_args(["evaluate", str(path), "--algorithms", "elo", "--format", "json"])
    assert args.func(args) == 0
    assert len(json.loads(capsys.readouterr().out)["results"]) == 1


def test_glicko2_is_evaluated_and_fitted(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_matches(_league(7, 200))
    assert main(["evaluate", str(path), "--algorithms", "glicko2,elo", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert [r["algorithm"] for r in rows] == ["glicko2", "elo"]
    result = fit(read_matches(path), "glicko2", max_evaluations=8)
    assert set(result.params) == {
        "rating",
        "deviation",
        "volatility",
        "tau",
        "deviation_per_day",
        "conservative_k",
        "advantage",
    }
    assert result.train_loss <= result.train_loss_default
    assert 0.1 <= float(result.params["tau"]) <= 2.0


def test_evaluate_and_fit_the_other_weng_lin_models(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_matches(_league(5, 40))
    names = (
        "bradley_terry_full,bradley_terry_part,thurstone_mosteller_full,thurstone_mosteller_part"
    )
    assert main(["evaluate", str(path), "--algorithms", names]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6  # the header, one row per model, the legend
    assert max(len(line) for line in lines[:-1]) < 120  # short headers: no wide table
    for name, line in zip(names.split(","), lines[1:-1], strict=True):
        assert name in line and "%" in line
    assert (
        main(
            ["fit", str(path), "--algorithm", "thurstone_mosteller_part", "--max-evaluations", "6"]
        )
        == 0
    )
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-2] == "ladder params:"
    ladder = json.loads(out[-1])
    assert ladder["algorithm"] == "thurstone_mosteller_part"
    params = ladder["params"]
    assert set(params) >= {"beta", "tau", "epsilon", "window_size", "limit_sigma"}
    assert params["window_size"] == 4.0 and params["limit_sigma"] is False
