"""Glicko-2: a rating, a rating deviation and a volatility per player (Glickman).

Source: ``rating-models.md`` section 6; M. E. Glickman, "Example of the Glicko-2 system"
(the steps 1 to 8 cited below), and "Dynamic paired comparison models with stochastic
variances" (Journal of Applied Statistics 28, 2001) for the model behind it.

A player has a rating r, a deviation RD and a volatility sigma. The shared ``Rating``
carries r as ``mu`` and RD as ``sigma``; the volatility rides along in a
``VolatileRating`` (``app.rating.base``). On the internal (Glicko-2) scale
mu = (r - 1500) / 173.7178 and phi = RD / 173.7178; only differences of mu enter an
update, so it is computed from rating gaps and works the same around any ``rating``.

One rating period of a player with (mu, phi, sigma) against opponents j with
(mu_j, phi_j) and scores s_j in {1, 1/2, 0} (step 3 to 8):

- g(phi) = 1 / sqrt(1 + 3 phi^2 / pi^2); E_j = 1 / (1 + exp(-g(phi_j) (mu - mu_j))).
- v = 1 / sum_j g(phi_j)^2 E_j (1 - E_j); Delta = v sum_j g(phi_j) (s_j - E_j).
- sigma' = exp(A / 2) with A the root of
  f(x) = e^x (Delta^2 - phi^2 - v - e^x) / (2 (phi^2 + v + e^x)^2) - (x - a) / tau^2,
  a = ln(sigma^2), found by the Illinois variant of regula falsi (step 5).
- phi* = sqrt(phi^2 + sigma'^2); phi' = 1 / sqrt(1 / phi*^2 + 1 / v);
  mu' = mu + phi'^2 sum_j g(phi_j) (s_j - E_j).
- A player without games in the period keeps mu and sigma; phi' = sqrt(phi^2 + sigma^2).

The sums are kept as the information I = 1 / v and the score S = Delta / v, and f is
evaluated as e^x (S^2 - I^2 phi^2 - I - I^2 e^x) / (2 (I phi^2 + 1 + I e^x)^2) - (x - a) /
tau^2 (the same function, numerator and denominator multiplied by I^2), which stays
finite when the games carry almost no information (I -> 0: an opponent of huge deviation,
a weight near 0, a gap so large that E_j (1 - E_j) underflows).

The volatility iteration (``_new_volatility``): tolerance ``VOLATILITY_TOLERANCE`` (1e-6
on |B - A|, the paper's epsilon), at most ``VOLATILITY_MAX_ROUNDS`` rounds. Its root is
kept in [``MIN_VOLATILITY``, ``MAX_VOLATILITY``]: when f does not change sign inside that
interval the nearer end is the answer. Within the parameter ranges the root lies far
inside it (volatilities of real players are 0.03 to 0.3); the bounds only keep a run of
absurd upsets from growing a volatility (and with it every later deviation) without limit.

Rating periods. The service rates a match as it arrives, so each match is one rating
period for the players in it (the usual choice of online services; Glickman's periods of
10 to 15 games per player suit batch rating, ``rate_period``). Time away is handled as the
other models' ``tau_per_day``: before a match the deviation grows as
RD^2 + ``deviation_per_day``^2 * days (``age``). Glicko-2's own rule for an empty period,
phi' = sqrt(phi^2 + sigma^2), maps onto it for a period of P days and a volatility sigma
as deviation_per_day = 173.7178 sigma / sqrt(P) (0.06 and 7-day periods: about 3.94); the
ladder uses one constant for every player, as Glicko (1) does with its c.

Teams and free-for-alls (``rate``): each team plays as one composite opponent, its
(weighted) mean rating and the root mean square of its (weighted) deviations; a player's
period is one game against every other team's composite, scored 1, 1/2 or 0 from the two
teams' ranks. It is the project's pairwise Elo decomposition (the TrueSkill paper's
duelling heuristic, section 4.1) with Glickman's multi-game period in place of the
averaged Elo steps: a free-for-all of k players is, for each player, a period of k - 1
games, exactly as Glickman rates a period; a 1 v 1 is the paper's update; a team of equal
players is the same opponent as one such player. Partial play w_i in [0, 1] counts each of
the player's games w_i times (I and S scaled by w_i); a player with w_i = 0 did not play:
an empty period.

Predictions. Two entrants (players or composites): P(1 beats 2) = 1 / (1 + exp(-g(phi_c)
(mu_1 - mu_2))), phi_c = sqrt(phi_1^2 + phi_2^2) (Glickman's expected outcome with the
combined deviation). More entrants: the Plackett-Luce first place, softmax of
g(phi_c) mu_j, with phi_c^2 = 2 * (the mean phi_j^2), which for two entrants is the
formula above. Quality is ``entrant_quality`` on the same entrants with the performance
deviation whose Gaussian win probability has the same slope at an even match,
beta = 2 * 173.7178 / (sqrt(pi) g(phi_c)) (as Elo's logistic ``quality_beta``): a
quality of 1 is even chances. Glicko-2 has no draw model: a draw is scored 1/2 and
``draw_probability`` is ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np

from app.rating.base import (
    PlayerScores,
    Rating,
    RatingInputError,
    Teams,
    VolatileRating,
    Weights,
    age,
    check_finite,
    check_positive,
    check_teams,
    check_weights,
    outcome_ranks,
    standard_scores,
    team_offsets,
)
from app.rating.pairwise import LARGE_MATCH_TEAMS, PAIR_BLOCK, FloatArray, TeamStrengths
from app.rating.params import ADVANTAGE, MAX_LENGTH, MAX_MEAN, MIN_LENGTH, Parameter
from app.rating.quality import entrant_quality

__all__ = [
    "DEFAULT_CONSERVATIVE_K",
    "MAX_ABS_RATING",
    "MAX_TAU",
    "MAX_VOLATILITY",
    "MIN_TAU",
    "MIN_VOLATILITY",
    "PARAMETERS",
    "SCALE",
    "VOLATILITY_MAX_ROUNDS",
    "VOLATILITY_TOLERANCE",
    "Glicko2",
]

#: Rating points per unit of the internal Glicko-2 scale (400 / ln 10, as printed).
SCALE: Final = 173.7178
#: The smallest and largest volatility (internal scale) a rating holds; see the module.
MIN_VOLATILITY: Final = 1e-6
MAX_VOLATILITY: Final = 1.0
#: The system constant tau: the paper advises 0.3 to 1.2; every value here stays finite.
MIN_TAU: Final = 0.05
MAX_TAU: Final = 5.0
#: The volatility iteration stops when |B - A| <= this (the paper's epsilon) ...
VOLATILITY_TOLERANCE: Final = 1e-6
#: ... or after this many rounds (it converges in well under 20).
VOLATILITY_MAX_ROUNDS: Final = 100
#: Ratings and deviations beyond this magnitude are refused (keeps squares finite).
MAX_ABS_RATING: Final = 1e12
#: Deviations subtracted for the leaderboard's conservative rating r - k RD: Glickman's
#: approximate 95% interval r +- 2 RD.
DEFAULT_CONSERVATIVE_K: Final = 2.0

#: The parameters a ladder may set, with the ranges it accepts (``app.rating.params``).
PARAMETERS: Final = (
    Parameter("rating", 1500.0, "Rating of a new player.", "r_0", -MAX_MEAN, MAX_MEAN),
    Parameter(
        "deviation",
        350.0,
        "Rating deviation RD of a new player.",
        "RD_0",
        MIN_LENGTH,
        MAX_LENGTH,
    ),
    Parameter(
        "volatility",
        0.06,
        "Volatility of a new player (internal scale): how erratic its results are.",
        "sigma_0",
        MIN_VOLATILITY,
        MAX_VOLATILITY,
    ),
    Parameter(
        "tau",
        0.5,
        "System constant: how fast volatilities change (the paper advises 0.3 to 1.2).",
        "tau",
        MIN_TAU,
        MAX_TAU,
    ),
    Parameter(
        "deviation_per_day",
        0.0,
        "Deviation added per day away: RD^2 grows by deviation_per_day^2 * days (0: off).",
        "",
        0.0,
        MAX_LENGTH,
    ),
    Parameter(
        "conservative_k",
        DEFAULT_CONSERVATIVE_K,
        "Deviations subtracted for the conservative rating r - k RD (the leaderboard's).",
        "k",
        0.0,
        100.0,
    ),
    ADVANTAGE,
)

_Q: Final = 1.0 / SCALE
#: 3 / pi^2, in g(phi) = 1 / sqrt(1 + 3 phi^2 / pi^2).
_G3: Final = 3.0 / (math.pi * math.pi)
_LOG_MIN_VAR: Final = 2.0 * math.log(MIN_VOLATILITY)
_LOG_MAX_VAR: Final = 2.0 * math.log(MAX_VOLATILITY)
_TWO_OVER_SQRT_PI: Final = 2.0 / math.sqrt(math.pi)
_sqrt = math.sqrt
_exp = math.exp
_log = math.log
_new_tuple = tuple.__new__


def _new(mu: float, sigma: float, volatility: float) -> VolatileRating:
    """A ``VolatileRating`` without the checks of its constructor (the hot path)."""
    r: VolatileRating = _new_tuple(VolatileRating, (mu, sigma))
    r._volatility = volatility
    return r


def _bounded(r: float) -> float:
    """A new rating kept within +-``MAX_ABS_RATING``, the range every rating input takes, so
    that whatever a model computed can be rated again (only absurd parameters and seeds,
    such as deviations of 1e6 over centuries, ever reach it)."""
    return -MAX_ABS_RATING if r < -MAX_ABS_RATING else MAX_ABS_RATING if r > MAX_ABS_RATING else r


def _g(phi2: float) -> float:
    """Glickman's g(phi) = 1 / sqrt(1 + 3 phi^2 / pi^2), from phi^2 (step 3)."""
    return 1.0 / _sqrt(1.0 + _G3 * phi2)


