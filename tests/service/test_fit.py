"""``POST /v1/ladders/{ladder}/fit``: a ladder's parameters fitted on its own matches in a
job, equal to ``app.evaluation.fit.fit`` on the same matches; applied, the ladder equals a
replay with the fitted parameters; a bad request is a problem document at once."""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.evaluation.auto import fit_auto
from app.evaluation.data import read_matches
from app.evaluation.fit import fit
from app.rating.registry import ALGORITHMS
from tests.service.helpers import all_pages, assert_problem, create_ladder, table_counts
from tests.service.oracle import LADDER_PARAMS, core_replay, random_matches

pytest.importorskip("scipy")

#: A small search: enough to move the parameters, quick to run.
EVALUATIONS = 6


def _ladder(client: TestClient, ladder: str, bodies: list[dict[str, Any]], **config: Any) -> None:
    create_ladder(client, ladder, **config)
    response = client.post(f"/v1/ladders/{ladder}/matches/batch", json={"matches": bodies})
    assert response.status_code == 201, response.text


def _finished(client: TestClient, response: Any, timeout: float = 120) -> dict[str, Any]:
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["kind"] == "fit" and job["result"] is None
    deadline = time.monotonic() + timeout
    while True:
        polled = client.get(response.headers["location"])
        assert polled.status_code == 200, polled.text
        job = polled.json()
        if job["state"] in ("succeeded", "failed"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.05)


def skilled_matches(seed: int, count: int, players: int) -> list[dict[str, Any]]:
    """One-on-one and two-on-two matches among players of fixed, widely spread skill, won
    by the higher skill plus noise (a day apart): a fit moves away from the defaults."""
    rng = random.Random(seed)
    skill = {f"s{n:02d}": rng.gauss(0.0, 3.0) for n in range(players)}
    names = sorted(skill)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    bodies = []
    for n in range(count):
        moment += timedelta(days=1)
        chosen = rng.sample(names, rng.choice([2, 2, 4]))
        teams = [[p] for p in chosen] if len(chosen) == 2 else [chosen[:2], chosen[2:]]
        strength = [sum(skill[p] for p in team) + rng.gauss(0.0, 1.0) for team in teams]
        bodies.append(
            {
                "match_id": f"k{seed}-{n}",
                "played_at": moment.isoformat(),
                "teams": teams,
                "ranks": [1, 2] if strength[0] > strength[1] else [2, 1],
            }
        )
    return bodies


def _file_of(bodies: list[dict[str, Any]], path: Path) -> Path:
    """The matches as a match file in the order the ladder rates them (the order posted:
    without ``played_at`` the file keeps its order)."""
    with path.open("w", encoding="utf-8") as out:
        for body in bodies:
            out.write(json.dumps({k: v for k, v in body.items() if k != "played_at"}) + "\n")
    return path


def _measures(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (None if row[k] != row[k] else row[k])  # NaN: none of those matches
        for k in ("prediction_error", "log_loss", "pair_log_loss", "brier")
    }


def _model_params(algorithm: str, params: dict[str, Any]) -> dict[str, Any]:
    """The model's own parameters (Glicko-2's model holds all of its ladder's)."""
    return {k: v for k, v in params.items() if algorithm == "glicko2" or k not in LADDER_PARAMS}


