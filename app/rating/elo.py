"""The Elo family: logistic (Bradley-Terry) and Gaussian (Thurstone case V) Elo, for any match.

Sources: ``rating-models.md`` section 2; Kerby, "Multiplayer generalization of Elo rating
system" (sections 2 and 3); the TrueSkill paper, section 1 (equation 1 and the linearised
Elo update) and section 4.1 (the "duelling" heuristic).

An Elo rating is a point estimate r without uncertainty. It is carried in the shared
``Rating`` value with ``sigma = 0.0`` always (sigma carries no information; a sigma given
on input is ignored), so its conservative rating is r itself.

Two players i and j, d = r_i - r_j:

- ``model="logistic"``: P(i beats j) = 1 / (1 + 10^(-d / scale)). This is Kerby's
  exponential model with strength e^rho, rho = r ln 10 / scale (section 2.1).
- ``model="gaussian"``: P(i beats j) = Phi(d / (sqrt 2 beta)), performances
  N(r, beta^2) (the paper's equation 1; Kerby section 2.2).

Outcome score S = 1 for a win, 1/2 for a draw, 0 for a loss. Update rules for one duel:

- ``rule="classic"``: delta_i = K (S - P(i beats j)) (the paper's linearised Elo update).
- ``rule="mle"``: delta_i = eta * d/dr_i [S log P(i beats j) + (1 - S) log P(j beats i)],
  Kerby's likelihood gradient step (section 2), with eta chosen so that an even match
  moves the ratings by K/2, exactly as classic does. A draw is scored as half a win and
  half a loss, the fractional-outcome likelihood that Elo's S = 1/2 stands for. For the
  Gaussian model, with z = d / (sqrt 2 beta) and V(z) = N(z)/Phi(z) (the inverse Mills
  ratio): delta_i = K sqrt(pi/8) (S V(z) - (1 - S) V(-z)); unbounded, it grows like
  K sqrt(pi/8) |z| for an upset (Kerby section 2.2). For the logistic model the gradient
  is d/drho [S log p + (1 - S) log(1 - p)] = S - p, so "mle" IS "classic" exactly (Kerby
  section 2.1 shows it for wins; the fractional score extends it to draws); both names
  are accepted and give identical numbers.

Games with more than two teams or teams of several players (``multiplayer``):

- ``"pairwise_mean"`` (default): the paper's duelling heuristic (section 4.1). Each
  player's delta is the mean of its duel deltas against every player on another team,
  S from the two teams' ranks and P from the two players' ratings.
- ``"pairwise_sum"``: the same duel deltas summed (Kerby section 3.1).
- ``"full"``: one gradient step on the likelihood of the whole finishing order (Kerby
  sections 3.2 and 3.3). Each team plays as one entrant rated by the mean R_j of its
  members; every member receives its team's delta. Logistic: Plackett-Luce with
  strengths e^rho_j, rho_j = R_j ln 10 / scale, the winner chosen first,
  log P(order) = sum_i [rho_(i) - log sum_{l >= i} e^rho_(l)] and
  delta_j = K d log P / d rho_j, which for two entrants is classic Elo exactly. Gaussian:
  Thurstonian, X_j ~ N(R_j, beta^2), log P(order) and its gradient by forward-backward
  integration in log space (``app.rating.thurstone``), delta_j = K (sqrt pi / 2) beta
  d log P / d R_j, which for two entrants is the Gaussian "mle" step exactly (and moves
  an even match by K/2 like classic). "full" is a likelihood step whatever ``rule`` says.
  Ties: the log-likelihood is averaged over the orders of each tied group (a tie is
  half of each order, as a draw is half a win and half a loss): tied entrants are
  treated alike (same rating in, same delta out), and a two-entrant draw gives exactly
  the two-player draw step of the model.

  Logistic: the average over all m! orders of a tied group, computed exactly from the
  group's 2^m - 1 subsets (``_plackett_luce_tie_gradient``: each stage's denominator
  averages over the members not yet chosen, a uniform random k-subset), so one tie of
  up to ``MAX_TIE_SIZE`` (16) teams; a larger one is rejected, naming ``ranks``.

  Gaussian: the integration costs the same for every order, so the exact average is
  kept for groups of up to ``EXACT_TIE_SIZE`` (4, 24 orders). A larger group of m
  averages over a fixed, deterministic design (``_group_orders``): the members sorted
  by rating, i = 0 .. m-1, placed by (a i + b) mod p for every a = 1 .. p-1 and
  b = 0 .. p-1, p the least prime >= m (m(m-1) orders for prime m, where every ordered
  pair of members takes every ordered pair of places exactly once; 36 for m = 6, 80
  for 8, 144 for 12), and the gradient is then averaged over tied teams of exactly
  equal rating, the projection onto the symmetry of the exact average, so tied equals
  get identical deltas and the step stays zero-sum. Measured against the exact average
  (all m! orders) with K = 32, beta 200, eight entrants, ratings N(1500, s): a tie of
  5 (prime, 20 orders) deviates by at most 0.003 points (s = 100) and 0.06 (s = 250);
  a tie of 6 (36 orders) by at most 0.3 and 0.6; a tie of 7 by 0.007 and 0.15; a tie
  of 8 (80 orders) by 0.3 and 0.8. (The 2m rotations and reversals of the sorted
  order, the cheaper design considered, deviate by up to 1.7 and 5 points for a tie
  of 6.) A match whose combined orders exceed ``MAX_TIE_ORDERS`` (5040: several large
  ties) is rejected, naming ``ranks``.

Partial play (``weights[j][i]`` = w_i in [0, 1]):

- pairwise: the duel between players i and j counts w_i w_j times (an absent player
  neither gains nor costs anything); "pairwise_mean" still divides by the number of
  opponents, so the updates stay zero-sum for equal team sizes.
- "full": the team rating is the weight-averaged mean R_j = sum w_i r_i / W_j,
  W_j = sum w_i; member i receives n_j (w_i / W_j) D_j, i.e. the likelihood gradient
  with respect to r_i scaled by the team size, so with full play every member receives
  D_j and the team's total change is n_j D_j whatever the weights. A team whose weights
  are all 0 did not play: it is left out of the order and its members do not move.

Every variant is zero-sum for equal team sizes: the duel deltas are antisymmetric and
the likelihoods are invariant under a common shift of all ratings.

Ratings are limited to |r| <= ``MAX_ABS_RATING`` so that every intermediate stays finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import combinations, permutations, product
from typing import Final

import numpy as np
import numpy.typing as npt

from app.rating import _special
from app.rating.base import (
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
    shifted,
    standard_scores,
    statistic_centre,
    team_offsets,
)
from app.rating.pairwise import LARGE_MATCH_PLAYERS, LARGE_MATCH_TEAMS, TeamStrengths, pair_blocks
from app.rating.params import ADVANTAGE, MAX_LENGTH, MAX_MEAN, MIN_LENGTH, Parameter
from app.rating.quality import entrant_quality, gaussian_win_probabilities
from app.rating.thurstone import order_log_likelihood

__all__ = [
    "EXACT_TIE_SIZE",
    "MAX_ABS_RATING",
    "MAX_TIE_ORDERS",
    "MAX_TIE_SIZE",
    "MODELS",
    "MULTIPLAYER",
    "PARAMETERS",
    "RULES",
    "Elo",
    "k_factor_problem",
]

FloatArray = npt.NDArray[np.float64]

MODELS: Final = ("logistic", "gaussian")
RULES: Final = ("classic", "mle")
MULTIPLAYER: Final = ("pairwise_mean", "pairwise_sum", "full")

#: The parameters a ladder may set, with the ranges it accepts (``app.rating.params``);
#: ``k_factor`` is also at most the model's width (``k_factor_problem``).
PARAMETERS: Final = (
    Parameter("initial", 1500.0, "Rating of a new player.", "r_0", -MAX_MEAN, MAX_MEAN),
    Parameter(
        "k_factor",
        32.0,
        "Step size: an even match won moves each side by K/2. At most `scale` (logistic) "
        "or `beta` (gaussian).",
        "K",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "model",
        "logistic",
        "Win probability of a duel: logistic (Bradley-Terry) or gaussian (Thurstone case V).",
        choices=MODELS,
    ),
    Parameter(
        "scale",
        400.0,
        "Logistic scale: a rating gap of `scale` is 10:1 odds.",
        "",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "beta",
        200.0,
        "Gaussian performance deviation (the gaussian model only).",
        "beta",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "rule",
        "classic",
        "Update of a duel: classic K (S - P) or mle (Kerby's likelihood gradient).",
        choices=RULES,
    ),
    Parameter(
        "multiplayer",
        "pairwise_mean",
        "Matches of 3+ teams or of teams: pairwise_mean, pairwise_sum or full.",
        choices=MULTIPLAYER,
    ),
    ADVANTAGE,
    Parameter(
        "margin",
        0.0,
        "Margin of victory: with scores, a two-team match won by N points moves the "
        "ratings 1 + margin * ln N times as far (N >= 1; 0: off).",
        "",
        0.0,
        100.0,
    ),
    Parameter(
        "stat_scale",
        0.0,
        "Rating points per standard deviation of a player's own statistic in the match "
        "(`player_scores`): after the outcome's update each rating moves stat_weight of the "
        "way to c_i + stat_scale z_i, c_i the mean rating of the players whose statistic is "
        "known (0: off).",
        "",
        0.0,
        MAX_LENGTH,
    ),
    Parameter(
        "stat_weight",
        0.1,
        "How far a rating moves towards what its statistic says, in [0, 1] (a step of the "
        "gradient of the Gaussian evidence, as K is of the outcome's).",
        "",
        0.0,
        1.0,
    ),
    Parameter(
        "stat_spread",
        0.0,
        "The statistic's own scale, in its units: z_i = (x_i - mean) / sqrt(sd^2 + "
        "stat_spread^2) (0: sd alone).",
        "",
        0.0,
        MAX_LENGTH,
    ),
)


def k_factor_problem(params: dict[str, float | str]) -> str | None:
    """What is wrong with ``k_factor`` given the model's width, or ``None``.

    The step is at most the width of the win probability: ``scale`` (logistic) or ``beta``
    (gaussian). With the gaussian likelihood step ("mle", "full") an upset by a gap d moves
    each side by about 0.44 (K / beta) d (K sqrt(pi/8) V(z), V(z) ~ |z| in the tail), so
    for K above about 1.1 beta the two ratings would cross and end further apart than
    they started, every upset multiplying the gap; K <= beta keeps it shrinking. For the
    logistic model the bound says an even result moves a rating by at most half a scale.
    """
    width_name = "scale" if params["model"] == "logistic" else "beta"
    k, width = params["k_factor"], params[width_name]
    if isinstance(k, float) and isinstance(width, float) and k > width:
        return (
            f"must be at most {width_name} with the {params['model']} model: in "
            f"[{MIN_LENGTH:g}, {width!r}], got {k!r}"
        )
    return None


#: The largest rating magnitude accepted (far beyond any real ladder; keeps squares finite).
MAX_ABS_RATING: Final = 1e12
#: Matches of at most this many players take the duelling heuristic in plain floats.
_SMALL_MATCH: Final = 10
#: The largest tied group the logistic "full" update averages over exactly (2^16 subsets).
MAX_TIE_SIZE: Final = 16
#: Gaussian "full": tied groups up to this size are averaged over all their orders (4! = 24).
EXACT_TIE_SIZE: Final = 4
#: Gaussian "full": the most finishing orders (over all tied groups together) averaged.
MAX_TIE_ORDERS: Final = 5040
#: Tied groups at most this large take the logistic subset sums in plain floats.
_SMALL_TIE: Final = 6

_LN10: Final = math.log(10.0)
_SQRT2: Final = math.sqrt(2.0)
_INV_SQRT2: Final = 1.0 / _SQRT2
_INV_SQRT_2PI: Final = 1.0 / math.sqrt(2.0 * math.pi)
_LOG_SQRT_2PI: Final = 0.5 * math.log(2.0 * math.pi)
#: sqrt(pi/8): the "mle" step K sqrt(pi/8) V(z) is K/2 at z = 0, since V(0) = sqrt(2/pi).
_MLE_GAIN: Final = math.sqrt(math.pi / 8.0)
#: Below this z, N(z)/Phi(z) comes from the continued fraction: exact to rounding there,
#: while the plain ratio loses about z^2/2 ulps (and Phi(z) underflows below -38).
_MILLS_TAIL: Final = -5.0
_exp = math.exp
_erfc = math.erfc
_new_rating = tuple.__new__


def _inverse_mills(z: float) -> float:
    """V(z) = N(z) / Phi(z), finite for every finite z.

    Below ``_MILLS_TAIL`` Phi(z) is computed relative to N(z) by Laplace's continued
    fraction of the Mills ratio, Phi(-t)/N(t) = 1/(t + 1/(t + 2/(t + 3/(t + ...)))),
    evaluated bottom-up; at t >= 5 forty terms are exact to rounding.
    """
    if z > _MILLS_TAIL:
        return _INV_SQRT_2PI * _exp(-0.5 * z * z) / (0.5 * _erfc(-z * _INV_SQRT2))
    t = -z
    frac = t
    for n in range(40, 0, -1):
        frac = t + n / frac
    return frac


def _inverse_mills_array(z: FloatArray) -> FloatArray:
    """V(z) = N(z) / Phi(z) elementwise, in log space (scipy's log_ndtr) so it never underflows."""
    out: FloatArray = np.exp(-0.5 * z * z - _LOG_SQRT_2PI - _special.log_ndtr(z))
    return out


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise RatingInputError(name, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


class Elo:
    """The Elo family of rating models (see the module docstring for the mathematics).

    Parameters (``rating-models.md`` section 2):

    - ``initial`` (1500): the rating of a new player.
    - ``k_factor`` (K, 32): the step size; an even match won moves each side by K/2.
    - ``model`` ("logistic"): "logistic" (Bradley-Terry) or "gaussian" (Thurstone case V).
    - ``scale`` (400): the logistic scale; a gap of ``scale`` is 10:1 odds.
    - ``beta`` (the paper's beta, 200): the Gaussian performance standard deviation.
    - ``rule`` ("classic"): "classic" K (S - P) or "mle" (Kerby's likelihood gradient).
    - ``multiplayer`` ("pairwise_mean"): "pairwise_mean", "pairwise_sum" or "full".
    - ``advantage`` (0): rating points a team with a full advantage share plays above its
      rating (the World Football Elo ratings use 100 for the home side): every member of
      team j plays at r + advantage * a_j in its duels, and the team's mean likewise.
    - ``margin`` (0): the margin-of-victory multiplier. A two-team match given with
      ``scores`` and won by N = |s_1 - s_2| points moves every rating by G = 1 + margin
      * ln(max(N, 1)) times the usual delta (a draw: G = 1). The World Football Elo
      ratings (eloratings.net) multiply K by 1, 1.5, 1.75 and 1.875 for wins by 1, 2, 3
      and 4 goals; margin 0.72 gives 1, 1.50, 1.79 and 2.00, and FiveThirtyEight's Elo
      uses the same logarithmic shape, ln(N + 1).

    Raises ``RatingInputError`` naming the offending argument.
    """

    name = "elo"

    def __init__(
        self,
        initial: float = 1500.0,
        k_factor: float = 32.0,
        model: str = "logistic",
        scale: float = 400.0,
        beta: float = 200.0,
        rule: str = "classic",
        multiplayer: str = "pairwise_mean",
        advantage: float = 0.0,
        margin: float = 0.0,
        stat_scale: float = 0.0,
        stat_weight: float = 0.1,
        stat_spread: float = 0.0,
    ) -> None:
        self._initial = check_finite("initial", initial)
        if abs(self._initial) > MAX_ABS_RATING:
            raise RatingInputError("initial", f"must be within +-{MAX_ABS_RATING:g}")
        self._k = check_positive("k_factor", k_factor)
        self._model = _choice("model", model, MODELS)
        self._scale = check_positive("scale", scale)
        self._beta = check_positive("beta", beta)
        self._rule = _choice("rule", rule, RULES)
        self._multiplayer = _choice("multiplayer", multiplayer, MULTIPLAYER)
        self._advantage = check_finite("advantage", advantage)
        self._margin = check_positive("margin", margin, allow_zero=True)
        self._stat_scale = check_positive("stat_scale", stat_scale, allow_zero=True)
        self._stat_weight = check_positive("stat_weight", stat_weight, allow_zero=True)
        if self._stat_weight > 1.0:
            raise RatingInputError("stat_weight", f"must be in [0, 1], got {stat_weight!r}")
        self._stat_spread = check_positive("stat_spread", stat_spread, allow_zero=True)
        self._logistic = self._model == "logistic"
        # ln 10 / scale: logistic ratings to Kerby's rho.
        self._rho_per_point = _LN10 / self._scale
        # 1 / (sqrt 2 beta): a Gaussian rating gap to z.
        self._z_per_point = 1.0 / (_SQRT2 * self._beta)
        # A two-entrant "full" Gaussian step is the "mle" step (module docstring).
        self._gauss_mle = self._rule == "mle" or self._multiplayer == "full"
        self._mle_gain = self._k * _MLE_GAIN

    @property
    def params(self) -> dict[str, float | str]:
        """Every parameter of the model with its value."""
        return {
            "initial": self._initial,
            "k_factor": self._k,
            "model": self._model,
            "scale": self._scale,
            "beta": self._beta,
            "rule": self._rule,
            "multiplayer": self._multiplayer,
            "advantage": self._advantage,
            "margin": self._margin,
            "stat_scale": self._stat_scale,
            "stat_weight": self._stat_weight,
            "stat_spread": self._stat_spread,
        }

    @property
    def quality_beta(self) -> float:
        """The performance deviation used for match quality.

        Gaussian: ``beta``. Logistic: the beta whose Gaussian win probability has the same
        slope at an even match, Phi(d / (sqrt 2 beta)) against 1/(1 + 10^(-d/scale)):
        1 / (2 beta sqrt pi) = ln 10 / (4 scale), so beta = 2 scale / (sqrt(pi) ln 10)
        (about 196 for scale 400).
        """
        if self._logistic:
            return 2.0 * self._scale / (math.sqrt(math.pi) * _LN10)
        return self._beta

    def rating(self, mu: float | None = None, sigma: float | None = None) -> Rating:
        """A new player's rating (``initial``), or rating ``mu``; sigma is always 0.0.

        An Elo rating has no uncertainty: ``sigma`` is accepted for the shared protocol and
        ignored.
        """
        if mu is None:
            return Rating(self._initial, 0.0)
        value = check_finite("mu", mu)
        if abs(value) > MAX_ABS_RATING:
            raise RatingInputError("mu", f"must be within +-{MAX_ABS_RATING:g}")
        return Rating(value, 0.0)

    # ------------------------------------------------------------------ two players

    def _duel(self, score: float, gap: float) -> float:
        """The delta of player i in one duel: outcome score S, gap d = r_i - r_j."""
        if self._logistic:
            x = -gap * self._rho_per_point
            p = 1.0 / (1.0 + _exp(x)) if x < 700.0 else 0.0
            return self._k * (score - p)
        z = gap * self._z_per_point
        if self._gauss_mle:
            gain = self._mle_gain
            if score == 1.0:
                return gain * _inverse_mills(z)
            if score == 0.0:
                return -gain * _inverse_mills(-z)
            return gain * (score * _inverse_mills(z) - (1.0 - score) * _inverse_mills(-z))
        return self._k * (score - 0.5 * _erfc(-z * _INV_SQRT2))

    def rate_1vs1(
        self, winner: Rating, loser: Rating, drawn: bool = False
    ) -> tuple[Rating, Rating]:
        """New (winner, loser) ratings after one game; ``drawn`` scores it a draw.

        The same numbers as ``rate([[winner], [loser]])`` (ranks [0, 1], or [0, 0] when
        drawn), on a fast path: a handful of float operations and the two new ratings.
        """
        if type(winner) is Rating and type(loser) is Rating:
            rw = winner[0]
            rl = loser[0]
            if -MAX_ABS_RATING <= rw <= MAX_ABS_RATING and -MAX_ABS_RATING <= rl <= MAX_ABS_RATING:
                if self._logistic:
                    x = (rl - rw) * self._rho_per_point
                    p = 1.0 / (1.0 + _exp(x)) if x < 700.0 else 0.0
                    d = self._k * ((0.5 if drawn else 1.0) - p)
                elif drawn:
                    d = self._duel(0.5, rw - rl)
                else:
                    # _duel(1.0, rw - rl) inlined, with the same arithmetic.
                    z = (rw - rl) * self._z_per_point
                    if not self._gauss_mle:
                        d = self._k * (1.0 - 0.5 * _erfc(-z * _INV_SQRT2))
                    elif z > _MILLS_TAIL:
                        d = self._mle_gain * (
                            _INV_SQRT_2PI * _exp(-0.5 * z * z) / (0.5 * _erfc(-z * _INV_SQRT2))
                        )
                    else:
                        d = self._mle_gain * _inverse_mills(z)
                return _new_rating(Rating, (rw + d, 0.0)), _new_rating(Rating, (rl - d, 0.0))
        _check_player("winner", winner)
        _check_player("loser", loser)
        d = self._duel(0.5 if drawn else 1.0, winner.mu - loser.mu)
        return Rating(winner.mu + d, 0.0), Rating(loser.mu - d, 0.0)

    # ------------------------------------------------------------------ any match

    def rate(
        self,
        teams: Teams,
        ranks: Sequence[float] | None = None,
        scores: Sequence[float] | None = None,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
        player_scores: PlayerScores | None = None,
    ) -> list[list[Rating]]:
        """New ratings after a match, in the shape of ``teams``; inputs are not mutated.

        With ``advantage``, every duel and the team means are taken at the ratings the
        teams play at (``shifted``); the deltas are added to the ratings themselves.
        """
        check_teams(teams, bayesian=False)
        z = standard_scores(teams, player_scores, self._stat_spread)
        new = self._rate_outcome(teams, ranks, scores, weights, advantage)
        if z is None or self._stat_scale == 0.0:
            return new
        # The Gaussian evidence's gradient step: each rating stat_weight of the way to
        # e_i = c + stat_scale z_i.
        centre = statistic_centre(teams, z)
        scale = self._stat_scale
        eta = self._stat_weight
        return [
            [
                r if x != x else Rating(_clamped(r.mu + eta * (centre + scale * x - r.mu)), 0.0)
                for r, x in zip(team, row, strict=True)
            ]
            for team, row in zip(new, z, strict=True)
        ]

    def _rate_outcome(
        self,
        teams: Teams,
        ranks: Sequence[float] | None,
        scores: Sequence[float] | None,
        weights: Weights | None,
        advantage: Sequence[float] | None,
    ) -> list[list[Rating]]:
        """The outcome's update (:meth:`rate` without the statistics)."""
        team_ranks = outcome_ranks(len(teams), ranks, scores)
        ws = check_weights(teams, weights)
        _check_range(teams)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        played = teams if offsets is None else shifted(teams, offsets)
        gain = 1.0
        if self._margin > 0.0 and scores is not None and len(teams) == 2:
            won_by = abs(float(scores[0]) - float(scores[1]))
            if won_by > 1.0:
                gain = 1.0 + self._margin * math.log(won_by)
        if ws is None and len(teams) == 2 and len(teams[0]) == 1 and len(teams[1]) == 1:
            ra, rb = team_ranks
            score = 1.0 if ra < rb else (0.0 if ra > rb else 0.5)
            d = gain * self._duel(score, played[0][0].mu - played[1][0].mu)
            return [[Rating(teams[0][0].mu + d, 0.0)], [Rating(teams[1][0].mu - d, 0.0)]]
        if self._multiplayer == "full":
            deltas = self._full_deltas(played, team_ranks, ws)
        elif (players := sum(len(team) for team in teams)) <= _SMALL_MATCH:
            deltas = self._pairwise_deltas_small(played, team_ranks, ws)
        elif players > LARGE_MATCH_PLAYERS:
            deltas = self._pairwise_deltas_blocks(played, team_ranks, ws)
        else:
            deltas = self._pairwise_deltas(played, team_ranks, ws)
        if gain != 1.0:
            deltas = [[gain * float(d) for d in row] for row in deltas]
        return [
            [Rating(r.mu + float(d), 0.0) for r, d in zip(team, row, strict=True)]
            for team, row in zip(teams, deltas, strict=True)
        ]

    def _duel_matrix(self, score: FloatArray, gap: FloatArray) -> FloatArray:
        """``_duel`` elementwise over matrices of scores and gaps."""
        if self._logistic:
            out: FloatArray = self._k * (score - _special.expit(gap * self._rho_per_point))
            return out
        z = gap * self._z_per_point
        if self._gauss_mle:
            out = self._mle_gain * (
                score * _inverse_mills_array(z) - (1.0 - score) * _inverse_mills_array(-z)
            )
            return out
        out = self._k * (score - _special.ndtr(z))
        return out

    def _pairwise_deltas_small(
        self, teams: Teams, team_ranks: list[float], ws: list[list[float]] | None
    ) -> list[list[float]]:
        """The duelling heuristic in plain floats: faster than arrays for a few players."""
        team_of = [j for j, team in enumerate(teams) for _ in team]
        mus = [p.mu for team in teams for p in team]
        w = [1.0] * len(mus) if ws is None else [x for row in ws for x in row]
        n = len(mus)
        delta = [0.0] * n
        duel = self._duel
        for a in range(n):
            ta = team_of[a]
            ra = team_ranks[ta]
            for b in range(a + 1, n):
                tb = team_of[b]
                if ta == tb:
                    continue
                rb = team_ranks[tb]
                score = 1.0 if ra < rb else (0.0 if ra > rb else 0.5)
                d = duel(score, mus[a] - mus[b]) * (w[a] * w[b])
                delta[a] += d
                delta[b] -= d
        if self._multiplayer == "pairwise_mean":
            delta = [d / (n - len(teams[team_of[i]])) for i, d in enumerate(delta)]
        out: list[list[float]] = []
        start = 0
        for team in teams:
            out.append(delta[start : start + len(team)])
            start += len(team)
        return out

    def _pairwise_deltas(
        self, teams: Teams, team_ranks: list[float], ws: list[list[float]] | None
    ) -> list[list[float]]:
        """Duelling heuristic: every player against every player of another team."""
        r = np.array([p.mu for team in teams for p in team], dtype=np.float64)
        sizes = [len(team) for team in teams]
        team_of = np.repeat(np.arange(len(teams)), sizes)
        rank = np.asarray(team_ranks, dtype=np.float64)[team_of]
        score = np.where(
            rank[:, None] < rank[None, :], 1.0, np.where(rank[:, None] > rank[None, :], 0.0, 0.5)
        )
        duel = self._duel_matrix(score, r[:, None] - r[None, :])
        # Exactly antisymmetric (delta_ij = -delta_ji), so the sum over all duels is zero.
        duel = 0.5 * (duel - duel.T)
        opponent = team_of[:, None] != team_of[None, :]
        if ws is None:
            duel = np.where(opponent, duel, 0.0)
        else:
            w = np.array([x for row in ws for x in row], dtype=np.float64)
            duel = np.where(opponent, duel * (w[:, None] * w[None, :]), 0.0)
        delta = duel.sum(axis=1)
        if self._multiplayer == "pairwise_mean":
            delta = delta / (r.size - np.asarray(sizes, dtype=np.float64)[team_of])
        out: list[list[float]] = []
        start = 0
        for n in sizes:
            out.append(delta[start : start + n].tolist())
            start += n
        return out

    def _pairwise_deltas_blocks(
        self, teams: Teams, team_ranks: list[float], ws: list[list[float]] | None
    ) -> list[list[float]]:
        """``_pairwise_deltas`` for many players, over blocks of pairs (``pair_blocks``)
        instead of players x players matrices. Each duel is evaluated once, from the side
        of the earlier player, and added to one player and taken from the other: the
        matrix form evaluates both sides and averages them, delta_ij = (d_ij - d_ji) / 2,
        and as d_ji = -d_ij exactly in the mathematics (S_ji = 1 - S_ij, P_ji = 1 -
        P_ij) the two agree to rounding, with half the work; the sums are zero either way.
        """
        r = np.array([p.mu for team in teams for p in team], dtype=np.float64)
        sizes = [len(team) for team in teams]
        team_of = np.repeat(np.arange(len(teams)), sizes)
        rank = np.asarray(team_ranks, dtype=np.float64)[team_of]
        w = None if ws is None else np.array([x for row in ws for x in row], dtype=np.float64)
        n = r.size
        delta = np.zeros(n)
        for block in pair_blocks(n):
            a, b = block.first, block.second
            ra = rank[a]
            rb = rank[b]
            score = np.where(ra < rb, 1.0, np.where(ra > rb, 0.0, 0.5))
            duel = self._duel_matrix(score, r[a] - r[b])
            if w is not None:
                duel = duel * (w[a] * w[b])
            duel = np.where(block.upper & (team_of[a] != team_of[b]), duel, 0.0)
            delta[block.rows] += duel.sum(axis=1)
            delta[block.cols] -= duel.sum(axis=0)
        if self._multiplayer == "pairwise_mean":
            delta = delta / (n - np.asarray(sizes, dtype=np.float64)[team_of])
        out: list[list[float]] = []
        start = 0
        for size in sizes:
            out.append(delta[start : start + size].tolist())
            start += size
        return out

    def _full_deltas(
        self, teams: Teams, team_ranks: list[float], ws: list[list[float]] | None
    ) -> list[list[float]]:
        """One gradient step on the likelihood of the whole finishing order."""
        team_rating, played = _team_ratings(teams, ws)
        active = [j for j in range(len(teams)) if played[j] > 0.0]
        team_delta = [0.0] * len(teams)
        if len(active) == 2:
            # Two entrants: the likelihood step is the model's duel on the team ratings
            # (classic for logistic, "mle" for Gaussian), a tie averaging the two orders.
            a, b = active
            ra, rb = team_ranks[a], team_ranks[b]
            score = 1.0 if ra < rb else (0.0 if ra > rb else 0.5)
            team_delta[a] = self._duel(score, team_rating[a] - team_rating[b])
            team_delta[b] = -team_delta[a]
        elif len(active) > 2:
            active_ranks = [team_ranks[j] for j in active]
            groups = _rank_groups(active_ranks)
            r = np.array([team_rating[j] for j in active], dtype=np.float64)
            if self._logistic and len(groups) == len(active):
                grad_list = _plackett_luce_gradient_one(
                    [x * self._rho_per_point for x in r.tolist()], [g[0] for g in groups]
                )
                step = self._k * np.asarray(grad_list)
            elif self._logistic:
                rho = [x * self._rho_per_point for x in r.tolist()]
                if len(active) > LARGE_MATCH_TEAMS:
                    step = self._k * np.asarray(_plackett_luce_tie_gradient_array(rho, groups))
                else:
                    step = self._k * np.asarray(_plackett_luce_tie_gradient(rho, groups))
            else:
                orders = _thurstone_orders(groups, r.tolist())
                _, g = order_log_likelihood(r / self._beta, orders)
                grad = g.mean(axis=0)
                if len(groups) < len(active):
                    grad = _equal_treatment(grad, active_ranks, r.tolist())
                step = self._k * (math.sqrt(math.pi) / 2.0) * grad
            for j, s in zip(active, step.tolist(), strict=True):
                team_delta[j] = s
        if ws is None:
            return [[team_delta[j]] * len(team) for j, team in enumerate(teams)]
        out: list[list[float]] = []
        for j, team in enumerate(teams):
            if played[j] > 0.0:
                n = len(team)
                out.append([n * team_delta[j] * (w / played[j]) for w in ws[j]])
            else:
                out.append([0.0] * len(team))
        return out

    # ------------------------------------------------------------------ predictions

    def _entrants(
        self, teams: Teams, weights: Weights | None, advantage: Sequence[float] | None
    ) -> list[float]:
        """Checked teams as the ratings they play at: (weighted) mean plus advantage."""
        check_teams(teams, bayesian=False)
        ws = check_weights(teams, weights)
        _check_range(teams)
        team_rating, _ = _team_ratings(teams, ws)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        if offsets is not None:
            team_rating = [r + o for r, o in zip(team_rating, offsets, strict=True)]
        return team_rating

    def win_probabilities(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> list[float]:
        """P(each team finishes first), summing to 1; each team rated by its (weighted) mean
        plus its advantage.

        Two teams: the model's P(i beats j). More: logistic, the Plackett-Luce first-place
        probability softmax(rho); Gaussian, P(N(R_j, beta^2) is the highest), by
        ``gaussian_win_probabilities``.
        """
        team_rating = self._entrants(teams, weights, advantage)
        if self._logistic:
            rho = np.asarray(team_rating, dtype=np.float64) * self._rho_per_point
            if len(teams) == 2:
                p = float(_special.expit(rho[0] - rho[1]))
                return [p, 1.0 - p]
            e = np.exp(rho - rho.max())
            probs: list[float] = (e / e.sum()).tolist()
            return probs
        if len(teams) == 2:
            z = (team_rating[0] - team_rating[1]) * self._z_per_point
            p = float(_special.ndtr(z))
            return [p, 1.0 - p]
        return gaussian_win_probabilities(team_rating, [self._beta * self._beta] * len(teams))

    def team_strengths(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> TeamStrengths:
        """Each team's (weight-averaged) mean rating R_j plus its advantage, the entrant
        ``win_probabilities`` compares; variance 0 (``app.rating.pairwise``)."""
        mean = np.asarray(self._entrants(teams, weights, advantage), dtype=np.float64)
        return TeamStrengths(mean, np.zeros_like(mean))

    def pair_win_probabilities(self, first: TeamStrengths, second: TeamStrengths) -> FloatArray:
        """P(first[i] beats second[i]) = the model's P(i beats j) of the two team ratings:
        1 / (1 + 10^(-(R_a - R_b) / scale)) or Phi((R_a - R_b) / (sqrt 2 beta)), as
        ``win_probabilities`` of each pair alone."""
        if self._logistic:
            rho = first.mean * self._rho_per_point - second.mean * self._rho_per_point
            out: FloatArray = _special.expit(rho)
            return out
        out = _special.ndtr((first.mean - second.mean) * self._z_per_point)
        return out

    def quality(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float:
        """Match quality on the team model of ``win_probabilities``, in (0, 1].

        Each team plays as one entrant rated by its (weight-averaged) mean R_j, as in
        ``win_probabilities`` and the "full" update, with performance N(R_j, beta_q^2),
        beta_q = ``quality_beta``: the paper's equation 7 generalised with no skill
        uncertainty, q = exp(-sum_j (R_j - R_bar)^2 / (2 beta_q^2)) (``entrant_quality``).
        Two teams: q = exp(-(R_1 - R_2)^2 / (4 beta_q^2)), a decreasing function of
        |P(1 beats 2) - 1/2| for both models (exp(-z^2/2) with P = Phi(z) for the gaussian
        model), so a 2 v 1 of equal ratings is even (q = 1, P = 1/2), whatever the sizes.
        """
        return entrant_quality(self._entrants(teams, weights, advantage), self.quality_beta)

    def draw_probability(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float | None:
        """None: the Elo models here have no draw model (a draw is scored S = 1/2)."""
        self._entrants(teams, weights, advantage)
        return None


def _check_player(argument: str, rating: object) -> None:
    if not isinstance(rating, Rating):
        raise RatingInputError(argument, "is not a Rating")
    mu = rating[0]
    if isinstance(mu, bool) or not isinstance(mu, int | float) or not math.isfinite(mu):
        raise RatingInputError(argument, "mu is not finite")
    if abs(mu) > MAX_ABS_RATING:
        raise RatingInputError(argument, f"mu must be within +-{MAX_ABS_RATING:g}")


def _clamped(rating: float) -> float:
    return min(max(rating, -MAX_ABS_RATING), MAX_ABS_RATING)


def _check_range(teams: Teams) -> None:
    for j, team in enumerate(teams):
        for i, p in enumerate(team):
            if abs(p.mu) > MAX_ABS_RATING:
                raise RatingInputError(
                    "teams", f"teams[{j}][{i}].mu must be within +-{MAX_ABS_RATING:g}"
                )


def _team_ratings(teams: Teams, ws: list[list[float]] | None) -> tuple[list[float], list[float]]:
    """Each team's (weight-averaged) mean rating and its total playing time W_j.

    A team whose weights are all 0 is rated by its plain mean (and has W_j = 0).
    """
    ratings: list[float] = []
    played: list[float] = []
    for j, team in enumerate(teams):
        plain = math.fsum(p.mu for p in team) / len(team)
        if ws is None:
            ratings.append(plain)
            played.append(float(len(team)))
            continue
        total = math.fsum(ws[j])
        played.append(total)
        if total > 0.0:
            share = [w / total for w in ws[j]]  # normalised first: subnormal weights stay exact
            ratings.append(math.fsum(w * p.mu for w, p in zip(share, team, strict=True)))
        else:
            ratings.append(plain)
    return ratings, played


def _rank_groups(ranks: list[float]) -> list[list[int]]:
    """The entrants grouped by equal rank, best rank first, each group in entrant order."""
    by_rank: dict[float, list[int]] = {}
    for j, rk in enumerate(ranks):
        by_rank.setdefault(rk, []).append(j)
    return [by_rank[rk] for rk in sorted(by_rank)]


def _group_orders(group: list[int], ratings: list[float]) -> list[tuple[int, ...]]:
    """The orders of one tied group that the Gaussian "full" update averages over.

    Up to ``EXACT_TIE_SIZE`` members: every order (the exact average). Larger, m members:
    with p the least prime >= m and the members sorted by rating (best first, then by
    position) numbered i = 0 .. m-1, one order per affine map i -> (a i + b) mod p
    (a = 1 .. p-1, b = 0 .. p-1), the members placed by increasing (a i + b) mod p;
    repeats are dropped. For prime m this is the affine group AGL(1, p), sharply
    2-transitive: every ordered pair of members takes every ordered pair of places
    exactly once, so every place and every pair of places is balanced as in the exact
    average (module docstring gives the measured deviation).
    """
    if len(group) <= EXACT_TIE_SIZE:
        return list(permutations(group))
    base = sorted(group, key=lambda j: (-ratings[j], j))
    return [tuple(base[i] for i in row) for row in _affine_patterns(len(base))]


@lru_cache(maxsize=64)
def _affine_patterns(m: int) -> tuple[tuple[int, ...], ...]:
    """The distinct orders of 0 .. m-1 by increasing (a i + b) mod p (``_group_orders``)."""
    p = _least_prime_from(m)
    seen: dict[tuple[int, ...], None] = {}
    for a in range(1, p):
        for b in range(p):
            keys = [(a * i + b) % p for i in range(m)]
            seen.setdefault(tuple(sorted(range(m), key=keys.__getitem__)))
    return tuple(seen)


def _least_prime_from(m: int) -> int:
    """The least prime >= m (m >= 2)."""
    p = m
    while any(p % d == 0 for d in range(2, math.isqrt(p) + 1)):
        p += 1
    return p


def _thurstone_orders(groups: list[list[int]], ratings: list[float]) -> npt.NDArray[np.intp]:
    """Every combination of the groups' orders (``_group_orders``), one finishing order a row."""
    if len(groups) == len(ratings):
        return np.asarray([[g[0] for g in groups]], dtype=np.intp)
    choices = [_group_orders(g, ratings) for g in groups]
    count = math.prod(len(c) for c in choices)
    if count > MAX_TIE_ORDERS:
        raise RatingInputError(
            "ranks",
            f"multiplayer 'full' with the gaussian model averages over {count} orders of the "
            f"tied teams here; at most {MAX_TIE_ORDERS} are supported (fewer tied groups fit)",
        )
    rows = [[j for part in choice for j in part] for choice in product(*choices)]
    return np.asarray(rows, dtype=np.intp)


def _equal_treatment(grad: FloatArray, ranks: list[float], ratings: list[float]) -> FloatArray:
    """The gradient averaged over each class of tied entrants with exactly equal ratings.

    The exact average over all orders gives such entrants equal components (they are
    exchangeable); averaging over the class is the projection onto that symmetry, so it
    keeps the sum (zero-sum updates) and can only move an approximate average closer to
    the exact one.
    """
    classes: dict[tuple[float, float], list[int]] = {}
    for j, key in enumerate(zip(ranks, ratings, strict=True)):
        classes.setdefault(key, []).append(j)
    out = grad.copy()
    for members in classes.values():
        if len(members) > 1:
            out[members] = grad[members].mean()
    return out


def _log_sum_exp(values: list[float]) -> float:
    """log sum e^v over ``values`` (-inf for none)."""
    if not values:
        return -math.inf
    top = max(values)
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


def _plackett_luce_tie_gradient(rho: list[float], groups: list[list[int]]) -> list[float]:
    """d log P / d rho averaged over every order of each tied group; Plackett-Luce.

    The groups (best first) occupy consecutive places. log P(order) = sum_j rho_j -
    sum over stages of log(the strengths not yet chosen); a stage inside group G removes
    one member, so with S the strength of every later group its denominator is
    log(S + sum_{l in T} e^rho_l), T the members of G not yet chosen. Over the m! orders
    of G taken uniformly, the set T before the stage that leaves k members is a uniform
    random k-subset, so the average of log P is

        sum_j rho_j - sum_G sum_{k=1..m} C(m, k)^-1 sum_{|T| = k} log(S_G + w(T)),

    exact with 2^m - 1 terms per group instead of m! orders (groups are independent:
    each stage depends on its own group's order only). Differentiating, entrant i loses
    e^rho_i / (S_G + w(T)) for every subset T of its own group that holds it and for
    every subset of every earlier group; everything is formed as exp(rho_i - log(...))
    with a non-positive exponent. Groups above ``MAX_TIE_SIZE`` are refused.
    """
    n = len(rho)
    grad = [1.0] * n
    later: list[int] = []  # every entrant of a later group
    for group in reversed(groups):
        m = len(group)
        if m > MAX_TIE_SIZE:
            raise RatingInputError(
                "ranks",
                f"multiplayer 'full' averages a tie over its subsets: at most "
                f"{MAX_TIE_SIZE} teams may tie for one place, got {m}",
            )
        log_rest = _log_sum_exp([rho[j] for j in later])
        members = [rho[j] for j in group]
        if m <= _SMALL_TIE:
            own, rest_lse = _tie_terms_small(members, log_rest)
        else:
            own, rest_lse = _tie_terms_array(members, log_rest)
        for j, loss in zip(group, own, strict=True):
            grad[j] -= loss
        # Every entrant of a later group is in the denominator of every stage of this one.
        for j in later:
            grad[j] -= math.exp(rho[j] + rest_lse)
        later.extend(group)
    mean = math.fsum(grad) / n
    return [g - mean for g in grad]


def _plackett_luce_tie_gradient_array(rho: list[float], groups: list[list[int]]) -> list[float]:
    """``_plackett_luce_tie_gradient`` for many entrants, in O(n) plus each group's subsets.

    The scalar form adds, for every group G, one term to each entrant of every later
    group and takes a fresh log-sum-exp of the later groups' strengths: O(n * groups).
    Here the later groups' log strength comes from a running log-sum-exp over the groups
    from the last up, and entrant j of group H loses e^(rho_j + log sum_{G < H} e^rest_G)
    at once, rest_G being the log of G's stage denominators (``_tie_terms_small``). A
    group of one (most of them) has the closed form own = e^(rho - log_den), rest = -log_den
    with log_den = log(S + e^rho), taken in arrays. Sums in another order than the scalar
    form: equal to rounding.
    """
    n = len(rho)
    x = np.asarray(rho, dtype=np.float64)
    count = len(groups)
    group_of = np.empty(n, dtype=np.intp)
    for g, group in enumerate(groups):
        if len(group) > MAX_TIE_SIZE:
            raise RatingInputError(
                "ranks",
                f"multiplayer 'full' averages a tie over its subsets: at most "
                f"{MAX_TIE_SIZE} teams may tie for one place, got {len(group)}",
            )
        group_of[group] = g
    own_lse = np.asarray([_log_sum_exp([rho[j] for j in group]) for group in groups])
    # log of the strength of every group after g: a running log-sum-exp from the last up.
    later = np.concatenate((np.logaddexp.accumulate(own_lse[::-1])[::-1][1:], [-np.inf]))
    grad = np.ones(n)
    rest = np.empty(count)
    single = np.asarray([len(group) == 1 for group in groups])
    if single.any():
        members = np.asarray([group[0] for group in groups])[single]
        log_den = np.logaddexp(later[single], x[members])
        grad[members] -= np.exp(x[members] - log_den)
        rest[single] = -log_den
    for g in np.flatnonzero(~single).tolist():
        group = groups[g]
        terms = [rho[j] for j in group]
        if len(group) <= _SMALL_TIE:
            own, rest[g] = _tie_terms_small(terms, float(later[g]))
        else:
            own, rest[g] = _tie_terms_array(terms, float(later[g]))
        grad[group] -= np.asarray(own)
    # Every stage of an earlier group G has entrant j in its denominator.
    earlier = np.concatenate(([-np.inf], np.logaddexp.accumulate(rest)[:-1]))
    grad -= np.exp(x + earlier[group_of])
    mean = math.fsum(grad.tolist()) / n
    out: list[float] = (grad - mean).tolist()
    return out


def _tie_terms_small(members: list[float], log_rest: float) -> tuple[list[float], float]:
    """For one tied group: each member's loss and log sum_T C(m,|T|)^-1 / (S + w(T)).

    Plain floats over the 2^m - 1 non-empty subsets T (``_plackett_luce_tie_gradient``).
    """
    m = len(members)
    own = [0.0] * m
    terms: list[float] = []
    for k in range(1, m + 1):
        log_coef = -math.log(math.comb(m, k))
        for subset in combinations(range(m), k):
            log_den = _log_add(log_rest, _log_sum_exp([members[i] for i in subset]))
            terms.append(log_coef - log_den)
            for i in subset:
                own[i] += math.exp(log_coef + members[i] - log_den)
    return own, _log_sum_exp(terms)


def _tie_terms_array(members: list[float], log_rest: float) -> tuple[list[float], float]:
    """``_tie_terms_small`` over arrays: one row per non-empty subset (bit mask)."""
    m = len(members)
    rho = np.asarray(members, dtype=np.float64)
    masks = np.arange(1, 2**m)
    inside = ((masks[:, None] >> np.arange(m)[None, :]) & 1).astype(bool)  # (2^m - 1, m)
    size = inside.sum(axis=1)
    log_coef = -np.log([float(math.comb(m, k)) for k in range(m + 1)])[size]
    masked = np.where(inside, rho[None, :], -np.inf)
    top = masked.max(axis=1)
    log_w = top + np.log(np.exp(masked - top[:, None]).sum(axis=1))
    log_den = np.logaddexp(log_rest, log_w)
    share = np.exp(np.where(inside, masked - log_den[:, None], -np.inf) + log_coef[:, None])
    own: list[float] = share.sum(axis=0).tolist()
    terms = log_coef - log_den
    top_term = float(terms.max())
    rest_lse = top_term + math.log(float(np.exp(terms - top_term).sum()))
    return own, rest_lse


def _log_add(a: float, b: float) -> float:
    """log(e^a + e^b) without overflow (a may be -inf)."""
    if a < b:
        a, b = b, a
    if b == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


def _plackett_luce_gradient_one(rho: list[float], order: list[int]) -> list[float]:
    """``_plackett_luce_gradient`` for a single order, in plain floats (small matches)."""
    n = len(order)
    ordered = [rho[j] for j in order]
    lse = [0.0] * n
    acc = -math.inf
    for i in range(n - 1, -1, -1):
        acc = _log_add(acc, ordered[i])
        lse[i] = acc
    grad = [0.0] * n
    inner = -math.inf
    for k in range(n):
        inner = _log_add(inner, -lse[k])
        grad[order[k]] = 1.0 - math.exp(ordered[k] + inner)
    mean = math.fsum(grad) / n
    return [g - mean for g in grad]


def _plackett_luce_gradient(rho: FloatArray, orders: npt.NDArray[np.intp]) -> FloatArray:
    """d log P(order) / d rho, averaged over ``orders``; Plackett-Luce, winner chosen first.

    Kerby section 3.2 (with the orientation reversed, so that the first chosen wins):
    P(order) = prod_i e^rho_(i) / sum_{l >= i} e^rho_(l), hence for the entrant in place k
    d log P / d rho_(k) = 1 - sum_{i <= k} e^rho_(k) / sum_{l >= i} e^rho_(l).
    The suffix sums are log-sum-exps and the inner sum e^{rho_(k) + log sum_{i<=k} e^-lse_i}
    has an exponent <= log k, so nothing overflows for any rating gap.
    """
    ordered = rho[orders]  # (orders, n)
    lse = np.logaddexp.accumulate(ordered[:, ::-1], axis=1)[:, ::-1]
    inner = np.logaddexp.accumulate(-lse, axis=1)
    by_place = 1.0 - np.exp(ordered + inner)
    grad = np.zeros(orders.shape, dtype=np.float64)
    np.put_along_axis(grad, orders, by_place, axis=1)
    out: FloatArray = grad.mean(axis=0)
    # The exact gradient sums to zero (shift invariance); remove rounding off that direction.
    out = out - out.mean()
    return out
