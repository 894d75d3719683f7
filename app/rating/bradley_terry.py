"""Bayesian Bradley-Terry rating: Weng and Lin (2011), Algorithms 1 (full) and 2 (partial).

R. C. Weng and C.-J. Lin, "A Bayesian Approximation Method for Online Ranking", JMLR 12
(2011) 267-300. Every pair of teams (i, q) is compared as a Bradley-Terry game with worths
exp(theta / c_iq):

    c_iq^2  = sigma_i^2 + sigma_q^2 + 2 beta^2
    p_iq    = exp(theta_i / c_iq) / (exp(theta_i / c_iq) + exp(theta_q / c_iq))
    s       = 1 if i placed above q, 1/2 if tied, 0 below
    Omega_i = sum_q sigma_i^2 / c_iq * (s - p_iq)
    Delta_i = sum_q gamma_iq sigma_i^2 / c_iq^2 * p_iq (1 - p_iq),  gamma_iq = sigma_i / c_iq

over every other team (full pairing, Algorithm 1) or over the teams next to i in the
finishing order (partial pairing, Algorithm 2). The final step and everything else the
family shares is ``app.rating.weng_lin``.

``BradleyTerryPart`` follows the ``openskill`` package's ``BradleyTerryPart`` (so that the
numbers agree), which widens the paper's neighbours: the teams up to ``window_size``
places away in the finishing order (ties in their listed order) count, and the sums are
averaged over them instead of added. ``window_size`` 1 with two teams is the paper's.

Margin of victory (``openskill``'s ``margin`` option, not in the paper): with scores, a
pair whose scores differ by more than the margin is compared on its mean difference
divided by the factor f_iq = log(1 + |s_i - s_q| / margin) (``weng_lin.margin_factor``),
p_iq = 1 / (1 + exp(-(theta_i - theta_q) / f_iq / c_iq)); c_iq, s and gamma_iq are
unchanged. A large win over an expected loser then counts as less expected (p_iq nearer
1/2) and moves both more; a pair differing by the margin or less, or tied, is unchanged.

p_iq is a logistic evaluated on the side where exp cannot overflow, so every output is
finite for finite input.
"""

from __future__ import annotations

import math

import numpy as np

from app.rating.pairwise import LARGE_MATCH_TEAMS, pair_blocks
from app.rating.params import Parameter
from app.rating.weng_lin import PARAMETERS as _FAMILY_PARAMETERS
from app.rating.weng_lin import WengLin, check_window, team_order

__all__ = ["PARAMETERS", "PART_PARAMETERS", "BradleyTerryFull", "BradleyTerryPart"]

#: The parameters of a full-pairing ladder, with the ranges it accepts.
PARAMETERS = _FAMILY_PARAMETERS

#: The largest window a ladder accepts: a match has at most 64 teams.
MAX_WINDOW = 64

WINDOW = Parameter(
    "window_size",
    4.0,
    "Partial pairing: teams up to this many places apart in the result are compared.",
    "",
    1.0,
    float(MAX_WINDOW),
    integer=True,
)

#: The parameters of a partial-pairing ladder.
PART_PARAMETERS = (*_FAMILY_PARAMETERS, WINDOW)

_exp = math.exp
_sqrt = math.sqrt


def _terms(d: float) -> tuple[float, float]:
    """(p, p (1 - p)) for p = 1 / (1 + exp(-d)), without overflow."""
    if d >= 0.0:
        t = _exp(-d)
        p = 1.0 / (1.0 + t)
        return p, p * (t / (1.0 + t))
    t = _exp(d)
    p = t / (1.0 + t)
    return p, p * (1.0 / (1.0 + t))