@pytest.mark.parametrize("algorithm", ["trueskill", "glicko2", "bradley_terry_part"])
def test_the_fit_of_a_ladder_equals_fit_on_its_matches(
    client: TestClient, tmp_path: Path, algorithm: str
) -> None:
    bodies = random_matches(seed=11, count=80, players=10)
    _ladder(client, "league", bodies, algorithm=algorithm)
    ladder = client.get("/v1/ladders/league").json()
    before = table_counts_of(client)

    response = client.post(
        "/v1/ladders/league/fit", json={"train_fraction": 0.6, "max_evaluations": EVALUATIONS}
    )
    job = _finished(client, response)
    assert job["state"] == "succeeded", job
    outcome = job["result"]

    own = _model_params(algorithm, ladder["params"])
    expected = fit(
        read_matches(_file_of(bodies, tmp_path / "league.jsonl")),
        algorithm,
        train_fraction=0.6,
        max_evaluations=EVALUATIONS,
        params=own,
    )
    assert outcome["algorithm"] == algorithm
    assert outcome["fitted"] == {k: expected.params[k] for k in outcome["fitted"]}
    assert {k: outcome["params"][k] for k in expected.params} == expected.params
    assert outcome["params"]["conservative_k"] == ladder["params"]["conservative_k"]
    assert (outcome["matches"], outcome["train_matches"], outcome["test_matches"]) == (80, 48, 32)
    assert outcome["train_log_loss"] == expected.train_loss
    assert outcome["train_log_loss_start"] == expected.train_loss_default
    assert outcome["later"] == {
        "current": _measures(expected.test["default"]),
        "fitted": _measures(expected.test["fitted"]),
    }
    current, fitted = outcome["later"]["current"], outcome["later"]["fitted"]
    assert outcome["gain"]["prediction_error"] == pytest.approx(
        current["prediction_error"] - fitted["prediction_error"]
    )
    assert [c["algorithm"] for c in outcome["candidates"]] == [algorithm]
    assert outcome["candidates"][0]["replays"] == job["progress"]["done"] <= EVALUATIONS
    assert job["progress"]["total"] == EVALUATIONS
    assert (outcome["applied"], outcome["update"]) == (False, None)
    # Nothing changed: the ladder keeps its parameters, and only the job was written.
    assert client.get("/v1/ladders/league").json()["params"] == ladder["params"]
    assert table_counts_of(client) == {**before, "jobs": before["jobs"] + 1}


VENUE = Path(__file__).parent / "data" / "intl_football_venue_sample.jsonl"


def test_a_ladder_with_venues_and_goals_fits_its_advantage_and_margin(
    client: TestClient,
) -> None:
    """Football with the home side's advantage and the goals: the fit searches the
    advantage and the margin too, exactly as ``fit`` does on the file, and applies them."""
    bodies = [json.loads(line) for line in VENUE.read_text().splitlines()]
    _ladder(client, "football", bodies, algorithm="trueskill")
    ladder = client.get("/v1/ladders/football").json()
    response = client.post("/v1/ladders/football/fit", json={"max_evaluations": 20, "apply": True})
    job = _finished(client, response)
    assert job["state"] == "succeeded", job
    outcome = job["result"]
    expected = fit(
        read_matches(VENUE),
        "trueskill",
        max_evaluations=20,
        params=_model_params("trueskill", ladder["params"]),
    )
    assert set(outcome["fitted"]) == {"advantage", "margin", "beta", "tau", "draw_probability"}
    assert outcome["fitted"] == {k: expected.params[k] for k in outcome["fitted"]}
    assert outcome["train_log_loss"] == expected.train_loss
    assert outcome["later"]["fitted"] == _measures(expected.test["fitted"])
    params = client.get("/v1/ladders/football").json()["params"]
    assert params == {**ladder["params"], **outcome["fitted"]}
    assert params["margin"] > 0.0  # the goals count now
    replayed = core_replay("trueskill", params, bodies)
    board = all_pages(client, "/v1/ladders/football/leaderboard", limit=100)
    assert len(board) == len(replayed.ratings)
    for entry in board:
        want = replayed.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(want.mu, rel=1e-9, abs=1e-9)
        assert entry["sigma"] == pytest.approx(want.sigma, rel=1e-9, abs=1e-9)


def table_counts_of(client: TestClient) -> dict[str, int]:
    from app.config import get_settings

    return table_counts(get_settings().database_url)


@pytest.mark.parametrize("algorithm", ["trueskill", "elo", "glicko2"])
def test_an_applied_fit_rebuilds_the_ladder_with_the_fitted_parameters(
    client: TestClient, algorithm: str
) -> None:
    bodies = skilled_matches(seed=12, count=60, players=8)
    config: dict[str, Any] = {"algorithm": algorithm}
    if algorithm == "trueskill":
        config["params"] = {"tau_per_day": 0.05, "conservative_k": 2.0}
    _ladder(client, "applied", bodies, **config)
    ladder = client.get("/v1/ladders/applied").json()

    response = client.post(
        "/v1/ladders/applied/fit",
        json={"algorithm": algorithm, "apply": True, "max_evaluations": EVALUATIONS},
    )
    job = _finished(client, response)
    assert job["state"] == "succeeded", job
    outcome = job["result"]
    assert outcome["applied"] is True
    params = client.get("/v1/ladders/applied").json()["params"]
    assert params == outcome["params"] == outcome["update"]["ladder"]["params"]
    assert params == {**ladder["params"], **outcome["fitted"]}
    assert params != ladder["params"]  # the search moved
    assert outcome["update"]["rebuild"] == {
        "ladder": "applied",
        "matches_rerated": 60,
        "players": 8,
    }

    replayed = core_replay(algorithm, params, bodies)
    board = all_pages(client, "/v1/ladders/applied/leaderboard", limit=50)
    assert {entry["player_id"] for entry in board} == set(replayed.ratings)
    for entry in board:
        want = replayed.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(want.mu, rel=1e-9, abs=1e-9)
        if algorithm != "elo":
            assert entry["sigma"] == pytest.approx(want.sigma, rel=1e-9, abs=1e-9)


