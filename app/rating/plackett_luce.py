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

Numerics: the worths are never formed directly (exp(theta/c) overflows for mean gaps of
about 700 c). When all exponents theta/c lie within 600 of each other they are shifted by
the largest one, which leaves every shifted worth a normal float; otherwise every p_{i,q}
is exp(theta_i/c - log sum_{s in C_q} exp(theta_s/c)) with a running log-sum-exp over C_q.
Either way each p lies in [0, 1] for any finite input and every output is finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.rating.base import (
    Rating,
    RatingInputError,
    Teams,
    Weights,
    check_finite,
    check_positive,
    check_teams,
    check_weights,
    outcome_ranks,
)
from app.rating.params import MAX_LENGTH, MAX_MEAN, MIN_LENGTH, Parameter
from app.rating.quality import match_quality

#: The smallest variance floor a ladder accepts: one match then shrinks a deviation by at
#: most a factor sqrt(1e-12) = 1e-6, so no sigma can fall out of the float range.
MIN_KAPPA = 1e-12

#: The parameters a ladder may set, with the ranges it accepts (``app.rating.params``).
PARAMETERS = (
    Parameter("mu", 25.0, "Prior skill mean of a new player.", "mu_0", -MAX_MEAN, MAX_MEAN),
    Parameter(
        "sigma",
        25.0 / 3.0,
        "Prior skill deviation of a new player.",
        "sigma_0",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "beta",
        25.0 / 6.0,
        "Performance deviation around the skill.",
        "beta",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "tau",
        25.0 / 300.0,
        "Dynamics deviation added before every match (0 turns it off).",
        "tau",
        0.0,
        MAX_LENGTH,
    ),
    Parameter(
        "kappa",
        1e-4,
        "Floor of the variance factor of an update, so sigma stays > 0.",
        "kappa",
        MIN_KAPPA,
        1.0,
        high_open=True,
    ),
)

_exp = math.exp
_isfinite = math.isfinite
_log = math.log
_sqrt = math.sqrt
_new_rating = tuple.__new__

#: Exponent span below which one shift (by the largest theta/c) keeps every worth a
#: normal float: exp(-600) ~ 1e-261 is far above the smallest normal double (~1e-308).
_SHIFT_SPAN = 600.0

#: openskill's partial-play rescaling: each team's weights are mapped linearly onto
#: [_WEIGHT_LOW, _WEIGHT_HIGH] (its ``weight_bounds`` default).
_WEIGHT_LOW = 1.0
_WEIGHT_HIGH = 2.0
#: The range openskill substitutes when every weight in a team is equal.
_WEIGHT_FLAT_RANGE = 0.0001


def _partial_play(weights: list[list[float]]) -> list[list[float]]:
    """Rescale partial-play weights as ``openskill`` does before the update.

    Within each team the smallest weight maps to 1 and the largest to 2, linearly; a team
    whose weights are all equal gets 1 for everyone; a one-player team gets 2 whatever
    its weight. Only the relative play time inside a team matters.
    """
    out: list[list[float]] = []
    span = _WEIGHT_HIGH - _WEIGHT_LOW
    for ws in weights:
        if len(ws) == 1:
            out.append([_WEIGHT_HIGH])
            continue
        lo = min(ws)
        rng = max(ws) - lo
        if rng == 0.0:
            rng = _WEIGHT_FLAT_RANGE
        out.append([(w - lo) / rng * span + _WEIGHT_LOW for w in ws])
    return out


def _checked(rating: Rating, argument: str) -> Rating:
    """A Bayesian rating with finite mu and finite sigma > 0, else the error naming it."""
    if not isinstance(rating, Rating):
        raise RatingInputError(argument, "is not a Rating")
    mu, sigma = rating
    if not _isfinite(mu):
        raise RatingInputError(argument, "mu is not finite")
    if not (_isfinite(sigma) and sigma > 0.0):
        raise RatingInputError(argument, f"sigma must be finite and > 0, got {sigma!r}")
    return rating


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


