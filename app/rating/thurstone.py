"""The Thurstonian order likelihood: log P(order) and its gradient by forward-backward integration.

Kerby's note, section 3 ("Gaussian version"): entrants perform X_i ~ N(m_i, 1) independently
and the observed finishing order o_1 (winner), ..., o_n (last) is the event
X_{o_1} > X_{o_2} > ... > X_{o_n}. Its probability is a nested one-dimensional integral:

    F_n(x) = Phi(x - m_{o_n})                         (the last placed is below x)
    F_j(x) = int_{-inf}^{x} f_{o_j}(y) F_{j+1}(y) dy  (places n .. j in order, all below x)
    P(order) = F_1(+inf)

and, from the winner down, B_1(x) = Phi(m_{o_1} - x), B_j(x) = int_x^{inf} f_{o_j}(y) B_{j-1}(y) dy.
The posterior density of X_{o_j} given the order is proportional to
f_{o_j}(x) F_{j+1}(x) B_{j-1}(x), and since d/dm log N(x; m, 1) = x - m,

    d log P(order) / d m_k = E[X_k | order] - m_k.

Kerby warns that P(order) underflows in double precision; every function here is held as
its logarithm. A cumulative integral is built segment by segment assuming log f is linear
on each grid segment (exact for exponential tails however steep, so far-apart ratings cost
nothing in accuracy), accumulated with ``logaddexp``; the O(h^2) error of that rule is
removed by Romberg extrapolation over four grid steps (h, h/2, h/4, h/8).

The grid covers, for every entrant, +-``WIDTH`` standard deviations around its isotonic fit
(pool adjacent violators of the means under the observed order): that fit is the posterior
mode, and the posterior is 1-strongly log-concave, so the mass outside is negligible
(below e^-50 relative) however far apart the ratings are.

Two integrators share this structure:

- The spectral one (``method="spectral"``, the default path): one grid of Chebyshev-Lobatto
  points on [min m - ``SPECTRAL_WIDTH``, max m + ``SPECTRAL_WIDTH``] (every isotonic fit, hence
  every posterior mode, lies within [min m, max m]), ``SPECTRAL_DENSITY`` points per
  standard deviation; a cumulative integral is one product with the precomputed Chebyshev
  integration matrix (interpolate by the polynomial through the points, integrate it
  exactly), spectrally accurate for these smooth integrands. F_j and B_j are held as
  plain probabilities (at most 1) with places, orders and grid points as array axes;
  the only Python loop is over places, two array operations a step. It needs no fine
  grid, but a value far below the maximum of its function on the same grid is held only
  to absolute precision, and a probability below the smallest double is lost. Every
  place's posterior gives its own estimate of log P and the exact gradient sums to zero;
  an order whose place estimates of log P disagree by more than ``SELF_CHECK`` or whose
  gradient sums to more than ``SELF_CHECK`` is recomputed by the log-space integrator.
  Measured against the log-space integrator on 300 random orders of 3-12 entrants with
  means of spread 0.3-1.5, the 89% that pass the check agree to within 1e-10 in the
  gradient (the median far closer); a strong upset (means several deviations apart
  against the order) fails the check and takes the slow path. Replaying the Halo 2
  free-for-all file with Elo (beta 200), 4 of 164,718 orders failed it.
- The log-space one (below; ``step`` and ``levels`` select it), exact for far-apart
  ratings whatever the order.

Units: performance standard deviation 1; callers divide ratings by beta.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from app.rating import _special

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: Half-width of the grid around each isotonic fit, in performance standard deviations.
WIDTH = 12.0
#: The coarsest grid step (standard deviations); each further level halves it.
STEP = 0.08
#: Grid levels combined by Romberg extrapolation (errors c2 h^2 + c4 h^4 + ... removed in turn).
LEVELS = 4
#: Upper bound on orders x grid points x entrants held at once (memory, about 8 bytes each).
_CHUNK_CELLS = 2_000_000

#: Spectral grid: half-width beyond the extreme means (posterior mass outside < e^-32).
SPECTRAL_WIDTH = 8.0
#: Spectral grid: Chebyshev points per performance standard deviation of the interval.
SPECTRAL_DENSITY = 8.0
#: Spectral grid: the most points; a wider spread of means takes the log-space integrator.
SPECTRAL_MAX_POINTS = 384
#: Largest disagreement of the place estimates of log P (and largest gradient sum) accepted.
SELF_CHECK = 1e-10

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def isotonic_fit(means: Sequence[float], order: Sequence[int]) -> list[float]:
    """The posterior mode of the performances given the order: pool adjacent violators.

    Returns, per position of ``order`` (winner first), the least-squares fit to
    ``means[order[j]]`` that is non-increasing in j.
    """
    blocks: list[list[float]] = []  # [sum, count]
    for k in order:
        blocks.append([float(means[k]), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    fit: list[float] = []
    for s, c in blocks:
        fit.extend([s / c] * int(c))
    return fit


def _grid(centres: Sequence[float], step: float) -> FloatArray:
    """Uniform points of spacing ``step`` over the union of [c - WIDTH, c + WIDTH]."""
    cs = sorted(centres)
    intervals: list[list[float]] = []
    for c in cs:
        lo, hi = c - WIDTH, c + WIDTH
        # Bands closer than one deviation merge, so every gap left is wider than any step.
        if intervals and lo <= intervals[-1][1] + 1.0:
            intervals[-1][1] = hi
        else:
            intervals.append([lo, hi])
    parts = []
    for lo, hi in intervals:
        n = math.ceil((hi - lo) / step - 1e-9)
        parts.append(lo + step * np.arange(n + 1, dtype=np.float64))
    return np.concatenate(parts)


def _log_segment_factor(d: FloatArray) -> FloatArray:
    """log((1 - e^-d) / d) for d >= 0: the log-linear segment integral, less max and width."""
    small = d < 1e-6
    safe = np.where(small, 1.0, d)
    out: FloatArray = np.where(small, -0.5 * d, np.log(-np.expm1(-safe) / safe))
    return out


def _log_cumulative(lg: FloatArray, log_widths: FloatArray, log_start: FloatArray) -> FloatArray:
    """log of int_{-inf}^{x_j} e^{lg} for every grid point x_j, along the last axis.

    ``log_start`` is the log of the mass left of the first point; each segment's integral
    assumes lg linear on it: width * (e^a - e^b) / (a - b).
    """
    a = lg[..., :-1]
    b = lg[..., 1:]
    seg = np.maximum(a, b) + log_widths + _log_segment_factor(np.abs(a - b))
    out: FloatArray = np.logaddexp.accumulate(
        np.concatenate([log_start[..., None], seg], axis=-1), axis=-1
    )
    return out


def _log_tail(lg: FloatArray, widths: FloatArray) -> FloatArray:
    """log of the mass beyond the first point, as an exponential tail (negligible by design)."""
    slope = (lg[..., 1] - lg[..., 0]) / widths[0]
    out: FloatArray = lg[..., 0] - np.log(np.maximum(slope, 1.0))
    return out


def _sweep(means: FloatArray, orders: IntArray, x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """log P(order) and the gradient for a chunk of orders on one grid (one step size)."""
    n_orders, n = orders.shape
    widths = np.diff(x)
    log_widths = np.log(widths)
    rev_widths = widths[::-1]
    rev_log_widths = log_widths[::-1]
    m = means[orders]  # (orders, n), winner first

    def log_f(j: int) -> FloatArray:
        """log N(x; m_{o_j}, 1) on the grid, one row per order."""
        d = x[None, :] - m[:, j, None]
        out: FloatArray = -0.5 * d * d - _LOG_SQRT_2PI
        return out

    # Forward, from the last placed up: log_fwd[:, j] = log F_{j+1}, the places below j.
    log_fwd = np.empty((n_orders, n, x.size))
    log_fwd[:, n - 1] = 0.0
    log_fwd[:, n - 2] = _special.log_ndtr(x[None, :] - m[:, n - 1, None])
    for j in range(n - 2, 0, -1):
        lg = log_f(j) + log_fwd[:, j]
        log_fwd[:, j - 1] = _log_cumulative(lg, log_widths, _log_tail(lg, widths))

    # Backward, from the winner down, with the posterior of each place on the way.
    log_bwd = np.zeros((n_orders, x.size))
    expectation = np.empty((n_orders, n))
    log_p = np.empty((n_orders, n))
    for j in range(n):
        lf = log_f(j)
        post = lf + log_fwd[:, j] + log_bwd
        top = post.max(axis=-1, keepdims=True)
        w = np.exp(post - top)
        xw = w * x
        mass = (0.5 * (w[:, :-1] + w[:, 1:]) * widths).sum(axis=-1)
        expectation[:, j] = (0.5 * (xw[:, :-1] + xw[:, 1:]) * widths).sum(axis=-1) / mass
        log_p[:, j] = top[:, 0] + np.log(mass)
        if j == 0:
            log_bwd = _special.log_ndtr(m[:, 0, None] - x[None, :])
        elif j < n - 1:
            lg = (lf + log_bwd)[:, ::-1]
            # Integrate from +inf down: the same rule on the mirrored grid.
            log_bwd = _log_cumulative(lg, rev_log_widths, _log_tail(lg, rev_widths))[:, ::-1]
    grad_by_place = expectation - m
    grad = np.zeros((n_orders, n))
    np.put_along_axis(grad, orders, grad_by_place, axis=1)
    # Every place gives an estimate of log P (the same integral); average them.
    return log_p.mean(axis=1), grad


@lru_cache(maxsize=32)
def _chebyshev(points: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Chebyshev-Lobatto nodes t on [-1, 1] (ascending) and their integration matrices.

    With a = V^-1 g the Chebyshev coefficients of the interpolant of g (V_in = T_n(t_i)),
    int_{-1}^{t_i} T_n = [T_{n+1}/(n+1) - T_{n-1}/(n-1)]/2 evaluated from -1 (n >= 2),
    t + 1 (n = 0) and (t^2 - 1)/2 (n = 1). Returns t, the transposed cumulative matrix
    (g @ it = int_{-1}^{t_i} g), the transposed tail matrix (int_{t_i}^{1} g) and the
    Clenshaw-Curtis weights (int_{-1}^{1} g = g @ weights).
    """
    n = points - 1
    theta = np.pi * np.arange(points)[::-1] / n
    t = np.cos(theta)
    degree = np.arange(points)
    vander = np.cos(np.outer(theta, degree))  # T_n(cos theta) = cos(n theta)
    cum = np.empty((points, points))
    cum[:, 0] = t + 1.0
    cum[:, 1] = 0.5 * (t * t - 1.0)
    k = degree[2:]
    up = np.cos(np.outer(theta, k + 1)) / (k + 1)
    down = np.cos(np.outer(theta, k - 1)) / (k - 1)
    sign = (-1.0) ** k  # T_{k+1}(-1) = T_{k-1}(-1) = (-1)^(k+1)
    cum[:, 2:] = 0.5 * (up - down) - 0.5 * (-sign / (k + 1) + sign / (k - 1))
    q = cum @ np.linalg.inv(vander)
    weights = q[-1].copy()
    tail = weights[None, :] - q
    return t, np.ascontiguousarray(q.T), np.ascontiguousarray(tail.T), weights


