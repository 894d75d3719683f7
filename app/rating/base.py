"""What every rating model shares: the rating value, input checking and the outcome encoding.

Conventions (``rating-models.md``): a match has k >= 2 teams of >= 1 player each;
``ranks[j]`` lower is better and equal ranks are a draw; ``scores[j]`` higher is better;
with neither, teams are listed winner first. ``weights[j][i]`` in [0, 1] is the partial
play of player i in team j. ``advantage[j]`` in [0, 1] is team j's share of the
model's ``advantage`` (home ground, first move, white): it adds ``advantage * share`` to
the team's mean performance in the update, the quality and every prediction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Protocol

#: How many standard deviations the conservative rating subtracts (the paper's mu - 3 sigma).
CONSERVATIVE_K = 3.0


class Rating(NamedTuple):
    """An immutable belief about one player's skill: a Gaussian N(mu, sigma^2).

    For the Elo family ``sigma`` carries no information and is always ``0.0``; the
    conservative rating of an Elo rating is then its ``mu``.
    """

    mu: float
    sigma: float

    def conservative(self, k: float = CONSERVATIVE_K) -> float:
        """The conservative skill estimate mu - k * sigma (the paper's leaderboard value)."""
        return self.mu - k * self.sigma

    @property
    def volatility(self) -> float | None:
        """The Glicko-2 volatility sigma of a ``VolatileRating``; ``None`` for every other."""
        return None


class VolatileRating(Rating):
    """A ``Rating`` that also carries a Glicko-2 volatility (Glickman's sigma, > 0).

    It is still the pair (mu, sigma) as a tuple, so every model and every caller that
    unpacks or indexes a ``Rating`` sees the same two numbers; the volatility rides along
    as an attribute. Only Glicko-2 makes these, so ``Rating`` itself stays the plain
    two-field tuple the other models build in their hot paths. Equal when mu, sigma and
    the volatility are equal.
    """

    _volatility: float

    def __new__(cls, mu: float, sigma: float, volatility: float) -> VolatileRating:
        self = tuple.__new__(cls, (mu, sigma))
        self._volatility = volatility
        return self

    @property
    def volatility(self) -> float:
        return self._volatility

    def __repr__(self) -> str:
        return f"VolatileRating(mu={self[0]!r}, sigma={self[1]!r}, volatility={self._volatility!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, VolatileRating):
            return tuple.__eq__(self, other) and self._volatility == other._volatility
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self[0], self[1], self._volatility))

    def __getnewargs__(self) -> tuple[float, float, float]:
        return (self[0], self[1], self._volatility)

    def __getstate__(self) -> None:
        return None

    def _replace(self, **changes: float) -> VolatileRating:
        return VolatileRating(
            changes.get("mu", self[0]),
            changes.get("sigma", self[1]),
            changes.get("volatility", self._volatility),
        )


