"""What the Bayesian models of Weng and Lin (2011) share.

R. C. Weng and C.-J. Lin, "A Bayesian Approximation Method for Online Ranking", JMLR 12
(2011) 267-300. Every model of the family keeps a Gaussian belief N(mu, sigma^2) per
player, rates a team i by theta_i = sum of its players' means and sigma_i^2 = sum of
their variances, widens every belief by the dynamics tau first (section 3.4), computes per
team the two sums of its algorithm,

    Omega_i  (the mean step of the team)   and   Delta_i  (its variance reduction),

and moves every player j of team i by the same final step (Algorithms 1 to 4, the end):

    mu_ij    <- mu_ij + sigma_ij^2 / sigma_i^2 * Omega_i
    sigma_ij <- sigma_ij * sqrt(max(1 - sigma_ij^2 / sigma_i^2 * Delta_i, kappa)).

Only Omega_i and Delta_i differ between the algorithms (``WengLin._team_steps``); the
team aggregation, the outcome (ranks, scores, ties), partial play, the dynamics, kappa,
``limit_sigma``, the margin of victory's factors (``WengLin.margin_factors``) and the
predictions live here once.

The numbers agree with the ``openskill`` package's models of the same names built with the
same parameters; where that package departs from the paper the departure is followed and
written down where it applies (partial play: ``partial_play``; predictions: the methods).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from app.rating import _special
from app.rating.base import (
    Evidence,
    PlayerScores,
    Rating,
    RatingInputError,
    Teams,
    Weights,
    check_finite,
    check_positive,
    check_teams,
    check_weights,
    outcome_ranks,
    statistic_evidence,
    team_offsets,
)
from app.rating.gaussian import ppf
from app.rating.pairwise import FloatArray, TeamStrengths
from app.rating.params import (
    ADVANTAGE,
    MAX_LENGTH,
    MAX_MEAN,
    MIN_LENGTH,
    Parameter,
    statistic_parameters,
)
from app.rating.quality import PredictedRank, match_quality, ranks_from_pairwise

__all__ = ["MARGIN", "MIN_KAPPA", "PARAMETERS", "WengLin", "margin_factor", "partial_play"]

#: The smallest variance floor a ladder accepts: one match then shrinks a deviation by at
#: most a factor sqrt(1e-12) = 1e-6, so no sigma can fall out of the float range.
MIN_KAPPA = 1e-12

#: The largest margin of victory a ladder accepts, in the units of its scores.
MAX_MARGIN = 1e6

MARGIN = Parameter(
    "margin",
    0.0,
    "Score difference beyond which a win counts as impressive: a pair of teams whose "
    "scores differ by D > margin enters the update with the factor log(1 + D / margin) "
    "(openskill's option; only matches given with scores; 0 turns it off).",
    "",
    0.0,
    MAX_MARGIN,
)

#: The parameters every model of the family has, with the ranges a ladder accepts.
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
    Parameter(
        "limit_sigma",
        False,
        "If true, no sigma ends a match above its value before it (the dynamics included).",
        "",
        boolean=True,
    ),
    ADVANTAGE,
    MARGIN,
    *statistic_parameters(),
)

_sqrt = math.sqrt
_log = math.log
_log1p = math.log1p
_LN2 = math.log(2.0)
_isfinite = math.isfinite
_erfc = math.erfc
_new_rating = tuple.__new__
_INV_SQRT2 = 1.0 / math.sqrt(2.0)

#: openskill's partial-play rescaling: each team's weights are mapped linearly onto
#: [_WEIGHT_LOW, _WEIGHT_HIGH] (its ``weight_bounds`` default).
_WEIGHT_LOW = 1.0
_WEIGHT_HIGH = 2.0
#: The range openskill substitutes when every weight in a team is equal.
_WEIGHT_FLAT_RANGE = 0.0001


def partial_play(weights: list[list[float]]) -> list[list[float]]:
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


def margin_factor(a: float, b: float, margin: float) -> float:
    """``openskill``'s factor of a pair of teams with scores (or ranks) a and b: log(1 + D /
    margin) when their difference D = |a - b| exceeds ``margin`` > 0, else 1.

    Between margin and (e - 1) margin the factor is below 1 (log 2 just past the margin),
    beyond it above 1. Where D / margin leaves the float range (a tiny margin, or scores of
    opposite sign near the float limit) log1p(x) equals log(x) to the last bit, computed
    from halved scores so that D itself cannot overflow: every factor is finite, at most
    about 1455.
    """
    d = abs(a - b)
    if not d > margin:
        return 1.0
    x = d / margin
    if x < math.inf:
        return _log1p(x)
    return _log(abs(0.5 * a - 0.5 * b)) + _LN2 - _log(margin)


def checked_rating(rating: Rating, argument: str) -> Rating:
    """A Bayesian rating with finite mu and finite sigma > 0, else the error naming it."""
    if not isinstance(rating, Rating):
        raise RatingInputError(argument, "is not a Rating")
    mu, sigma = rating
    if not _isfinite(mu):
        raise RatingInputError(argument, "mu is not finite")
    if not (_isfinite(sigma) and sigma > 0.0):
        raise RatingInputError(argument, f"sigma must be finite and > 0, got {sigma!r}")
    return rating


def _cdf(x: float) -> float:
    return 0.5 * _erfc(-x * _INV_SQRT2)


class WengLin(ABC):
    r"""The shared part of the Weng-Lin models; a subclass gives ``_team_steps``.

    Parameters (the paper's symbols; defaults as in ``rating-models.md`` sections 3, 7):

    - ``mu`` (:math:`\mu_0`, 25): prior mean of a new player.
    - ``sigma`` (:math:`\sigma_0`, 25/3): prior standard deviation of a new player.
    - ``beta`` (:math:`\beta`, 25/6): standard deviation of a performance around the skill.
    - ``tau`` (:math:`\tau`, 25/300): dynamics added before each match,
      sigma' = sqrt(sigma^2 + tau^2); 0 turns it off.
    - ``kappa`` (:math:`\kappa`, 1e-4): floor of the variance factor
      1 - sigma_ij^2 / sigma_i^2 * Delta_i, in (0, 1), so sigma stays > 0.
    - ``limit_sigma`` (false): when true a player's sigma after the match is at most its
      sigma before it, dynamics included (``openskill``'s option of that name).
    - ``advantage`` (0): what a team with a full advantage share adds to its team mean
      theta_j, in the update, the quality and every prediction (not in ``openskill``).
    - ``margin`` (0: off): ``openskill``'s margin of victory. When a match is given with
      scores, each pair of teams i, q whose scores differ by D > margin enters the update
      with the factor f_iq = log(1 + D / margin) (``margin_factor``): the pairwise models
      divide the pair's mean difference by it, Plackett-Luce moves each team's mean
      (``PlackettLuce._team_steps``). Ranks alone, ties and differences up to the margin
      change nothing.
    - ``stat_scale`` (0: off), ``stat_noise`` and ``stat_spread``: each player's own
      statistic in the match (``player_scores``), standardised, read as z_i = stat_scale
      (p_i - c) + N(0, stat_noise^2) (``base.statistic_evidence``). The family's update
      already treats each match's likelihood on its own; the evidence is one more such
      likelihood, N(e_i; s_i, beta^2 + r) with e_i = c + z_i / stat_scale and r =
      (stat_noise / stat_scale)^2, taken after the team update as the exact Gaussian
      (Kalman) update of the skill: mu_i += v_i (e_i - mu_i) / (v_i + beta^2 + r),
      v_i *= (beta^2 + r) / (v_i + beta^2 + r).

    The object is immutable after construction; every method returns new values.
    """

    name: str = ""
    #: Whether a team whose Omega_i is exactly 0 multiplies by the partial-play weight
    #: (``True``) or divides by it (``False``; see ``_apply``).
    _ZERO_STEP_GAINS: bool = True

    __slots__ = (
        "_advantage",
        "_beta",
        "_beta2",
        "_kappa",
        "_limit_sigma",
        "_margin",
        "_mu",
        "_sigma",
        "_stat_noise",
        "_stat_scale",
        "_stat_spread",
        "_tau",
        "_tau2",
    )

    def __init__(
        self,
        mu: float = 25.0,
        sigma: float = 25.0 / 3.0,
        beta: float = 25.0 / 6.0,
        tau: float = 25.0 / 300.0,
        kappa: float = 1e-4,
        limit_sigma: bool = False,
        *,
        advantage: float = 0.0,
        margin: float = 0.0,
        stat_scale: float = 0.0,
        stat_noise: float = 1.0,
        stat_spread: float = 0.0,
    ) -> None:
        self._mu = check_finite("mu", mu)
        self._sigma = check_positive("sigma", sigma)
        self._beta = check_positive("beta", beta)
        self._tau = check_positive("tau", tau, allow_zero=True)
        self._kappa = check_positive("kappa", kappa)
        if self._kappa >= 1.0:
            raise RatingInputError("kappa", f"must be < 1 (a variance floor), got {kappa!r}")
        if not isinstance(limit_sigma, bool):
            raise RatingInputError("limit_sigma", f"must be true or false, got {limit_sigma!r}")
        self._limit_sigma = limit_sigma
        self._advantage = check_finite("advantage", advantage)
        self._margin = check_positive("margin", margin, allow_zero=True)
        self._stat_scale = check_positive("stat_scale", stat_scale, allow_zero=True)
        self._stat_noise = check_positive("stat_noise", stat_noise)
        self._stat_spread = check_positive("stat_spread", stat_spread, allow_zero=True)
        # Precomputed for the hot path.
        self._beta2 = self._beta * self._beta
        self._tau2 = self._tau * self._tau

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    @property
    def params(self) -> dict[str, float | str]:
        """Every parameter with its value (a fresh dict: changing it changes nothing here)."""
        return {
            "mu": self._mu,
            "sigma": self._sigma,
            "beta": self._beta,
            "tau": self._tau,
            "kappa": self._kappa,
            "limit_sigma": self._limit_sigma,
            "advantage": self._advantage,
            "margin": self._margin,
            "stat_scale": self._stat_scale,
            "stat_noise": self._stat_noise,
            "stat_spread": self._stat_spread,
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
        advantage: Sequence[float] | None = None,
        player_scores: PlayerScores | None = None,
    ) -> list[list[Rating]]:
        """New ratings after one match, in the shape of ``teams``.

        ``ranks`` (lower is better, equal is a draw) or ``scores`` (higher is better); with
        neither, teams are listed winner first. Ranks are compared as given.

        Partial play follows ``openskill`` (so that the numbers agree), not TrueSkill:
        team strengths are unweighted; each team's weights are rescaled onto [1, 2] (see
        ``partial_play``: a one-player team gets 2, a team of equal weights gets 1), and
        a player's weight w multiplies its mean step and variance reduction when its
        team's Omega_i >= 0, and divides them when Omega_i < 0. Weights that are all 1
        (or omitted) leave the update unweighted; there ``openskill`` would still give a
        one-player team the weight 2 if a weights argument is passed at all.

        ``advantage``: each team's share; ``advantage`` times it is added to theta_j.

        With a ``margin`` > 0 and ``scores``, the pairs of teams whose scores differ by
        more than the margin enter with their factors (``margin_factors``); the advantage
        moves the team means first, so the margin acts on the moved means.
        """
        check_teams(teams, bayesian=True)
        k = len(teams)
        r = None if ranks is None and scores is None else outcome_ranks(k, ranks, scores)
        w = check_weights(teams, weights)
        offsets = team_offsets(self._advantage, k, advantage)
        # With scores the ranks are the negated scores: |r_i - r_q| is the score difference.
        factors = None if scores is None or r is None else self.margin_factors(r)
        evidence = statistic_evidence(
            teams, player_scores, self._stat_scale, self._stat_noise, self._stat_spread
        )
        new = self._update(teams, r, None if w is None else partial_play(w), offsets, factors)
        return new if evidence is None else self._observe(new, evidence)

    def _observe(self, teams: list[list[Rating]], evidence: Evidence) -> list[list[Rating]]:
        """The skills after the evidence N(p_i; e_i, r) on each performance p_i ~ N(s_i,
        beta^2): the Gaussian update of s_i by e_i observed with variance beta^2 + r."""
        beta2 = self._beta2
        out = []
        for team, row in zip(teams, evidence, strict=True):
            new = []
            for rating, found in zip(team, row, strict=True):
                if found is None:
                    new.append(rating)
                    continue
                precision, shifted = found
                v = rating.sigma * rating.sigma
                # e observed with variance beta^2 + 1 / pi, times pi above and below.
                total = precision * (v + beta2) + 1.0
                new.append(
                    Rating(
                        rating.mu + v * (shifted - precision * rating.mu) / total,
                        math.sqrt(v * (precision * beta2 + 1.0) / total),
                    )
                )
            out.append(new)
        return out

    def margin_factors(self, scores: Sequence[float]) -> list[list[float]] | None:
        """The factor f_iq of every pair of teams for these scores (``margin_factor``), a
        symmetric table with 1 on the diagonal; ``None`` when the margin is off or no pair
        differs by more than it (then every factor is 1 and the update is the plain one).
        """
        m = self._margin
        if m == 0.0:
            return None
        k = len(scores)
        table: list[list[float]] | None = None
        for i in range(k):
            si = scores[i]
            for q in range(i + 1, k):
                if abs(si - scores[q]) > m:
                    if table is None:
                        table = [[1.0] * k for _ in range(k)]
                    f = margin_factor(si, scores[q], m)
                    table[i][q] = f
                    table[q][i] = f
        return table

    def rate_1vs1(
        self, winner: Rating, loser: Rating, drawn: bool = False
    ) -> tuple[Rating, Rating]:
        """New (winner, loser) ratings: ``rate([[winner], [loser]])`` (ranks [0, 0] if drawn)."""
        w = checked_rating(winner, "winner")
        l = checked_rating(loser, "loser")
        (a,), (b,) = self._update([[w], [l]], [0.0, 0.0] if drawn else None, None)
        return a, b

    def _update(
        self,
        teams: Teams,
        ranks: list[float] | None,
        weights: list[list[float]] | None,
        offsets: list[float] | None = None,
        factors: list[list[float]] | None = None,
    ) -> list[list[Rating]]:
        """The update on checked input; ``weights`` already rescaled, ``None`` if unweighted;
        ``offsets`` the teams' advantages (``None``: none); ``factors`` the margin factors
        of the pairs (``None``: all 1)."""
        tau2 = self._tau2
        k = len(teams)
        theta = [0.0] * k  # team mean: sum of the players' mu
        var = [0.0] * k  # team variance: sum of the players' sigma^2 + tau^2
        for j, team in enumerate(teams):
            m = 0.0
            v = 0.0
            for mu, sigma in team:
                m += mu
                v += sigma * sigma + tau2
            theta[j] = m if offsets is None else m + offsets[j]
            var[j] = v
        step, shrink = self._team_steps(theta, var, ranks, factors)
        return self._apply(teams, step, shrink, weights)

    @abstractmethod
    def _team_steps(
        self,
        theta: list[float],
        var: list[float],
        ranks: list[float] | None,
        factors: list[list[float]] | None = None,
    ) -> tuple[list[float], list[float]]:
        """Per team i: (Omega_i / sigma_i^2, Delta_i / sigma_i^2) of the algorithm.

        ``theta`` and ``var`` are the team means and (widened) variances; ``ranks`` the
        outcome (``None``: the listed order, every team placed below the one before it);
        ``factors`` the margin factor f_iq of each pair (``None``: all 1, no margin).
        """

    def _apply(
        self,
        teams: Teams,
        step: list[float],
        shrink: list[float],
        weights: list[list[float]] | None,
    ) -> list[list[Rating]]:
        """Move every player by its team's step (Algorithms 1-4, the final lines).

        With s2 = sigma_ij^2 + tau^2: mu += s2 * step_i * w, sigma = sqrt(s2 * max(1 - s2 *
        shrink_i * w, kappa)), w the rescaled weight when step_i >= 0 (or > 0, per model)
        and 1/w otherwise; with ``limit_sigma`` the new sigma is at most the old one.
        """
        tau2 = self._tau2
        kappa = self._kappa
        limit = self._limit_sigma
        zero_gains = self._ZERO_STEP_GAINS
        out: list[list[Rating]] = []
        for i, team in enumerate(teams):
            a = step[i]
            b = shrink[i]
            new_team: list[Rating] = []
            if weights is None:
                for mu, sigma in team:
                    s2 = sigma * sigma + tau2
                    f = 1.0 - s2 * b
                    s = _sqrt(s2 * (f if f > kappa else kappa))
                    if limit and s > sigma:
                        s = sigma
                    new_team.append(_new_rating(Rating, (mu + s2 * a, s)))
            else:
                gain = a > 0.0 or (zero_gains and a == 0.0)
                for (mu, sigma), wt in zip(team, weights[i], strict=True):
                    s2 = sigma * sigma + tau2
                    we = wt if gain else 1.0 / wt
                    f = 1.0 - s2 * b * we
                    s = _sqrt(s2 * (f if f > kappa else kappa))
                    if limit and s > sigma:
                        s = sigma
                    new_team.append(_new_rating(Rating, (mu + s2 * a * we, s)))
            out.append(new_team)
        return out

    # ------------------------------------------------------------------ predictions

    def _prediction_sums(
        self, teams: Teams, weights: Weights | None, advantage: Sequence[float] | None
    ) -> tuple[list[float], list[float]]:
        """Checked teams as (theta_j, sigma_j^2): sum w mu (plus the team's advantage) and
        sum w^2 sigma^2, no tau.

        Partial play uses the raw weights in [0, 1] (a prediction, not the update's
        rescaled weights); ``openskill`` predicts without weights, which is w = 1.
        """
        check_teams(teams, bayesian=True)
        w = check_weights(teams, weights)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        theta: list[float] = []
        var: list[float] = []
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
            theta.append(m if offsets is None else m + offsets[j])
            var.append(v)
        return theta, var

    def _pairwise(self, theta: list[float], var: list[float]) -> list[list[float]]:
        """P(team i beats team j) = Phi((theta_i - theta_j) / sqrt(2 beta^2 + s_i^2 + s_j^2)):
        the Thurstone-Mosteller comparison ``openskill`` predicts with in every model."""
        k = len(theta)
        two_beta2 = 2.0 * self._beta2
        table = [[0.0] * k for _ in range(k)]
        for i in range(k):
            row = table[i]
            for j in range(k):
                if i != j:
                    row[j] = _cdf((theta[i] - theta[j]) / _sqrt(two_beta2 + var[i] + var[j]))
        return table

    def predict_rank(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> list[PredictedRank]:
        """The predicted finishing order: per team its rank (1 is first, equal chances
        share a rank) and the probability behind it, equal to ``openskill``'s
        ``predict_rank``.

        The probability of team i is the mean over the other teams j of P(i beats j) (the
        Thurstone-Mosteller comparison with c^2 = 2 beta^2 + sigma_i^2 + sigma_j^2, see
        ``_pairwise``), normalised to sum to 1 (``quality.ranks_from_pairwise``).
        Beliefs are used as they are: no dynamics tau is added.
        """
        theta, var = self._prediction_sums(teams, weights, advantage)
        return ranks_from_pairwise(self._pairwise(theta, var))

    def quality(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float:
        """How balanced the match is, in (0, 1]: the TrueSkill paper's match quality.

        Equation 7 generalised to any teams (``rating-models.md`` section 1, computed by
        ``quality.match_quality``) with this model's beta: the Gaussian performances
        N(sum w mu, sum w^2 (sigma^2 + beta^2)) of the teams, compared as a draw. Weng and
        Lin's models define no quality of their own; this one ranks matches the same way
        for every Gaussian model. Beliefs are used as they are: no dynamics tau is added.
        """
        check_teams(teams, bayesian=True)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        return match_quality(teams, check_weights(teams, weights), self._beta, offsets)

    def draw_probability(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float | None:
        """The chance of a draw, equal to ``openskill``'s ``predict_draw``.

        With n players in all, a draw margin eps = sqrt(n) beta Phi^-1((1 + 1/n) / 2) (the
        TrueSkill paper's section 4.1 for a draw probability of 1/n), and per pair of teams
        P(|t_i - t_j| <= eps) = Phi((eps - d) / c) - Phi((-eps - d) / c), d = theta_i -
        theta_j, c^2 = 2 beta^2 + sigma_i^2 + sigma_j^2; the answer is the mean over the
        pairs. Beliefs are used as they are: no dynamics tau is added.
        """
        theta, var = self._prediction_sums(teams, weights, advantage)
        n = sum(len(team) for team in teams)
        eps = _sqrt(n) * self._beta * ppf((1.0 + 1.0 / n) / 2.0)
        two_beta2 = 2.0 * self._beta2
        k = len(teams)
        total = 0.0
        for i in range(k):
            for j in range(i + 1, k):
                c = _sqrt(two_beta2 + var[i] + var[j])
                d = theta[i] - theta[j]
                total += _cdf((eps - d) / c) - _cdf((-d - eps) / c)
        return total / (k * (k - 1) // 2)

    def team_strengths(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> TeamStrengths:
        """Each team's (theta_j, sigma_j^2) of ``win_probabilities``: sum w mu (plus its
        advantage) and sum w^2 sigma^2, no tau (``app.rating.pairwise``)."""
        theta, var = self._prediction_sums(teams, weights, advantage)
        return TeamStrengths(np.asarray(theta), np.asarray(var))

    def pair_win_probabilities(self, first: TeamStrengths, second: TeamStrengths) -> FloatArray:
        """P(first[i] beats second[i]) = Phi((theta_a - theta_b) / sqrt(2 beta^2 + s_a^2 +
        s_b^2)): ``win_probabilities`` of each pair alone (``_pairwise``)."""
        c = np.sqrt(2.0 * self._beta2 + first.variance + second.variance)
        out: FloatArray = 0.5 * _special.erfc(-((first.mean - second.mean) / c) * _INV_SQRT2)
        return out

    def win_probabilities(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> list[float]:
        """P(team j finishes first), one per team, equal to ``openskill``'s ``predict_win``.

        The probabilities of ``predict_rank``: for two teams P(1 beats 2) and its
        complement, for k teams the mean of each team's pairwise chances, normalised.
        """
        theta, var = self._prediction_sums(teams, weights, advantage)
        table = self._pairwise(theta, var)
        if len(teams) == 2:
            p = table[0][1]
            return [p, 1.0 - p]
        return [r.probability for r in ranks_from_pairwise(table)]


def team_order(ranks: list[float] | None, k: int) -> list[int]:
    """The teams best first (a stable sort by rank: tied teams keep their listed order)."""
    if ranks is None:
        return list(range(k))
    return sorted(range(k), key=ranks.__getitem__)


def check_window(window_size: float) -> int:
    """A partial pairing's window: a whole number >= 1 (a float with no fraction too)."""
    if isinstance(window_size, bool) or not isinstance(window_size, int | float):
        raise RatingInputError("window_size", f"must be a whole number >= 1, got {window_size!r}")
    if not (_isfinite(window_size) and window_size >= 1 and window_size == int(window_size)):
        raise RatingInputError("window_size", f"must be a whole number >= 1, got {window_size!r}")
    return int(window_size)
