"""The parameter search of ``fit``: its scales, its widening and what it reports."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from app.cli.evaluate import main
from app.evaluation.data import read_matches
from app.evaluation.fit import MAX_WIDENINGS, Range, fit, fitted_ranges, search
from tests.evaluation.conftest import WriteMatches


def _noisy_duels(seed: int, matches: int, beta: float, players: int = 12) -> list[Any]:
    """Duels of TrueSkill's generative model: skills from the prior N(25, (25/3)^2),
    performances N(skill, beta^2); no draws."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(25.0, 25.0 / 3.0, players)
    bodies: list[Any] = []
    for i in range(matches):
        a, b = rng.choice(players, 2, replace=False)
        won = skill[a] + rng.normal(0.0, beta) > skill[b] + rng.normal(0.0, beta)
        bodies.append(
            {
                "match_id": str(i),
                "played_at": f"2024-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
                "teams": [[f"p{a}"], [f"p{b}"]],
                "ranks": [1, 2] if won else [2, 1],
            }
        )
    return bodies


def test_a_large_beta_is_found_past_the_first_range(write_matches: WriteMatches) -> None:
    first = fitted_ranges("trueskill")["beta"]
    assert first.high == 25.0
    f = read_matches(write_matches(_noisy_duels(1, 3000, beta=100.0)))
    result = fit(f, "trueskill", max_evaluations=40)
    beta = float(result.params["beta"])
    assert result.widenings >= 1
    assert 50.0 < beta < 200.0  # the truth is 100; the loss is flat around it
    assert result.evaluations <= 40
    assert result.train_loss < result.train_loss_default
    # No draws in the file: the draw probability stays at its documented lower limit 0.
    assert [b.as_dict() for b in result.on_bound] == [
        {"parameter": "draw_probability", "side": "low", "bound": 0.0, "limit": True}
    ]


def test_fit_command_reports_parameters_on_a_bound(
    write_matches: WriteMatches, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(write_matches(_noisy_duels(2, 600, beta=100.0)))
    args = ["fit", path, "--algorithm", "trueskill", "--max-evaluations", "12"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "  draw_probability ended on its low bound 0 (its documented limit)\n" in out
    assert main([*args, "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["evaluations"] <= 12
    assert {"parameter": "draw_probability", "side": "low", "bound": 0.0, "limit": True} in body[
        "on_bound"
    ]


def test_tau_is_searched_logarithmically_down_to_small_values() -> None:
    tau = fitted_ranges("trueskill")["tau"]
    assert tau.log and tau.low <= 0.001
    # 0.01 and 0.1 lie far apart in the searched scale (about 0.3 of it), as do 0.1 and 1.
    gap = tau.to_unit(0.1) - tau.to_unit(0.01)
    assert gap > 0.25 and math.isclose(gap, tau.to_unit(1.0) - tau.to_unit(0.1))
    calls: list[float] = []

    def loss(values: dict[str, float]) -> float:
        calls.append(values["tau"])
        return (math.log(values["tau"]) - math.log(0.01)) ** 2

    found = search(loss, {"tau": tau}, {"tau": 0.5}, 30)
    assert found.values["tau"] == pytest.approx(0.01, rel=0.05)
    assert found.first_loss == pytest.approx(math.log(50.0) ** 2)
    assert found.on_bound == [] and found.widenings == 0
    assert found.evaluations == len(calls) <= 30


def test_a_range_is_widened_up_to_its_documented_limit_and_reported() -> None:
    r = Range(low=0.5, high=2.0, log=True, floor=1e-6, ceiling=8.0)

    def loss(values: dict[str, float]) -> float:
        return (math.log(values["x"]) - math.log(1000.0)) ** 2  # beyond the limit

    found = search(loss, {"x": r}, {"x": 1.0}, 60)
    assert found.values["x"] == pytest.approx(8.0, rel=0.02)
    assert found.ranges["x"].high == 8.0 and found.ranges["x"].low == 0.5
    assert [(b.parameter, b.side, b.bound, b.limit) for b in found.on_bound] == [
        ("x", "high", 8.0, True)
    ]
    assert found.evaluations <= 60


def test_widening_stops_after_a_bounded_number_of_rounds() -> None:
    r = Range(low=1.0, high=2.0, log=True, floor=1e-6, ceiling=1e6)

    def loss(values: dict[str, float]) -> float:
        return -values["x"]  # always better further up

    found = search(loss, {"x": r}, {"x": 1.5}, 1000)
    assert found.widenings == MAX_WIDENINGS
    assert found.ranges["x"].high == 2.0 * 4.0**MAX_WIDENINGS
    [edge] = found.on_bound
    assert (edge.side, edge.bound, edge.limit) == ("high", 2.0 * 4.0**MAX_WIDENINGS, False)


def test_a_linear_range_moves_towards_its_limit() -> None:
    r = Range(low=0.0, high=0.9, log=False, floor=0.0, ceiling=1.0)
    assert r.widened("high").high == pytest.approx(0.975)
    assert r.at_limit("low") and not r.at_limit("high")
    assert r.widened("low") == r


def test_the_budget_counts_every_round() -> None:
    r = Range(low=1.0, high=2.0, log=True, floor=1e-6, ceiling=1e6)
    calls = 0

    def loss(values: dict[str, float]) -> float:
        nonlocal calls
        calls += 1
        return -values["x"] - values["y"]

    found = search(loss, {"x": r, "y": r}, {"x": 1.5, "y": 1.5}, 25)
    assert calls == found.evaluations <= 25
    assert found.widenings >= 1
    with pytest.raises(ValueError, match="at least 1"):
        search(loss, {"x": r}, {"x": 1.5}, 0)
