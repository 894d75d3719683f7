"""Bayesian Plackett-Luce rating: Weng and Lin (2011), Algorithm 4.

R. C. Weng and C.-J. Lin, "A Bayesian Approximation Method for Online Ranking", JMLR 12
(2011) 267-300. Each player's skill is a Gaussian belief N(mu, sigma^2); a team's strength
theta_i is the sum of its players' means and its variance sigma_i^2 the sum of theirs.
The outcome is modelled as a Plackett-Luce ranking of the teams with worths
exp(theta_i / c), and one step of the paper's Bayesian approximation (Stein's lemma on
the log-likelihood) moves every belief:

    c^2      = sum_i (sigma_i^2 + beta^2)                         (Algorithm 4, step 1)
    C_q      = {s : r(s) >= r(q)},  A_q = |{s : r(s) = r(q)}|     (the ties of q)
    p_{i,q}  = exp(theta_i / c) / sum_{s in C_q} exp(theta_s / c)
    Omega_i  = sigma_i^2 / c   * sum_{q : r(q) <= r(i)} (delta_{iq} - p_{i,q}) / A_q
    Delta_i  = gamma_i * sigma_i^2 / c^2 * sum_{q : r(q) <= r(i)} p_{i,q} (1 - p_{i,q}) / A_q
    gamma_i  = sigma_i / c                                        (the paper's suggestion)
    mu_ij    <- mu_ij + sigma_ij^2 / sigma_i^2 * Omega_i
    sigma_ij <- sigma_ij * sqrt(max(1 - sigma_ij^2 / sigma_i^2 * Delta_i, kappa))

Dynamics (the paper's section 3.4): before the match every sigma becomes
sqrt(sigma^2 + tau^2). ``kappa`` is the paper's small positive floor that keeps the
variance factor, and so sigma, positive.

The numbers agree with the ``openskill`` package's ``PlackettLuce`` built with the same
parameters and no other options; where that package departs from the paper the departure
is followed and written down at the method concerned (partial play: ``rate``).

Margin of victory (``openskill``'s ``margin`` option, not in the paper): with scores, each
team's mean in the worths exp(theta_i / c) is moved before the sums are taken,

    theta_i' = theta_i - 1/n_i sum_{q : s_q != s_i} (theta_i - theta_q) (f_iq - 1),

n_i the number of teams whose score differs from team i's and f_iq = log(1 + |s_i - s_q| /
margin) when that difference exceeds the margin, else 1 (``weng_lin.margin_factor``); c,
gamma_i and the final step are unchanged. For two teams the mean difference in the
worths becomes (theta_1 - theta_2)(3 - 2 f): it shrinks as the factor grows, and past
f = 3/2 (a difference above (e^1.5 - 1) margin, about 3.5 margins) it changes sign.

Numerics: the worths are never formed directly (exp(theta/c) overflows for mean gaps of
about 700 c). When all exponents theta/c lie within 600 of each other they are shifted by
the largest one, which leaves every shifted worth a normal float; otherwise every p_{i,q}
is exp(theta_i/c - log sum_{s in C_q} exp(theta_s/c)) with a running log-sum-exp over C_q.
Either way each p lies in [0, 1] for any finite input and every output is finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from app.rating.base import Rating, Teams, Weights
from app.rating.pairwise import LARGE_MATCH_TEAMS, FloatArray, TeamStrengths
from app.rating.weng_lin import PARAMETERS as _FAMILY_PARAMETERS
from app.rating.weng_lin import WengLin, checked_rating

#: The parameters a ladder may set, with the ranges it accepts (``app.rating.params``).
PARAMETERS = _FAMILY_PARAMETERS

_exp = math.exp
_isfinite = math.isfinite
_log = math.log
_sqrt = math.sqrt
_new_rating = tuple.__new__

#: Exponent span below which one shift (by the largest theta/c) keeps every worth a
#: normal float: exp(-600) ~ 1e-261 is far above the smallest normal double (~1e-308).
_SHIFT_SPAN = 600.0


def _two_teams(d: float, drawn: bool) -> tuple[list[float], list[float]]:
    """The sums of Algorithm 4 for two teams, the first placed first (or both tied).

    With d = (theta_1 - theta_2)/c, p = 1/(1 + exp(-d)) is the first team's worth share
    (a logistic, evaluated on the side where exp cannot overflow). A win gives
    omega = (1 - p, -(1 - p)), a draw (one A = 2 group) omega = (1/2 - p, 1/2 - (1 - p));
    delta = p (1 - p) for both teams either way (the loser's second term p=1 adds 0).
    """
    if d >= 0.0:
        t = _exp(-d)
        p1 = 1.0 / (1.0 + t)
        p2 = t / (1.0 + t)
    else:
        t = _exp(d)
        p1 = t / (1.0 + t)
        p2 = 1.0 / (1.0 + t)
    if drawn:
        return [0.5 - p1, 0.5 - p2], [p1 * (1.0 - p1), p2 * (1.0 - p2)]
    return [1.0 - p1, -p2], [p1 * (1.0 - p1), p2 * (1.0 - p2)]


def _many_teams(x: list[float], ranks: list[float] | None) -> tuple[list[float], list[float]]:
    """The sums of Algorithm 4 for k teams with exponents x_i = theta_i / c.

    Returns (omega_i, delta_i) = (1/A_{g(i)} - sum_g p_{i,g}, sum_g p_{i,g} (1 - p_{i,g}))
    over the tie groups g up to team i's own, best first.
    """
    k = len(x)
    # Groups of tied teams, best first; with no ranks each team is its own group.
    groups: list[list[int]]
    if ranks is None:
        groups = [[j] for j in range(k)]
    else:
        order = sorted(range(k), key=ranks.__getitem__)
        groups = []
        last = math.nan
        for j in order:
            if ranks[j] == last:
                groups[-1].append(j)
            else:
                groups.append([j])
                last = ranks[j]
    n_groups = len(groups)
    group_of = [0] * k
    for g, members in enumerate(groups):
        for j in members:
            group_of[j] = g

    omega = [0.0] * k
    delta = [0.0] * k
    xmax = max(x)
    if xmax - min(x) < _SHIFT_SPAN:
        # One shift by the largest exponent keeps every worth a normal float.
        e = [_exp(v - xmax) for v in x]
        suffix = [0.0] * n_groups  # sum over C_q of the shifted worths
        acc = 0.0
        for g in range(n_groups - 1, -1, -1):
            for j in groups[g]:
                acc += e[j]
            suffix[g] = acc
        for i in range(k):
            gi = group_of[i]
            ei = e[i]
            om = 1.0 / len(groups[gi])
            de = 0.0
            for g in range(gi + 1):
                p = ei / suffix[g]
                om -= p
                de += p * (1.0 - p)
            omega[i] = om
            delta[i] = de
        return omega, delta
    # log sum over C_q of exp(theta/c), a running log-sum-exp from the last group up.
    log_suffix = [0.0] * n_groups
    shift = -math.inf
    acc = 0.0
    for g in range(n_groups - 1, -1, -1):
        for j in groups[g]:
            xj = x[j]
            if xj > shift:
                acc = acc * _exp(shift - xj) + 1.0
                shift = xj
            else:
                acc += _exp(xj - shift)
        log_suffix[g] = shift + _log(acc)
    for i in range(k):
        gi = group_of[i]
        xi = x[i]
        om = 1.0 / len(groups[gi])
        de = 0.0
        for g in range(gi + 1):
            p = _exp(xi - log_suffix[g])
            om -= p
            de += p * (1.0 - p)
        omega[i] = om
        delta[i] = de
    return omega, delta


def _margin_means(
    theta: list[float], ranks: list[float], factors: list[list[float]]
) -> list[float]:
    """The team means moved by the margin factors: theta_i minus the mean over the teams q
    with another score of (theta_i - theta_q)(f_iq - 1) (``openskill``'s adjusted mean)."""
    k = len(theta)
    moved = list(theta)
    for i in range(k):
        ti = theta[i]
        ri = ranks[i]
        row = factors[i]
        shift = 0.0
        n = 0
        for q in range(k):
            if ranks[q] != ri:
                shift += (ti - theta[q]) * (row[q] - 1.0)
                n += 1
        if n:
            moved[i] = ti - shift / n
    return moved


def _many_teams_array(x: list[float], ranks: list[float] | None) -> tuple[list[float], list[float]]:
    """``_many_teams`` for a large k, in O(k) array operations instead of O(k * groups).

    With S_g the sum of the worths of tie group g and every later one (C_q of a team of
    group g), p_{i,g} = e_i / S_g, so team i's sums over the groups up to its own, g(i),
    come from two prefix sums over the groups, T1_g = sum_{h <= g} 1 / S_h and
    T2_g = sum_{h <= g} 1 / S_h^2:

        omega_i = 1 / A_g(i) - e_i T1_g(i),
        delta_i = (e_i T1_g(i)-1 - e_i^2 T2_g(i)-1) + p_{i,g(i)} (1 - p_{i,g(i)}),

    the term of its own group, where p can be near 1, taken with 1 - p = (S_g(i) - e_i) /
    S_g(i) formed from the other worths, and the earlier ones (each p (1 - p) >= 0, so
    their rounding residue is floored at 0). Sums are taken in another order than the
    scalar loop: the results agree with it to rounding. The same two branches: worths
    shifted by the largest exponent when the exponents span less than ``_SHIFT_SPAN``,
    else everything in log space (log S_g and log T by running log-sum-exps).
    """
    xs = np.asarray(x, dtype=np.float64)
    k = xs.size
    if ranks is None:
        group = np.arange(k)
    else:
        r = np.asarray(ranks, dtype=np.float64)
        order = np.argsort(r, kind="stable")
        ordered = r[order]
        group = np.empty(k, dtype=np.intp)
        group[order] = np.cumsum(np.concatenate(([False], ordered[1:] != ordered[:-1])))
    size = np.bincount(group).astype(np.float64)
    before = group - 1  # the last earlier group (-1: none)
    xmax = float(xs.max())
    if xmax - float(xs.min()) < _SHIFT_SPAN:
        e = np.exp(xs - xmax)
        worth = np.bincount(group, weights=e, minlength=size.size)
        suffix = np.cumsum(worth[::-1])[::-1]
        inv = 1.0 / suffix
        t1 = np.concatenate((np.cumsum(inv), [0.0]))  # index -1: the empty prefix
        t2 = np.concatenate((np.cumsum(inv * inv), [0.0]))
        own = e / suffix[group]
        later = np.concatenate((suffix[1:], [0.0]))  # the worths of the later groups
        rest = (later[group] + (worth[group] - e)) / suffix[group]
        earlier = np.maximum(e * t1[before] - e * e * t2[before], 0.0)
        omega = 1.0 / size[group] - e * t1[group]
    else:
        by_group = np.argsort(group, kind="stable")
        starts = np.flatnonzero(np.concatenate(([True], np.diff(group[by_group]) != 0)))
        log_worth = np.logaddexp.reduceat(xs[by_group], starts)
        log_suffix = np.logaddexp.accumulate(log_worth[::-1])[::-1]
        lt1 = np.concatenate((np.logaddexp.accumulate(-log_suffix), [-np.inf]))
        lt2 = np.concatenate((np.logaddexp.accumulate(-2.0 * log_suffix), [-np.inf]))
        log_own = xs - log_suffix[group]
        own = np.exp(log_own)
        rest = -np.expm1(log_own)
        earlier = np.maximum(np.exp(xs + lt1[before]) - np.exp(2.0 * xs + lt2[before]), 0.0)
        omega = 1.0 / size[group] - np.exp(xs + lt1[group])
    delta = earlier + own * rest
    out: tuple[list[float], list[float]] = (omega.tolist(), delta.tolist())
    return out


class PlackettLuce(WengLin):
    r"""The Bayesian Plackett-Luce model (Weng and Lin 2011, Algorithm 4).

    Parameters: those of the family (``WengLin``: mu, sigma, beta, tau, kappa,
    limit_sigma, advantage, margin), with the defaults of ``rating-models.md`` section 3.

    Ranks are compared as given. ``openskill`` truncates ranks to integers before
    comparing them (so 0.5 and 0.7 tie there); with integer ranks, or with scores, the
    two agree. Tied teams share one A_q group as in the paper: each tied team is compared
    against the others through the same C_q, so tied teams of different strength still
    move differently (the stronger one loses mean, the weaker gains).

    One degenerate case has no reproducible reference: every team tied with exactly
    equal team means under partial play. The true Omega_i is then exactly 0 (no mean
    moves) and the choice between multiplying and dividing by the weight rests on its
    sign; here it is computed as exactly 0 (multiply), while ``openskill`` takes the
    sign of a rounding residue, so its sigmas there depend on summation order.

    The object is immutable after construction; every method returns new values.
    """

    name: str = "plackett_luce"

    __slots__ = ()

    def rate_1vs1(
        self, winner: Rating, loser: Rating, drawn: bool = False
    ) -> tuple[Rating, Rating]:
        """New (winner, loser) ratings: ``rate([[winner], [loser]])`` (ranks [0, 0] if drawn).

        Two one-player teams make every sum in Algorithm 4 a single term: with
        p = exp(theta_w/c) / (exp(theta_w/c) + exp(theta_l/c)) (a logistic, computed
        without overflow), Omega_w = sigma_w^2/c (1 - p) and Omega_l = -sigma_l^2/c (1 - p)
        for a win; a draw puts both in one A = 2 group, Omega = sigma^2/c (1/2 - p_own).
        """
        mw, sw = checked_rating(winner, "winner")
        ml, sl = checked_rating(loser, "loser")
        tau2 = self._tau2
        vw = sw * sw + tau2
        vl = sl * sl + tau2
        c2 = vw + vl + 2.0 * self._beta2
        c = _sqrt(c2)
        d = (mw - ml) / c
        if d >= 0.0:
            t = _exp(-d)
            pw = 1.0 / (1.0 + t)
            pl = t / (1.0 + t)
        else:
            t = _exp(d)
            pw = t / (1.0 + t)
            pl = 1.0 / (1.0 + t)
        if drawn:
            ow = 0.5 - pw
            ol = 0.5 - pl
            dw = pw * (1.0 - pw)
            dl = pl * (1.0 - pl)
        else:
            ow = 1.0 - pw
            ol = -pl
            dw = pw * (1.0 - pw)
            dl = pl * (1.0 - pl)
        kappa = self._kappa
        c3 = c2 * c
        fw = 1.0 - vw * _sqrt(vw) / c3 * dw
        fl = 1.0 - vl * _sqrt(vl) / c3 * dl
        nw = _sqrt(vw * (fw if fw > kappa else kappa))
        nl = _sqrt(vl * (fl if fl > kappa else kappa))
        if self._limit_sigma:
            nw = min(nw, sw)
            nl = min(nl, sl)
        return (
            _new_rating(Rating, (mw + vw / c * ow, nw)),
            _new_rating(Rating, (ml + vl / c * ol, nl)),
        )

    def _team_steps(
        self,
        theta: list[float],
        var: list[float],
        ranks: list[float] | None,
        factors: list[list[float]] | None = None,
    ) -> tuple[list[float], list[float]]:
        """Algorithm 4's Omega_i / sigma_i^2 and Delta_i / sigma_i^2 per team.

        The sums over q with r(q) <= r(i) run over groups of tied teams: every q in a
        group has the same C_q, so the group's A_q terms add up to one term, giving
        Omega_i = sigma_i^2/c (1/A_{g(i)} - sum_{g <= g(i)} p_{i,g}) and
        Delta_i = gamma_i sigma_i^2/c^2 sum_{g <= g(i)} p_{i,g} (1 - p_{i,g}).

        With margin ``factors`` (the ranks are then the negated scores) the worths use the
        moved means of the module's margin paragraph.
        """
        if factors is not None and ranks is not None:
            theta = _margin_means(theta, ranks, factors)
        k = len(theta)
        c2 = k * self._beta2
        for v in var:
            c2 += v
        c = _sqrt(c2)
        if k == 2:
            if ranks is not None and ranks[0] > ranks[1]:
                omega, delta = _two_teams((theta[1] - theta[0]) / c, False)
                omega.reverse()
                delta.reverse()
            else:
                drawn = ranks is not None and ranks[0] == ranks[1]
                omega, delta = _two_teams((theta[0] - theta[1]) / c, drawn)
        else:
            x = [t / c for t in theta]
            if k > LARGE_MATCH_TEAMS:
                omega, delta = _many_teams_array(x, ranks)
            else:
                omega, delta = _many_teams(x, ranks)
        # gamma_i = sigma_i / c: Delta_i / sigma_i^2 = delta_i sigma_i / c^3.
        c3 = c2 * c
        return [o / c for o in omega], [d * _sqrt(v) / c3 for d, v in zip(delta, var, strict=True)]

    # ------------------------------------------------------------------ predictions

    def win_probabilities(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> list[float]:
        """P(team j finishes first) under the Plackett-Luce model itself, one per team.

        P(j first) = exp(theta_j / c) / sum_i exp(theta_i / c), the first factor of the
        Plackett-Luce likelihood (Weng and Lin 2011, equation (34)) with the same c as
        Algorithm 4: c^2 = sum_i (sigma_i^2 + beta^2). Computed as a softmax shifted by the
        largest exponent (log-sum-exp), so it never overflows; the values sum to 1.
        With partial play, theta_j = sum_i w_i mu_i and sigma_j^2 = sum_i w_i^2 sigma_i^2
        (the raw weights in [0, 1]: a prediction, not the update's rescaled weights).
        Beliefs are used as they are: no dynamics tau is added. A team's advantage adds to
        its theta_j.
        """
        theta, var = self._prediction_sums(teams, weights, advantage)
        c2 = len(teams) * self._beta2
        for v in var:
            c2 += v
        c = _sqrt(c2)
        x = [t / c for t in theta]
        xmax = max(x)
        e = [_exp(v - xmax) for v in x]
        total = math.fsum(e)
        return [v / total for v in e]

    def pair_win_probabilities(self, first: TeamStrengths, second: TeamStrengths) -> FloatArray:
        """P(first[i] beats second[i]) under the Plackett-Luce model of the two teams
        alone, as ``win_probabilities`` computes it: c^2 = 2 beta^2 + sigma_a^2 + sigma_b^2,
        x = theta / c, P = e^(x_a - m) / (e^(x_a - m) + e^(x_b - m)), m the larger x.
        ``team_strengths`` (``WengLin``'s) gives theta_j and sigma_j^2."""
        c = np.sqrt(2.0 * self._beta2 + first.variance + second.variance)
        xa = first.mean / c
        xb = second.mean / c
        top = np.maximum(xa, xb)
        ea = np.exp(xa - top)
        out: FloatArray = ea / (ea + np.exp(xb - top))
        return out
