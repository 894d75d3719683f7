"""Bayesian Thurstone-Mosteller rating: Weng and Lin (2011), Algorithm 3 (full pairing) and
its partial-pairing form.

R. C. Weng and C.-J. Lin, "A Bayesian Approximation Method for Online Ranking", JMLR 12
(2011) 267-300. Every pair of teams (i, q) is compared as a Thurstone-Mosteller game, a
Gaussian performance difference with a draw margin epsilon:

    c_iq^2  = sigma_i^2 + sigma_q^2 + 2 beta^2,   x = (theta_i - theta_q) / c_iq,
    t       = epsilon / c_iq
    i above q:  Omega_i += sigma_i^2 / c_iq V(x, t),    Delta_i += g W(x, t)
    i below q:  Omega_i -= sigma_i^2 / c_iq V(-x, t),   Delta_i += g W(-x, t)
    tied:       Omega_i += sigma_i^2 / c_iq V~(x, t),   Delta_i += g W~(x, t)
    g = gamma_iq sigma_i^2 / c_iq^2,  gamma_iq = sigma_i / c_iq

with the paper's V(x, t) = N(x - t) / Phi(x - t), W = V (V + x - t) and their two-sided
draw forms V~, W~ (section 3, equations (50)-(53)). The final step and everything else the
family shares is ``app.rating.weng_lin``.

V, W, V~ and W~ are the TrueSkill paper's truncated-Gaussian functions of
``app.rating.gaussian`` (the same definitions), accurate in both tails and with W in
[0, 1), so no comparison can grow a variance. This is where the numbers part from the
``openskill`` package, on purpose, and only far in the tails: openskill evaluates
Phi(x) as (1 + erf(x / sqrt 2)) / 2, which has lost half its digits by x = -7 and all of
them by x = -8.1 (where its W reaches 10 and a surprised player's sigma collapses to the
kappa floor), cuts V and W off to -(x - t) and [x < 0] below that, and replaces V~ by the
straight line -x +- t once the draw mass is below 1e-5 (for the default parameters a draw
between teams about 3.4 c_iq apart, where that line is off by about 1/|x|). Away from
those regions the two agree to 1e-9.

Margin of victory (``openskill``'s ``margin`` option, not in the paper): with scores, a
pair whose scores differ by more than the margin is compared at x / f_iq, f_iq =
log(1 + |s_i - s_q| / margin) (``weng_lin.margin_factor``), with the same t = epsilon /
c_iq, c_iq and gamma_iq; a pair differing by the margin or less, or tied, is unchanged.

``ThurstoneMostellerPart`` follows ``openskill``'s ``ThurstoneMostellerPart``: the teams up
to ``window_size`` places away in the finishing order are compared (ties in their listed
order), the sums are averaged over them, c_iq is twice the full-pairing one, and a team
whose Omega_i is exactly 0 divides by its players' partial-play weights.
"""

from __future__ import annotations

import math

import numpy as np

from app.rating.base import check_positive
from app.rating.bradley_terry import WINDOW
from app.rating.gaussian import trunc_draw, trunc_win
from app.rating.pairwise import LARGE_MATCH_TEAMS, pair_blocks
from app.rating.params import MAX_LENGTH, Parameter
from app.rating.weng_lin import PARAMETERS as _FAMILY_PARAMETERS
from app.rating.weng_lin import WengLin, check_window, team_order

__all__ = ["PARAMETERS", "PART_PARAMETERS", "ThurstoneMostellerFull", "ThurstoneMostellerPart"]

EPSILON = Parameter(
    "epsilon",
    0.1,
    "Draw margin of a comparison: performances closer than this draw.",
    "epsilon",
    0.0,
    MAX_LENGTH,
)

#: The parameters of a full-pairing ladder, with the ranges it accepts.
PARAMETERS = (*_FAMILY_PARAMETERS, EPSILON)
#: The parameters of a partial-pairing ladder.
PART_PARAMETERS = (*_FAMILY_PARAMETERS, EPSILON, WINDOW)

_sqrt = math.sqrt


