"""The prediction health's rules (``app.domain.health``): drawn shares, quality bins, the
paper's draws curve and the runs of matches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.accuracy import Tally
from app.domain.health import CURVE_POINTS, draw_curve, drawn_share, periods, quality_bins


def test_a_match_counts_the_share_of_its_pairs_that_drew() -> None:
    assert drawn_share([1, 1]) == 1.0
    assert drawn_share([1, 2]) == 0.0
    assert drawn_share([1, 1, 2]) == pytest.approx(1 / 3)
    assert drawn_share([1, 1, 1, 1]) == 1.0
    assert drawn_share([1]) is None


def test_quality_bins_count_matches_and_draws() -> None:
    bins = quality_bins([(0.05, 1.0), (0.05, 0.0), (0.95, 1.0), (1.0, 1.0), (0.55, 0.5)])
    assert [(b.matches, b.draws) for b in bins if b.matches] == [(2, 1.0), (1, 0.5), (2, 2.0)]
    assert bins[0].share == 0.5 and bins[9].share == 1.0 and bins[3].share is None
    assert (bins[0].low, bins[9].high) == (0.0, 1.0)


def test_the_draws_curve_accumulates_from_the_highest_quality() -> None:
    xs, ys = draw_curve([(0.1, 0.0), (0.9, 1.0), (0.5, 0.0), (0.7, 1.0)])
    assert xs == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert ys == [0.0, 0.5, 1.0, 1.0, 1.0]
    assert draw_curve([(0.5, 0.0)]) == ([], [])
    many = [(n / 10_000, float(n % 2)) for n in range(10_000)]
    xs, ys = draw_curve(many)
    assert len(xs) <= CURVE_POINTS + 2 and xs[-1] == ys[-1] == 1.0


def test_runs_are_of_equal_size_and_tallied() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    scored = [(start + timedelta(hours=n), [0.7, 0.3], [1.0, 2.0]) for n in range(7)]
    runs = periods(scored, 3)
    assert [run.tally.matches for run in runs] == [3, 2, 2]
    assert runs[0].first == start and runs[-1].last == start + timedelta(hours=6)
    one = Tally.zero()
    one.add_match([0.7, 0.3], [1.0, 2.0])
    assert runs[1].tally.log_loss() == one.log_loss()
    assert periods(scored, 20)[-1].tally.matches == 1
    assert periods([], 20) == []
