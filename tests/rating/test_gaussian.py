"""The normal distribution helpers and the paper's V and W (section 3), against integration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from app.rating.gaussian import (
    MIN_ONE_MINUS_W,
    cdf,
    interval_probability,
    log_cdf,
    pdf,
    ppf,
    trunc_draw,
    trunc_win,
    v_draw,
    v_win,
    w_draw,
    w_win,
)


def _shifted_moments(c: float, length: float) -> tuple[float, float]:
    """Mean and variance of y in [0, length] with density proportional to exp(-c y - y^2/2).

    That is N(0, 1) truncated to [c, c + length], shifted by c: integrating in y keeps full
    precision even when c is thousands of standard deviations out.
    """
    scale = 1.0 / max(c, 1.0)

    def g(y: float) -> float:
        return math.exp(-c * y - 0.5 * y * y)

    upper = min(length, 60.0 * scale)
    pts = [scale * k for k in (1, 3, 10) if scale * k < upper]
    opts = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 200, "points": pts or None}
    z0 = integrate.quad(g, 0.0, upper, **opts)[0]
    mean = integrate.quad(lambda y: y * g(y), 0.0, upper, **opts)[0] / z0
    var = integrate.quad(lambda y: (y - mean) ** 2 * g(y), 0.0, upper, **opts)[0] / z0
    return mean, var


def _interval_moments(a: float, b: float) -> tuple[float, float]:
    """Mean and variance of N(0, 1) truncated to [a, b] (b may be inf), by quadrature."""
    if a >= 0.0:
        mean, var = _shifted_moments(a, b - a)
        return a + mean, var
    if b <= 0.0:
        mean, var = _shifted_moments(-b, b - a)
        return b - mean, var
    opts = {"epsabs": 1e-14, "epsrel": 1e-13, "limit": 200}
    z0 = integrate.quad(stats.norm.pdf, a, b, **opts)[0]
    mean = integrate.quad(lambda x: x * stats.norm.pdf(x), a, b, **opts)[0] / z0
    var = integrate.quad(lambda x: (x - mean) ** 2 * stats.norm.pdf(x), a, b, **opts)[0] / z0
    return mean, var


class TestNormal:
    def test_pdf_cdf_ppf_match_scipy(self) -> None:
        for x in np.linspace(-37.0, 8.0, 181):
            x = float(x)
            assert pdf(x) == pytest.approx(stats.norm.pdf(x), rel=1e-13)
            assert cdf(x) == pytest.approx(stats.norm.cdf(x), rel=1e-13)
        for p in (1e-300, 1e-12, 0.001, 0.1, 0.5, 0.55, 0.9, 0.999999):
            assert ppf(p) == pytest.approx(stats.norm.ppf(p), rel=1e-12)

    def test_log_cdf_is_finite_and_accurate_in_the_far_tail(self) -> None:
        for x in (-1e4, -500.0, -40.0, -10.0, -4.0, -1.0, 0.0, 3.0):
            assert log_cdf(x) == pytest.approx(stats.norm.logcdf(x), rel=1e-12)

    def test_interval_probability(self) -> None:
        for lo, hi in ((-1.0, 1.0), (2.0, 3.0), (-3.0, -2.0), (5.0, 5.0 + 1e-9), (-40.0, -39.0)):
            ref = integrate.quad(stats.norm.pdf, lo, hi, epsabs=0.0, epsrel=1e-13)[0]
            assert interval_probability(lo, hi) == pytest.approx(ref, rel=1e-10)
        assert interval_probability(1.0, 1.0) == 0.0


class TestWin:
    @pytest.mark.parametrize("x", [-5000.0, -300.0, -37.5, -12.0, -4.5, -3.5, -1.0, 0.0, 2.0, 9.0])
    def test_v_and_w_are_the_moments_of_the_truncated_normal(self, x: float) -> None:
        # V = E[X | X > -x] and 1 - W = Var[X | X > -x] for X ~ N(0, 1).
        mean, var = _interval_moments(-x, math.inf)
        v, one_minus_w = trunc_win(x, 0.0)
        assert v == pytest.approx(mean, rel=1e-10, abs=1e-13)
        assert one_minus_w == pytest.approx(var, rel=1e-9)
        assert v_win(x + 0.5, 0.5) == pytest.approx(v, rel=1e-12)
        assert w_win(x, 0.0) == pytest.approx(1.0 - var, rel=1e-9, abs=1e-15)

    def test_plain_ratio_in_the_bulk(self) -> None:
        for t in np.linspace(-3.0, 5.0, 33):
            t = float(t)
            v = stats.norm.pdf(t - 0.7) / stats.norm.cdf(t - 0.7)
            assert v_win(t, 0.7) == pytest.approx(v, rel=1e-13)
            assert w_win(t, 0.7) == pytest.approx(v * (v + t - 0.7), rel=1e-12)

    @settings(max_examples=200, deadline=None)
    @given(st.floats(-1e6, 1e6), st.floats(0.0, 1e3))
    def test_always_finite_with_w_in_0_1(self, t: float, e: float) -> None:
        v, one_minus_w = trunc_win(t, e)
        assert math.isfinite(v) and v >= 0.0
        assert MIN_ONE_MINUS_W <= one_minus_w <= 1.0


class TestDraw:
    @pytest.mark.parametrize(
        ("t", "e"),
        [
            (0.0, 0.5),
            (0.3, 0.2),
            (1.0, 2.0),
            (2.5, 0.3),
            (-2.5, 0.3),
            (7.0, 1.5),
            (30.0, 0.01),
            (45.0, 3.0),
            (800.0, 20.0),
            (1e4, 1e-3),
            (3.0, 1e-6),
            (0.0, 1e-7),
            (-60.0, 59.0),
            (5.0, 40.0),
        ],
    )
    def test_v_and_w_are_the_moments_of_the_truncated_normal(self, t: float, e: float) -> None:
        # V = E[X] and 1 - W = Var[X] for X ~ N(0, 1) truncated to [-e - t, e - t].
        mean, var = _interval_moments(-e - t, e - t)
        v, one_minus_w = trunc_draw(t, e)
        assert v == pytest.approx(mean, rel=1e-9, abs=1e-13)
        assert one_minus_w == pytest.approx(var, rel=1e-8)

    def test_plain_formula_in_the_bulk(self) -> None:
        for t in np.linspace(-3.0, 3.0, 25):
            t, e = float(t), 0.74
            z = stats.norm.cdf(e - t) - stats.norm.cdf(-e - t)
            v = (stats.norm.pdf(-e - t) - stats.norm.pdf(e - t)) / z
            w = v * v + ((e - t) * stats.norm.pdf(e - t) + (e + t) * stats.norm.pdf(e + t)) / z
            assert v_draw(t, e) == pytest.approx(v, rel=1e-11, abs=1e-15)
            assert w_draw(t, e) == pytest.approx(w, rel=1e-11)

    def test_symmetry(self) -> None:
        for t, e in ((0.4, 0.3), (12.0, 2.0), (100.0, 0.5)):
            assert trunc_draw(-t, e) == (-trunc_draw(t, e)[0], trunc_draw(t, e)[1])

    def test_zero_margin_pins_the_difference(self) -> None:
        v, one_minus_w = trunc_draw(1.5, 0.0)
        assert v == -1.5
        assert one_minus_w == MIN_ONE_MINUS_W

    @settings(max_examples=200, deadline=None)
    @given(st.floats(-1e6, 1e6), st.floats(0.0, 1e3))
    def test_always_finite_with_w_in_0_1(self, t: float, e: float) -> None:
        v, one_minus_w = trunc_draw(t, e)
        assert math.isfinite(v)
        assert MIN_ONE_MINUS_W <= one_minus_w <= 1.0
        # The posterior mean of the standardised difference lies inside the draw interval.
        assert -e - 1e-9 * (1.0 + abs(t)) <= t + v <= e + 1e-9 * (1.0 + abs(t))
