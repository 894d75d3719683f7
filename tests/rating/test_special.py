"""The rating core's special functions against scipy.special and the math module."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import scipy.special as sc

from app.rating import _special

RNG = np.random.default_rng(20261121)
#: Every branch and its edges, dense, plus random values near 0 and in the body.
GRID = np.concatenate(
    [
        np.linspace(-40.0, 40.0, 160_001),
        RNG.normal(0.0, 0.3, 20_000),
        RNG.normal(0.0, 4.0, 20_000),
        [0.0, -0.0, 0.46875, -0.46875, 4.0, -4.0, 26.543, -26.543, 5e-324, -5e-324, 1e-300],
    ]
)
SPECIALS = np.array([np.inf, -np.inf, np.nan])


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.abs(want))


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_small_arrays_are_the_math_module(name: str) -> None:
    scalar = getattr(math, name)
    x = RNG.normal(0.0, 5.0, _special.LOOP_BELOW - 1)
    got = getattr(_special, name)(x)
    assert got.dtype == np.float64 and got.shape == x.shape
    assert got.tolist() == [scalar(v) for v in x.tolist()]  # bit for bit
    assert getattr(_special, name)(0.3) == scalar(0.3)
    assert isinstance(getattr(_special, name)(0.3), np.float64)


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_large_arrays_within_a_few_ulps_of_math(name: str) -> None:
    scalar = getattr(math, name)
    got = getattr(_special, name)(GRID)
    want = np.array([scalar(v) for v in GRID.tolist()])
    normal = np.abs(want) >= np.finfo(np.float64).tiny
    assert ulps(got[normal], want[normal]).max() <= 8
    # Where erfc underflows to a subnormal, absolute agreement (scipy's erfc gives 0 too).
    assert np.abs(got[~normal] - want[~normal]).max() <= 1e-307
    ends = getattr(_special, name)(np.concatenate([SPECIALS, np.zeros(_special.LOOP_BELOW)]))
    assert ends[:2].tolist() == ([1.0, -1.0] if name == "erf" else [0.0, 2.0])
    assert math.isnan(ends[2])


def test_ndtr_matches_scipy() -> None:
    got = _special.ndtr(GRID)
    want = sc.ndtr(GRID)
    # Both round z / sqrt(2), which erfc's condition number (2 x^2) turns into a relative
    # 4e-13 at z = -36 (Phi = 5e-288).
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    assert _special.ndtr(SPECIALS[:2]).tolist() == [1.0, 0.0]
    assert _special.ndtr(0.0) == 0.5


def test_log_ndtr_matches_scipy_into_the_far_tail() -> None:
    z = np.concatenate([GRID, np.linspace(-1e4, -40.0, 10_001), [-1e150, 1e150]])
    got = _special.log_ndtr(z)
    want = sc.log_ndtr(z)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    # Above 0 the value is -Phi(-z) to first order: relative precision, not absolute.
    assert _special.log_ndtr(10.0) == pytest.approx(-sc.ndtr(-10.0), rel=1e-13)
    ends = _special.log_ndtr(SPECIALS)
    assert ends[0] == 0.0 and ends[1] == -np.inf and math.isnan(ends[2])
    small = _special.log_ndtr(np.array([-6.0, -1.0, 3.0]))
    np.testing.assert_allclose(small, sc.log_ndtr([-6.0, -1.0, 3.0]), rtol=1e-14)


def test_logsumexp_matches_scipy() -> None:
    a = RNG.normal(0.0, 300.0, (7, 50))
    a[3] = -np.inf  # a row of nothing
    a[4, :10] = -np.inf
    for axis in (None, 0, 1):
        got = _special.logsumexp(a, axis=axis)
        want = sc.logsumexp(a, axis=axis)
        np.testing.assert_allclose(got, want, rtol=1e-14)
    assert _special.logsumexp(a, axis=1)[3] == -np.inf
    assert _special.logsumexp([1000.0, 1000.0]) == pytest.approx(1000.0 + math.log(2.0))
    assert isinstance(_special.logsumexp([0.0, 0.0]), np.float64)


def test_expit_matches_scipy() -> None:
    x = np.concatenate([np.linspace(-800.0, 800.0, 100_001), SPECIALS[:2]])
    np.testing.assert_allclose(_special.expit(x), sc.expit(x), rtol=4e-16, atol=1e-300)
    assert _special.expit(0.0) == 0.5


def test_the_service_never_imports_scipy() -> None:
    """A ladder, a batch and a win probability of three teams, the app and the command's
    parser: neither scipy nor matplotlib (the optional ``eval`` extra) in the process."""
    code = """