class RatingInputError(ValueError):
    """Invalid input to a rating model; ``argument`` names the offending argument."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        self.message = message
        super().__init__(f"{argument}: {message}")


Teams = Sequence[Sequence[Rating]]
Weights = Sequence[Sequence[float]]

_isfinite = math.isfinite


def check_teams(teams: Teams, *, bayesian: bool) -> None:
    """Reject fewer than two teams, empty teams, non-ratings and non-finite numbers.

    ``bayesian``: the model uses sigma, so it must be finite and > 0.
    """
    if len(teams) < 2:
        raise RatingInputError("teams", f"a match needs at least two teams, got {len(teams)}")
    for j, team in enumerate(teams):
        if not team:
            raise RatingInputError("teams", f"team {j} is empty")
        for i, r in enumerate(team):
            if type(r) is not Rating and not isinstance(r, Rating):
                raise RatingInputError("teams", f"teams[{j}][{i}] is not a Rating")
            mu, sigma = r
            if not _isfinite(mu):
                raise RatingInputError("teams", f"teams[{j}][{i}].mu is not finite")
            if bayesian and not (_isfinite(sigma) and sigma > 0.0):
                raise RatingInputError(
                    "teams", f"teams[{j}][{i}].sigma must be finite and > 0, got {sigma!r}"
                )


def outcome_ranks(
    n_teams: int,
    ranks: Sequence[float] | None,
    scores: Sequence[float] | None,
) -> list[float]:
    """Encode the outcome as ranks (lower is better, equal is a draw), one per team."""
    if ranks is not None and scores is not None:
        raise RatingInputError("ranks", "give ranks or scores, not both")
    if ranks is not None:
        name, values = "ranks", ranks
    elif scores is not None:
        name, values = "scores", scores
    else:
        return [float(j) for j in range(n_teams)]
    if len(values) != n_teams:
        raise RatingInputError(name, f"expected {n_teams} values (one per team), got {len(values)}")
    out: list[float] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or not _isfinite(v):
            raise RatingInputError(name, f"every value must be a finite number, got {v!r}")
        out.append(float(v) if name == "ranks" else -float(v))
    return out


def check_weights(teams: Teams, weights: Weights | None) -> list[list[float]] | None:
    """Validate partial-play weights: same shape as ``teams``, each finite and in [0, 1].

    Returns ``None`` when every weight is 1 (the common case, which models may take faster).
    """
    if weights is None:
        return None
    if len(weights) != len(teams):
        raise RatingInputError(
            "weights", f"expected {len(teams)} teams of weights, got {len(weights)}"
        )
    out: list[list[float]] = []
    all_one = True
    for j, (team, ws) in enumerate(zip(teams, weights, strict=True)):
        if len(ws) != len(team):
            raise RatingInputError(
                "weights", f"weights[{j}] has {len(ws)} values for a team of {len(team)}"
            )
        row: list[float] = []
        for w in ws:
            if isinstance(w, bool) or not isinstance(w, int | float) or not _isfinite(w):
                raise RatingInputError("weights", f"weights[{j}] holds a non-finite value {w!r}")
            if not 0.0 <= w <= 1.0:
                raise RatingInputError("weights", f"weights[{j}] holds {w!r}, outside [0, 1]")
            if w != 1.0:
                all_one = False
            row.append(float(w))
        out.append(row)
    return None if all_one else out


def check_advantage(n_teams: int, advantage: Sequence[float] | None) -> list[float] | None:
    """Validate advantage shares: one finite number in [0, 1] per team.

    Returns ``None`` when there are none or every share is 0 (nothing changes).
    """
    if advantage is None:
        return None
    if len(advantage) != n_teams:
        raise RatingInputError(
            "advantage", f"expected {n_teams} values (one per team), got {len(advantage)}"
        )
    out: list[float] = []
    for a in advantage:
        if isinstance(a, bool) or not isinstance(a, int | float) or not _isfinite(a):
            raise RatingInputError("advantage", f"every share must be a finite number, got {a!r}")
        if not 0.0 <= a <= 1.0:
            raise RatingInputError("advantage", f"every share must be in [0, 1], got {a!r}")
        out.append(float(a))
    return out if any(out) else None


def team_offsets(
    size: float, n_teams: int, advantage: Sequence[float] | None
) -> list[float] | None:
    """What each team's mean performance gains: ``size`` times its advantage share.

    ``None`` when no team gains anything (no shares, all 0, or a ``size`` of 0), so a
    model takes exactly its path without advantage. The shares are checked either way.
    """
    shares = check_advantage(n_teams, advantage)
    if shares is None or size == 0.0:
        return None
    return [size * a for a in shares]


def shifted(teams: Teams, offsets: Sequence[float]) -> list[list[Rating]]:
    """``teams`` with every member's mean moved by its team's offset (sigma kept).

    For models whose team strength is the (weighted) mean of its members' ratings, this
    moves each team's strength by exactly its offset.
    """
    return [[Rating(r[0] + o, r[1]) for r in team] for team, o in zip(teams, offsets, strict=True)]


#: Each player's own statistic in a match, in the shape of the teams (None: unknown).
PlayerScores = Sequence[Sequence[float | None]]


def score_moments(
    teams: Teams, player_scores: PlayerScores | None, spread: float = 0.0
) -> tuple[float, float] | None:
    """The mean of the players' statistics known in the match and the deviation they are
    standardised by, sqrt(sd^2 + spread^2) (sd their population deviation; ``spread`` the
    statistic's own scale, which steadies a match whose few points make sd a poor
    measure); ``None`` when they say nothing (no statistics, fewer than two known, or all
    equal). The statistics are checked: the shape of ``teams``, finite numbers or None.
    ``rating-models.md`` section 9."""
    if player_scores is None:
        return None
    if len(player_scores) != len(teams):
        raise RatingInputError(
            "player_scores", f"expected {len(teams)} teams of scores, got {len(player_scores)}"
        )
    for j, row in enumerate(player_scores):
        if len(row) != len(teams[j]):
            raise RatingInputError(
                "player_scores",
                f"player_scores[{j}] has {len(row)} values for a team of {len(teams[j])}",
            )
    known = [x for row in player_scores for x in row if x is not None]
    for x in known:
        kind = type(x)
        if ((kind is not float and kind is not int) or x - x != 0.0) and (
            isinstance(x, bool) or not isinstance(x, int | float) or not _isfinite(x)
        ):
            j = next(j for j, row in enumerate(player_scores) if any(y is x for y in row))
            raise RatingInputError(
                "player_scores", f"player_scores[{j}] holds a non-finite value {x!r}"
            )
    n = len(known)
    if n < 2:
        return None
    mean = sum(known) / n
    squares = 0.0
    for x in known:
        d = x - mean
        squares += d * d
    sd = math.sqrt(squares / n)
    if not sd > 0.0 or not _isfinite(sd):
        return None
    if spread:
        sd = math.sqrt(sd * sd + spread * spread)
    return mean, sd


def standard_scores(
    teams: Teams, player_scores: PlayerScores | None, spread: float = 0.0
) -> list[list[float]] | None:
    """Each player's statistic standardised within the match, (x - mean) / sd by
    :func:`score_moments`, in the shape of ``teams``, NaN where it is unknown; ``None``
    when they say nothing."""
    moments = score_moments(teams, player_scores, spread)
    if moments is None or player_scores is None:
        return None
    mean, sd = moments
    nan = math.nan
    return [[nan if x is None else (x - mean) / sd for x in row] for row in player_scores]


#: Per player the Gaussian evidence (mean, variance) a statistic gives on their
#: performance, in the shape of the teams (None: none for that player).
Evidence = list[list[tuple[float, float] | None]]


def statistic_centre(teams: Teams, z: list[list[float]]) -> float:
    """The mean skill (mu) of the players whose standardised statistic ``z`` is known."""
    known = [
        rating[0]
        for team, row in zip(teams, z, strict=True)
        for rating, x in zip(team, row, strict=True)
        if x == x
    ]
    return math.fsum(known) / len(known)


def statistic_evidence(
    teams: Teams,
    player_scores: PlayerScores | None,
    scale: float,
    noise: float,
    spread: float = 0.0,
) -> Evidence | None:
    """The evidence each player's statistic gives on their performance p_i
    (``rating-models.md`` section 9), in canonical form: its precision pi and
    precision-adjusted mean tau. The statistic standardised within the match
    (:func:`standard_scores`, with ``spread``) is z_i = scale (p_i - c) + N(0, noise^2), c
    the mean skill of the players whose statistic is known, so as a function of p_i it is
    N(p_i; c + z_i / scale, (noise / scale)^2): pi = (scale / noise)^2 and tau = pi c +
    scale z_i / noise^2, finite for any scale (at 0, no evidence). None: no evidence (no
    statistics, fewer than two known or all equal, or a ``scale`` of 0). The statistics
    are checked either way."""
    z = standard_scores(teams, player_scores, spread)
    if z is None or scale == 0.0:
        return None
    centre = statistic_centre(teams, z)
    per_z = scale / (noise * noise)
    precision = scale * per_z
    lift = precision * centre
    return [[None if x != x else (precision, lift + per_z * x) for x in row] for row in z]


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Validate a model parameter: a finite number > 0 (or >= 0 with ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not _isfinite(value):
        raise RatingInputError(name, f"must be a finite number, got {value!r}")
    if value < 0.0 or (value == 0.0 and not allow_zero):
        raise RatingInputError(name, f"must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


def check_finite(name: str, value: float) -> float:
    """Validate a model parameter: any finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not _isfinite(value):
        raise RatingInputError(name, f"must be a finite number, got {value!r}")
    return float(value)


