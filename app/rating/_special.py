"""Special functions of the rating core, elementwise over numpy arrays, without scipy.

Importing ``scipy.special`` cost a process about 27 MB and a second of start-up (the
first ladder, batch or win probability of a fresh worker waited for it), for six
functions. They are here instead:

- ``erf`` and ``erfc`` are the ``math`` module's, applied element by element to arrays
  of fewer than ``LOOP_BELOW`` values: the vectorised updates (``app.rating._vector``)
  then use the very function the scalar updates use. Larger arrays take W. J. Cody's
  rational approximations (the ones of his CALERF routine) evaluated with numpy, within a
  few units in the last place of ``math.erfc`` (6 ulp over the whole range, measured).
- ``ndtr`` (the standard normal CDF) and ``log_ndtr`` (its logarithm, finite far into the
  lower tail, where Phi itself underflows: Laplace's continued fraction below -5).
- ``logsumexp`` and ``expit``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["erf", "erfc", "expit", "log_ndtr", "logsumexp", "ndtr"]

Floats = NDArray[np.float64]

#: Arrays of fewer values go through the ``math`` module element by element (about 50 ns
#: a value); larger ones through the numpy evaluation, whose fixed cost is larger.
LOOP_BELOW = 1024

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

# W. J. Cody, "Rational Chebyshev approximations for the error function", Mathematics of
# Computation 23 (1969) 631-637; the coefficients of his CALERF (netlib specfun): erf on
# |x| <= 0.46875, erfc on 0.46875 < |x| <= 4 and, in 1 / x**2, beyond 4.
_THRESH = 0.46875
_SQRPI = 0.56418958354775628695  # 1 / sqrt(pi)
_A = (
    3.1611237438705656,
    113.864154151050156,
    377.485237685302021,
    3209.37758913846947,
    0.185777706184603153,
)
_B = (23.6012909523441209, 244.024637934444173, 1282.61652607737228, 2844.23683343917062)
_C = (
    0.564188496988670089,
    8.88314979438837594,
    66.1191906371416295,
    298.635138197400131,
    881.95222124176909,
    1712.04761263407058,
    2051.07837782607147,
    1230.33935479799725,
    2.15311535474403846e-8,
)
_D = (
    15.7449261107098347,
    117.693950891312499,
    537.181101862009858,
    1621.38957456669019,
    3290.79923573345963,
    4362.61909014324716,
    3439.36767414372164,
    1230.33935480374942,
)
_P = (
    0.305326634961232344,
    0.360344899949804439,
    0.125781726111229246,
    0.0160837851487422766,
    6.58749161529837803e-4,
    0.0163153871373020978,
)
_Q = (
    2.56852019228982242,
    1.87295284992346047,
    0.527905102951428412,
    0.0605183413124413191,
    0.00233520497626869185,
)


def _exp_minus_square(y: Floats) -> Floats:
    """exp(-y * y) without the rounding error of y * y: y is split at a multiple of 1/16,
    whose square is exact."""
    head = np.trunc(y * 16.0) / 16.0
    out: Floats = np.exp(-head * head) * np.exp(-(y - head) * (y + head))
    return out


def _cody_erfc_large(y: Floats) -> Floats:
    """erfc(y) for y > 4 (down to the subnormal numbers and 0, from 27.3 on); the
    operations in place."""
    ysq = y * y
    np.divide(1.0, ysq, out=ysq)
    num = _P[5] * ysq
    den = ysq.copy()
    for i in range(4):
        num += _P[i]
        num *= ysq
        den += _Q[i]
        den *= ysq
    num += _P[4]
    num *= ysq
    den += _Q[4]
    num /= den
    np.subtract(_SQRPI, num, out=num)
    num /= y
    out: Floats = _exp_minus_square(y)
    out *= num
    return out


def _cody(x: Floats, complement: bool) -> Floats:
    """erf(x), or erfc(x) with ``complement``, of a flat array.

    The small-argument and middle formulas are evaluated over the whole array in place
    (no array per operation, none picked out by a mask) and the right one chosen per
    element; the rare arguments beyond 4 are evaluated apart. Every element takes the
    operations of its own branch in the same order, so the values are those of each
    branch alone.
    """
    y = np.abs(x)
    small = y <= _THRESH
    with np.errstate(all="ignore"):  # each formula outside its own range is not used
        erf_small = _cody_erf_small(x)
        tail = _cody_erfc_middle(y)  # erfc(|x|), NaN for NaN
    large = y > 4.0
    if large.any():
        with np.errstate(invalid="ignore"):  # y = inf: 0 * (0 / inf)
            tail[large] = _cody_erfc_large(y[large])
        tail[np.isinf(y)] = 0.0
    if complement:
        out: Floats = np.where(small, 1.0 - erf_small, np.where(x < 0.0, 2.0 - tail, tail))
        return out
    magnitude = (0.5 - tail) + 0.5
    out = np.where(small, erf_small, np.where(x < 0.0, -magnitude, magnitude))
    return out


def _cody_erf_small(x: Floats) -> Floats:
    """erf(x) for |x| <= 0.46875 (the operations in place: no array per step)."""
    ysq = x * x
    num = _A[4] * ysq
    den = ysq.copy()
    for i in range(3):
        num += _A[i]
        num *= ysq
        den += _B[i]
        den *= ysq
    num += _A[3]
    num *= x
    den += _B[3]
    num /= den
    return num


def _cody_erfc_middle(y: Floats) -> Floats:
    """erfc(y) for 0.46875 < y <= 4 (the operations in place, ``_exp_minus_square``'s
    included)."""
    num = _C[8] * y
    den = y.copy()
    for i in range(7):
        num += _C[i]
        num *= y
        den += _D[i]
        den *= y
    num += _C[7]
    den += _D[7]
    num /= den
    # _exp_minus_square(y), in place.
    head = y * 16.0
    np.trunc(head, out=head)
    head /= 16.0
    square = np.negative(head)
    square *= head
    np.exp(square, out=square)
    rest = y - head
    np.negative(rest, out=rest)
    head += y
    rest *= head
    np.exp(rest, out=rest)
    square *= rest
    square *= num
    return square


def _apply(
    x: ArrayLike, scalar: Callable[[float], float], vector: Callable[[Floats], Floats]
) -> Any:
    """``scalar`` of every element of a small ``x``, ``vector`` of a large one's; float64
    in the shape of ``x`` (a numpy float for a scalar, as a ufunc gives)."""
    values = np.asarray(x, dtype=np.float64)
    flat = values.ravel()
    if flat.size < LOOP_BELOW:
        out = np.fromiter(map(scalar, flat.tolist()), dtype=np.float64, count=flat.size)
    else:
        out = vector(flat)
    return out.reshape(values.shape)[()]


def erf(x: ArrayLike) -> Any:
    """The error function, elementwise."""
    return _apply(x, math.erf, lambda flat: _cody(flat, complement=False))


def erfc(x: ArrayLike) -> Any:
    """The complementary error function ``1 - erf(x)``, elementwise, without cancellation
    for large ``x``."""
    return _apply(x, math.erfc, lambda flat: _cody(flat, complement=True))


def ndtr(z: ArrayLike) -> Any:
    """Phi(z), the standard normal CDF, elementwise."""
    values = np.asarray(z, dtype=np.float64)
    out: Any = 0.5 * erfc(-values * _INV_SQRT2)
    return out


#: Below this z, log Phi(z) comes from Laplace's continued fraction of the Mills ratio,
#: exact to rounding there (forty terms from t = 5 on), as ``app.rating.elo`` computes it.
_LOG_NDTR_TAIL = -5.0


def log_ndtr(z: ArrayLike) -> Any:
    """log Phi(z), elementwise, finite for every finite z.

    Above 0, log1p(-Phi(-z)) keeps the precision of a probability near 1; from -5 to 0,
    log Phi(z); below -5, log Phi(z) = -z^2/2 - log sqrt(2 pi) - log R(-z) with Laplace's
    continued fraction R(t) = t + 1/(t + 2/(t + 3/(t + ...))), evaluated bottom-up.
    """
    values = np.asarray(z, dtype=np.float64)
    flat = values.ravel()
    out = np.empty_like(flat)
    upper = flat > 0.0
    lower = flat < _LOG_NDTR_TAIL
    middle = ~(upper | lower)  # NaN included: log(NaN) is NaN
    if upper.any():
        out[upper] = np.log1p(-ndtr(-flat[upper]))
    if middle.any():
        with np.errstate(divide="ignore"):
            out[middle] = np.log(ndtr(flat[middle]))
    if lower.any():
        zl = flat[lower]
        t = -zl
        frac = t.copy()
        with np.errstate(invalid="ignore"):  # t = inf: inf + n / inf
            for n in range(40, 0, -1):
                frac = t + n / frac
        out[lower] = -0.5 * zl * zl - _LOG_SQRT_2PI - np.log(frac)
    return out.reshape(values.shape)[()]


def logsumexp(a: ArrayLike, axis: int | None = None) -> Any:
    """log(sum(exp(a))) along ``axis`` (all of ``a`` by default), without overflow: the
    largest term is factored out. -inf where every term is -inf."""
    values = np.asarray(a, dtype=np.float64)
    top = np.max(values, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(values - top), axis=axis, keepdims=True)) + top
    if axis is None:
        return out.reshape(())[()]
    return np.squeeze(out, axis=axis)


def expit(x: ArrayLike) -> Any:
    """The logistic function 1 / (1 + exp(-x)), elementwise (0 where exp(-x) overflows)."""
    values = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        out: Any = (1.0 / (1.0 + np.exp(-values)))[()]
    return out