def _expected(z: float) -> tuple[float, float]:
    """E = 1 / (1 + e^-z) and E (1 - E), without overflow for any z."""
    if z >= 0.0:
        t = _exp(-z)
        e = 1.0 / (1.0 + t)
        return e, t * e * e
    t = _exp(z)
    e = t / (1.0 + t)
    inv = 1.0 / (1.0 + t)
    return e, t * inv * inv


def _expected_array(z: FloatArray) -> FloatArray:
    """``_expected``'s E elementwise: 1 / (1 + e^-z), on the side where exp cannot overflow."""
    t = np.exp(-np.abs(z))
    out: FloatArray = np.where(z >= 0.0, 1.0 / (1.0 + t), t / (1.0 + t))
    return out


def _new_volatility(sigma: float, phi2: float, info: float, score: float, tau: float) -> float:
    """The new volatility sigma' (step 5): the root A of f by the Illinois algorithm.

    f(x) = e^x (S^2 - I^2 phi^2 - I - I^2 e^x) / (2 (I phi^2 + 1 + I e^x)^2) - (x - a)/tau^2
    is the paper's f with v = 1 / I and Delta = S / I (module docstring). Start A = a;
    B = ln(Delta^2 - phi^2 - v) when Delta^2 > phi^2 + v, else the first a - k tau
    (k = 1, 2, ...) with f >= 0; then C = A + (A - B) f(A) / (f(B) - f(A)); if
    f(C) f(B) <= 0 then A, f(A) = B, f(B) else f(A) = f(A) / 2; B, f(B) = C, f(C); until
    |B - A| <= ``VOLATILITY_TOLERANCE`` (at most ``VOLATILITY_MAX_ROUNDS`` rounds).
    sigma' = exp(A / 2), kept in [MIN_VOLATILITY, MAX_VOLATILITY] (module docstring).
    """
    a = 2.0 * _log(sigma)
    i2 = info * info
    c0 = score * score - i2 * phi2 - info
    p0 = info * phi2 + 1.0
    inv_tau2 = 1.0 / (tau * tau)
    var = sigma * sigma
    den = p0 + info * var
    f_a = var * (c0 - i2 * var) / (2.0 * den * den)
    if f_a == 0.0:
        return sigma
    big_a = a
    if c0 > 0.0:
        big_b = _log(c0) - 2.0 * _log(info) if info > 0.0 else math.inf
        if big_b > _LOG_MAX_VAR:
            big_b = _LOG_MAX_VAR
            ex = _exp(big_b)
            den = p0 + info * ex
            f_b = ex * (c0 - i2 * ex) / (2.0 * den * den) - (big_b - a) * inv_tau2
            if f_b > 0.0:
                return MAX_VOLATILITY
        elif big_b < _LOG_MIN_VAR:
            big_b = _LOG_MIN_VAR
            ex = _exp(big_b)
            den = p0 + info * ex
            f_b = ex * (c0 - i2 * ex) / (2.0 * den * den) - (big_b - a) * inv_tau2
            if f_b < 0.0:
                return MIN_VOLATILITY
        else:
            # e^B = Delta^2 - phi^2 - v exactly: the first term of f is 0 there.
            f_b = -(big_b - a) * inv_tau2
    else:
        k = 1.0
        while True:
            big_b = a - k * tau
            if big_b <= _LOG_MIN_VAR:
                big_b = _LOG_MIN_VAR
            ex = _exp(big_b)
            den = p0 + info * ex
            f_b = ex * (c0 - i2 * ex) / (2.0 * den * den) - (big_b - a) * inv_tau2
            if f_b >= 0.0:
                break
            if big_b == _LOG_MIN_VAR:
                return MIN_VOLATILITY
            k += 1.0
    for _ in range(VOLATILITY_MAX_ROUNDS):
        if abs(big_b - big_a) <= VOLATILITY_TOLERANCE:
            break
        big_c = big_a + (big_a - big_b) * f_a / (f_b - f_a)
        ex = _exp(big_c)
        den = p0 + info * ex
        f_c = ex * (c0 - i2 * ex) / (2.0 * den * den) - (big_c - a) * inv_tau2
        if f_c * f_b <= 0.0:
            big_a = big_b
            f_a = f_b
        else:
            f_a *= 0.5
        big_b = big_c
        f_b = f_c
    new = _exp(0.5 * big_a)
    if new < MIN_VOLATILITY:
        return MIN_VOLATILITY
    return MAX_VOLATILITY if new > MAX_VOLATILITY else new