def _spectral_points(m: FloatArray) -> int:
    """The number of Chebyshev points the spectral integrator lays for centred means m."""
    length = float(m.max() - m.min()) + 2.0 * SPECTRAL_WIDTH
    return 16 * math.ceil(SPECTRAL_DENSITY * length / 16.0) + 1


def _spectral(m: FloatArray, orders: IntArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """log P(order), the gradient and the self-check residual, on the Chebyshev grid.

    F_j and B_j of the module docstring are held as they are (probabilities, at most 1),
    place by place along the first axis so that every step is two array operations. An
    order whose probability underflows gives a non-finite residual; one where a value
    far below its function's maximum matters gives place estimates that disagree. The
    residual of an order is the larger of the spread of its place estimates of log P and
    |sum of its gradient|.
    """
    rows, n = orders.shape
    t, cum_t, tail_t, weights = _chebyshev(_spectral_points(m))
    lo = float(m.min()) - SPECTRAL_WIDTH
    half = 0.5 * (float(m.max()) + SPECTRAL_WIDTH - lo)
    x = lo + half * (t + 1.0)
    mo = m[orders].T  # (n, rows): place j, winner first
    d = x - mo[:, :, None]
    f = np.exp(-0.5 * d * d)
    f *= _INV_SQRT_2PI  # (n, rows, points): N(x; m_{o_j}, 1)
    fh = f * half  # dx = half dt on [-1, 1]
    work = np.empty((rows, t.size))
    fwd = np.empty_like(f)  # fwd[j] = F_{j+1}, the places below j in order and below x
    fwd[n - 1] = 1.0
    fwd[n - 2] = _special.ndtr(d[n - 1])
    for j in range(n - 2, 0, -1):
        np.multiply(fh[j], fwd[j], out=work)
        np.matmul(work, cum_t, out=fwd[j - 1])
    bwd = np.empty_like(f)  # bwd[j] = B_{j-1}, the places above j in order and above x
    bwd[0] = 1.0
    bwd[1] = _special.ndtr(-d[0])
    for j in range(1, n - 1):
        np.multiply(fh[j], bwd[j], out=work)
        np.matmul(work, tail_t, out=bwd[j + 1])
    post = f * fwd
    post *= bwd
    mass = post @ (weights * half)  # (n, rows): P(order), once per place
    expectation = (post @ (weights * (half * x))) / mass
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p_places = np.log(mass)
    grad = np.empty((rows, n))
    grad[np.arange(rows)[:, None], orders] = (expectation - mo).T
    spread = log_p_places.max(axis=0) - log_p_places.min(axis=0)
    residual = np.maximum(spread, np.abs(grad.sum(axis=1)))
    residual[~np.isfinite(residual)] = np.inf
    return log_p_places.sum(axis=0) / n, grad, residual


def _romberg(values: list[FloatArray]) -> FloatArray:
    """Romberg extrapolation of results on steps h, h/2, h/4, ... with even-power errors."""
    table = list(values)
    factor = 4.0
    while len(table) > 1:
        table = [(factor * fine - coarse) / (factor - 1.0) for coarse, fine in pairwise(table)]
        factor *= 4.0
    return table[0]


def _centres(m: FloatArray, o: IntArray) -> list[float]:
    """Every entrant's isotonic fit under every order: where the grid is laid."""
    centres: set[float] = set()
    for row in o.tolist():
        centres.update(round(c, 6) for c in isotonic_fit(m.tolist(), row))
    return sorted(centres)


def _checked(
    means: Sequence[float] | FloatArray, orders: Sequence[Sequence[int]] | IntArray
) -> tuple[FloatArray, IntArray]:
    m = np.asarray(means, dtype=np.float64)
    o = np.asarray(orders, dtype=np.intp)
    if o.ndim != 2 or o.shape[1] != m.size or m.size < 2:
        raise ValueError("orders must be rows of a permutation of at least two entrants")
    # Centre the ratings: the likelihood is shift invariant and the grid stays near zero.
    return m - float(m.mean()), o


#: The widest gap between adjacent means (sorted) the integrators see, in performance
#: deviations. A grid point far from zero is held only to its ulp: gaps of 1e15 deviations
#: (ratings 1e9 apart over a beta of 1e-6) would leave grid steps of 0.01 below it, and
#: the integral would be 0 / 0. A wider gap is narrowed to this one: an upset across it
#: has probability below e^-2.5e7 either way, and the order's likelihood and gradient
#: are those of entrants ``MAX_GAP`` apart (a finite step where the exact one, about the
#: gap itself, means nothing). With at most 64 entrants the grid then stays within
#: +-3.2e5, where its steps keep ten significant digits.
MAX_GAP = 1e4


def _narrowed(m: FloatArray) -> FloatArray:
    """``m`` with every gap between adjacent sorted means above ``MAX_GAP`` narrowed to it."""
    if float(m.max() - m.min()) <= MAX_GAP:
        return m
    order = np.argsort(m, kind="stable")
    gaps = np.minimum(np.diff(m[order]), MAX_GAP)
    out = np.empty_like(m)
    out[order] = np.concatenate([[0.0], np.cumsum(gaps)])
    centred: FloatArray = out - float(out.mean())
    return centred


def grid_cells(
    means: Sequence[float] | FloatArray,
    orders: Sequence[Sequence[int]] | IntArray,
    *,
    step: float = STEP,
    levels: int = LEVELS,
) -> int:
    """The work of the log-space integrator: orders x entrants x grid points, over all levels."""
    m, o = _checked(means, orders)
    if m.size == 2:
        return 0
    m = _narrowed(m)
    centres = _centres(m, o)
    points = sum(_grid(centres, step / 2.0**level).size for level in range(levels))
    return int(o.shape[0] * m.size * points)


def order_log_likelihood(
    means: Sequence[float] | FloatArray,
    orders: Sequence[Sequence[int]] | IntArray,
    *,
    step: float | None = None,
    levels: int | None = None,
) -> tuple[FloatArray, FloatArray]:
    """log P(order) and d log P(order) / d m for each order, unit performance variance.

    ``means``: m_i, one per entrant (in units of the performance standard deviation).
    ``orders``: each row a permutation of the entrants, winner first.
    ``step``, ``levels``: given, the log-space integrator with that coarsest grid step and
    number of Romberg levels; left out, the spectral integrator, with the log-space one
    (``STEP``, ``LEVELS``) for the orders that fail its self-check or whose means are
    spread too wide for ``SPECTRAL_MAX_POINTS``. The log-space defaults give about 1e-10
    (absolute, in the gradient) for a few entrants and 1e-8 for 64; the spectral
    integrator about 1e-11 where it is accepted (measured against finer grids and
    against quadrature in the tests). With three or more entrants, gaps between adjacent
    means wider than ``MAX_GAP`` are narrowed to it first (``_narrowed``).
    Returns ``(log_p, grad)`` with shapes (orders,) and (orders, entrants).
    """
    m, o = _checked(means, orders)
    if m.size == 2:
        # Closed form: P = Phi((m_w - m_l) / sqrt 2); its gradient through the Mills ratio.
        z = (m[o[:, 0]] - m[o[:, 1]]) / math.sqrt(2.0)
        log_p = _special.log_ndtr(z)
        v = np.exp(-0.5 * z * z - _LOG_SQRT_2PI - log_p) / math.sqrt(2.0)
        grad = np.zeros((o.shape[0], 2))
        np.put_along_axis(grad, o, np.stack([v, -v], axis=1), axis=1)
        return np.asarray(log_p, dtype=np.float64), grad
    m = _narrowed(m)
    if step is None and levels is None and _spectral_points(m) <= SPECTRAL_MAX_POINTS:
        rows, n = o.shape
        chunk = max(1, _CHUNK_CELLS // (_spectral_points(m) * n))
        if rows <= chunk:
            log_p, grad, residual = _spectral(m, o)
        else:
            parts = [_spectral(m, o[start : start + chunk]) for start in range(0, rows, chunk)]
            log_p = np.concatenate([part[0] for part in parts])
            grad = np.concatenate([part[1] for part in parts])
            residual = np.concatenate([part[2] for part in parts])
        bad = residual > SELF_CHECK
        if bad.any():
            log_p[bad], grad[bad] = _log_space(m, o[bad], STEP, LEVELS)
        # The exact gradient sums to zero: project the quadrature error off that direction.
        return log_p, grad - grad.sum(axis=1, keepdims=True) / n
    return _log_space(m, o, STEP if step is None else step, LEVELS if levels is None else levels)


def _log_space(
    m: FloatArray, o: IntArray, step: float, levels: int
) -> tuple[FloatArray, FloatArray]:
    """The log-space integrator: Romberg over ``levels`` grids from step ``step`` down."""
    centres = _centres(m, o)
    grids = [_grid(centres, step / 2.0**level) for level in range(levels)]
    log_p = np.empty(o.shape[0])
    grad = np.empty(o.shape, dtype=np.float64)
    chunk = max(1, _CHUNK_CELLS // (grids[-1].size * m.size))
    for start in range(0, o.shape[0], chunk):
        part = o[start : start + chunk]
        sweeps = [_sweep(m, part, x) for x in grids]
        lp = _romberg([s[0] for s in sweeps])
        g = _romberg([s[1] for s in sweeps])
        log_p[start : start + chunk] = lp
        # The exact gradient sums to zero (the likelihood is shift invariant): project the
        # quadrature error off that direction so updates built on it stay zero-sum.
        grad[start : start + chunk] = g - g.mean(axis=1, keepdims=True)
    return log_p, grad
