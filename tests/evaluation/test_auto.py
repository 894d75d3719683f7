"""``fit --algorithm auto``: the fit's loss from the replay engine equals ``predict``'s, every
candidate is searched, the lowest training loss is chosen and fitted exactly as ``fit``
fits it, in worker processes as in this one."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli.evaluate import main
from app.evaluation.auto import SHORTLIST, fit_auto, most_replays
from app.evaluation.data import MatchFile, read_matches
from app.evaluation.fit import fit
from app.evaluation.loss import PairLoss
from app.evaluation.metrics import pair_log_loss, predict
from app.evaluation.presets import NAMES, build
from app.rating.registry import ALGORITHMS, parameters
from tests.evaluation.conftest import WriteMatches

pytest.importorskip("scipy")


def _mixed(seed: int, matches: int, players: int = 16) -> list[dict[str, Any]]:
    """Matches of every shape between players of fixed skill: duels, two teams with partial
    play, free-for-alls with ties and draws."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(25.0, 8.0, players)
    bodies: list[dict[str, Any]] = []
    for i in range(matches):
        shape = i % 4
        if shape == 3:  # a free-for-all of 3 to 5, ranks from performances, ties possible
            who = rng.choice(players, int(rng.integers(3, 6)), replace=False)
            perf = [skill[p] + rng.normal(0.0, 4.0) for p in who]
            ranks = [round(float(-x) / 4.0) for x in perf]
            teams = [[f"p{p}"] for p in who]
            body: dict[str, Any] = {"teams": teams, "ranks": ranks}
        else:
            size = 1 if shape < 2 else 2
            who = rng.choice(players, 2 * size, replace=False)
            teams = [[f"p{p}" for p in who[:size]], [f"p{p}" for p in who[size:]]]
            perf = [
                sum(skill[p] for p in t) + rng.normal(0.0, 4.0) for t in (who[:size], who[size:])
            ]
            gap = perf[0] - perf[1]
            ranks = [1, 1] if abs(gap) < 1.0 else ([1, 2] if gap > 0 else [2, 1])
            body = {"teams": teams, "ranks": ranks}
            if shape == 2:
                body["weights"] = [[1.0, 0.5], [0.75, 1.0]]
            if shape == 0 and i % 8 == 0:  # goals, and the first team at home
                goals = [max(0, round(float(x) / 8.0)) for x in perf]
                body = {"teams": teams, "scores": goals, "advantage": [1, 0]}
        body["match_id"] = str(i)
        bodies.append(body)
    return bodies


