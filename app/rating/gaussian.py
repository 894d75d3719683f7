"""The standard normal distribution and the paper's truncated-Gaussian corrections V and W.

Herbrich, Minka and Graepel, "TrueSkill: A Bayesian Skill Rating System" (2007), section 3:
when the performance difference d ~ N(mu, sigma^2) is observed to satisfy a win
``I(d > eps)`` or a draw ``I(|d| <= eps)``, the moment-matched posterior of d has

    mean = mu + sigma * V(t, e),        variance = sigma^2 * (1 - W(t, e)),

with t = mu / sigma and e = eps / sigma. For a win

    V(t, e) = N(t - e) / Phi(t - e),    W(t, e) = V (V + t - e),

and for a draw (the two-sided versions)

    V(t, e) = (N(-e - t) - N(e - t)) / (Phi(e - t) - Phi(-e - t)),
    W(t, e) = V^2 + ((e - t) N(e - t) + (e + t) N(e + t)) / (Phi(e - t) - Phi(-e - t)).

The plain ratios lose every digit in the far tails (N(x) / Phi(x) is 0 / 0 below x = -38)
and 1 - W cancels catastrophically there. The forms below are exact identities evaluated
without underflow or cancellation:

* N(x) / Phi(x) for x < ``_TAIL`` comes from Laplace's continued fraction of the Mills
  ratio, Phi(-z) / N(z) = 1 / (z + 1 / (z + 2 / (z + 3 / ...))), which also yields 1 - W
  directly (no subtraction of two numbers near 1).
* A draw over a narrow interval (e (|t| + e) <= 1) is integrated by Gauss-Legendre
  quadrature around the interval's centre, so its tiny variance keeps full precision.
* A draw with both interval ends in one tail is the one-sided truncation minus the part
  beyond the far end (a two-component mixture), using the continued fraction above.

``trunc_win`` and ``trunc_draw`` return (V, 1 - W) rather than (V, W): 1 - W is the factor by
which the variance of d shrinks, and near W = 1 it would lose every digit as ``1.0 - W``.
It is kept in [``MIN_ONE_MINUS_W``, 1], i.e. W in [0, 1), so no variance can grow from a
win, a loss or a draw, and none collapses to exactly zero.

Everything here is scalar and uses the ``math`` module: these run once per comparison
factor per message-passing round, where numpy's per-call overhead would dominate.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

__all__ = [
    "MIN_ONE_MINUS_W",
    "cdf",
    "interval_probability",
    "log_cdf",
    "pdf",
    "ppf",
    "trunc_draw",
    "trunc_win",
    "v_draw",
    "v_win",
    "w_draw",
    "w_win",
]

#: The smallest 1 - W returned (a variance factor, which must stay > 0). Reached only by a
#: draw whose margin is below ~1e-20 standard deviations of the performance difference,
#: or by a win against a gap of ~1e20 of them.
MIN_ONE_MINUS_W = 1e-40

_SQRT2 = math.sqrt(2.0)
_INV_SQRT2 = 1.0 / _SQRT2
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

#: Below this x, N(x) / Phi(x) and 1 - W come from the continued fraction.
_TAIL = -4.0
# Depth of the continued fraction for z below each bound: it converges faster the further
# out z is, and each depth gives lam and 1 - W to ~1e-16 on its range (checked against
# 50-digit arithmetic).
_CF_DEPTHS = ((6.0, 44), (10.0, 24), (16.0, 16), (math.inf, 10))
# Per bound, the numerators depth, depth - 1, ..., 5 of the fraction's deeper terms as
# floats (the same values as the integers: n / d converts n exactly), ready to loop over.
_CF_TERMS = tuple(
    (limit, tuple(float(n) for n in range(depth, 4, -1))) for limit, depth in _CF_DEPTHS
)


def _gauss_legendre_pairs(n: int) -> tuple[tuple[float, float], ...]:
    """The positive Gauss-Legendre nodes on [-1, 1] (n even) with their weights."""
    x, w = np.polynomial.legendre.leggauss(n)
    return tuple((float(xk), float(wk)) for xk, wk in zip(x, w, strict=True) if xk > 0.0)


# Gauss-Legendre nodes for narrow intervals (their mirror images are implied).
_GL4 = _gauss_legendre_pairs(4)
_GL6 = _gauss_legendre_pairs(6)
_GL10 = _gauss_legendre_pairs(10)
_GL12 = _gauss_legendre_pairs(12)
_GL14 = _gauss_legendre_pairs(14)

_erf = math.erf
_erfc = math.erfc
_exp = math.exp
_expm1 = math.expm1
_log = math.log

_STD_NORMAL = NormalDist()


def pdf(x: float) -> float:
    """The standard normal density N(x) = exp(-x^2 / 2) / sqrt(2 pi)."""
    return _INV_SQRT_2PI * _exp(-0.5 * x * x)


def cdf(x: float) -> float:
    """The standard normal distribution function Phi(x), accurate in both tails (via erfc)."""
    return 0.5 * _erfc(-x * _INV_SQRT2)


def log_cdf(x: float) -> float:
    """log Phi(x), finite for every finite x (the continued fraction below ``_TAIL``)."""
    if x >= _TAIL:
        return _log(cdf(x))
    v, _, _ = _lower_tail(x)
    # Phi(x) = N(x) / (N(x) / Phi(x))
    return -0.5 * x * x - _LOG_SQRT_2PI - _log(v)


def ppf(p: float) -> float:
    """The standard normal quantile Phi^-1(p) for 0 < p < 1."""
    return _STD_NORMAL.inv_cdf(p)


def interval_probability(lo: float, hi: float) -> float:
    """Phi(hi) - Phi(lo) for lo <= hi, without cancellation (0.0 only when it underflows)."""
    if hi <= lo:
        return 0.0
    half = 0.5 * (hi - lo)
    mid = 0.5 * (hi + lo)
    if half * (abs(mid) + half) <= 1.0:
        # Narrow: integrate the density directly (the difference of two near values cancels).
        total = 0.0
        for xk, wk in _GL12:
            y = half * xk
            total += wk * (pdf(mid + y) + pdf(mid - y))
        return half * total
    if lo >= 0.0:
        return 0.5 * (_erfc(lo * _INV_SQRT2) - _erfc(hi * _INV_SQRT2))
    if hi <= 0.0:
        return 0.5 * (_erfc(-hi * _INV_SQRT2) - _erfc(-lo * _INV_SQRT2))
    return 0.5 * (_erf(hi * _INV_SQRT2) + _erf(-lo * _INV_SQRT2))


def _lower_tail(x: float) -> tuple[float, float, float]:
    """For X ~ N(0, 1) conditioned on X > -x: (lam, lam + x, 1 - lam (lam + x)).

    lam = N(x) / Phi(x) is the paper's V for a win at t - e = x; the third value is 1 - W.
    With z = -x the truncation point, lam = E[X] and 1 - W = Var[X]. For x < ``_TAIL``:
    Laplace's continued fraction Phi(-z) / N(z) = 1 / D1 with D_n = z + n / D_(n+1), so
    lam = D1 = z + 1 / D2 and 1 - W = (z + 4 / D3 - 3 / D4) / (D3 * D2^2) exactly.
    """
    if x >= _TAIL:
        c = cdf(x)
        lam = pdf(x) / c
        g = lam + x
        return lam, g, 1.0 - lam * g
    z = -x
    d = z  # D_(depth + 1) ~ z; the tail of the fraction no longer matters here
    for limit, terms in _CF_TERMS:
        if z < limit:
            for n in terms:
                d = z + n / d
            break
    d4 = z + 4.0 / d
    d3 = z + 3.0 / d4
    d2 = z + 2.0 / d3
    g = 1.0 / d2
    one_minus_w = ((z + 4.0 / d3 - 3.0 / d4) / d3) / d2 / d2
    return z + g, g, one_minus_w


def trunc_win(t: float, e: float) -> tuple[float, float]:
    """(V, 1 - W) for a win, ``I(d > eps)``, at t = mu / sigma, e = eps / sigma (section 3)."""
    v, _, one_minus_w = _lower_tail(t - e)
    if one_minus_w > 1.0:
        one_minus_w = 1.0
    elif one_minus_w < MIN_ONE_MINUS_W:
        one_minus_w = MIN_ONE_MINUS_W
    return v, one_minus_w


def trunc_draw(t: float, e: float) -> tuple[float, float]:
    """(V, 1 - W) for a draw, ``I(|d| <= eps)``, at t = mu / sigma, e = eps / sigma >= 0.

    V is odd and W even in t, so the work is done for |t|. With X ~ N(0, 1) conditioned on
    the interval [a, b] = [-e - |t|, e - |t|]: V = E[X] and 1 - W = Var[X].
    """
    s = abs(t)
    if e <= 0.0:
        # A zero-width interval pins d to 0: the limit V = -t, W = 1.
        return -t, MIN_ONE_MINUS_W
    if e * (s + e) <= 1.0:
        mean, var = _narrow_moments(s, e)
    elif s <= e:
        mean, var = _straddle_moments(s, e)
    else:
        mean, var = _tail_moments(s, e)
    if var > 1.0:
        var = 1.0
    elif not var >= MIN_ONE_MINUS_W:
        var = MIN_ONE_MINUS_W
    return (mean if t >= 0.0 else -mean), var


def _narrow_moments(s: float, e: float) -> tuple[float, float]:
    """Mean and variance of N(0, 1) on [-e - s, e - s] when the log-density varies little.

    With X = -s + y, y in [-e, e], the density is proportional to exp(s y - y^2 / 2), whose
    exponent varies by at most e (s + e) <= 1 here, so Gauss-Legendre quadrature is exact
    to rounding. In u = y / e the integrand is exp(a u - g u^2), a = s e, g = e^2 / 2, and
    the n-point rule misses terms of order a^(2n) / (2n)! and g^n / n!, so n grows from 4
    to 14 with a and e. Nodes come in pairs +-y, which share exp(-y^2 / 2) and exp(+-s y).
    """
    tilt = s * e
    if tilt <= 0.06 and e <= 0.08:
        nodes = _GL4
    elif tilt <= 0.35 and e <= 0.2:
        nodes = _GL6
    elif e <= 0.6:
        nodes = _GL10
    else:
        nodes = _GL14
    z0 = m1 = m2 = 0.0
    for xk, wk in nodes:
        y = e * xk
        common = wk * _exp(-0.5 * y * y)
        up = _exp(s * y)
        gp = common * up
        gm = common / up
        z0 += gp + gm
        m1 += (gp - gm) * y
        m2 += (gp + gm) * y * y
    my = m1 / z0
    # Var = E[y^2] - E[y]^2 loses nothing here: |E[y]| <= e |tanh(s e)| is well below
    # the root mean square of y whenever e (s + e) <= 1.
    return -s + my, m2 / z0 - my * my


def _straddle_moments(s: float, e: float) -> tuple[float, float]:
    """Mean and variance of N(0, 1) on [a, b] = [-e - s, e - s] with a < 0 <= b, wide."""
    a = -e - s
    b = e - s
    z = 0.5 * (_erf(b * _INV_SQRT2) + _erf((e + s) * _INV_SQRT2))
    na = pdf(a)
    nb = pdf(b)
    mean = (na - nb) / z
    var = 1.0 - mean * mean - (b * nb - a * na) / z
    return mean, var


def _tail_moments(s: float, e: float) -> tuple[float, float]:
    """Mean and variance of N(0, 1) on [-e - s, e - s] with e < s: both ends in one tail.

    By symmetry, U = -X lives on [c, c + L], c = s - e > 0, L = 2 e. The one-sided
    truncation U > c is the mixture of U on the interval (weight 1 - rho) and U > c + L
    (weight rho = Phi(-c - L) / Phi(-c)); its mean and variance, from ``_lower_tail``,
    give the interval's by the law of total variance.
    """
    c = s - e
    L = 2.0 * e
    lam1, g1, var1 = _lower_tail(-c)
    lam2, g2, var2 = _lower_tail(-c - L)
    # rho = N(c + L) / N(c) * lam1 / lam2, with N(c + L) / N(c) = exp(-2 e s).
    rho = _exp(-2.0 * e * s) * (lam1 / lam2)
    one_minus_rho = 1.0 - rho
    if rho > 0.25:
        one_minus_rho = -_expm1(-2.0 * e * s + _log(lam1 / lam2))
    # Offsets from c: E[U | U > c] - c = g1, E[U | U > c + L] - c = L + g2.
    delta = (g1 - rho * (L + g2)) / one_minus_rho
    gap = delta - L - g2
    var = (var1 - rho * var2 - rho * one_minus_rho * gap * gap) / one_minus_rho
    return -(c + delta), var


def v_win(t: float, e: float) -> float:
    """The paper's V for a win: N(t - e) / Phi(t - e)."""
    return trunc_win(t, e)[0]


def w_win(t: float, e: float) -> float:
    """The paper's W for a win: V (V + t - e), in [0, 1)."""
    return 1.0 - trunc_win(t, e)[1]


def v_draw(t: float, e: float) -> float:
    """The paper's V for a draw (the two-sided version)."""
    return trunc_draw(t, e)[0]


def w_draw(t: float, e: float) -> float:
    """The paper's W for a draw (the two-sided version), in [0, 1)."""
    return 1.0 - trunc_draw(t, e)[1]
