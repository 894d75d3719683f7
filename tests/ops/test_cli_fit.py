"""``ratings fit --ladder ID``: the fit of ``POST /v1/ladders/{ladder}/fit`` from the command
line, on the database of ``--database-url``; ``--apply`` changes the ladder as the job does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.evaluation.data import read_matches
from app.evaluation.fit import fit
from app.services import auth
from tests.ops.conftest import bearer
from tests.ops.test_cli import run
from tests.service.oracle import core_replay
from tests.service.test_fit import _file_of, skilled_matches

pytest.importorskip("scipy")


@pytest.fixture
def admin(db_url: str, make_key: Callable[[str, str], auth.NewKey]) -> dict[str, str]:
    return bearer(make_key("admin", "fit-test").key)


def _ladder(client: TestClient, admin: dict[str, str], bodies: list[dict[str, Any]]) -> None:
    response = client.post(
        "/v1/ladders",
        json={"id": "duel", "algorithm": "trueskill", "params": {"tau_per_day": 0.02}},
        headers=admin,
    )
    assert response.status_code == 201, response.text
    response = client.post(
        "/v1/ladders/duel/matches/batch", json={"matches": bodies}, headers=admin
    )
    assert response.status_code == 201, response.text


def test_fit_on_a_ladder_equals_fit_on_its_matches(
    client: TestClient,
    admin: dict[str, str],
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bodies = skilled_matches(seed=21, count=80, players=10)
    _ladder(client, admin, bodies)
    params = client.get("/v1/ladders/duel").json()["params"]
    common = ["--ladder", "duel", "--max-evaluations", "8", "--train-fraction", "0.6"]

    status, out, err = run(capsys, "--database-url", db_url, "fit", *common, "--format", "json")
    assert status == 0, err
    outcome = json.loads(out)
    own = {k: v for k, v in params.items() if k not in ("tau_per_day", "conservative_k")}
    want = fit(
        read_matches(_file_of(bodies, tmp_path / "duel.jsonl")),
        "trueskill",
        train_fraction=0.6,
        max_evaluations=8,
        params=own,
    )
    assert outcome["algorithm"] == "trueskill" and outcome["applied"] is False
    assert outcome["fitted"] == {k: want.params[k] for k in ("beta", "tau", "draw_probability")}
    assert outcome["params"] == {**params, **outcome["fitted"]}
    assert outcome["train_log_loss"] == want.train_loss
    assert outcome["later"]["fitted"]["log_loss"] == want.test["fitted"]["log_loss"]
    assert outcome["later"]["current"]["log_loss"] == want.test["default"]["log_loss"]
    assert client.get("/v1/ladders/duel").json()["params"] == params  # unchanged

    status, out, _ = run(capsys, "--database-url", db_url, "fit", *common)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("ladder duel: trueskill fitted on the first 48 of its 80 matches")
    assert lines[-2] == "ladder params:"
    assert json.loads(lines[-1]) == {"algorithm": "trueskill", "params": outcome["params"]}
    assert any(line.split()[:2] == ["trueskill", "current"] for line in lines)


def test_apply_changes_the_parameters_and_rebuilds(
    client: TestClient,
    admin: dict[str, str],
    db_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bodies = skilled_matches(seed=22, count=60, players=8)
    _ladder(client, admin, bodies)
    before = client.get("/v1/ladders/duel").json()["params"]
    status, out, err = run(
        capsys,
        "--database-url",
        db_url,
        "fit",
        "--ladder",
        "duel",
        "--apply",
        "--max-evaluations",
        "8",
        "--format",
        "json",
    )
    assert status == 0, err
    outcome = json.loads(out)
    assert outcome["applied"] is True
    assert outcome["update"]["rebuild"]["matches_rerated"] == 60
    params = client.get("/v1/ladders/duel").json()["params"]
    assert params == outcome["params"] == {**before, **outcome["fitted"]} != before
    replayed = core_replay("trueskill", params, bodies)
    board = client.get("/v1/ladders/duel/leaderboard?limit=100").json()["entries"]
    assert len(board) == len(replayed.ratings) == 8
    for entry in board:
        want = replayed.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(want.mu, rel=1e-9)
        assert entry["sigma"] == pytest.approx(want.sigma, rel=1e-9)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ladder", "nope"], "ratings: ladder: no ladder 'nope'"),
        (["--ladder", "duel", "--algorithm", "auto", "--apply"], "apply: only the ladder's own"),
        (["--ladder", "duel", "--train-fraction", "0.001"], "train_fraction"),
        (["--ladder", "duel", "--algorithm", "elo-paper"], "algorithm"),
        (["--ladder", "duel", "some.jsonl"], "give a match FILE or --ladder ID"),
    ],
)
def test_bad_requests_are_refused(
    client: TestClient,
    admin: dict[str, str],
    db_url: str,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    _ladder(client, admin, skilled_matches(seed=23, count=20, players=6))
    status, out, err = run(capsys, "--database-url", db_url, "fit", *args)
    assert status in (1, 2) and out == ""
    assert message in err
    assert client.get("/v1/ladders/duel").json()["matches"] == 20
