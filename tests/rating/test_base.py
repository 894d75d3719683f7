"""The shared pieces of the core: the rating value, outcome encoding and input checks."""

from __future__ import annotations

import math

import pytest

from app.rating import Rating, RatingInputError, age, widen
from app.rating.base import check_teams, check_weights, outcome_ranks


def test_rating_is_immutable_and_has_conservative_value() -> None:
    r = Rating(25.0, 25.0 / 3)
    assert r.conservative() == pytest.approx(0.0, abs=1e-12)
    assert r.conservative(2.0) == pytest.approx(25.0 - 50.0 / 3)
    with pytest.raises(AttributeError):
        r.mu = 3.0  # type: ignore[misc]


def test_outcome_ranks_from_scores_ranks_or_order() -> None:
    assert outcome_ranks(3, None, None) == [0.0, 1.0, 2.0]
    assert outcome_ranks(2, [2, 1], None) == [2.0, 1.0]
    assert outcome_ranks(2, None, [10, 3]) == [-10.0, -3.0]


@pytest.mark.parametrize(
    ("ranks", "scores", "argument"),
    [
        ([1], None, "ranks"),
        (None, [1, 2, 3], "scores"),
        ([1, math.nan], None, "ranks"),
        ([1, 2], [1, 2], "ranks"),
        ([True, 2], None, "ranks"),
    ],
)
def test_outcome_ranks_rejects_bad_outcomes(
    ranks: list[float] | None, scores: list[float] | None, argument: str
) -> None:
    with pytest.raises(RatingInputError) as info:
        outcome_ranks(2, ranks, scores)
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError)


def test_check_teams_rejects_bad_teams() -> None:
    good = Rating(25.0, 8.0)
    for teams in (
        [[good]],
        [[good], []],
        [[good], [Rating(math.inf, 1.0)]],
        [[good], [Rating(1.0, 0.0)]],
        [[good], [(1.0, 2.0)]],
    ):
        with pytest.raises(RatingInputError) as info:
            check_teams(teams, bayesian=True)  # type: ignore[arg-type]
        assert info.value.argument == "teams"
    check_teams([[good], [Rating(1.0, 0.0)]], bayesian=False)


def test_check_weights() -> None:
    teams = [[Rating(1, 1)], [Rating(1, 1), Rating(1, 1)]]
    assert check_weights(teams, None) is None
    assert check_weights(teams, [[1], [1, 1.0]]) is None
    assert check_weights(teams, [[1], [0.5, 1]]) == [[1.0], [0.5, 1.0]]
    for weights in ([[1]], [[1], [1]], [[1], [1.5, 1]], [[1], [-0.1, 1]], [[1], [math.nan, 1]]):
        with pytest.raises(RatingInputError) as info:
            check_weights(teams, weights)
        assert info.value.argument == "weights"


def test_dynamics_widen_and_age() -> None:
    r = Rating(20.0, 3.0)
    assert widen(r, 4.0) == Rating(20.0, 5.0)
    assert age(r, 0.0, 10.0) is r
    assert age(r, 1.0, -3.0) is r
    assert age(r, 2.0, 4.0).sigma == pytest.approx(5.0)
    with pytest.raises(RatingInputError):
        age(r, -1.0, 1.0)