def widen(rating: Rating, tau: float) -> Rating:
    """Add dynamics variance: sigma' = sqrt(sigma^2 + tau^2) (the paper's gamma)."""
    if tau == 0.0:
        return rating
    return Rating(rating.mu, math.sqrt(rating.sigma * rating.sigma + tau * tau))


def age(rating: Rating, tau_per_day: float, days: float, *, ceiling: float | None = None) -> Rating:
    """Widen a Bayesian belief for time away: variance grows by tau_per_day^2 * days.

    ``rating-models.md`` section 4: applied before a match, in addition to the per-match
    tau, for the days since the player's previous match. Negative ``days`` (a match
    reported out of order) widen nothing. With a ``ceiling`` (Glicko-2's prior deviation:
    Glicko's own rule, RD = min(sqrt(RD^2 + c^2 t), RD_0)) time away widens sigma up to it
    and no further, and never narrows a sigma already above it.
    """
    check_finite("days", days)
    check_positive("tau_per_day", tau_per_day, allow_zero=True)
    if tau_per_day == 0.0 or days <= 0.0:
        return rating
    sigma = math.sqrt(rating.sigma * rating.sigma + tau_per_day**2 * days)
    if ceiling is not None:
        sigma = min(sigma, max(rating.sigma, ceiling))
    return Rating(rating.mu, sigma)


class RatingModel(Protocol):
    """What every model offers; the service, the command line and users call exactly this."""

    #: The model's name as ladders spell it: "trueskill", "plackett_luce", "elo" or "glicko2".
    name: str

    @property
    def params(self) -> dict[str, float | str]:
        """Every parameter of the model with its value (defaults filled in)."""
        ...

    def rating(self, mu: float | None = None, sigma: float | None = None) -> Rating:
        """The prior belief of a new player (or one with the given mu and sigma)."""
        ...

    def rate(
        self,
        teams: Teams,
        ranks: Sequence[float] | None = None,
        scores: Sequence[float] | None = None,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
        player_scores: PlayerScores | None = None,
    ) -> list[list[Rating]]:
        """New ratings after a match, in the shape of ``teams``; inputs are not mutated."""
        ...

    def rate_1vs1(
        self, winner: Rating, loser: Rating, drawn: bool = False
    ) -> tuple[Rating, Rating]:
        """The fast path for the most common match: new (winner, loser) ratings."""
        ...

    def quality(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float:
        """How balanced the match is, in (0, 1]; 1 is a perfectly even match."""
        ...

    def win_probabilities(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> list[float]:
        """The probability of each team finishing first; they sum to 1."""
        ...

    def draw_probability(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> float | None:
        """The probability of a draw where the model defines one, else ``None``."""
        ...