def test_auto_chooses_the_lowest_training_loss(client: TestClient, tmp_path: Path) -> None:
    bodies = random_matches(seed=13, count=60, players=8)
    _ladder(client, "auto", bodies)
    ladder = client.get("/v1/ladders/auto").json()
    response = client.post(
        "/v1/ladders/auto/fit", json={"algorithm": "auto", "max_evaluations": EVALUATIONS}
    )
    job = _finished(client, response)
    assert job["state"] == "succeeded", job
    outcome = job["result"]

    candidates = outcome["candidates"]
    assert [c["algorithm"] for c in candidates] == list(ALGORITHMS)
    best = min(candidates, key=lambda c: c["train_log_loss"])
    assert outcome["algorithm"] == best["algorithm"]
    assert outcome["train_log_loss"] == best["train_log_loss"]
    assert set(outcome["later"]) == {"current", "fitted", "best_default"}
    assert job["progress"]["done"] == sum(c["replays"] for c in candidates)

    expected = fit_auto(
        read_matches(_file_of(bodies, tmp_path / "auto.jsonl")),
        ALGORITHMS,
        max_evaluations=EVALUATIONS,
        params={"trueskill": _model_params("trueskill", ladder["params"])},
    )
    assert expected.chosen == outcome["algorithm"]
    assert [c["train_log_loss"] for c in candidates] == [c.train_loss for c in expected.candidates]
    assert [c["stage"] for c in candidates] == [c.stage for c in expected.candidates]
    assert outcome["fitted"] == {k: expected.result.params[k] for k in outcome["fitted"]}


def test_bad_requests_are_answered_at_once(client: TestClient) -> None:
    _ladder(client, "small", random_matches(seed=14, count=3, players=6))
    create_ladder(client, "empty")
    before = table_counts_of(client)

    def post(ladder: str, body: dict[str, Any]) -> Any:
        return client.post(f"/v1/ladders/{ladder}/fit", json=body)

    assert_problem(post("nope", {}), 404, "ladder")
    assert_problem(post("empty", {}), 422, "train_fraction")
    assert_problem(post("small", {"train_fraction": 0.2}), 422, "train_fraction")
    assert_problem(post("small", {"train_fraction": 1.0}), 422, "train_fraction")
    assert_problem(post("small", {"train_fraction": -0.5}), 422, "train_fraction")
    assert_problem(post("small", {"algorithm": "auto", "apply": True}), 422, "apply")
    assert_problem(post("small", {"algorithm": "elo", "apply": True}), 422, "apply")
    assert_problem(post("small", {"algorithm": "bogus"}), 422, "algorithm")
    assert_problem(post("small", {"max_evaluations": 0}), 422, "max_evaluations")
    assert_problem(post("small", {"max_evaluations": 10_000}), 422, "max_evaluations")
    assert_problem(post("small", {"max_evaluations": 2.5}), 422, "max_evaluations")
    assert_problem(post("small", {"rebuild": True}), 422, "rebuild")
    response = client.post(
        "/v1/ladders/small/fit", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 422)
    assert table_counts_of(client) == before  # no job was made


def test_without_scipy_a_fit_is_refused(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ladder(client, "plain", random_matches(seed=15, count=10, players=6))
    monkeypatch.setitem(sys.modules, "scipy", None)  # what an install without the extra sees
    detail = assert_problem(client.post("/v1/ladders/plain/fit", json={}), 501, "scipy")
    assert "ratings[eval]" in detail