class ThurstoneMostellerFull(WengLin):
    r"""The Bayesian Thurstone-Mosteller model with full pairing (Weng and Lin, Algorithm 3).

    Parameters: those of the family (``WengLin``: mu, sigma, beta, tau, kappa,
    limit_sigma, advantage, margin) and ``epsilon`` (:math:`\epsilon`, 0.1): the draw
    margin of a comparison.
    """

    name: str = "thurstone_mosteller_full"

    __slots__ = ("_epsilon",)

    #: The factor of c_iq (``ThurstoneMostellerPart`` doubles it) and the averaging.
    _C_FACTOR: float = 1.0

    def __init__(
        self,
        mu: float = 25.0,
        sigma: float = 25.0 / 3.0,
        beta: float = 25.0 / 6.0,
        tau: float = 25.0 / 300.0,
        kappa: float = 1e-4,
        limit_sigma: bool = False,
        epsilon: float = 0.1,
        advantage: float = 0.0,
        *,
        margin: float = 0.0,
        stat_scale: float = 0.0,
        stat_noise: float = 1.0,
        stat_spread: float = 0.0,
    ) -> None:
        super().__init__(
            mu,
            sigma,
            beta,
            tau,
            kappa,
            limit_sigma,
            advantage=advantage,
            margin=margin,
            stat_scale=stat_scale,
            stat_noise=stat_noise,
            stat_spread=stat_spread,
        )
        self._epsilon = check_positive("epsilon", epsilon, allow_zero=True)

    @property
    def params(self) -> dict[str, float | str]:
        """Every parameter with its value (a fresh dict: changing it changes nothing here)."""
        return {**super().params, "epsilon": self._epsilon}

    def _pair(
        self, ti: float, vi: float, ri: float, tq: float, vq: float, rq: float, f: float = 1.0
    ) -> tuple[float, float]:
        """The terms of one comparison: (Omega_i / sigma_i^2, Delta_i / sigma_i^3); ``f``
        the pair's margin factor."""
        c2 = vi + vq + 2.0 * self._beta2
        c = _sqrt(c2) * self._C_FACTOR
        x = (ti - tq) / c
        if f != 1.0:
            x /= f
        t = self._epsilon / c
        if rq > ri:
            v, one_minus_w = trunc_win(x, t)
        elif rq < ri:
            v, one_minus_w = trunc_win(-x, t)
            v = -v
        else:
            v, one_minus_w = trunc_draw(x, t)
        return v / c, (1.0 - one_minus_w) / (c * c * c)

    def _team_steps(
        self,
        theta: list[float],
        var: list[float],
        ranks: list[float] | None,
        factors: list[list[float]] | None = None,
    ) -> tuple[list[float], list[float]]:
        """Sum the comparisons with every other team q.

        Each pair is evaluated once: q's comparison with i is i's seen from the other
        side, V(-x) of the opposite outcome = -V(x) and the same W (V~ odd, W~ even;
        f_qi = f_iq).
        """
        k = len(theta)
        if k > LARGE_MATCH_TEAMS and factors is None:
            return self._team_steps_array(theta, var, ranks)
        om = [0.0] * k
        de = [0.0] * k
        pair = self._pair
        for i in range(k):
            ti = theta[i]
            vi = var[i]
            ri = i if ranks is None else ranks[i]
            row = None if factors is None else factors[i]
            for q in range(i + 1, k):
                rq = q if ranks is None else ranks[q]
                f = 1.0 if row is None else row[q]
                a, b = pair(ti, vi, ri, theta[q], var[q], rq, f)
                om[i] += a
                om[q] -= a
                de[i] += b
                de[q] += b
        return om, [d * _sqrt(v) for d, v in zip(de, var, strict=True)]

    def _team_steps_array(
        self, theta: list[float], var: list[float], ranks: list[float] | None
    ) -> tuple[list[float], list[float]]:
        """``_team_steps`` for many teams: ``_pair``'s terms over blocks of pairs
        (``pair_blocks``) with the truncated-Gaussian V and W elementwise
        (``app.rating._vector``, the same branches as ``app.rating.gaussian``), each
        team's added up over the rows and columns of each block (in another order than
        the scalar loop, so equal to rounding)."""
        from app.rating import _vector

        k = len(theta)
        t = np.asarray(theta, dtype=np.float64)
        v = np.asarray(var, dtype=np.float64)
        r = np.arange(k, dtype=np.float64) if ranks is None else np.asarray(ranks, np.float64)
        om = np.zeros(k)
        de = np.zeros(k)
        for block in pair_blocks(k):
            i, q = block.first, block.second
            c = np.sqrt(v[i] + v[q] + 2.0 * self._beta2) * self._C_FACTOR
            x = (t[i] - t[q]) / c
            e = self._epsilon / c
            # A loss is the win of the other side: V(-x) negated, the same W.
            sign = np.where(r[q] < r[i], -1.0, 1.0)
            step, one_minus_w = _vector.trunc_win(sign * x, e)
            step = sign * step
            drawn = r[q] == r[i]
            if drawn.any():
                step[drawn], one_minus_w[drawn] = _vector.trunc_draw(x[drawn], e[drawn])
            keep = block.upper
            a = np.where(keep, step / c, 0.0)
            b = np.where(keep, (1.0 - one_minus_w) / (c * c * c), 0.0)
            om[block.rows] += a.sum(axis=1)
            om[block.cols] -= a.sum(axis=0)
            de[block.rows] += b.sum(axis=1)
            de[block.cols] += b.sum(axis=0)
        out: tuple[list[float], list[float]] = (om.tolist(), (de * np.sqrt(v)).tolist())
        return out


