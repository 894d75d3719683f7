"""The Thurstonian order likelihood against independent numerical integration.

References: log P(order) and its gradient written as low-dimensional integrals by
conditioning on the middle places, evaluated with scipy's adaptive quadrature (``quad``)
for moderate ratings and, where P(order) underflows, by brute-force sums on fine grids in
log space. Neither shares code with the forward-backward integration under test.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import log_ndtr, logsumexp
from scipy.stats import norm

from app.rating.thurstone import grid_cells, isotonic_fit, order_log_likelihood

INF = np.inf

# The references ask quad for more digits than it can always certify; the tests check them.
pytestmark = pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")


def _quad(f, lo=-INF, hi=INF):  # type: ignore[no-untyped-def]
    return integrate.quad(f, lo, hi, epsabs=0.0, epsrel=1e-12, limit=200)[0]


def _pdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _log_pdf(x: float) -> float:
    return -0.5 * x * x - 0.5 * math.log(2.0 * math.pi)


def _cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def reference_nested(m: list[float]) -> tuple[float, list[float]]:
    """log P(X_0 > X_1 > ... > X_{n-1}) and its gradient for n = 3, 4 or 5, by quadrature.

    Conditioning on the middle place c = n // 2 (X_c = x):
        P = int N(x - m_c) A(x) B(x) dx,
    A(x) = P(the places above c are in order and above x), B(x) = P(the places below c are
    in order and below x), each Phi(.) for one entrant or a one-dimensional integral for
    two. Every derivative differentiates one factor under the integral sign. The outer
    integrand is scaled by e^-C, C its largest log value, so that a P far below the
    smallest double still comes out as log P.
    """
    pdf, cdf = _pdf, _cdf
    n = len(m)
    c = n // 2
    above = list(range(c))
    below = list(range(c + 1, n))

    def chain_above(k: int | None):  # type: ignore[no-untyped-def]
        """A(x), or dA/dm_k."""
        if len(above) == 1:
            (t,) = above
            return (lambda x: cdf(m[t] - x)) if k is None else (lambda x: pdf(m[t] - x))
        t0, t1 = above
        if k is None:
            g = lambda y: pdf(y - m[t1]) * cdf(m[t0] - y)  # noqa: E731
        elif k == t0:
            g = lambda y: pdf(y - m[t1]) * pdf(m[t0] - y)  # noqa: E731
        else:
            g = lambda y: (y - m[t1]) * pdf(y - m[t1]) * cdf(m[t0] - y)  # noqa: E731
        return lambda x: _quad(g, x, INF)

    def chain_below(k: int | None):  # type: ignore[no-untyped-def]
        """B(x), or dB/dm_k."""
        if len(below) == 1:
            (b,) = below
            return (lambda x: cdf(x - m[b])) if k is None else (lambda x: -pdf(x - m[b]))
        b0, b1 = below
        if k is None:
            g = lambda y: pdf(y - m[b0]) * cdf(y - m[b1])  # noqa: E731
        elif k == b0:
            g = lambda y: (y - m[b0]) * pdf(y - m[b0]) * cdf(y - m[b1])  # noqa: E731
        else:
            g = lambda y: -pdf(y - m[b0]) * pdf(y - m[b1])  # noqa: E731
        return lambda x: _quad(g, -INF, x)

    a_fn, b_fn = chain_above(None), chain_below(None)
    centre = isotonic_fit(m, list(range(n)))[c]
    probe = np.linspace(centre - 10.0, centre + 10.0, 81)
    shift = max(
        _log_pdf(x - m[c]) + math.log(va) + math.log(vb)
        for x in probe
        if (va := a_fn(x)) > 0.0 and (vb := b_fn(x)) > 0.0
    )

    def outer(fa, fb, middle=lambda x: 1.0) -> float:  # type: ignore[no-untyped-def]
        def integrand(x: float) -> float:
            va, vb, vm = fa(x), fb(x), middle(x)
            if va == 0.0 or vb == 0.0 or vm == 0.0:
                return 0.0
            sign = math.copysign(1.0, va) * math.copysign(1.0, vb) * math.copysign(1.0, vm)
            log_abs = _log_pdf(x - m[c]) + math.log(abs(va * vm)) + math.log(abs(vb))
            return sign * math.exp(log_abs - shift)

        return _quad(integrand, centre - 15.0, centre + 15.0)

    p = outer(a_fn, b_fn)
    grad = [0.0] * n
    for k in above:
        grad[k] = outer(chain_above(k), b_fn) / p
    for k in below:
        grad[k] = outer(a_fn, chain_below(k)) / p
    grad[c] = outer(a_fn, b_fn, lambda x: x - m[c]) / p
    return math.log(p) + shift, grad


def reference_three_log(m: list[float], step: float = 2e-4) -> tuple[float, list[float]]:
    """Order 0 > 1 > 2 by a fine-grid sum in log space around the posterior of X_1.

    The integrand of the three-entrant reference is smooth and decays like a Gaussian, so
    the plain Riemann sum converges spectrally; the gradient factors are ratios of
    densities to distribution functions, taken in log space as well.
    """
    centre = isotonic_fit(m, [0, 1, 2])[1]
    x = np.arange(centre - 30.0, centre + 30.0, step)
    base = norm.logpdf(x - m[1]) + log_ndtr(m[0] - x) + log_ndtr(x - m[2])
    log_p = float(logsumexp(base) + math.log(step))
    w = np.exp(base - logsumexp(base))
    d0 = float(np.sum(w * np.exp(norm.logpdf(m[0] - x) - log_ndtr(m[0] - x))))
    d2 = -float(np.sum(w * np.exp(norm.logpdf(x - m[2]) - log_ndtr(x - m[2]))))
    d1 = float(np.sum(w * (x - m[1])))
    return log_p, [d0, d1, d2]


class TestAgainstQuadrature:
    @pytest.mark.parametrize(
        "means",
        [[0.3, -0.2, 0.5], [0.0, 0.0, 0.0], [2.0, -1.0, 0.5], [-3.0, 0.0, 3.0], [1.0, 2.0, 3.5]],
    )
    def test_three_entrants(self, means: list[float]) -> None:
        log_p, grad = order_log_likelihood(means, [[0, 1, 2]])
        ref_log_p, ref_grad = reference_nested(means)
        assert log_p[0] == pytest.approx(ref_log_p, abs=1e-10)
        np.testing.assert_allclose(grad[0], ref_grad, atol=1e-10, rtol=0)

    @pytest.mark.parametrize("means", [[0.4, 0.1, -0.3, 0.2], [1.5, -0.5, 0.8, 0.0]])
    def test_four_entrants(self, means: list[float]) -> None:
        log_p, grad = order_log_likelihood(means, [[0, 1, 2, 3]])
        ref_log_p, ref_grad = reference_nested(means)
        assert log_p[0] == pytest.approx(ref_log_p, abs=1e-10)
        np.testing.assert_allclose(grad[0], ref_grad, atol=1e-10, rtol=0)

    @pytest.mark.parametrize("means", [[0.4, 0.1, -0.3, 0.2, -0.5], [-1.0, 1.0, 0.0, 2.0, -2.0]])
    def test_five_entrants(self, means: list[float]) -> None:
        log_p, grad = order_log_likelihood(means, [[0, 1, 2, 3, 4]])
        ref_log_p, ref_grad = reference_nested(means)
        assert log_p[0] == pytest.approx(ref_log_p, abs=1e-9)
        np.testing.assert_allclose(grad[0], ref_grad, atol=1e-9, rtol=0)

    def test_order_is_taken_from_the_rows(self) -> None:
        # The same event with the entrants listed differently.
        means = [0.5, 2.0, -1.0]
        log_p, grad = order_log_likelihood(means, [[2, 0, 1]])
        ref_log_p, ref_grad = reference_nested([means[2], means[0], means[1]])
        assert log_p[0] == pytest.approx(ref_log_p, abs=1e-10)
        np.testing.assert_allclose(grad[0], [ref_grad[1], ref_grad[2], ref_grad[0]], atol=1e-10)

    def test_two_entrants_closed_form(self) -> None:
        log_p, grad = order_log_likelihood([0.7, -0.4], [[0, 1], [1, 0]])
        z = 1.1 / math.sqrt(2.0)
        assert log_p[0] == pytest.approx(math.log(norm.cdf(z)), abs=1e-14)
        assert log_p[1] == pytest.approx(math.log(norm.cdf(-z)), abs=1e-14)
        v = norm.pdf(z) / norm.cdf(z) / math.sqrt(2.0)
        np.testing.assert_allclose(grad[0], [v, -v], atol=1e-14)


class TestFarApart:
    """Ratings hundreds of deviations apart against the order: P(order) underflows."""

    @pytest.mark.parametrize(
        "means", [[-30.0, 0.0, 30.0], [-40.0, 3.0, 45.0], [0.0, 60.0, -3.0], [-500.0, 1.0, 400.0]]
    )
    def test_three_entrants(self, means: list[float]) -> None:
        log_p, grad = order_log_likelihood(means, [[0, 1, 2]])
        ref_log_p, ref_grad = reference_three_log(means)
        assert math.exp(ref_log_p) == 0.0 or ref_log_p > -700.0
        assert log_p[0] == pytest.approx(ref_log_p, rel=1e-10)
        np.testing.assert_allclose(grad[0], ref_grad, rtol=1e-9, atol=1e-8)

    def test_underflowing_probability_is_finite_in_log_space(self) -> None:
        log_p, grad = order_log_likelihood([-40.0, 3.0, 45.0], [[0, 1, 2]])
        assert log_p[0] < -745.0  # exp() of it is 0.0 in double precision
        assert np.all(np.isfinite(grad))

    @pytest.mark.parametrize(
        "means",
        [[-30.0, 1.0, 0.0, 35.0], [-25.0, -24.0, 20.0, 21.0], [-30.0, 2.0, -1.0, 1.0, 33.0]],
    )
    def test_four_and_five_entrants(self, means: list[float]) -> None:
        log_p, grad = order_log_likelihood(means, [list(range(len(means)))])
        ref_log_p, ref_grad = reference_nested(means)
        assert math.exp(ref_log_p) == 0.0
        assert log_p[0] == pytest.approx(ref_log_p, rel=1e-11)
        np.testing.assert_allclose(grad[0], ref_grad, rtol=1e-8, atol=1e-8)


class TestStructure:
    def test_gradient_sums_to_zero_and_log_p_is_shift_invariant(self) -> None:
        means = [0.3, -1.2, 2.5, 0.0, 1.1, -0.4]
        order = [[3, 1, 0, 5, 2, 4]]
        log_p, grad = order_log_likelihood(means, order)
        shifted, grad_shifted = order_log_likelihood([m + 1000.0 for m in means], order)
        assert abs(grad.sum()) < 1e-12
        assert shifted[0] == pytest.approx(log_p[0], abs=1e-9)
        np.testing.assert_allclose(grad_shifted, grad, atol=1e-9)

    def test_gradient_matches_finite_differences_of_log_p(self) -> None:
        means = np.array([0.2, 1.5, -0.7, 0.9])
        order = [[1, 3, 0, 2]]
        _, grad = order_log_likelihood(means, order)
        h = 1e-4
        for k in range(4):
            up = means.copy()
            up[k] += h
            down = means.copy()
            down[k] -= h
            fd = order_log_likelihood(up, order)[0][0] - order_log_likelihood(down, order)[0][0]
            assert grad[0][k] == pytest.approx(fd / (2 * h), abs=1e-8)

    def test_probabilities_of_all_orders_sum_to_one(self) -> None:
        means = [0.4, -0.6, 1.3, 0.0]
        orders = list(itertools.permutations(range(4)))
        log_p, _ = order_log_likelihood(means, orders)
        assert float(np.exp(log_p).sum()) == pytest.approx(1.0, abs=1e-10)

    def test_rows_are_independent(self) -> None:
        means = [0.1, 0.8, -0.5]
        together = order_log_likelihood(means, [[0, 1, 2], [2, 1, 0]])
        alone = order_log_likelihood(means, [[2, 1, 0]])
        assert together[0][1] == pytest.approx(alone[0][0], abs=1e-12)
        np.testing.assert_allclose(together[1][1], alone[1][0], atol=1e-12)

    def test_many_entrants_stay_finite(self) -> None:
        rng = np.random.default_rng(7)
        means = rng.normal(0.0, 2000.0, 64)
        log_p, grad = order_log_likelihood(means, [rng.permutation(64)])
        assert np.isfinite(log_p).all()
        assert np.isfinite(grad).all()
        assert abs(grad.sum()) < 1e-6 * np.abs(grad).max()

    def test_means_1e15_deviations_apart_are_those_max_gap_apart(self) -> None:
        """Ratings 1e9 apart over a beta of 1e-6: the grid cannot resolve steps there, so
        gaps wider than MAX_GAP are narrowed to it; upsets included, all finite."""
        from app.rating.thurstone import MAX_GAP

        for order in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]):
            far = order_log_likelihood([1e15, 1e15 + 0.5, -4e14, 0.0], [order])
            near = order_log_likelihood([2 * MAX_GAP, 2 * MAX_GAP + 0.5, 0.0, MAX_GAP], [order])
            assert np.isfinite(far[0]).all() and np.isfinite(far[1]).all()
            np.testing.assert_allclose(far[0], near[0], rtol=1e-9)
            np.testing.assert_allclose(far[1], near[1], rtol=1e-6, atol=1e-6)

    def test_grid_settings_and_the_work_they_cost(self) -> None:
        means = [0.3, -1.2, 2.5, 0.0]
        orders = [[0, 1, 2, 3], [1, 0, 2, 3]]
        fine = order_log_likelihood(means, orders)
        coarse = order_log_likelihood(means, orders, step=0.16, levels=2)
        np.testing.assert_allclose(coarse[1], fine[1], atol=1e-4)
        assert grid_cells(means, orders, step=0.16, levels=2) < grid_cells(means, orders) / 5
        # every level holds the +-12 deviation band around the fits, one point per step
        assert grid_cells([0.0, 0.0, 0.0], [[0, 1, 2]], step=0.5, levels=1) == 3 * 49
        assert grid_cells([0.0, 1.0], [[0, 1]]) == 0  # two entrants: closed form

    def test_grid_points_always_increase(self) -> None:
        from app.rating.thurstone import _grid

        for step in (0.16, 0.08, 0.04):
            x = _grid([0.0, 1.03, 25.035, 50.0, 74.5], step)
            assert np.all(np.diff(x) > 0.0)

    def test_isotonic_fit_pools_adjacent_violators(self) -> None:
        assert isotonic_fit([3.0, 1.0, 2.0], [0, 1, 2]) == [3.0, 1.5, 1.5]
        assert isotonic_fit([0.0, 4.0, 2.0], [0, 1, 2]) == [2.0, 2.0, 2.0]
        assert isotonic_fit([5.0, 1.0, 3.0], [0, 2, 1]) == [5.0, 3.0, 1.0]

    def test_rejects_bad_shapes(self) -> None:
        with pytest.raises(ValueError):
            order_log_likelihood([0.0, 1.0, 2.0], [[0, 1]])
        with pytest.raises(ValueError):
            order_log_likelihood([0.0], [[0]])


class TestSpectral:
    """The default (spectral) integrator against the log-space one and its self-check."""

    def test_agrees_with_the_log_space_integrator(self) -> None:
        rng = np.random.default_rng(11)
        for n in (3, 6, 8, 12):
            means = rng.normal(0.0, 1.0, n)
            orders = [list(rng.permutation(n)) for _ in range(3)] + [list(np.argsort(-means))]
            log_p, grad = order_log_likelihood(means, orders)
            ref_log_p, ref_grad = order_log_likelihood(means, orders, step=0.08, levels=4)
            np.testing.assert_allclose(log_p, ref_log_p, atol=1e-9, rtol=0)
            np.testing.assert_allclose(grad, ref_grad, atol=1e-9, rtol=0)

    def test_accepted_orders_pass_the_self_check(self) -> None:
        from app.rating.thurstone import SELF_CHECK, _checked, _spectral

        m, o = _checked([0.4, 0.1, -0.3, 0.2, -0.5, 1.0, -1.2, 0.0], [list(range(8))])
        _, grad, residual = _spectral(m, o)
        assert residual[0] < SELF_CHECK
        assert abs(grad.sum()) < SELF_CHECK

    def test_a_strong_upset_fails_the_check_and_takes_the_log_space_path(self) -> None:
        from app.rating.thurstone import SELF_CHECK, _checked, _spectral

        means = list(np.linspace(-5.0, 5.0, 12))
        order = [list(range(12))]  # the lowest first, the highest last
        m, o = _checked(means, order)
        assert _spectral(m, o)[2][0] > SELF_CHECK
        log_p, grad = order_log_likelihood(means, order)
        ref_log_p, ref_grad = order_log_likelihood(means, order, step=0.08, levels=4)
        assert log_p[0] == ref_log_p[0]
        np.testing.assert_allclose(grad, ref_grad, atol=1e-15, rtol=0)

    def test_chebyshev_matrices_integrate_polynomials_exactly(self) -> None:
        from app.rating.thurstone import _chebyshev

        t, cum_t, tail_t, weights = _chebyshev(17)
        g = 3.0 * t**5 - t**2 + 0.5
        exact = 0.5 * (t**6 - 1.0) - (t**3 + 1.0) / 3.0 + 0.5 * (t + 1.0)
        np.testing.assert_allclose(g @ cum_t, exact, atol=1e-14)
        np.testing.assert_allclose(g @ tail_t, exact[-1] - exact, atol=1e-14)
        assert weights.sum() == pytest.approx(2.0, abs=1e-14)
