"""TrueSkill: Bayesian skill ratings for teams (Herbrich, Minka and Graepel, 2007).

The model (``rating-models.md`` section 1, the paper's section 2 and Figure 1): a player's
skill s_i ~ N(mu_i, sigma_i^2 + tau^2) (dynamics added before the match), performance
p_i ~ N(s_i, beta^2), team performance t_j = sum_i w_ij p_i (w the partial-play weights),
and, with the teams sorted by rank, the difference d_j = t_(j) - t_(j+1) of adjacent teams
is observed through I(d_j > eps_j) (win) or I(|d_j| <= eps_j) (draw).

Inference is the paper's: exact for two teams (one truncation, closed form), expectation
propagation on the factor graph for three or more (Table 1, as written out in
``rating-models.md``). Only the comparison layer needs iterating: the messages down from
the priors to the team performances do not depend on anything below them, so they are
summed once (team mean m_j = sum w mu, variance s_j^2 = sum w^2 (sigma^2 + tau^2 + beta^2)),
and the messages back up to the skills reduce, per team, to one precision and one
precision-adjusted mean, applied to each member in closed form.

All messages are kept as plain floats in canonical form (pi = 1 / variance,
tau = mean / variance); no factor objects are built, which keeps a match in microseconds.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import NamedTuple

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
    score_moments,
    statistic_evidence,
    team_offsets,
)
from app.rating.gaussian import interval_probability, ppf, trunc_draw, trunc_win
from app.rating.pairwise import FloatArray, TeamStrengths
from app.rating.params import (
    ADVANTAGE,
    MAX_LENGTH,
    MAX_MEAN,
    MIN_LENGTH,
    Parameter,
    statistic_parameters,
)
from app.rating.quality import MIN_TEAM_VARIANCE, gaussian_win_probabilities, match_quality

__all__ = [
    "DEFAULT_BETA",
    "DEFAULT_DRAW_PROBABILITY",
    "DEFAULT_MU",
    "DEFAULT_SIGMA",
    "DEFAULT_TAU",
    "EP_MAX_ROUNDS",
    "EP_TOLERANCE",
    "MAX_DRAW_PROBABILITY",
    "PARAMETERS",
    "TrueSkill",
]

#: The prior skill mean mu_0 (the paper's Xbox Live value).
DEFAULT_MU = 25.0
#: The prior skill deviation sigma_0 = mu_0 / 3.
DEFAULT_SIGMA = DEFAULT_MU / 3.0
#: The performance deviation beta = sigma_0 / 2: a skill gap of beta means ~76% to win.
DEFAULT_BETA = DEFAULT_SIGMA / 2.0
#: The dynamics deviation tau = sigma_0 / 100 (the paper's gamma), added before each match.
DEFAULT_TAU = DEFAULT_SIGMA / 100.0
#: The probability of a draw between two evenly matched teams, which sets the draw margin.
DEFAULT_DRAW_PROBABILITY = 0.10
#: The largest draw probability with a finite draw margin: above it (draw_probability + 1)/2
#: rounds to 1, whose quantile is infinite. At it the margin is 8.2 standard deviations.
MAX_DRAW_PROBABILITY = 1.0 - 2.0**-52

#: The parameters a ladder may set, with the ranges it accepts (``app.rating.params``).
PARAMETERS = (
    Parameter("mu", DEFAULT_MU, "Prior skill mean of a new player.", "mu_0", -MAX_MEAN, MAX_MEAN),
    Parameter(
        "sigma",
        DEFAULT_SIGMA,
        "Prior skill deviation of a new player.",
        "sigma_0",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "beta",
        DEFAULT_BETA,
        "Performance deviation: a skill gap of beta wins about 76% of duels.",
        "beta",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "tau",
        DEFAULT_TAU,
        "Dynamics deviation added before every match (0 turns it off).",
        "gamma",
        0.0,
        MAX_LENGTH,
    ),
    Parameter(
        "draw_probability",
        DEFAULT_DRAW_PROBABILITY,
        "Probability that two even teams draw; sets the draw margin eps.",
        "",
        0.0,
        MAX_DRAW_PROBABILITY,
    ),
    ADVANTAGE,
    Parameter(
        "margin",
        0.0,
        "Rating units per point of score difference: with scores, a two-team match is "
        "the Gaussian observation t_1 - t_2 = margin * (s_1 - s_2) (0: off, the order only).",
        "",
        0.0,
        MAX_LENGTH,
    ),
    *statistic_parameters(),
)

#: Message passing (3+ teams) measures, per round, the largest move of the marginal of a
#: team difference d_i that a comparison message caused: sqrt(dm^2 + dv^2) with dm the
#: change of its mean in standard deviations of d_i's cavity and dv the change of its
#: variance as a fraction of the cavity variance. The schedule converges geometrically (a
#: round shrinks the move by a ratio r, typically 0.003, at most ~0.07 in our tests), so it
#: stops when the move, or the estimated remaining distance move * r / (1 - r), is below
#: this. Against the converged trueskill package the ratings then agree to ~2e-7 or better.
EP_TOLERANCE = 1e-7
#: The most forward-and-backward sweeps over the comparison factors; the schedule has
#: converged far earlier for every ordinary match (typically 5-30 sweeps).
EP_MAX_ROUNDS = 200

_sqrt = math.sqrt
# Building result tuples directly skips the NamedTuple constructor's argument handling.
_new_tuple = tuple.__new__
_exp = math.exp
_erfc = math.erfc
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
# Win comparisons with t - e at or above this use N(x) / Phi(x) inline (the same formula as
# ``gaussian.trunc_win`` there); below it the tail-safe forms of ``gaussian`` take over.
_DIRECT = -4.0


def _reject_team_variance(variance: float, weighted: bool) -> None:
    """A team whose performance variance is (nearly) 0 would be known exactly: reject it.

    With weights this means weights that are all 0 or vanishingly small; without, ratings
    and beta so small that their squares underflow.
    """
    if variance == 0.0 and weighted:
        raise RatingInputError("weights", "a team has no player with a positive weight")
    raise RatingInputError(
        "weights" if weighted else "teams",
        f"a team's performance variance {variance!r} is below {MIN_TEAM_VARIANCE!r}",
    )


#: A step of a sweep (``TrueSkill._factor_graph``).
_Step = tuple[int, int, float, float, bool, float, float]


def _team_sum(
    team: Sequence[Rating], row: Sequence[float] | None, extra: float
) -> tuple[float, float]:
    """A team's performance mean and variance: sum_i w_i mu_i and sum_i w_i^2 (sigma_i^2 +
    ``extra``), ``row`` its weights (None: all 1); a variance too small to divide by is
    refused."""
    m = s2 = 0.0
    if row is None:
        for mu, sigma in team:
            m += mu
            s2 += sigma * sigma + extra
    else:
        for (mu, sigma), w in zip(team, row, strict=True):
            m += w * mu
            s2 += w * w * (sigma * sigma + extra)
    if s2 < MIN_TEAM_VARIANCE:
        _reject_team_variance(s2, row is not None)
    return m, s2


class _FactorGraph(NamedTuple):
    """A match of three or more teams for message passing, teams in rank order."""

    mean: list[float]
    var: list[float]
    prior_pi: list[float]
    prior_tau: list[float]
    forward: list[_Step]
    backward: list[_Step]


class TrueSkill:
    """The TrueSkill rating model (the ``RatingModel`` protocol of ``app.rating.base``).

    Parameters (``rating-models.md`` section 1, the paper's symbols):
    ``mu`` (mu_0) and ``sigma`` (sigma_0) the prior of a new player; ``beta`` the
    performance deviation; ``tau`` the dynamics deviation (the paper's gamma);
    ``draw_probability`` in [0, 1), the chance that two even teams draw, which fixes the
    draw margin eps = Phi^-1((draw_probability + 1) / 2) sqrt(n_1 + n_2) beta for two
    compared teams of n_1 and n_2 players (the paper's section 4.1).
    ``advantage`` what a team with a full advantage share adds to its mean performance
    m_j = sum w mu, in the update, the quality and every prediction.
    ``margin`` (0: off) the rating units one point of score difference stands for: a
    two-team match given with ``scores`` then observes the difference of the team
    performances, t_1 - t_2 = margin * (s_1 - s_2), instead of only its sign (the linear
    Gaussian update of ``_observe_two``). A goal-difference model of this kind is one of
    the ways TrueSkill 2 (Minka, Cleven and Zaykov 2018, section 4) learns from scores.
    ``ep_tolerance`` and ``ep_max_rounds`` bound the message passing for 3+ teams.
    """

    name: str = "trueskill"

    def __init__(
        self,
        mu: float = DEFAULT_MU,
        sigma: float = DEFAULT_SIGMA,
        beta: float = DEFAULT_BETA,
        tau: float = DEFAULT_TAU,
        draw_probability: float = DEFAULT_DRAW_PROBABILITY,
        advantage: float = 0.0,
        margin: float = 0.0,
        stat_scale: float = 0.0,
        stat_noise: float = 1.0,
        stat_spread: float = 0.0,
        *,
        ep_tolerance: float = EP_TOLERANCE,
        ep_max_rounds: int = EP_MAX_ROUNDS,
    ) -> None:
        self._mu = check_finite("mu", mu)
        self._sigma = check_positive("sigma", sigma)
        self._beta = check_positive("beta", beta)
        self._tau = check_positive("tau", tau, allow_zero=True)
        draw_probability = check_positive("draw_probability", draw_probability, allow_zero=True)
        if draw_probability >= 1.0 or (draw_probability + 1.0) / 2.0 >= 1.0:
            # The second: so close to 1 that the draw margin's quantile rounds to 1 (the
            # margin would be infinite).
            raise RatingInputError(
                "draw_probability",
                f"must be in [0, 1) with a finite draw margin (at most 1 - 2**-52), "
                f"got {draw_probability!r}",
            )
        self._draw_probability = draw_probability
        self._advantage = check_finite("advantage", advantage)
        self._margin = check_positive("margin", margin, allow_zero=True)
        self._stat_scale = check_positive("stat_scale", stat_scale, allow_zero=True)
        self._stat_noise = check_positive("stat_noise", stat_noise)
        self._stat_spread = check_positive("stat_spread", stat_spread, allow_zero=True)
        # The evidence on a performance in canonical form (``base.statistic_evidence``):
        # precision (scale / noise)^2, and scale / noise^2 per deviation of the statistic.
        self._per_z = self._stat_scale / (self._stat_noise * self._stat_noise)
        self._precision = self._stat_scale * self._per_z
        self._ep_tolerance = check_positive("ep_tolerance", ep_tolerance)
        if (
            isinstance(ep_max_rounds, bool)
            or not isinstance(ep_max_rounds, int)
            or (ep_max_rounds < 1)
        ):
            raise RatingInputError(
                "ep_max_rounds", f"must be an integer >= 1, got {ep_max_rounds!r}"
            )
        self._ep_max_rounds = ep_max_rounds
        self._beta2 = self._beta * self._beta
        self._tau2 = self._tau * self._tau
        # eps for two compared teams of n players in all is _margin_unit * sqrt(n).
        self._margin_unit = ppf((draw_probability + 1.0) / 2.0) * self._beta
        self._performances: TrueSkill | None = None

    # -- the protocol -----------------------------------------------------------------

    @property
    def params(self) -> dict[str, float | str]:
        """The model parameters with their values."""
        return {
            "mu": self._mu,
            "sigma": self._sigma,
            "beta": self._beta,
            "tau": self._tau,
            "draw_probability": self._draw_probability,
            "advantage": self._advantage,
            "margin": self._margin,
            "stat_scale": self._stat_scale,
            "stat_noise": self._stat_noise,
            "stat_spread": self._stat_spread,
        }

    def rating(self, mu: float | None = None, sigma: float | None = None) -> Rating:
        """The prior N(mu_0, sigma_0^2) of a new player, or the given mu and sigma."""
        mu = self._mu if mu is None else check_finite("mu", mu)
        sigma = self._sigma if sigma is None else check_positive("sigma", sigma)
        return Rating(mu, sigma)

    def draw_margin(self, players: int) -> float:
        """eps = Phi^-1((draw_probability + 1) / 2) sqrt(players) beta (paper, section 4.1).

        ``players`` is the number of players in the two compared teams together.
        """
        return self._margin_unit * _sqrt(players)

    def rate_1vs1(
        self, winner: Rating, loser: Rating, drawn: bool = False
    ) -> tuple[Rating, Rating]:
        """New (winner, loser) ratings after a 1 vs 1 match (the paper's equations for two)."""
        check_teams(((winner,), (loser,)), bayesian=True)
        (a,), (b,) = self._rate_two(((winner,), (loser,)), None, drawn)
        return a, b

    def rate(
        self,
        teams: Teams,
        ranks: Sequence[float] | None = None,
        scores: Sequence[float] | None = None,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
        player_scores: PlayerScores | None = None,
    ) -> list[list[Rating]]:
        """New ratings after a match, in the shape and order of ``teams``.

        ``ranks`` (lower is better, equal is a draw) or ``scores`` (higher is better); with
        neither, teams are listed winner first. ``weights[j][i]`` in [0, 1] is partial play:
        a player with weight 0 only receives the dynamics tau. Raises ``RatingInputError``
        naming the argument; a team whose weights are all 0 is rejected ("weights").
        ``advantage``: each team's share; ``advantage`` times it adds to the team's m_j.
        ``player_scores``: each player's own statistic (None: unknown), evidence on their
        performance where ``stat_scale`` is above 0 (:meth:`_rate_with_evidence`).
        """
        check_teams(teams, bayesian=True)
        k = len(teams)
        rank = outcome_ranks(k, ranks, scores)
        ws = check_weights(teams, weights)
        if ws is not None:
            for j, row in enumerate(ws):
                if not any(row):
                    raise RatingInputError("weights", f"every weight of team {j} is 0")
        offsets = team_offsets(self._advantage, k, advantage)
        if player_scores is not None:
            # Checked either way; evidence where the statistics say something.
            moments = score_moments(teams, player_scores, self._stat_spread)
            if moments is not None and self._stat_scale > 0.0:
                if k == 2 and not (self._margin > 0.0 and scores is not None):
                    if rank[1] < rank[0]:
                        flipped = None if ws is None else [ws[1], ws[0]]
                        swapped = None if offsets is None else [offsets[1], offsets[0]]
                        b_new, a_new = self._rate_two_evidence(
                            (teams[1], teams[0]),
                            flipped,
                            False,
                            swapped,
                            (player_scores[1], player_scores[0]),
                            moments,
                        )
                        return [a_new, b_new]
                    return self._rate_two_evidence(
                        teams, ws, rank[0] == rank[1], offsets, player_scores, moments
                    )
                evidence = statistic_evidence(
                    teams, player_scores, self._stat_scale, self._stat_noise, self._stat_spread
                )
                assert evidence is not None
                return self._rate_with_evidence(teams, rank, ws, offsets, scores, evidence)
        if k == 2:
            if self._margin > 0.0 and scores is not None:
                gap = self._margin * (float(scores[0]) - float(scores[1]))
                return self._observe_two(teams, ws, gap, offsets)
            if rank[1] < rank[0]:
                flipped = None if ws is None else [ws[1], ws[0]]
                swapped = None if offsets is None else [offsets[1], offsets[0]]
                b_new, a_new = self._rate_two((teams[1], teams[0]), flipped, False, swapped)
                return [a_new, b_new]
            return self._rate_two(teams, ws, rank[0] == rank[1], offsets)
        return self._rate_many(teams, rank, ws, offsets)

    def quality(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float:
        """The paper's match quality (equation 7, generalised to any teams), in (0, 1]."""
        check_teams(teams, bayesian=True)
        ws = check_weights(teams, weights)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        return match_quality(teams, ws, self._beta, offsets)

    def win_probabilities(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> list[float]:
        """P(team j finishes first) with team performance N(m_j, s_j^2).

        ``rating-models.md`` section 1: m_j = sum w mu (plus the team's advantage),
        s_j^2 = sum w^2 (sigma^2 + beta^2).
        """
        means, variances = self._team_performances(teams, weights, advantage)
        return gaussian_win_probabilities(means, variances)

    def team_strengths(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> TeamStrengths:
        """Each team's performance N(m_j, s_j^2) of ``win_probabilities``: m_j = sum w mu
        (plus its advantage), s_j^2 = sum w^2 (sigma^2 + beta^2) (``app.rating.pairwise``)."""
        means, variances = self._team_performances(teams, weights, advantage)
        return TeamStrengths(np.asarray(means), np.asarray(variances))

    def pair_win_probabilities(self, first: TeamStrengths, second: TeamStrengths) -> FloatArray:
        """P(first[i] beats second[i]) = Phi(z), z = (m_a - m_b) / sqrt(s_a^2 + s_b^2):
        ``win_probabilities`` of each pair alone. The smaller of Phi(z) and Phi(-z) is
        computed (accurate in the tail) and the other is 1 minus it, one erfc per pair;
        ``gaussian_win_probabilities`` computes both and divides by their sum, which is
        1 to rounding, so the two agree to a few units in the last place."""
        z = (first.mean - second.mean) / np.sqrt(first.variance + second.variance)
        tail = 0.5 * _special.erfc(np.abs(z) * _INV_SQRT2)
        out: FloatArray = np.where(z >= 0.0, 1.0 - tail, tail)
        return out

    def draw_probability(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float | None:
        """P(|t_1 - t_2| <= eps) for two teams, eps the draw margin for their player counts.

        With more than two teams the model defines no single draw event: ``None``.
        """
        means, variances = self._team_performances(teams, weights, advantage)
        if len(teams) != 2:
            return None
        eps = self.draw_margin(len(teams[0]) + len(teams[1]))
        sd = _sqrt(variances[0] + variances[1])
        diff = means[0] - means[1]
        return interval_probability((-eps - diff) / sd, (eps - diff) / sd)

    # -- internals ----------------------------------------------------------------------

    def _rate_with_evidence(
        self,
        teams: Teams,
        rank: list[float],
        ws: list[list[float]] | None,
        offsets: list[float] | None,
        scores: Sequence[float] | None,
        evidence: Evidence,
    ) -> list[list[Rating]]:
        """The update with each player's statistic as one more Gaussian factor
        N(p_i; e_i, r_i) on their performance p_i (``base.statistic_evidence``).

        The factor is Gaussian, so the message it sends is exact: the performance's
        message down to the team sums becomes N(m~_i, v~_i), the product of N(mu_i, v_i +
        beta^2) (v_i = sigma_i^2 + tau^2) and the evidence. From there the outcome's
        inference is the usual one, run on performances (a model with beta = tau = 0 whose
        "skills" are the p_i, and the same draw margins): exact for two teams, expectation
        propagation for more. It gives each p_i's posterior N(a_i, b_i). Since the evidence
        is about p_i alone, s_i given p_i is still N(mu_i + g_i (p_i - mu_i), g_i beta^2)
        with g_i = v_i / (v_i + beta^2), so the skill's posterior is
            mu_i' = mu_i + g_i (a_i - mu_i),   sigma_i'^2 = g_i beta^2 + g_i^2 b_i.
        Without evidence for a player this is exactly the plain update; docs/models.md
        derives it."""
        tau2 = self._tau2
        beta2 = self._beta2
        virtual: list[list[Rating]] = []
        for team, row in zip(teams, evidence, strict=True):
            out: list[Rating] = []
            for (mu, sigma), found in zip(team, row, strict=True):
                prior = sigma * sigma + tau2 + beta2
                if found is None:
                    out.append(Rating(mu, _sqrt(prior)))
                    continue
                precision, shifted = found
                var = prior / (1.0 + prior * precision)
                out.append(Rating(var * (mu / prior + shifted), _sqrt(var)))
            virtual.append(out)
        performances = self._performance_model()
        k = len(teams)
        if k == 2 and self._margin > 0.0 and scores is not None:
            gap = self._margin * (float(scores[0]) - float(scores[1]))
            posterior = performances._observe_two(virtual, ws, gap, offsets)
        elif k == 2 and rank[1] < rank[0]:
            flipped = None if ws is None else [ws[1], ws[0]]
            swapped = None if offsets is None else [offsets[1], offsets[0]]
            b_new, a_new = performances._rate_two((virtual[1], virtual[0]), flipped, False, swapped)
            posterior = [a_new, b_new]
        elif k == 2:
            posterior = performances._rate_two(virtual, ws, rank[0] == rank[1], offsets)
        else:
            posterior = performances._rate_many(virtual, rank, ws, offsets)
        result: list[list[Rating]] = []
        for team, moved in zip(teams, posterior, strict=True):
            new: list[Rating] = []
            for (mu, sigma), (a, b) in zip(team, moved, strict=True):
                v = sigma * sigma + tau2
                gain = v / (v + beta2)
                new.append(Rating(mu + gain * (a - mu), _sqrt(gain * beta2 + gain * gain * b * b)))
            result.append(new)
        return result

    def _performance_model(self) -> TrueSkill:
        """This model on performances: no beta and no tau (each "skill" given to it is a
        performance), the same draw margins, advantage and margin."""
        if self._performances is None:
            performances = copy.copy(self)
            performances._beta2 = 0.0
            performances._tau2 = 0.0
            self._performances = performances
        return self._performances

    def _team_performances(
        self, teams: Teams, weights: Weights | None, advantage: Sequence[float] | None
    ) -> tuple[list[float], list[float]]:
        check_teams(teams, bayesian=True)
        ws = check_weights(teams, weights)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        means: list[float] = []
        variances: list[float] = []
        for j, team in enumerate(teams):
            m, s2 = _team_sum(team, None if ws is None else ws[j], self._beta2)
            means.append(m if offsets is None else m + offsets[j])
            variances.append(s2)
        return means, variances

    def _observe_two(
        self,
        teams: Teams,
        ws: Sequence[Sequence[float]] | None,
        gap: float,
        offsets: Sequence[float] | None,
    ) -> list[list[Rating]]:
        """Two teams whose performance difference t_1 - t_2 = ``gap`` was observed.

        d = t_1 - t_2 ~ N(m_1 - m_2, c^2) with c^2 = s_1^2 + s_2^2 (skill variances after
        dynamics plus beta^2 per player, weighted), and the skills are jointly Gaussian
        with it, so the posterior is exact (a Kalman update): with r = gap - (m_1 - m_2),
        mu_i += +-w_i v_i r / c^2 and v_i *= 1 - w_i^2 v_i / c^2, which stays in (0, 1]
        as w_i^2 v_i < c^2.
        """
        tau2 = self._tau2
        extra = tau2 + self._beta2
        sums = []
        for j, team in enumerate(teams):
            m, s2 = _team_sum(team, None if ws is None else ws[j], extra)
            sums.append((m if offsets is None else m + offsets[j], s2))
        c2 = sums[0][1] + sums[1][1]
        move = (gap - (sums[0][0] - sums[1][0])) / c2
        out: list[list[Rating]] = []
        for j, team in enumerate(teams):
            sign = move if j == 0 else -move
            row = None if ws is None else ws[j]
            new: list[Rating] = []
            for i, (mu, sigma) in enumerate(team):
                w = 1.0 if row is None else row[i]
                var = sigma * sigma + tau2
                new.append(Rating(mu + w * var * sign, _sqrt(var * (1.0 - w * w * var / c2))))
            out.append(new)
        return out

    def _rate_two(
        self,
        teams: Teams,
        ws: Sequence[Sequence[float]] | None,
        drawn: bool,
        offsets: Sequence[float] | None = None,
    ) -> list[list[Rating]]:
        """The exact update for two teams, the first not worse than the second; ``offsets``
        (the teams' advantages) add to m_1 and m_2.

        With c^2 = s_1^2 + s_2^2, t = (m_1 - m_2) / c, e = eps / c (paper, section 3):
        mu_i += +-w_i v_i V(t, e) / c and v_i *= 1 - w_i^2 v_i W(t, e) / c^2, v_i the
        skill variance after dynamics. As w_i^2 v_i < c^2 and 0 <= W < 1, the factor lies
        in (0, 1]: no variance grows and none vanishes.
        """
        tau2 = self._tau2
        extra = tau2 + self._beta2
        team_a, team_b = teams[0], teams[1]
        ma = sa = mb = sb = 0.0
        if ws is None:
            for mu, sigma in team_a:
                ma += mu
                sa += sigma * sigma + extra
            for mu, sigma in team_b:
                mb += mu
                sb += sigma * sigma + extra
        else:
            for (mu, sigma), w in zip(team_a, ws[0], strict=True):
                ma += w * mu
                sa += w * w * (sigma * sigma + extra)
            for (mu, sigma), w in zip(team_b, ws[1], strict=True):
                mb += w * mu
                sb += w * w * (sigma * sigma + extra)
        if sa < MIN_TEAM_VARIANCE or sb < MIN_TEAM_VARIANCE:
            _reject_team_variance(sa if sa < MIN_TEAM_VARIANCE else sb, ws is not None)
        if offsets is not None:
            ma += offsets[0]
            mb += offsets[1]
        shift, scale, low = self._compare(ma - mb, sa + sb, len(team_a) + len(team_b), drawn)
        out: list[list[Rating]] = []
        if ws is None:
            for team, move in ((team_a, shift), (team_b, -shift)):
                new: list[Rating] = []
                for mu, sigma in team:
                    var = sigma * sigma + tau2
                    factor = 1.0 - var * scale
                    if factor < var * low:
                        factor = var * low
                    new.append(_new_tuple(Rating, (mu + var * move, _sqrt(var * factor))))
                out.append(new)
            return out
        for team, row, move in ((team_a, ws[0], shift), (team_b, ws[1], -shift)):
            new = []
            for (mu, sigma), w in zip(team, row, strict=True):
                var = sigma * sigma + tau2
                wv = w * w * var
                factor = 1.0 - wv * scale
                if factor < wv * low:
                    factor = wv * low
                new.append(_new_tuple(Rating, (mu + w * var * move, _sqrt(var * factor))))
            out.append(new)
        return out

    def _compare(
        self, gap: float, c2: float, players: int, drawn: bool
    ) -> tuple[float, float, float]:
        """The comparison of two team performances whose difference is N(gap, c2), the first
        not worse than the second, among ``players``: the first team's mean move per unit
        of a member's variance, V(t, e) / c, and the scale and floor of the variance
        factor, W(t, e) / c^2 and (1 - W(t, e)) / c^2 (the paper's section 3)."""
        c = _sqrt(c2)
        t = gap / c
        e = self._margin_unit * _sqrt(players) / c
        x = t - e
        if drawn:
            v, one_minus_w = trunc_draw(t, e)
        elif x >= _DIRECT:
            v = _INV_SQRT_2PI * _exp(-0.5 * x * x) / (0.5 * _erfc(-x * _INV_SQRT2))
            one_minus_w = 1.0 - v * (v + x)
        else:
            v, one_minus_w = trunc_win(t, e)
        # Per player the variance factor is 1 - w^2 var W / c^2 = (r + w^2 var (1 - W)) / c^2,
        # r = c^2 - w^2 var >= 0; the second form bounds it below when rounding bites.
        return v / c, (1.0 - one_minus_w) / c2, one_minus_w / c2

    def _rate_two_evidence(
        self,
        teams: Teams,
        ws: Sequence[Sequence[float]] | None,
        drawn: bool,
        offsets: Sequence[float] | None,
        player_scores: PlayerScores,
        moments: tuple[float, float],
    ) -> list[list[Rating]]:
        """:meth:`_rate_with_evidence` for two teams, the first not worse than the second, in
        one pass over the players and one back, in plain floats: the common case.
        ``moments``: the statistics' mean and deviation (``base.score_moments``).

        With the evidence's precision pi = (stat_scale / stat_noise)^2 and d = 1 + prior
        pi, a known statistic's message is v~ = prior / d and m~ = (mu + k (x - mean) prior
        + c prior pi) / d, k = stat_scale / (stat_noise^2 sd): the centre c, known once
        every player is read, enters each team's sum as c times its sum of w prior pi / d.
        """
        tau2 = self._tau2
        beta2 = self._beta2
        extra = tau2 + beta2
        precision = self._precision
        mean, sd = moments
        k = self._per_z / sd
        total = 0.0
        count = 0
        sums = [0.0] * 6  # per team: sum w m~ without the centre's part, sum w^2 v~, its pull
        for j in (0, 1):
            row = player_scores[j]
            w_row = None if ws is None else ws[j]
            m = s = pull = 0.0
            for i, (mu, sigma) in enumerate(teams[j]):
                x = row[i]
                w = 1.0 if w_row is None else w_row[i]
                prior = sigma * sigma + extra
                if x is None:
                    m += w * mu
                    s += w * w * prior
                else:
                    total += mu
                    count += 1
                    den = 1.0 + prior * precision
                    m += w * (mu + k * (x - mean) * prior) / den
                    s += w * w * prior / den
                    pull += w * prior * precision / den
            sums[3 * j] = m
            sums[3 * j + 1] = s
            sums[3 * j + 2] = pull
        centre = total / count
        ma = sums[0] + centre * sums[2]
        sa = sums[1]
        mb = sums[3] + centre * sums[5]
        sb = sums[4]
        if sa < MIN_TEAM_VARIANCE or sb < MIN_TEAM_VARIANCE:
            _reject_team_variance(sa if sa < MIN_TEAM_VARIANCE else sb, ws is not None)
        if offsets is not None:
            ma += offsets[0]
            mb += offsets[1]
        shift, scale, low = self._compare(ma - mb, sa + sb, len(teams[0]) + len(teams[1]), drawn)
        lift = centre * precision
        out: list[list[Rating]] = []
        sqrt = _sqrt
        new_tuple = _new_tuple
        for j, move in ((0, shift), (1, -shift)):
            row = player_scores[j]
            w_row = None if ws is None else ws[j]
            new: list[Rating] = []
            for i, (mu, sigma) in enumerate(teams[j]):
                x = row[i]
                w = 1.0 if w_row is None else w_row[i]
                prior = sigma * sigma + extra
                if x is None:
                    vt = prior
                    mt = mu
                else:
                    den = 1.0 + prior * precision
                    vt = prior / den
                    mt = (mu + (k * (x - mean) + lift) * prior) / den
                wv = w * w * vt
                factor = 1.0 - wv * scale
                if factor < wv * low:
                    factor = wv * low
                gain = 1.0 - beta2 / prior  # (sigma^2 + tau^2) / (sigma^2 + tau^2 + beta^2)
                new.append(
                    new_tuple(
                        Rating,
                        (
                            mu + gain * (mt + w * vt * move - mu),
                            sqrt(gain * (beta2 + gain * vt * factor)),
                        ),
                    )
                )
            out.append(new)
        return out

    def _rate_many(
        self,
        teams: Teams,
        rank: list[float],
        ws: list[list[float]] | None,
        offsets: list[float] | None = None,
    ) -> list[list[Rating]]:
        """Expectation propagation for three or more teams (the paper's Figure 1 schedule).

        Teams sorted by rank (stably); factor i compares sorted teams i and i + 1 through
        d_i. Down: team performance priors N(m_j, s_j^2). Then sweeps forward over the
        comparison factors (each updated by Table 1 row 4, then its weighted-sum factor
        sends up to the right-hand team, Table 1 row 3) and backward (sending to the
        left-hand team), until the marginals of the d_i have settled to ``ep_tolerance``
        (see ``EP_TOLERANCE``), at most ``ep_max_rounds`` times. Up: each team's
        incoming precision pi_U and tau_U give, for member i with skill variance v_i,
            mu_i += w_i v_i (tau_U - pi_U m_j) / (1 + pi_U s_j^2),
            v_i  *= (1 + pi_U (s_j^2 - w_i^2 v_i)) / (1 + pi_U s_j^2),
        which is Table 1 rows 3 and 2 (weighted sum down to p_i, likelihood to s_i) and
        the product with the prior, simplified exactly.
        """
        order = sorted(range(len(teams)), key=rank.__getitem__)
        graph = self._factor_graph(teams, rank, ws, order, offsets)
        return self._skills_up(teams, ws, order, graph, *self._pass_messages(graph))

    def _factor_graph(
        self,
        teams: Teams,
        rank: list[float],
        ws: list[list[float]] | None,
        order: list[int],
        offsets: list[float] | None = None,
    ) -> _FactorGraph:
        """The team priors by place (teams in rank order) and the steps of the two sweeps.

        A step is (factor i, the team it sends to, the margin for the inline win formula,
        the draw margin eps_i, whether drawn, that team's prior pi and tau). The inline
        margin of a drawn factor is +inf: x = -inf < ``_DIRECT`` then sends it to the
        branch that tells a draw from a win, so a step makes one comparison, not two.
        """
        extra = self._tau2 + self._beta2
        unit = self._margin_unit
        inf = math.inf
        mean: list[float] = []
        var: list[float] = []
        prior_pi: list[float] = []
        prior_tau: list[float] = []
        forward: list[_Step] = []
        backward: list[_Step] = []
        size = 0
        team_rank = 0.0
        p = t = 0.0
        for pos, j in enumerate(order):
            team = teams[j]
            m, s2 = _team_sum(team, None if ws is None else ws[j], extra)
            if offsets is not None:
                m += offsets[j]
            mean.append(m)
            var.append(s2)
            if pos:
                # Factor pos - 1, between this team and the one before it (prior p, t).
                eps = unit * _sqrt(size + len(team))
                tie = rank[j] == team_rank
                inline = inf if tie else eps
                backward.append((pos - 1, pos - 1, inline, eps, tie, p, t))
                p = 1.0 / s2
                t = m * p
                forward.append((pos - 1, pos, inline, eps, tie, p, t))
            else:
                p = 1.0 / s2
                t = m * p
            prior_pi.append(p)
            prior_tau.append(t)
            size = len(team)
            team_rank = rank[j]
        # Forward over factors 0..n-2 sending right, backward over n-1..1 sending left.
        forward.pop()
        backward.reverse()
        backward.pop()
        return _FactorGraph(mean, var, prior_pi, prior_tau, forward, backward)

    def _pass_messages(
        self, graph: _FactorGraph
    ) -> tuple[list[float], list[float], list[float], list[float]]:
        """Rounds of a forward and a backward sweep (the paper's Figure 1, arrows 1-3) until
        the marginals of the d_i settle. Returns per factor the comparison message
        (precision, precision-adjusted mean), and per team the cavity of the last backward
        sweep as a right-hand team (precision, precision-adjusted mean).

        A team's cavity for one of its factors is its prior times the message from its
        other factor. A sweep carries the cavity it has just updated on to its next step in
        local floats, and leaves it as 1 / pi and mean for the other sweep to read; every
        quantity is computed with the same operations in the same order as written out in
        the paper (``app.rating._vector`` repeats them over blocks of matches).
        """
        prior_pi = graph.prior_pi
        prior_tau = graph.prior_tau
        k = len(prior_pi)
        n = k - 1
        tol = self._ep_tolerance
        inf = math.inf
        sqrt, exp, erfc, direct = _sqrt, _exp, _erfc, _DIRECT
        # -x * (1 / sqrt 2) and x * -(1 / sqrt 2) are the same float (negation is exact).
        c_lam, c_cdf = 2.0 * _INV_SQRT_2PI, -_INV_SQRT2
        # Per team j: the cavity as the left-hand team of factor j (1 / pi, mean), written
        # forward and read backward; as the right-hand team of factor j - 1, written
        # backward (also as pi, tau) and read forward, its prior before the first sweep.
        left_inv = [0.0] * k
        left_mean = [0.0] * k
        right_pi = prior_pi[:]
        right_tau = prior_tau[:]
        right_inv = [0.0] * k
        right_mean = [0.0] * k
        for j in range(1, k):
            right_inv[j] = irp = 1.0 / prior_pi[j]
            right_mean[j] = prior_tau[j] * irp
        cmp_pi = [0.0] * n
        cmp_tau = [0.0] * n
        # The marginal of each d_i after its last update, for the convergence measure.
        d_mean = [0.0] * n
        d_var = [inf] * n
        # Team 0 is only ever a left-hand team and team n a right-hand one: their cavities
        # are their priors.
        first_pi = prior_pi[0]
        first_inv = 1.0 / first_pi
        first_mean = prior_tau[0] * first_inv
        last_pi = right_pi[n]
        last_inv = right_inv[n]
        last_mean = right_mean[n]
        forward = graph.forward
        backward = graph.backward
        previous = earlier = inf
        # Round 1 starts from no messages (d_var = inf): its move is infinite whatever the
        # steps compute, so it is not measured.
        measure = False
        for _ in range(self._ep_max_rounds):
            delta2 = 0.0 if measure else inf
            lp, ilp, lm = first_pi, first_inv, first_mean
            for i, j, eps, real_eps, tie, to_pi, to_tau in forward:
                # Table 1 row 3: the difference factor's message down to d_i = t_i - t_j
                # (j = i + 1) from the cavities of its two teams.
                irp = right_inv[j]
                cav_var = ilp + irp
                cav_mean = lm - right_mean[j]
                sd = sqrt(cav_var)
                isd = 1.0 / sd
                # Table 1 row 4: the comparison factor, via V and W (and 1 - W).
                x = (cav_mean - eps) * isd
                if x >= direct:
                    v = c_lam * exp(-0.5 * x * x) / erfc(x * c_cdf)
                    w = v * (v + x)
                    one_minus_w = 1.0 - w
                else:
                    trunc = trunc_draw if tie else trunc_win
                    v, one_minus_w = trunc(cav_mean * isd, real_eps * isd)
                    w = 1.0 - one_minus_w
                sv = sd * v
                new_mean = cav_mean + sv
                new_var = cav_var * one_minus_w
                inv = 1.0 / new_var
                cp = w * inv
                ct = (cav_mean * w + sv) * inv
                if not i:
                    # The backward sweep updates every other factor after this one.
                    cmp_pi[0] = cp
                    cmp_tau[0] = ct
                # Convergence: the squared move of d_i's marginal (mean in cavity deviations,
                # variance as a fraction of the cavity variance).
                if measure:
                    dm = new_mean - d_mean[i]
                    dv = (new_var - d_var[i]) * isd
                    change = (dm * dm + dv * dv) * isd * isd
                    if change > delta2:
                        delta2 = change
                d_mean[i] = new_mean
                d_var[i] = new_var
                # Table 1 row 3 again, up to team j: t_j = t_i - d_i is
                # N(lm - ct / cp, 1 / lp + 1 / cp), times its prior its cavity for factor j.
                f = lp / (cp + lp)
                lp = to_pi + cp * f
                ilp = 1.0 / lp
                lm = (to_tau + (cp * lm - ct) * f) * ilp
                left_inv[j] = ilp
                left_mean[j] = lm
            rp, irp, rm = last_pi, last_inv, last_mean
            for i, _j, eps, real_eps, tie, to_pi, to_tau in backward:
                ilp = left_inv[i]
                cav_var = ilp + irp
                cav_mean = left_mean[i] - rm
                sd = sqrt(cav_var)
                isd = 1.0 / sd
                x = (cav_mean - eps) * isd
                if x >= direct:
                    v = c_lam * exp(-0.5 * x * x) / erfc(x * c_cdf)
                    w = v * (v + x)
                    one_minus_w = 1.0 - w
                else:
                    trunc = trunc_draw if tie else trunc_win
                    v, one_minus_w = trunc(cav_mean * isd, real_eps * isd)
                    w = 1.0 - one_minus_w
                sv = sd * v
                new_mean = cav_mean + sv
                new_var = cav_var * one_minus_w
                inv = 1.0 / new_var
                cp = w * inv
                ct = (cav_mean * w + sv) * inv
                cmp_pi[i] = cp
                cmp_tau[i] = ct
                if measure:
                    dm = new_mean - d_mean[i]
                    dv = (new_var - d_var[i]) * isd
                    change = (dm * dm + dv * dv) * isd * isd
                    if change > delta2:
                        delta2 = change
                d_mean[i] = new_mean
                d_var[i] = new_var
                # Up to team i: t_i = d_i + t_(i+1) is N(rm + ct / cp, 1 / rp + 1 / cp).
                f = rp / (cp + rp)
                rp = to_pi + cp * f
                rt = to_tau + (cp * rm + ct) * f
                irp = 1.0 / rp
                rm = rt * irp
                right_pi[i] = rp
                right_tau[i] = rt
                right_inv[i] = irp
                right_mean[i] = rm
            # Stop on a small move, or when the moves shrink geometrically and their
            # remaining sum, delta * r / (1 - r), is small; r is the larger of the last two
            # ratios of moves. (Round 1 starts from no messages and its move is infinite;
            # round 2's move is atypically large, so r is trusted from round 4 on.)
            delta = sqrt(delta2)
            if delta <= tol:
                break
            if earlier < inf:
                ratio = max(delta / previous, previous / earlier)
                if ratio < 1.0 and delta * ratio <= tol * (1.0 - ratio):
                    break
            earlier = previous
            previous = delta
            measure = True
        return cmp_pi, cmp_tau, right_pi, right_tau

    def _skills_up(
        self,
        teams: Teams,
        ws: list[list[float]] | None,
        order: list[int],
        graph: _FactorGraph,
        cmp_pi: list[float],
        cmp_tau: list[float],
        right_pi: list[float],
        right_tau: list[float],
    ) -> list[list[Rating]]:
        """New ratings from the final comparison messages (the paper's Figure 1, arrows 4
        and 5, then Table 1 rows 3 and 2 down to the members, see ``_rate_many``).

        A team's incoming message is the product of those from its two difference factors.
        The last backward sweep left the message of factor i to its left-hand team i
        (i >= 1) consistent with the final comparison messages: the cavity it reached less
        the prior. The messages to right-hand teams date from the forward sweep, before the
        last comparison updates, so they are recomputed along the chain, and factor 0
        sends to team 0.
        """
        prior_pi = graph.prior_pi
        prior_tau = graph.prior_tau
        mean = graph.mean
        var = graph.var
        n = len(cmp_pi)
        cp = cmp_pi[0]
        rp = right_pi[1]
        f = rp / (cp + rp)
        right_pi[0] = prior_pi[0] + cp * f
        right_tau[0] = prior_tau[0] + (cp * (right_tau[1] / rp) + cmp_tau[0]) * f
        # The message from factor pos - 1 (none to team 0), and the cavity it came from.
        from_pi = from_tau = 0.0
        lp = prior_pi[0]
        lt = prior_tau[0]
        tau2 = self._tau2
        sqrt = _sqrt
        new_tuple = _new_tuple
        out: list[list[Rating]] = [[]] * len(order)
        for pos, j in enumerate(order):
            # (Team n has no factor to its right: its cavity is its prior, less itself 0.)
            pi = from_pi + (right_pi[pos] - prior_pi[pos])
            inv = 1.0 / (1.0 + pi * var[pos])
            shift = (from_tau + (right_tau[pos] - prior_tau[pos]) - pi * mean[pos]) * inv
            kappa = pi * inv
            # factor = (1 + pi_U (s_j^2 - w^2 v)) / (1 + pi_U s_j^2) = 1 - w^2 v kappa >= inv.
            new: list[Rating] = []
            if ws is None:
                for mu, sigma in teams[j]:
                    v = sigma * sigma + tau2
                    factor = 1.0 - v * kappa
                    factor = factor if factor > inv else inv
                    new.append(new_tuple(Rating, (mu + v * shift, sqrt(v * factor))))
            else:
                for (mu, sigma), w in zip(teams[j], ws[j], strict=True):
                    v = sigma * sigma + tau2
                    factor = 1.0 - w * w * v * kappa
                    factor = factor if factor > inv else inv
                    new.append(new_tuple(Rating, (mu + w * v * shift, sqrt(v * factor))))
            out[j] = new
            if pos < n:
                # Factor pos to team pos + 1: t_(pos+1) = t_pos - d_pos.
                cp = cmp_pi[pos]
                f = lp / (cp + lp)
                from_pi = cp * f
                from_tau = (cp * (lt / lp) - cmp_tau[pos]) * f
                lp = prior_pi[pos + 1] + from_pi
                lt = prior_tau[pos + 1] + from_tau
        return out