class ThurstoneMostellerPart(ThurstoneMostellerFull):
    r"""The Bayesian Thurstone-Mosteller model with partial pairing (``openskill``'s form).

    Parameters: those of ``ThurstoneMostellerFull`` and ``window_size`` (4): the teams up
    to that many places away in the finishing order are compared, the sums averaged over
    them, with c_iq doubled (see the module).
    """

    name: str = "thurstone_mosteller_part"
    _ZERO_STEP_GAINS = False
    _C_FACTOR = 2.0

    __slots__ = ("_window",)

    def __init__(
        self,
        mu: float = 25.0,
        sigma: float = 25.0 / 3.0,
        beta: float = 25.0 / 6.0,
        tau: float = 25.0 / 300.0,
        kappa: float = 1e-4,
        limit_sigma: bool = False,
        epsilon: float = 0.1,
        window_size: float = 4,
        advantage: float = 0.0,
        *,
        margin: float = 0.0,
        stat_scale: float = 0.0,
        stat_noise: float = 1.0,
        stat_spread: float = 0.0,
    ) -> None:
        super().__init__(
            mu,
            sigma,
            beta,
            tau,
            kappa,
            limit_sigma,
            epsilon,
            advantage=advantage,
            margin=margin,
            stat_scale=stat_scale,
            stat_noise=stat_noise,
            stat_spread=stat_spread,
        )
        self._window = check_window(window_size)

    @property
    def params(self) -> dict[str, float | str]:
        """Every parameter with its value (a fresh dict: changing it changes nothing here)."""
        return {**super().params, "window_size": float(self._window)}

    def _team_steps(
        self,
        theta: list[float],
        var: list[float],
        ranks: list[float] | None,
        factors: list[list[float]] | None = None,
    ) -> tuple[list[float], list[float]]:
        """The comparisons with the neighbours within the window, averaged."""
        k = len(theta)
        order = team_order(ranks, k)
        window = self._window
        step = [0.0] * k
        shrink = [0.0] * k
        pair = self._pair
        for pos, i in enumerate(order):
            ti = theta[i]
            vi = var[i]
            ri = pos if ranks is None else ranks[i]
            row = None if factors is None else factors[i]
            om = 0.0
            de = 0.0
            lo = pos - window if pos > window else 0
            hi = pos + window + 1 if pos + window + 1 < k else k
            for qpos in range(lo, hi):
                if qpos != pos:
                    q = order[qpos]
                    rq = qpos if ranks is None else ranks[q]
                    f = 1.0 if row is None else row[q]
                    a, b = pair(ti, vi, ri, theta[q], var[q], rq, f)
                    om += a
                    de += b
            n = hi - lo - 1
            step[i] = om / n
            shrink[i] = de * _sqrt(vi) / n
        return step, shrink