def _duels(seed: int, matches: int, players: int = 30) -> list[dict[str, Any]]:
    """Duels between players of widely spread skill: the defaults of every model are off."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(0.0, 3.0, players)
    bodies = []
    for i in range(matches):
        a, b = rng.choice(players, 2, replace=False)
        won = skill[a] + rng.logistic(0.0, 1.0) > skill[b] + rng.logistic(0.0, 1.0)
        bodies.append(
            {
                "match_id": str(i),
                "teams": [[f"p{a}"], [f"p{b}"]],
                "ranks": [1, 2] if won else [2, 1],
            }
        )
    return bodies


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> MatchFile:
    path = tmp_path_factory.mktemp("mixed") / "mixed.jsonl"
    path.write_text("".join(json.dumps(b) + "\n" for b in _mixed(3, 240)), encoding="utf-8")
    return read_matches(path)


@pytest.mark.parametrize("side", [False, True], ids=["plain", "advantage-and-margin"])
@pytest.mark.parametrize("name", NAMES)
def test_the_fit_loss_equals_predicts_pair_log_loss(
    mixed: MatchFile, name: str, side: bool
) -> None:
    params: dict[str, Any] = {"k_factor": 20.0} if name.startswith("elo") else {}
    if side:  # an advantage and a margin that count: the replay goes match by match
        algorithm = build(name).name
        specs = {spec.name for spec in parameters(algorithm)}
        scale = {"elo": 40.0, "glicko2": 40.0}.get(algorithm, 1.0)
        params["advantage"] = scale
        if "margin" in specs:
            params["margin"] = 0.5 if algorithm != "trueskill" else 0.2
    model = build(name, params)
    want = pair_log_loss(predict(model, mixed.matches, len(mixed.players), pair_loss=True))
    got = PairLoss(mixed.matches, len(mixed.players))(model)
    assert math.isfinite(want)
    assert got == pytest.approx(want, rel=1e-12)
    if side:  # the advantage and the margin made a difference
        plain = build(name, {k: v for k, v in params.items() if k not in ("advantage", "margin")})
        assert PairLoss(mixed.matches, len(mixed.players))(plain) != got


def test_a_match_the_replay_refuses_is_left_unrated_as_predict_leaves_it(
    write_matches: WriteMatches,
) -> None:
    # Whole-order logistic Elo rates ties of at most 16 teams: a 17-way tie is refused, and
    # predict goes on without it; the loss is predict's.
    tie = {"teams": [[f"t{n}"] for n in range(18)], "ranks": [1] * 17 + [2]}
    bodies = [*_duels(1, 40, players=10), tie, *_duels(2, 40, players=10)]
    match_file = read_matches(write_matches(bodies))
    model = build("elo-full-logistic")
    run = predict(model, match_file.matches, len(match_file.players), pair_loss=True)
    assert run.unrated == 1
    got = PairLoss(match_file.matches, len(match_file.players))(model)
    assert got == pair_log_loss(run)


def test_one_candidate_is_fitted_exactly_as_fit_fits_it(mixed: MatchFile) -> None:
    want = fit(mixed, "plackett_luce", max_evaluations=10, train_fraction=0.6)
    got = fit_auto(mixed, ["plackett_luce"], max_evaluations=10, train_fraction=0.6)
    assert got.chosen == got.best_start == "plackett_luce"
    (candidate,) = got.candidates
    assert candidate.stage == "full"
    assert got.result.params == want.params == candidate.params
    assert got.result.train_loss == want.train_loss == candidate.train_loss
    assert got.result.train_loss_default == want.train_loss_default
    assert got.result.evaluations == want.evaluations
    assert candidate.replays == want.evaluations  # every evaluation a replay of its own
    for label in ("default", "fitted"):
        for measure in ("prediction_error", "log_loss", "pair_log_loss", "brier"):
            assert got.test[label][measure] == want.test[label][measure]


def test_auto_screens_then_fits_the_best_fully(write_matches: WriteMatches) -> None:
    match_file = read_matches(write_matches(_duels(4, 400)))
    names = ["trueskill", "plackett_luce", "elo", "glicko2", "thurstone_mosteller_full"]
    got = fit_auto(match_file, names, max_evaluations=12, short=4)
    assert [c.name for c in got.candidates] == names
    full = [c for c in got.candidates if c.stage == "full"]
    short = [c for c in got.candidates if c.stage == "short"]
    assert len(full) >= SHORTLIST and len(full) + len(short) == len(names)
    # The screened-out were stopped after 4 replays, never better than the shortlist then.
    assert all(c.replays == c.evaluations == 4 for c in short)
    assert max(c.train_loss for c in full) <= min(c.train_loss for c in short)
    # Each fitted fully is fitted exactly as fit() fits it, the screening's replays reused.
    for candidate in full:
        want = fit(match_file, candidate.name, max_evaluations=12)
        assert candidate.params == want.params
        assert candidate.train_loss == want.train_loss
        assert candidate.train_loss_start == want.train_loss_default
        assert candidate.evaluations == candidate.replays == want.evaluations
    # The screening is the start of that same fit: the best of its first 4 replays.
    for candidate in short:
        losses: list[float] = []

        def record(
            count: int, values: dict[str, float], loss: float, into: list[float] = losses
        ) -> None:
            into.append(loss)

        fit(match_file, candidate.name, max_evaluations=12, on_evaluation=record)
        assert candidate.train_loss_start == losses[0]
        assert candidate.train_loss == min(losses[:4])
    # The choice is the lowest training loss.
    chosen = min(got.candidates, key=lambda c: c.train_loss)
    assert got.chosen == chosen.name and chosen.stage == "full"
    want = fit(match_file, got.chosen, max_evaluations=12)
    assert got.result.params == want.params
    assert got.test["fitted"]["log_loss"] == want.test["fitted"]["log_loss"]
    assert got.test["default"]["log_loss"] == want.test["default"]["log_loss"]
    # The best default: the lowest loss at the start, measured at its defaults.
    best = min(got.candidates, key=lambda c: c.train_loss_start)
    assert got.best_start == best.name == got.test["best_default"]["name"]
    total = sum(c.replays for c in got.candidates)
    assert total <= most_replays(len(names), 12, 4) == 5 * 4 + SHORTLIST * 8


def test_worker_processes_find_the_same(write_matches: WriteMatches) -> None:
    match_file = read_matches(write_matches(_duels(5, 200)))
    names = ["trueskill", "elo", "bradley_terry_full"]
    told: list[tuple[str, int]] = []

    def on(name: str, count: int, values: dict[str, float], loss: float) -> None:
        told.append((name, count))

    here = fit_auto(match_file, names, max_evaluations=8, short=3, jobs=1)
    there = fit_auto(match_file, names, max_evaluations=8, short=3, jobs=2, on_evaluation=on)
    assert [c.as_dict() for c in there.candidates] == [c.as_dict() for c in here.candidates]
    timing = {"seconds", "cpu_seconds"}
    assert {
        label: {k: v for k, v in row.items() if k not in timing}
        for label, row in there.test.items()
    } == {
        label: {k: v for k, v in row.items() if k not in timing} for label, row in here.test.items()
    }
    # Every replay was told, each candidate's counted on across both stages.
    for c in there.candidates:
        counts = sorted(count for name, count in told if name == c.name)
        assert counts == list(range(1, c.replays + 1))


def test_start_parameters_and_extra_comparisons(write_matches: WriteMatches) -> None:
    match_file = read_matches(write_matches(_duels(6, 200)))
    start = {"beta": 2.0, "tau": 0.05}
    got = fit_auto(
        match_file,
        ["plackett_luce"],
        max_evaluations=6,
        params={"plackett_luce": start},
        compare_with={"current": ("plackett_luce", start), "elo": ("elo", None)},
    )
    want = fit(match_file, "plackett_luce", max_evaluations=6, params=start)
    assert got.result.params == want.params
    assert got.candidates[0].start_params["beta"] == 2.0
    assert got.test["current"]["log_loss"] == want.test["default"]["log_loss"]
    elo = fit(match_file, "elo", max_evaluations=1)
    assert got.test["elo"]["log_loss"] == elo.test["default"]["log_loss"]


def test_bad_arguments_are_refused_before_any_search(mixed: MatchFile) -> None:
    with pytest.raises(ValueError, match="no algorithms"):
        fit_auto(mixed, [])
    with pytest.raises(ValueError, match="at least 1"):
        fit_auto(mixed, ["elo"], jobs=0)
    with pytest.raises(ValueError, match="cannot be split"):
        fit_auto(mixed, ["elo"], train_fraction=0.001)


def test_the_auto_command_reports_every_candidate_and_the_choice(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(write_matches(_duels(7, 300)))
    common = ["--max-evaluations", "6", "--screening", "3", "--jobs", "1"]
    assert main(["fit", path, "--algorithm", "auto", "--format", "json", *common]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["algorithm"] for c in out["candidates"]] == list(ALGORITHMS)
    chosen = min(out["candidates"], key=lambda c: c["train_log_loss"])
    assert out["chosen"] == chosen["algorithm"] == out["ladder_algorithm"]
    assert out["params"] == chosen["params"]
    assert set(out["test"]) == {"fitted", "default", "best_default"}
    assert sum(c["stage"] == "full" for c in out["candidates"]) == SHORTLIST

    assert main(["fit", path, "--algorithm", "auto", *common]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[-2] == "ladder params:"
    assert json.loads(text[-1]) == {"algorithm": out["chosen"], "params": out["params"]}
    assert f"  chosen: {out['chosen']} (the lowest training loss)" in text
    assert sum(line.startswith(f"  {name} ") for name in ALGORITHMS for line in text) >= len(
        ALGORITHMS
    )
    # Every candidate's stage starts under the header's, whatever the longest name.
    header = next(line for line in text if line.startswith("  candidate"))
    column = header.index("stage")
    rows = [line for line in text if line.split()[0] in ALGORITHMS and line.startswith("  ")]
    assert len(rows) >= len(ALGORITHMS)
    assert all(row[column - 1] == " " and row[column] != " " for row in rows)

    # Presets may be candidates; their ladder algorithm is Elo's.
    args = ["fit", path, "--algorithm", "auto", "--candidates", "elo-paper", "--format", "json"]
    assert main([*args, *common]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["chosen"], out["ladder_algorithm"]) == ("elo-paper", "elo")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--candidates", "elo,bogus"], "--candidates: unknown ['bogus']"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--apply"], "--apply changes a ladder"),
        (["--shortlist", "0"], "at least 1"),
    ],
)
def test_bad_auto_options_are_refused(
    write_matches: WriteMatches,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    path = str(write_matches(_duels(8, 40)))
    assert main(["fit", path, "--algorithm", "auto", *args]) == 2
    assert message in capsys.readouterr().err


def test_fit_needs_a_file_or_a_ladder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--algorithm", "elo"]) == 2
    assert "give a match FILE or --ladder ID" in capsys.readouterr().err


def _children(pid: int) -> list[int]:
    """The worker processes ``pid`` spawned (Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == pid and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux /proc")
def test_worker_processes_end_when_their_parent_is_killed(write_matches: WriteMatches) -> None:
    # Long enough that the workers, left alone, would search for minutes.
    path = write_matches(_duels(9, 20_000, players=500))
    program = (
        "from app.evaluation.auto import fit_auto\n"
        "from app.evaluation.data import read_matches\n"
        f"fit_auto(read_matches({str(path)!r}), ['glicko2', 'thurstone_mosteller_part'],"
        " max_evaluations=200,"
        " jobs=2)\n"
    )
    root = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", program], cwd=root)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while len(workers) < 2:
            assert time.monotonic() < deadline, "the worker processes did not start"
            assert parent.poll() is None, "the fit ended before it could be killed"
            time.sleep(0.2)
            workers = _children(parent.pid)
        time.sleep(1.0)  # into their searches
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 120
        while any(_alive(pid) for pid in workers):
            assert time.monotonic() < deadline, "orphaned worker processes kept running"
            time.sleep(0.2)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