class Glicko2:
    """The Glicko-2 rating model (the ``RatingModel`` protocol of ``app.rating.base``).

    Parameters (``rating-models.md`` section 6, Glickman's symbols): ``rating`` (r_0),
    ``deviation`` (RD_0) and ``volatility`` (sigma_0) of a new player; ``tau`` the system
    constant; ``deviation_per_day`` the growth of RD with time away (``age``);
    ``conservative_k`` the k of the leaderboard's conservative rating r - k RD;
    ``advantage`` the rating points a team with a full advantage share plays above its
    rating (its players' expected scores and its composite are taken there). Ratings
    are ``VolatileRating`` (mu = r, sigma = RD, volatility); a plain ``Rating`` given as
    input has the prior volatility. Raises ``RatingInputError`` naming the argument.
    """

    name = "glicko2"

    def __init__(
        self,
        rating: float = 1500.0,
        deviation: float = 350.0,
        volatility: float = 0.06,
        tau: float = 0.5,
        deviation_per_day: float = 0.0,
        conservative_k: float = DEFAULT_CONSERVATIVE_K,
        advantage: float = 0.0,
    ) -> None:
        self._rating = check_finite("rating", rating)
        if abs(self._rating) > MAX_ABS_RATING:
            raise RatingInputError("rating", f"must be within +-{MAX_ABS_RATING:g}")
        self._deviation = _check_deviation("deviation", deviation)
        self._volatility = _check_volatility("volatility", volatility)
        self._tau = check_positive("tau", tau)
        self._deviation_per_day = check_positive(
            "deviation_per_day", deviation_per_day, allow_zero=True
        )
        self._conservative_k = check_positive("conservative_k", conservative_k, allow_zero=True)
        self._advantage = check_finite("advantage", advantage)

    @property
    def params(self) -> dict[str, float | str]:
        """Every parameter of the model with its value."""
        return {
            "rating": self._rating,
            "deviation": self._deviation,
            "volatility": self._volatility,
            "tau": self._tau,
            "deviation_per_day": self._deviation_per_day,
            "conservative_k": self._conservative_k,
            "advantage": self._advantage,
        }

    @property
    def deviation_per_day(self) -> float:
        return self._deviation_per_day

    @property
    def conservative_k(self) -> float:
        return self._conservative_k

    def rating(
        self, mu: float | None = None, sigma: float | None = None, volatility: float | None = None
    ) -> VolatileRating:
        """A new player's rating (r_0, RD_0, sigma_0), or the given rating, RD, volatility."""
        r = self._rating if mu is None else check_finite("mu", mu)
        rd = self._deviation if sigma is None else _check_deviation("sigma", sigma)
        vol = (
            self._volatility if volatility is None else _check_volatility("volatility", volatility)
        )
        if abs(r) > MAX_ABS_RATING:
            raise RatingInputError("mu", f"must be within +-{MAX_ABS_RATING:g}")
        return VolatileRating(r, rd, vol)

    def conservative(self, rating: Rating) -> float:
        """The leaderboard's conservative rating r - k RD, k = ``conservative_k``."""
        return rating.mu - self._conservative_k * rating.sigma

    @property
    def deviation_ceiling(self) -> float:
        """The largest deviation time away gives a rating: a new player's, RD_0 (Glicko's
        own cap; a seeded deviation above it is kept, never widened)."""
        return self._deviation

    def age(self, rating: Rating, days: float) -> VolatileRating:
        """The rating after ``days`` away: RD^2 grows by deviation_per_day^2 * days, up to
        ``deviation_ceiling`` (``app.rating.base.age``).

        Negative ``days`` (a match reported out of order) change nothing but the type.
        """
        days = check_finite("days", days)
        r, rd, vol = self._unpack("rating", rating)
        aged = age(Rating(r, rd), self._deviation_per_day, days, ceiling=self._deviation)
        return _new(r, aged.sigma, vol)

    # ------------------------------------------------------------------ updates

    def rate_period(self, rating: Rating, games: Sequence[tuple[Rating, float]]) -> VolatileRating:
        """The rating after one rating period of ``games`` (opponent, score), scores in
        [0, 1] (1 win, 1/2 draw, 0 loss); no games: RD grows by the volatility (step 6).

        The paper's steps 3 to 8 exactly (module docstring); the opponents' volatilities
        play no part.
        """
        r, rd, vol = self._unpack("rating", rating)
        phi2 = (rd * _Q) ** 2
        info = score = 0.0
        for n, game in enumerate(games):
            try:
                opponent, s = game
            except (TypeError, ValueError):
                raise RatingInputError(
                    "games", f"games[{n}] is not an (opponent, score) pair"
                ) from None
            r_j, rd_j, _ = self._unpack(f"games[{n}]", opponent)
            if isinstance(s, bool) or not isinstance(s, int | float) or not 0.0 <= s <= 1.0:
                raise RatingInputError("games", f"games[{n}] has score {s!r}, not in [0, 1]")
            g = _g((rd_j * _Q) ** 2)
            e, ev = _expected(g * (r - r_j) * _Q)
            info += g * g * ev
            score += g * (s - e)
        return self._updated(r, rd, vol, phi2, info, score, bool(games))

    def _updated(
        self,
        r: float,
        rd: float,
        vol: float,
        phi2: float,
        info: float,
        score: float,
        played: bool,
    ) -> VolatileRating:
        """Steps 5 to 8 from the period's information I and score S (module docstring)."""
        if not played:
            rd = SCALE * _sqrt(phi2)
            return _new(r, min(SCALE * _sqrt(phi2 + vol * vol), max(rd, self._deviation)), vol)
        new_vol = _new_volatility(vol, phi2, info, score, self._tau)
        phi_star2 = phi2 + new_vol * new_vol
        phi_new2 = phi_star2 / (1.0 + phi_star2 * info)
        return _new(_bounded(r + SCALE * phi_new2 * score), SCALE * _sqrt(phi_new2), new_vol)

    def rate_1vs1(
        self, winner: Rating, loser: Rating, drawn: bool = False
    ) -> tuple[VolatileRating, VolatileRating]:
        """New (winner, loser) ratings after one game, each its own rating period;
        ``drawn`` scores it 1/2 each. The same numbers as ``rate([[winner], [loser]])``."""
        if type(winner) is VolatileRating and type(loser) is VolatileRating:
            # The common case read directly; anything out of range takes _unpack's checks.
            ra, rda = winner
            rb, rdb = loser
            va = winner._volatility
            vb = loser._volatility
            if not (
                -MAX_ABS_RATING <= ra <= MAX_ABS_RATING
                and -MAX_ABS_RATING <= rb <= MAX_ABS_RATING
                and 0.0 < rda <= MAX_ABS_RATING
                and 0.0 < rdb <= MAX_ABS_RATING
                and MIN_VOLATILITY <= va <= MAX_VOLATILITY
                and MIN_VOLATILITY <= vb <= MAX_VOLATILITY
            ):
                ra, rda, va = self._unpack("winner", winner)
                rb, rdb, vb = self._unpack("loser", loser)
        else:
            ra, rda, va = self._unpack("winner", winner)
            rb, rdb, vb = self._unpack("loser", loser)
        phi2a = (rda * _Q) ** 2
        phi2b = (rdb * _Q) ** 2
        ga = 1.0 / _sqrt(1.0 + _G3 * phi2b)  # g of the winner's opponent
        gb = 1.0 / _sqrt(1.0 + _G3 * phi2a)
        gap = (ra - rb) * _Q
        ea, eva = _expected(ga * gap)
        eb, evb = _expected(-gb * gap)
        s = 0.5 if drawn else 1.0
        tau = self._tau
        info = ga * ga * eva
        score = ga * (s - ea)
        vol = _new_volatility(va, phi2a, info, score, tau)
        star = phi2a + vol * vol
        phi_new2 = star / (1.0 + star * info)
        new_a = _new(_bounded(ra + SCALE * phi_new2 * score), SCALE * _sqrt(phi_new2), vol)
        info = gb * gb * evb
        score = gb * ((1.0 - s) - eb)
        vol = _new_volatility(vb, phi2b, info, score, tau)
        star = phi2b + vol * vol
        phi_new2 = star / (1.0 + star * info)
        new_b = _new(_bounded(rb + SCALE * phi_new2 * score), SCALE * _sqrt(phi_new2), vol)
        return new_a, new_b

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

        The match is one rating period for each player in it: one game against every
        other team's composite opponent (module docstring), partial play scaling the
        player's games; a player of weight 0 has an empty period. With ``advantage`` a
        player's expected score is taken at r + o_j against composites at R_k + o_k, o the
        teams' advantages; the update moves r itself.
        """
        offsets = team_offsets(self._advantage, len(teams), advantage)
        standard_scores(teams, player_scores)  # checked; not evidence in this model
        if (
            offsets is None
            and weights is None
            and len(teams) == 2
            and len(teams[0]) == 1
            and len(teams[1]) == 1
        ):
            # One on one: rate_1vs1 checks the two ratings (errors named "teams" here).
            ra, rb = outcome_ranks(2, ranks, scores)
            try:
                if rb < ra:
                    b, a = self.rate_1vs1(teams[1][0], teams[0][0])
                else:
                    a, b = self.rate_1vs1(teams[0][0], teams[1][0], drawn=ra == rb)
            except RatingInputError:
                check_teams(teams, bayesian=True)
                raise
            return [[a], [b]]
        check_teams(teams, bayesian=True)
        team_ranks = outcome_ranks(len(teams), ranks, scores)
        ws = check_weights(teams, weights)
        players = [[self._unpack(f"teams[{j}]", p) for p in team] for j, team in enumerate(teams)]
        composites = _composites(players, ws)
        if len(teams) > LARGE_MATCH_TEAMS:
            return self._rate_many(players, composites, team_ranks, ws, offsets)
        out: list[list[Rating]] = []
        for j, team in enumerate(players):
            # The games of team j's players: against each other team's composite, its
            # advantage over them counted against them (r - r_k taken as r - (r_k - o_j
            # + o_k)).
            games: list[tuple[float, float, float]] = []
            for k, (r_k, phi2_k) in enumerate(composites):
                if k == j:
                    continue
                rank_j, rank_k = team_ranks[j], team_ranks[k]
                s = 1.0 if rank_j < rank_k else (0.0 if rank_j > rank_k else 0.5)
                if offsets is not None:
                    r_k = r_k + (offsets[k] - offsets[j])
                games.append((r_k, _g(phi2_k), s))
            row: list[Rating] = []
            for i, (r, rd, vol) in enumerate(team):
                w = 1.0 if ws is None else ws[j][i]
                info = score = 0.0
                for r_k, g, s in games:
                    e, ev = _expected(g * (r - r_k) * _Q)
                    info += g * g * ev
                    score += g * (s - e)
                phi2 = (rd * _Q) ** 2
                row.append(self._updated(r, rd, vol, phi2, w * info, w * score, w > 0.0))
            out.append(row)
        return out

    def _rate_many(
        self,
        players: list[list[tuple[float, float, float]]],
        composites: list[tuple[float, float]],
        team_ranks: list[float],
        ws: list[list[float]] | None,
        offsets: list[float] | None = None,
    ) -> list[list[Rating]]:
        """``rate`` for many teams (``offsets``: the teams' advantages): each player's
        information I and score S summed over the other teams' composites in arrays,
        blocks of players at a time (the sums in another order than the scalar loop, so
        equal to rounding); steps 5 to 8 as ever."""
        k = len(players)
        opponent = np.asarray([r for r, _ in composites], dtype=np.float64)
        g = 1.0 / np.sqrt(1.0 + _G3 * np.asarray([phi2 for _, phi2 in composites]))
        rank = np.asarray(team_ranks, dtype=np.float64)
        flat = [p for team in players for p in team]
        team_of = np.repeat(np.arange(k), [len(team) for team in players])
        r = np.asarray([p[0] for p in flat], dtype=np.float64)
        if offsets is not None:
            shift = np.asarray(offsets, dtype=np.float64)
            opponent = opponent + shift
            r = r + shift[team_of]
        info = np.empty(len(flat))
        score = np.empty(len(flat))
        rows = max(1, PAIR_BLOCK // k)
        for start in range(0, len(flat), rows):
            part = slice(start, start + rows)
            own = team_of[part]
            # _expected elementwise, on the side where exp cannot overflow.
            z = g[None, :] * (r[part, None] - opponent[None, :]) * _Q
            t = np.exp(-np.abs(z))
            inv = 1.0 / (1.0 + t)
            e = np.where(z >= 0.0, inv, t / (1.0 + t))
            ev = t * inv * inv
            mine = rank[own][:, None]
            s = np.where(mine < rank[None, :], 1.0, np.where(mine > rank[None, :], 0.0, 0.5))
            other = own[:, None] != np.arange(k)[None, :]
            info[part] = np.where(other, g * g * ev, 0.0).sum(axis=1)
            score[part] = np.where(other, g * (s - e), 0.0).sum(axis=1)
        sums = iter(zip(info.tolist(), score.tolist(), strict=True))
        out: list[list[Rating]] = []
        for j, team in enumerate(players):
            row: list[Rating] = []
            for i, (mu, rd, vol) in enumerate(team):
                w = 1.0 if ws is None else ws[j][i]
                i_n, s_n = next(sums)
                phi2 = (rd * _Q) ** 2
                row.append(self._updated(mu, rd, vol, phi2, w * i_n, w * s_n, w > 0.0))
            out.append(row)
        return out

    # ------------------------------------------------------------------ predictions

    def _entrants(
        self, teams: Teams, weights: Weights | None, advantage: Sequence[float] | None
    ) -> tuple[list[float], float]:
        """Each team's composite rating (plus its advantage) and g(phi_c) of the combined
        deviation (module)."""
        check_teams(teams, bayesian=True)
        ws = check_weights(teams, weights)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        players = [[self._unpack(f"teams[{j}]", p) for p in team] for j, team in enumerate(teams)]
        composites = _composites(players, ws)
        ratings = [r for r, _ in composites]
        if offsets is not None:
            ratings = [r + o for r, o in zip(ratings, offsets, strict=True)]
        phi2 = [p for _, p in composites]
        pair = len(composites) == 2
        combined = phi2[0] + phi2[1] if pair else 2.0 * math.fsum(phi2) / len(phi2)
        return ratings, _g(combined)

    def win_probabilities(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> list[float]:
        """P(each team finishes first), summing to 1 (module docstring, "Predictions")."""
        ratings, g = self._entrants(teams, weights, advantage)
        if len(ratings) == 2:
            p, _ = _expected(g * (ratings[0] - ratings[1]) * _Q)
            return [p, 1.0 - p]
        z = [g * r * _Q for r in ratings]
        top = max(z)
        e = [_exp(x - top) for x in z]
        total = math.fsum(e)
        return [x / total for x in e]

    def team_strengths(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> TeamStrengths:
        """Each team's composite opponent: its (weighted) mean rating plus its advantage,
        and mean phi^2 (module docstring, "Predictions"; ``app.rating.pairwise``)."""
        check_teams(teams, bayesian=True)
        ws = check_weights(teams, weights)
        offsets = team_offsets(self._advantage, len(teams), advantage)
        players = [[self._unpack(f"teams[{j}]", p) for p in team] for j, team in enumerate(teams)]
        composites = _composites(players, ws)
        mean = np.asarray([r for r, _ in composites], dtype=np.float64)
        if offsets is not None:
            mean = mean + np.asarray(offsets, dtype=np.float64)
        return TeamStrengths(mean, np.asarray([phi2 for _, phi2 in composites], dtype=np.float64))

    def pair_win_probabilities(self, first: TeamStrengths, second: TeamStrengths) -> FloatArray:
        """P(first[i] beats second[i]) = 1 / (1 + exp(-g(phi_c) (mu_a - mu_b))),
        phi_c^2 = phi_a^2 + phi_b^2: ``win_probabilities`` of each pair alone."""
        g = 1.0 / np.sqrt(1.0 + _G3 * (first.variance + second.variance))
        return _expected_array(g * (first.mean - second.mean) * _Q)

    def quality_beta(self, teams: Teams, weights: Weights | None = None) -> float:
        """The performance deviation of ``quality``: 2 * 173.7178 / (sqrt(pi) g(phi_c))."""
        _, g = self._entrants(teams, weights, None)
        return _TWO_OVER_SQRT_PI * SCALE / g

    def quality(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float:
        """Match quality on the entrants of ``win_probabilities``, in (0, 1].

        q = exp(-sum_j (R_j - R_bar)^2 / (2 beta^2)) (``entrant_quality``) with
        beta = 2 * 173.7178 / (sqrt(pi) g(phi_c)), the Gaussian deviation of the same slope
        as the logistic win probability at an even match: for two entrants
        q = exp(-z^2 / 2) where P(1 beats 2) = 1 / (1 + e^-(sqrt(8/pi) z)) to first order,
        so q falls as the chances move away from even.
        """
        ratings, g = self._entrants(teams, weights, advantage)
        return entrant_quality(ratings, _TWO_OVER_SQRT_PI * SCALE / g)

    def draw_probability(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float | None:
        """None: Glicko-2 has no draw model (a draw is scored 1/2)."""
        self._entrants(teams, weights, advantage)
        return None

    # ------------------------------------------------------------------ input

    def _unpack(self, argument: str, rating: object) -> tuple[float, float, float]:
        """(r, RD, volatility) of an input rating, checked; a plain ``Rating`` has the
        prior volatility."""
        if not isinstance(rating, Rating):
            raise RatingInputError(argument, "is not a Rating")
        r, rd = rating
        vol = rating.volatility
        if vol is None:
            vol = self._volatility
        if not (-MAX_ABS_RATING <= r <= MAX_ABS_RATING):
            raise RatingInputError(
                argument, f"mu must be a finite number within +-{MAX_ABS_RATING:g}, got {r!r}"
            )
        if not (0.0 < rd <= MAX_ABS_RATING):
            raise RatingInputError(
                argument, f"sigma must be in (0, {MAX_ABS_RATING:g}], got {rd!r}"
            )
        if not (MIN_VOLATILITY <= vol <= MAX_VOLATILITY):
            raise RatingInputError(
                argument,
                f"volatility must be in [{MIN_VOLATILITY:g}, {MAX_VOLATILITY:g}], got {vol!r}",
            )
        return float(r), float(rd), float(vol)


def _check_deviation(name: str, value: float) -> float:
    value = check_positive(name, value)
    if value > MAX_ABS_RATING:
        raise RatingInputError(name, f"must be at most {MAX_ABS_RATING:g}, got {value!r}")
    return value


def _check_volatility(name: str, value: float) -> float:
    value = check_finite(name, value)
    if not MIN_VOLATILITY <= value <= MAX_VOLATILITY:
        raise RatingInputError(
            name, f"must be in [{MIN_VOLATILITY:g}, {MAX_VOLATILITY:g}], got {value!r}"
        )
    return value


def _composites(
    players: list[list[tuple[float, float, float]]], ws: list[list[float]] | None
) -> list[tuple[float, float]]:
    """Each team as one opponent: its (weighted) mean rating and mean phi^2 (the square of
    the root mean square deviation, internal scale). A team whose weights are all 0 is
    taken by its plain means."""
    out: list[tuple[float, float]] = []
    for j, team in enumerate(players):
        row = None if ws is None else ws[j]
        total = 0.0 if row is None else math.fsum(row)
        if row is None or total == 0.0:
            n = len(team)
            r = math.fsum(p[0] for p in team) / n
            phi2 = math.fsum((p[1] * _Q) ** 2 for p in team) / n
        else:
            share = [w / total for w in row]
            r = math.fsum(w * p[0] for w, p in zip(share, team, strict=True))
            phi2 = math.fsum(w * (p[1] * _Q) ** 2 for w, p in zip(share, team, strict=True))
        out.append((r, phi2))
    return out