class PlackettLuce:
    r"""The Bayesian Plackett-Luce model (Weng and Lin 2011, Algorithm 4).

    Parameters (the paper's symbols; defaults as in ``rating-models.md`` section 3):

    - ``mu`` (:math:`\mu_0`, 25): prior mean of a new player.
    - ``sigma`` (:math:`\sigma_0`, 25/3): prior standard deviation of a new player.
    - ``beta`` (:math:`\beta`, 25/6): standard deviation of a performance around the skill.
    - ``tau`` (:math:`\tau`, 25/300): dynamics added before each match,
      sigma' = sqrt(sigma^2 + tau^2); 0 turns it off.
    - ``kappa`` (:math:`\kappa`, 1e-4): floor of the variance factor
      1 - sigma_ij^2 / sigma_i^2 * Delta_i, in (0, 1), so sigma stays > 0 and never grows.

    The object is immutable after construction; every method returns new values.
    """

    name: str = "plackett_luce"

    __slots__ = ("_beta", "_beta2", "_kappa", "_mu", "_sigma", "_tau", "_tau2")

    def __init__(
        self,
        mu: float = 25.0,
        sigma: float = 25.0 / 3.0,
        beta: float = 25.0 / 6.0,
        tau: float = 25.0 / 300.0,
        kappa: float = 1e-4,
    ) -> None:
        self._mu = check_finite("mu", mu)
        self._sigma = check_positive("sigma", sigma)
        self._beta = check_positive("beta", beta)
        self._tau = check_positive("tau", tau, allow_zero=True)
        self._kappa = check_positive("kappa", kappa)
        if self._kappa >= 1.0:
            raise RatingInputError("kappa", f"must be < 1 (a variance floor), got {kappa!r}")
        # Precomputed for the hot path.
        self._beta2 = self._beta * self._beta
        self._tau2 = self._tau * self._tau

    def __repr__(self) -> str:
        return (
            f"PlackettLuce(mu={self._mu!r}, sigma={self._sigma!r}, beta={self._beta!r}, "
            f"tau={self._tau!r}, kappa={self._kappa!r})"
        )

    @property
    def params(self) -> dict[str, float | str]:
        """Every parameter with its value (a fresh dict: changing it changes nothing here)."""
        return {
            "mu": self._mu,
            "sigma": self._sigma,
            "beta": self._beta,
            "tau": self._tau,
            "kappa": self._kappa,
        }

    def rating(self, mu: float | None = None, sigma: float | None = None) -> Rating:
        """The prior N(mu0, sigma0^2) of a new player, or the given mu and sigma (checked)."""
        m = self._mu if mu is None else check_finite("mu", mu)
        s = self._sigma if sigma is None else check_positive("sigma", sigma)
        return Rating(m, s)

    # ------------------------------------------------------------------ the update

    def rate(
        self,
        teams: Teams,
        ranks: Sequence[float] | None = None,
        scores: Sequence[float] | None = None,
        weights: Weights | None = None,
    ) -> list[list[Rating]]:
        """New ratings after one match (Algorithm 4), in the shape of ``teams``.

        ``ranks`` (lower is better, equal is a draw) or ``scores`` (higher is better); with
        neither, teams are listed winner first. Tied teams share one A_q group as in the
        paper: each tied team is compared against the others through the same C_q, so
        tied teams of different strength still move differently (the stronger one loses
        mean, the weaker gains).

        Partial play follows ``openskill`` (so that the numbers agree), not TrueSkill:
        team strengths are unweighted; each team's weights are rescaled onto [1, 2] (see
        ``_partial_play``: a one-player team gets 2, a team of equal weights gets 1), and
        a player's weight w multiplies its mean step and variance reduction when its
        team's Omega_i >= 0, and divides them when Omega_i < 0. Weights that are all 1
        (or omitted) leave the update unweighted; there ``openskill`` would still give a
        one-player team the weight 2 if a weights argument is passed at all.

        Ranks are compared as given. ``openskill`` truncates ranks to integers before
        comparing them (so 0.5 and 0.7 tie there); with integer ranks, or with scores,
        the two agree.

        One degenerate case has no reproducible reference: every team tied with exactly
        equal team means under partial play. The true Omega_i is then exactly 0 (no mean
        moves) and the choice between multiplying and dividing by the weight rests on its
        sign; here it is computed as exactly 0 (multiply), while ``openskill`` takes the
        sign of a rounding residue, so its sigmas there depend on summation order.
        """
        check_teams(teams, bayesian=True)
        k = len(teams)
        r = None if ranks is None and scores is None else outcome_ranks(k, ranks, scores)
        w = check_weights(teams, weights)
        return self._update(teams, r, None if w is None else _partial_play(w))

    def rate_1vs1(
        self, winner: Rating, loser: Rating, drawn: bool = False
    ) -> tuple[Rating, Rating]:
        """New (winner, loser) ratings: ``rate([[winner], [loser]])`` (ranks [0, 0] if drawn).

        Two one-player teams make every sum in Algorithm 4 a single term: with
        p = exp(theta_w/c) / (exp(theta_w/c) + exp(theta_l/c)) (a logistic, computed
        without overflow), Omega_w = sigma_w^2/c (1 - p) and Omega_l = -sigma_l^2/c (1 - p)
        for a win; a draw puts both in one A = 2 group, Omega = sigma^2/c (1/2 - p_own).
        """
        mw, sw = _checked(winner, "winner")
        ml, sl = _checked(loser, "loser")
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
        return (
            _new_rating(Rating, (mw + vw / c * ow, _sqrt(vw * (fw if fw > kappa else kappa)))),
            _new_rating(Rating, (ml + vl / c * ol, _sqrt(vl * (fl if fl > kappa else kappa)))),
        )

    def _update(
        self,
        teams: Teams,
        ranks: list[float] | None,
        weights: list[list[float]] | None,
    ) -> list[list[Rating]]:
        """Algorithm 4 on checked input; ``weights`` already rescaled, ``None`` if unweighted.

        The sums over q with r(q) <= r(i) run over groups of tied teams: every q in a
        group has the same C_q, so the group's A_q terms add up to one term, giving
        Omega_i = sigma_i^2/c (1/A_{g(i)} - sum_{g <= g(i)} p_{i,g}) and
        Delta_i = gamma_i sigma_i^2/c^2 sum_{g <= g(i)} p_{i,g} (1 - p_{i,g}).
        """
        tau2 = self._tau2
        k = len(teams)
        theta = [0.0] * k  # team mean: sum of the players' mu
        var = [0.0] * k  # team variance: sum of the players' sigma^2 + tau^2
        c2 = k * self._beta2
        for j, team in enumerate(teams):
            m = 0.0
            v = 0.0
            for mu, sigma in team:
                m += mu
                v += sigma * sigma + tau2
            theta[j] = m
            var[j] = v
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
            omega, delta = _many_teams([t / c for t in theta], ranks)

        # Per player: mu += s2 * Omega_i / sigma_i^2 and the variance factor
        # 1 - s2 * Delta_i / sigma_i^2, with s2 = sigma^2 + tau^2 and gamma_i = sigma_i / c.
        kappa = self._kappa
        c3 = c2 * c
        out: list[list[Rating]] = []
        for i, team in enumerate(teams):
            a = omega[i] / c
            b = delta[i] * _sqrt(var[i]) / c3
            new_team: list[Rating] = []
            if weights is None:
                for mu, sigma in team:
                    s2 = sigma * sigma + tau2
                    f = 1.0 - s2 * b
                    new_team.append(
                        _new_rating(Rating, (mu + s2 * a, _sqrt(s2 * (f if f > kappa else kappa))))
                    )
            else:
                gain = a >= 0.0
                for (mu, sigma), wt in zip(team, weights[i], strict=True):
                    s2 = sigma * sigma + tau2
                    we = wt if gain else 1.0 / wt
                    f = 1.0 - s2 * b * we
                    new_team.append(
                        _new_rating(
                            Rating, (mu + s2 * a * we, _sqrt(s2 * (f if f > kappa else kappa)))
                        )
                    )
            out.append(new_team)
        return out

    # ------------------------------------------------------------------ predictions

    def win_probabilities(self, teams: Teams, weights: Weights | None = None) -> list[float]:
        """P(team j finishes first) under the Plackett-Luce model itself, one per team.

        P(j first) = exp(theta_j / c) / sum_i exp(theta_i / c), the first factor of the
        Plackett-Luce likelihood (Weng and Lin 2011, equation (34)) with the same c as
        Algorithm 4: c^2 = sum_i (sigma_i^2 + beta^2). Computed as a softmax shifted by the
        largest exponent (log-sum-exp), so it never overflows; the values sum to 1.
        With partial play, theta_j = sum_i w_i mu_i and sigma_j^2 = sum_i w_i^2 sigma_i^2
        (the raw weights in [0, 1]: a prediction, not the update's rescaled weights).
        Beliefs are used as they are: no dynamics tau is added.
        """
        check_teams(teams, bayesian=True)
        w = check_weights(teams, weights)
        c2 = len(teams) * self._beta2
        theta: list[float] = []
        for j, team in enumerate(teams):
            m = 0.0
            v = 0.0
            if w is None:
                for mu, sigma in team:
                    m += mu
                    v += sigma * sigma
            else:
                for (mu, sigma), wt in zip(team, w[j], strict=True):
                    m += wt * mu
                    v += wt * wt * sigma * sigma
            theta.append(m)
            c2 += v
        c = _sqrt(c2)
        x = [t / c for t in theta]
        xmax = max(x)
        e = [_exp(v - xmax) for v in x]
        total = math.fsum(e)
        return [v / total for v in e]

    def quality(self, teams: Teams, weights: Weights | None = None) -> float:
        """How balanced the match is, in (0, 1]: the TrueSkill paper's match quality.

        Equation 7 generalised to any teams (``rating-models.md`` section 1, computed by
        ``quality.match_quality``) with this model's beta: the Gaussian performances
        N(sum w mu, sum w^2 (sigma^2 + beta^2)) of the teams, compared as a draw. Weng and
        Lin's model defines no quality of its own; this one ranks matches the same way for
        every Gaussian model. Beliefs are used as they are: no dynamics tau is added.
        """
        check_teams(teams, bayesian=True)
        return match_quality(teams, check_weights(teams, weights), self._beta)

    def draw_probability(self, teams: Teams, weights: Weights | None = None) -> float | None:
        """``None``: the Plackett-Luce model has no draw margin, so it gives no draw chance.

        Ties are still rated (they share an A_q group in Algorithm 4); the model just
        assigns them no probability of their own.
        """
        check_teams(teams, bayesian=True)
        check_weights(teams, weights)
        return None
