"""The measures, computed by hand on tiny cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.evaluation.data import read_matches
from app.evaluation.metrics import (
    Predictions,
    brier,
    json_safe,
    log_loss,
    predict,
    prediction_error,
    summarize,
    tightest,
)
from app.evaluation.presets import build, resolve
from app.rating import Elo, TrueSkill
from app.rating.elo import MAX_TIE_SIZE
from tests.evaluation.conftest import WriteMatches


def _predictions(
    name: str, wrong: list[float], tied: list[float], pairs: list[float], quality: list[float]
) -> Predictions:
    n = len(wrong)
    return Predictions(
        algorithm=name,
        params={},
        wrong=np.array(wrong),
        tied=np.array(tied),
        pairs=np.array(pairs),
        drawn=np.zeros(n),
        quality=np.array(quality),
        p_first=np.full(n, np.nan),
        first_won=np.full(n, np.nan),
        pair_loss=None,
        unrated=0,
        seconds=0.0,
        cpu_seconds=0.0,
    )


def test_prediction_error_pools_pairs_and_weighs_predicted_ties() -> None:
    # 3 + 1 + 0 decisive pairs (the last match all drawn): 1 wrong, 1 predicted even.
    p = _predictions("a", [1, 0, 0], [1, 0, 0], [3, 1, 0], [0.1, 0.2, 0.3])
    assert prediction_error(p) == pytest.approx(1.5 / 4)
    assert prediction_error(p, tie_weight=1.0) == pytest.approx(2 / 4)
    assert prediction_error(p, np.array([False, True, True])) == 0.0
    assert math.isnan(prediction_error(p, np.array([False, False, True])))


def test_tightest_takes_the_highest_quality_in_match_order() -> None:
    q = np.array([0.9, 0.1, 0.5, 0.9, 0.2])
    every = np.ones(5, dtype=bool)
    assert np.flatnonzero(tightest(q, every)).tolist() == [0]  # ceil(0.2 * 5) = 1
    assert np.flatnonzero(tightest(q, every, 0.4)).tolist() == [0, 3]
    assert np.flatnonzero(tightest(q, every, 0.6)).tolist() == [0, 2, 3]
    later = np.arange(5) >= 1
    assert np.flatnonzero(tightest(q, later)).tolist() == [3]


def test_challenged_is_each_systems_error_on_the_others_tightest() -> None:
    # Ten matches of one decisive pair each. A finds match 0 and 1 tightest, B 8 and 9.
    wrong_a = [1, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    wrong_b = [1, 1, 0, 0, 0, 0, 0, 0, 0, 1]
    qa = [0.9, 0.8] + [0.1] * 8
    qb = [0.1] * 8 + [0.8, 0.9]
    a = _predictions("a", wrong_a, [0] * 10, [1] * 10, qa)
    b = _predictions("b", wrong_b, [0] * 10, [1] * 10, qb)
    ra, rb = summarize([a, b])
    assert ra["prediction_error"] == pytest.approx(0.3)
    assert ra["challenged"] == {"b": pytest.approx(1.0)}  # A on B's 8 and 9
    assert rb["challenged"] == {"a": pytest.approx(1.0)}  # B on A's 0 and 1
    assert ra["tightest_error"] == pytest.approx(0.5)
    assert rb["tightest_error"] == pytest.approx(0.5)
    # From match 5 on: 5 matches, ceil(0.2 * 5) = 1 tightest each (A: 5, the first 0.1).
    ra, rb = summarize([a, b], start=5)
    assert ra["matches"] == 5 and ra["prediction_error"] == pytest.approx(0.4)
    assert ra["challenged"] == {"b": pytest.approx(1.0)}
    assert rb["challenged"] == {"a": pytest.approx(0.0)}


def test_replay_with_logistic_elo_by_hand(write_matches: WriteMatches) -> None:
    f = read_matches(
        write_matches(
            [
                {"teams": [["a"], ["b"]], "ranks": [1, 2]},
                {"teams": [["a"], ["b"]], "ranks": [2, 1]},
                {"teams": [["a"], ["b"], ["c"]], "ranks": [1, 1, 2]},
                {"teams": [["a"], ["b"]], "ranks": [1, 1]},
            ]
        )
    )
    run = predict(Elo(k_factor=32.0), f.matches, len(f.players))
    # Match 1: both 1500, an even prediction; a wins: a 1516, b 1484.
    # Match 2: a predicted ahead (wrong: b wins); p = P(a beats b) at a gap of 32.
    p2 = 1.0 / (1.0 + 10.0 ** (-32.0 / 400.0))
    a2, b2 = 1516.0 - 32.0 * p2, 1484.0 + 32.0 * p2
    assert a2 < 1500.0 < b2
    # Match 3: a-b drew (not counted); c (1500) predicted ahead of a: wrong; b ahead of c.
    assert run.pairs.tolist() == [1, 1, 2, 0]
    assert run.wrong.tolist() == [0, 1, 1, 0]
    assert run.tied.tolist() == [1, 0, 0, 0]
    assert run.drawn.tolist() == [0, 0, 1, 1]
    assert prediction_error(run) == pytest.approx(2.5 / 4)
    assert np.isnan(run.p_first[2:]).all()  # three teams; a draw
    assert run.p_first[:2] == pytest.approx([0.5, p2])
    assert log_loss(run) == pytest.approx((-math.log(0.5) - math.log(1.0 - p2)) / 2)
    assert brier(run) == pytest.approx((0.25 + p2 * p2) / 2)
    # Elo's quality: 1 for equal ratings, lower for a gap.
    assert run.quality[0] == pytest.approx(1.0)
    assert run.quality[1] < 1.0


def test_trueskill_orders_teams_by_summed_means_and_draws_from_the_data(
    write_matches: WriteMatches,
) -> None:
    f = read_matches(
        write_matches(
            [
                {"teams": [["a"], ["b"]], "ranks": [1, 2]},
                # a (ahead after winning) with a newcomer against b and c: the team sum
                # 25 + mu_a beats mu_b + 25, and the second team won: wrong.
                {"teams": [["a", "c"], ["b", "d"]], "ranks": [2, 1]},
            ]
        )
    )
    model = build("trueskill", draw_probability=0.25)
    assert model.params["draw_probability"] == 0.25
    run = predict(model, f.matches, len(f.players), pair_loss=True)
    assert run.tied.tolist() == [1, 0] and run.wrong.tolist() == [0, 1]
    assert run.quality[0] == pytest.approx(TrueSkill().quality([[TrueSkill().rating()]] * 2))
    assert run.pair_loss is not None
    # The pair log loss of a two-team match is its log loss.
    assert run.pair_loss[0] == pytest.approx(-math.log(run.p_first[0]))
    assert run.pair_loss[1] == pytest.approx(-math.log(1.0 - run.p_first[1]))


def test_a_refused_match_is_predicted_but_not_rated(write_matches: WriteMatches) -> None:
    # A tie of more than MAX_TIE_SIZE teams: Elo's whole-order update refuses it.
    n = MAX_TIE_SIZE + 1
    f = read_matches(write_matches([{"teams": [[str(i)] for i in range(n)], "ranks": [1] * n}]))
    run = predict(build("elo-full-logistic"), f.matches, len(f.players))
    assert run.unrated == 1 and run.pairs.tolist() == [0]
    assert run.drawn.tolist() == [n * (n - 1) // 2]


def test_presets() -> None:
    algorithm, params = resolve("elo-paper")
    assert algorithm == "elo" and params["model"] == "gaussian"
    # K = alpha beta sqrt(pi) with alpha 0.07: 24.8 on the Elo scale (beta 200).
    assert params["k_factor"] * 200.0 / params["beta"] == pytest.approx(24.81, abs=0.01)
    assert resolve("trueskill", {"beta": 3}, draw_probability=0.2) == (
        "trueskill",
        {"beta": 3, "draw_probability": 0.2},
    )
    assert resolve("trueskill", {"draw_probability": 0.0}, draw_probability=0.2)[1] == {
        "draw_probability": 0.0
    }
    assert resolve("elo-full-gaussian", {"k_factor": 10})[1]["k_factor"] == 10
    with pytest.raises(ValueError, match="unknown"):
        resolve("glicko")


def test_json_safe() -> None:
    assert json_safe({"a": [math.nan, 1.0, math.inf], "b": "x"}) == {
        "a": [None, 1.0, None],
        "b": "x",
    }


def test_teams_are_ordered_by_summed_ratings_for_elo_too(write_matches: WriteMatches) -> None:
    f = read_matches(
        write_matches(
            [
                {"teams": [["a"], ["b"]]},  # a 1516, b 1484
                # b + c = 2984 against a = 1516: the pair is ordered by the sums (the team
                # means, 1492 against 1516, would order it the other way), and a won.
                {"teams": [["b", "c"], ["a"]], "ranks": [2, 1]},
            ]
        )
    )
    run = predict(Elo(k_factor=32.0), f.matches, len(f.players))
    assert run.wrong.tolist() == [0, 1]
    # Elo's own win probability compares the team means: a is the favourite.
    assert run.p_first[1] < 0.5