class BradleyTerryFull(WengLin):
    r"""The Bayesian Bradley-Terry model with full pairing (Weng and Lin, Algorithm 1).

    Parameters: those of the family (``WengLin``: mu, sigma, beta, tau, kappa,
    limit_sigma, advantage, margin) with the defaults of ``rating-models.md`` section 7.
    """

    name: str = "bradley_terry_full"

    __slots__ = ()

    def _team_steps(
        self,
        theta: list[float],
        var: list[float],
        ranks: list[float] | None,
        factors: list[list[float]] | None = None,
    ) -> tuple[list[float], list[float]]:
        """Omega_i / sigma_i^2 = sum_q (s - p_iq) / c_iq and Delta_i / sigma_i^2 =
        sigma_i sum_q p_iq (1 - p_iq) / c_iq^3 over every other team q.

        Each pair is evaluated once: c_qi = c_iq, p_qi = 1 - p_iq (taken from the same
        logistic, without cancellation; f_qi = f_iq) and s_qi = 1 - s_iq; every team still
        adds its terms in the order of q.
        """
        k = len(theta)
        if k > LARGE_MATCH_TEAMS and factors is None:
            return self._team_steps_array(theta, var, ranks)
        two_beta2 = 2.0 * self._beta2
        om = [0.0] * k
        de = [0.0] * k
        for i in range(k):
            ti = theta[i]
            vi = var[i]
            ri = i if ranks is None else ranks[i]
            row = None if factors is None else factors[i]
            for q in range(i + 1, k):
                c2 = vi + var[q] + two_beta2
                c = _sqrt(c2)
                diff = ti - theta[q]
                if row is not None:
                    diff /= row[q]
                d = diff / c
                if d >= 0.0:
                    t = _exp(-d)
                    p = 1.0 / (1.0 + t)
                    pq = t / (1.0 + t)
                else:
                    t = _exp(d)
                    p = t / (1.0 + t)
                    pq = 1.0 / (1.0 + t)
                rq = q if ranks is None else ranks[q]
                s = 1.0 if rq > ri else (0.5 if rq == ri else 0.0)
                om[i] += (s - p) / c
                om[q] += (1.0 - s - pq) / c
                shared = p * pq / (c2 * c)
                de[i] += shared
                de[q] += shared
        return om, [d * _sqrt(v) for d, v in zip(de, var, strict=True)]

    def _team_steps_array(
        self, theta: list[float], var: list[float], ranks: list[float] | None
    ) -> tuple[list[float], list[float]]:
        """``_team_steps`` for many teams: the same terms over blocks of pairs
        (``pair_blocks``), each team's added up over the rows and columns of each block (in
        another order than the scalar loop, so equal to rounding)."""
        k = len(theta)
        t = np.asarray(theta, dtype=np.float64)
        v = np.asarray(var, dtype=np.float64)
        r = np.arange(k, dtype=np.float64) if ranks is None else np.asarray(ranks, np.float64)
        two_beta2 = 2.0 * self._beta2
        om = np.zeros(k)
        de = np.zeros(k)
        for block in pair_blocks(k):
            i, q = block.first, block.second
            c2 = v[i] + v[q] + two_beta2
            c = np.sqrt(c2)
            d = (t[i] - t[q]) / c
            # The logistic on the side where exp cannot overflow, as ``_terms``.
            e = np.exp(-np.abs(d))
            ahead = d >= 0.0
            p = np.where(ahead, 1.0 / (1.0 + e), e / (1.0 + e))
            pq = np.where(ahead, e / (1.0 + e), 1.0 / (1.0 + e))
            s = np.where(r[q] > r[i], 1.0, np.where(r[q] == r[i], 0.5, 0.0))
            keep = block.upper
            om[block.rows] += np.where(keep, (s - p) / c, 0.0).sum(axis=1)
            om[block.cols] += np.where(keep, (1.0 - s - pq) / c, 0.0).sum(axis=0)
            shared = np.where(keep, p * pq / (c2 * c), 0.0)
            de[block.rows] += shared.sum(axis=1)
            de[block.cols] += shared.sum(axis=0)
        out: tuple[list[float], list[float]] = (om.tolist(), (de * np.sqrt(v)).tolist())
        return out


class BradleyTerryPart(WengLin):
    r"""The Bayesian Bradley-Terry model with partial pairing (Weng and Lin, Algorithm 2).

    Parameters: those of the family (``WengLin``) and ``window_size`` (4, ``openskill``'s
    default): the teams up to that many places away in the finishing order are compared,
    and the sums are averaged over them (see the module).
    """

    name: str = "bradley_terry_part"

    __slots__ = ("_window",)

    def __init__(
        self,
        mu: float = 25.0,
        sigma: float = 25.0 / 3.0,
        beta: float = 25.0 / 6.0,
        tau: float = 25.0 / 300.0,
        kappa: float = 1e-4,
        limit_sigma: bool = False,
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
        """The full-pairing sums over the neighbours within the window, averaged."""
        k = len(theta)
        order = team_order(ranks, k)
        two_beta2 = 2.0 * self._beta2
        window = self._window
        step = [0.0] * k
        shrink = [0.0] * k
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
                if qpos == pos:
                    continue
                q = order[qpos]
                c2 = vi + var[q] + two_beta2
                c = _sqrt(c2)
                diff = ti - theta[q]
                if row is not None:
                    diff /= row[q]
                p, pq = _terms(diff / c)
                rq = qpos if ranks is None else ranks[q]
                s = 1.0 if rq > ri else (0.5 if rq == ri else 0.0)
                om += (s - p) / c
                de += pq / (c2 * c)
            n = hi - lo - 1
            step[i] = om / n
            shrink[i] = de * _sqrt(vi) / n
        return step, shrink
