"""Match quality and win probabilities for Gaussian team performances.

Shared by every model. Definitions: ``rating-models.md`` section 1, "Match quality" (the
TrueSkill paper's equation 7, generalised to any teams) and "Win probabilities".

Quality is always computed on the team model the same model's win probabilities use, so a
quality of 1 means even chances and a lower quality means chances further from even:

- ``match_quality``: team performance is the SUM of the players' performances,
  N(sum w mu, sum w^2 (sigma^2 + beta^2)); TrueSkill and Plackett-Luce rate and predict
  with team sums.
- ``entrant_quality``: each team plays as ONE entrant with a known rating R_j (Elo: the
  weight-averaged mean of its members) and performance N(R_j, beta^2).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from app.rating import _special
from app.rating.base import (
    RatingInputError,
    RatingModel,
    Teams,
    Weights,
    check_advantage,
    check_positive,
    check_teams,
    check_weights,
)
from app.rating.gaussian import cdf

__all__ = [
    "MIN_TEAM_VARIANCE",
    "QUALITY_FLOOR",
    "PredictedRank",
    "entrant_quality",
    "gaussian_win_probabilities",
    "match_quality",
    "predict_rank",
    "ranks_from_pairwise",
]

#: The smallest quality returned: the smallest positive normal float. A quality below it
#: (teams hundreds of standard deviations apart) is reported as this value, never as 0.
QUALITY_FLOOR = sys.float_info.min

#: The smallest team performance variance accepted. Below it a team's performance is
#: treated as known exactly, which the model cannot express (its precision would overflow
#: the arithmetic); such input is rejected rather than rated.
MIN_TEAM_VARIANCE = 1e-150

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def match_quality(
    teams: Teams,
    weights: list[list[float]] | None,
    beta: float,
    offsets: Sequence[float] | None = None,
) -> float:
    """The paper's match quality (equation 7, generalised), in (0, 1].

    ``rating-models.md`` section 1: with A the (players x (k-1)) matrix of signed partial-play
    weights w_i of adjacent teams, mu the skill means, S = diag(sigma_i^2) and beta the
    performance deviation,

        q = sqrt(det(beta^2 A'A) / det(beta^2 A'A + A'SA))
            * exp(-1/2 mu'A (beta^2 A'A + A'SA)^-1 A'mu).

    Both matrices are covariances of the k-1 differences of independent team variables
    (team j with variance B_j = beta^2 sum w^2, resp. V_j = B_j + sum w^2 sigma^2), so,
    exactly, det = prod_j V_j * sum_j 1/V_j (Cauchy-Binet: every (k-1)-minor of the
    difference operator is +-1) and the quadratic form is sum_j (m_j - m_bar)^2 / V_j with
    m_j = sum w mu and m_bar the 1/V-weighted mean of the m_j. That is evaluated in log
    space in O(players), so it neither overflows nor underflows for 64 teams; for 1 vs 1
    it is equation 7: sqrt(2 beta^2 / c^2) exp(-(mu_1 - mu_2)^2 / (2 c^2)),
    c^2 = 2 beta^2 + sigma_1^2 + sigma_2^2.

    ``offsets`` (the teams' advantages) add to the team means m_j.

    A quality that underflows is returned as ``QUALITY_FLOOR`` (the smallest positive
    normal float). Raises ``RatingInputError`` for invalid teams, weights or beta, and for a
    team whose weights are all 0 (its performance would be known exactly, q undefined) or
    whose beta^2 sum w^2 is below ``MIN_TEAM_VARIANCE``.
    """
    check_teams(teams, bayesian=True)
    ws = check_weights(teams, weights)
    beta = check_positive("beta", beta)
    beta2 = beta * beta
    k = len(teams)
    b = [0.0] * k
    v = [0.0] * k
    m = [0.0] * k
    for j, team in enumerate(teams):
        sw2 = ss = sm = 0.0
        if ws is None:
            for mu, sigma in team:
                sw2 += 1.0
                ss += sigma * sigma
                sm += mu
        else:
            for (mu, sigma), w in zip(team, ws[j], strict=True):
                w2 = w * w
                sw2 += w2
                ss += w2 * sigma * sigma
                sm += w * mu
        if sw2 == 0.0:
            raise RatingInputError("weights", f"every weight of team {j} is 0")
        if beta2 * sw2 < MIN_TEAM_VARIANCE:
            raise RatingInputError(
                "weights" if ws is not None else "beta",
                f"team {j}'s performance variance is below {MIN_TEAM_VARIANCE!r}",
            )
        b[j] = beta2 * sw2
        v[j] = b[j] + ss
        m[j] = sm if offsets is None else sm + offsets[j]
    if k == 2:
        vt = v[0] + v[1]
        d = m[0] - m[1]
        log_q = 0.5 * math.log((b[0] + b[1]) / vt) - 0.5 * d * d / vt
    else:
        inv_v = [1.0 / x for x in v]
        sum_inv_v = math.fsum(inv_v)
        m_bar = math.fsum(mj * iv for mj, iv in zip(m, inv_v, strict=True)) / sum_inv_v
        quad = math.fsum((mj - m_bar) ** 2 * iv for mj, iv in zip(m, inv_v, strict=True))
        log_det_ratio = (
            math.fsum(math.log(bj / vj) for bj, vj in zip(b, v, strict=True))
            + math.log(math.fsum(1.0 / bj for bj in b))
            - math.log(sum_inv_v)
        )
        log_q = 0.5 * log_det_ratio - 0.5 * quad
    if log_q >= 0.0:
        return 1.0
    q = math.exp(log_q)
    return q if q >= QUALITY_FLOOR else QUALITY_FLOOR


_LOG_QUALITY_FLOOR = math.log(QUALITY_FLOOR)


def entrant_quality(ratings: Sequence[float], beta: float) -> float:
    """Equation 7 generalised, for k entrants of known ratings R_j and performances
    N(R_j, beta^2), in (0, 1]:

        q = exp(-sum_j (R_j - R_bar)^2 / (2 beta^2)),   R_bar the plain mean of the R_j.

    It is ``match_quality`` with one player per team and every sigma 0 (all variances
    equal, so the determinant ratio is 1 and the weighted mean is the plain one). For two
    entrants q = exp(-(R_1 - R_2)^2 / (4 beta^2)) = exp(-z^2 / 2) with z = (R_1 - R_2) /
    (sqrt 2 beta), the argument of the Gaussian win probability Phi(z): q is a decreasing
    function of |P(1 beats 2) - 1/2|. Gaps are divided by beta before squaring, so nothing
    underflows; a quality below the smallest normal float is ``QUALITY_FLOOR``.
    """
    beta = check_positive("beta", beta)
    k = len(ratings)
    if k < 2:
        raise RatingInputError("teams", f"a match needs at least two teams, got {k}")
    for x in ratings:
        if not math.isfinite(x):
            raise RatingInputError("teams", f"every team rating must be finite, got {x!r}")
    r_bar = math.fsum(ratings) / k
    scaled = [(x - r_bar) / beta for x in ratings]
    log_q = -0.5 * math.fsum(y * y for y in scaled)  # y * y: inf, never OverflowError
    if log_q >= 0.0:
        return 1.0
    if log_q < _LOG_QUALITY_FLOOR:
        return QUALITY_FLOOR
    return math.exp(log_q)


# Per-team breakpoints for the k > 2 integral, in standard deviations from the team mean:
# one-deviation panels through the bulk, coarser ones out to where the density underflows.
_GRID = np.concatenate(
    [
        np.array([-38.0, -30.0, -24.0, -18.0, -14.0]),
        np.arange(-10.0, 10.5, 1.0),
        np.array([14.0, 18.0, 24.0, 30.0, 38.0]),
    ]
)
#: Below max_i(m_i - _REACH s_i) some team's Phi factor is below Phi(-38) ~ 1e-316.
_REACH = 38.0
_GL_X, _GL_W = np.polynomial.legendre.leggauss(6)
# Bound standardised arguments so that squares and log Phi stay finite.
_Z_CLIP = 1e100


def gaussian_win_probabilities(means: Sequence[float], variances: Sequence[float]) -> list[float]:
    """P(team j has the highest performance) for independent N(means[j], variances[j]).

    ``rating-models.md`` section 1, "Win probabilities": for two teams
    P(1 beats 2) = Phi((m_1 - m_2) / sqrt(s_1^2 + s_2^2)); for k > 2 teams
    P_j = int N(x; m_j, s_j^2) prod_{i != j} Phi((x - m_i) / s_i) dx, by composite
    6-point Gauss-Legendre quadrature on panels laid out on every team's own scale
    (one standard deviation wide through the bulk), summed in log space (log N + sum of
    log Phi, combined with log-sum-exp) so that far tails do not underflow. The result is
    normalised to sum to 1 and is finite for every finite input with variances > 0.
    Raises ``RatingInputError`` ("means" or "variances") otherwise.
    """
    k = len(means)
    if len(variances) != k:
        raise RatingInputError(
            "variances", f"expected {k} values (one per team), got {len(variances)}"
        )
    if k == 0:
        raise RatingInputError("means", "no teams")
    for x in means:
        if not math.isfinite(x):
            raise RatingInputError("means", f"every mean must be finite, got {x!r}")
    for x in variances:
        if not (math.isfinite(x) and x > 0.0):
            raise RatingInputError("variances", f"every variance must be finite and > 0, got {x!r}")
    if k == 1:
        return [1.0]
    if k == 2:
        z = (means[0] - means[1]) / math.sqrt(variances[0] + variances[1])
        p0 = cdf(z)
        p1 = cdf(-z)
        total = p0 + p1
        return [p0 / total, p1 / total]
    m = np.asarray(means, dtype=float)
    s = np.sqrt(np.asarray(variances, dtype=float))
    lo = float(np.max(m - _REACH * s))
    hi = float(np.max(m + _REACH * s))
    pts = (m[:, None] + s[:, None] * _GRID[None, :]).ravel()
    pts = np.unique(np.concatenate([pts[(pts > lo) & (pts < hi)], [lo, hi]]))
    if pts.size < 2:
        # Every scale is below the resolution of the means: the performances are
        # indistinguishable in floating point.
        return [1.0 / k] * k
    half = 0.5 * (pts[1:] - pts[:-1])
    mid = 0.5 * (pts[1:] + pts[:-1])
    x = (mid[:, None] + half[:, None] * _GL_X[None, :]).ravel()
    with np.errstate(divide="ignore"):  # a sub-interval narrower than the smallest float
        log_w = np.log((half[:, None] * _GL_W[None, :]).ravel())  # weighs nothing (-inf)
    z = np.clip((x[None, :] - m[:, None]) / s[:, None], -_Z_CLIP, _Z_CLIP)
    log_phi = _special.log_ndtr(z)
    log_all = log_phi.sum(axis=0)
    log_pdf = -0.5 * z * z - np.log(s)[:, None] - _LOG_SQRT_2PI
    log_p = _special.logsumexp(log_pdf + (log_all[None, :] - log_phi) + log_w[None, :], axis=1)
    p = np.exp(log_p - _special.logsumexp(log_p))
    p /= p.sum()
    return [float(v) for v in p]


class PredictedRank(NamedTuple):
    """One team's predicted place: ``rank`` 1 is first (equal chances share a rank, the
    next rank skipping as many places) and the ``probability`` the place rests on."""

    rank: int
    probability: float


def ranks_from_pairwise(table: Sequence[Sequence[float]]) -> list[PredictedRank]:
    """A predicted finishing order from pairwise win probabilities, one entry per team.

    ``table[i][j]`` is P(team i beats team j) (the diagonal is ignored). Team i's
    probability is the mean of its row, normalised over the teams so they sum to 1
    (the construction of ``openskill``'s ``predict_rank``); teams are ranked by it, highest
    first, and teams with exactly equal probabilities share a rank ("1, 1, 3").
    """
    k = len(table)
    means: list[float] = []
    for i, row in enumerate(table):
        total = 0.0
        for j in range(k):
            if j != i:
                total += row[j]
        means.append(total / (k - 1))
    norm = sum(means)
    probs = [p / norm for p in means] if norm > 0.0 else [1.0 / k] * k
    order = sorted(range(k), key=lambda i: -probs[i])
    ranks = [0] * k
    current = 1
    for place, i in enumerate(order):
        if place and probs[i] < probs[order[place - 1]]:
            current = place + 1
        ranks[i] = current
    return [PredictedRank(r, p) for r, p in zip(ranks, probs, strict=True)]


def predict_rank(
    model: RatingModel,
    teams: Teams,
    weights: Weights | None = None,
    advantage: Sequence[float] | None = None,
) -> list[PredictedRank]:
    """The predicted finishing order of ``teams`` under ``model``, one entry per team.

    A model with a ``predict_rank`` method of its own (the Weng-Lin models: openskill's
    definition) answers with it. Any other model gets the same construction from its own
    win probabilities: P(i beats j) is ``model.win_probabilities`` of the two teams alone
    (with their weights and advantages), and ``ranks_from_pairwise`` turns the table into
    ranks.
    """
    own = getattr(model, "predict_rank", None)
    if callable(own):
        result: list[PredictedRank] = own(teams, weights, advantage)
        return result
    k = len(teams)
    if k < 2:
        raise RatingInputError("teams", f"a match needs at least two teams, got {k}")
    if weights is not None and len(weights) != k:
        raise RatingInputError("weights", f"expected {k} teams of weights, got {len(weights)}")
    shares = check_advantage(k, advantage)
    table = [[0.0] * k for _ in range(k)]
    for i in range(k):
        for j in range(i + 1, k):
            pair_weights = None if weights is None else [weights[i], weights[j]]
            pair_shares = None if shares is None else [shares[i], shares[j]]
            p_i, p_j = model.win_probabilities([teams[i], teams[j]], pair_weights, pair_shares)
            table[i][j] = p_i
            table[j][i] = p_j
    return ranks_from_pairwise(table)