import sys
from app.rating.registry import make_model
from app.rating import Rating
from app.rating.replay import replay
from app.rating.replay import ReplayMatch
import app.main
from app.cli.main import build_parser
app.main.create_app()
build_parser()
model = make_model("trueskill", {})
model.win_probabilities([[Rating(25, 8)], [Rating(20, 3)], [Rating(30, 5)]])
matches = [ReplayMatch([[i], [i + 100], [i + 200]], None, None, 0.0) for i in range(100)]
replay(model, [25.0] * 300, [8.3] * 300, matches, with_quality=True)
print(sorted({"scipy", "matplotlib"} & set(sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stderr


def _reference_cody(x: np.ndarray, complement: bool) -> np.ndarray:
    """Cody's erf and erfc as first written: each branch on the elements picked out by a
    mask, a new array per operation (the formulas of ``_special``, line for line)."""
    a, b, c, d = _special._A, _special._B, _special._C, _special._D
    p, q = _special._P, _special._Q

    def exp_minus_square(y: np.ndarray) -> np.ndarray:
        head = np.trunc(y * 16.0) / 16.0
        out: np.ndarray = np.exp(-head * head) * np.exp(-(y - head) * (y + head))
        return out

    def erf_small(v: np.ndarray) -> np.ndarray:
        ysq = v * v
        num = a[4] * ysq
        den = ysq
        for i in range(3):
            num = (num + a[i]) * ysq
            den = (den + b[i]) * ysq
        out: np.ndarray = v * (num + a[3]) / (den + b[3])
        return out

    def erfc_middle(y: np.ndarray) -> np.ndarray:
        num = c[8] * y
        den = y
        for i in range(7):
            num = (num + c[i]) * y
            den = (den + d[i]) * y
        out: np.ndarray = exp_minus_square(y) * ((num + c[7]) / (den + d[7]))
        return out

    def erfc_large(y: np.ndarray) -> np.ndarray:
        ysq = 1.0 / (y * y)
        num = p[5] * ysq
        den = ysq
        for i in range(4):
            num = (num + p[i]) * ysq
            den = (den + q[i]) * ysq
        out: np.ndarray = exp_minus_square(y) * (
            (_special._SQRPI - ysq * (num + p[4]) / (den + q[4])) / y
        )
        return out

    out = np.empty_like(x)
    small = np.abs(x) <= _special._THRESH
    if small.any():
        erf_s = erf_small(x[small])
        out[small] = 1.0 - erf_s if complement else erf_s
    rest = ~small
    if rest.any():
        xr = x[rest]
        y = np.abs(xr)
        tail = np.empty_like(y)
        middle = y <= 4.0
        tail[middle] = erfc_middle(y[middle])
        with np.errstate(invalid="ignore"):
            tail[~middle] = erfc_large(y[~middle])
        tail[np.isinf(y)] = 0.0
        if complement:
            out[rest] = np.where(xr < 0.0, 2.0 - tail, tail)
        else:
            magnitude = (0.5 - tail) + 0.5
            out[rest] = np.where(xr < 0.0, -magnitude, magnitude)
    return out


@pytest.mark.parametrize("complement", [False, True])
def test_large_arrays_are_each_branch_bit_for_bit(complement: bool) -> None:
    # The whole-array evaluation picks, per element, the value its own branch gives alone.
    x = np.concatenate([GRID, SPECIALS, RNG.normal(0.0, 2.0, 3001)])
    got = _special._cody(x, complement)
    want = _reference_cody(x, complement)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
