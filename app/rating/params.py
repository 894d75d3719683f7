"""The documented range of every model parameter, in which every computation stays finite.

A model's constructor only refuses what is mathematically undefined (a sigma <= 0, a draw
probability >= 1). The ranges here are narrower: they are the ones a ladder accepts, chosen
so that an update, the quality, the win and draw probabilities, matchmaking, a replay, the
conservative rating and the leaderboard buckets stay finite and mean something for every
rating a ladder can hold. They follow from the float64 arithmetic:

- Means (``mu``, Elo's ``initial``) lie in [-``MAX_MEAN``, ``MAX_MEAN``] = [-1e9, 1e9], the
  range a seeded rating may take (``PUT .../players/{id}``).
- Lengths on the rating scale (``sigma``, ``beta``, Elo's ``scale`` and ``k_factor``) lie in
  [``MIN_LENGTH``, ``MAX_LENGTH``] = [1e-6, 1e6]. At the largest mean 1e9 one ulp is
  1e9 * 2^-52 ~ 2.2e-7, so a length of 1e-6 still moves a rating by a few ulps; below it an
  update or a gap of one beta is lost to rounding. Squares and sums of squares of up to 256
  players then stay between 1e-12 and 3e14, far from underflow and overflow, and a rating
  gap over a length is at most 2e15, where every tail function used here is exact.
- Dynamics (``tau``, ``tau_per_day``) lie in [0, ``MAX_LENGTH``]: 0 turns them off.
- Probabilities and factors have their own ranges (``draw_probability``, ``kappa``,
  ``conservative_k``).

``Parameter.problem`` says what is wrong with a value (naming the range) or ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from app.rating.base import CONSERVATIVE_K

__all__ = [
    "ADVANTAGE",
    "LADDER_PARAMETERS",
    "MAX_LENGTH",
    "MAX_MEAN",
    "MIN_LENGTH",
    "Parameter",
    "statistic_parameters",
]

#: The largest |mean| of a prior or a seeded rating.
MAX_MEAN: Final = 1e9
#: The smallest length on the rating scale (sigma, beta, scale, k_factor; see the module).
MIN_LENGTH: Final = 1e-6
#: The largest length on the rating scale (also the largest seeded sigma).
MAX_LENGTH: Final = 1e6


@dataclass(frozen=True)
class Parameter:
    """One tunable parameter: its name, default, meaning and accepted values.

    Numbers: ``low`` <= value <= ``high`` (strict where ``low_open`` / ``high_open``).
    Strings: one of ``choices``. Switches (``boolean``): true or false. Counts
    (``integer``): whole numbers in the range. ``symbol`` is the paper's name for it.
    """

    name: str
    default: float | str
    description: str
    symbol: str = ""
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    boolean: bool = False
    integer: bool = False

    @property
    def range_text(self) -> str:
        """The accepted values as the documentation and error details spell them."""
        if self.boolean:
            return "true or false"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        interval = f"{left}{_number(self.low)}, {_number(self.high)}{right}"
        return f"whole numbers in {interval}" if self.integer else interval

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` for this parameter (naming the range), or ``None``."""
        if self.boolean:
            if isinstance(value, bool):
                return None
            return f"must be true or false, got {_shown(value)}"
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return None
            return f"must be {self.range_text}, got {_shown(value)}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number in {self.range_text}, got {_shown(value)}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number in {self.range_text}, got {value!r}"
        # An int is compared as it is: a huge one must not overflow a float conversion.
        below = value <= self.low if self.low_open else value < self.low
        above = value >= self.high if self.high_open else value > self.high
        if below or above:
            return f"must be in {self.range_text}, got {_shown(value)}"
        if self.integer and value != int(value):
            return f"must be one of the {self.range_text}, got {_shown(value)}"
        return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(x: float) -> str:
    """A bound as written in the documentation: repr for exact values, else ``g``."""
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    text = f"{x:g}"
    return text if float(text) == x else repr(x)


#: The parameters of a Bayesian ladder beyond its model's: the dynamics over time
#: (``rating-models.md`` section 4, ``base.age``) and the k of the conservative rating.
LADDER_PARAMETERS: Final = (
    Parameter(
        "tau_per_day",
        0.0,
        "Deviation added per day away: the variance grows by tau_per_day^2 * days (0: off).",
        "",
        0.0,
        MAX_LENGTH,
    ),
    Parameter(
        "conservative_k",
        CONSERVATIVE_K,
        "Deviations subtracted for the conservative rating mu - k sigma (the leaderboard's).",
        "k",
        0.0,
        100.0,
    ),
)


#: Every model's size of the advantage a match may give a team (``base.team_offsets``).
def statistic_parameters() -> tuple[Parameter, Parameter, Parameter]:
    """``stat_scale``, ``stat_noise`` and ``stat_spread``: a player's own statistic in the
    match as evidence on their performance (``rating-models.md`` section 9)."""
    return (
        Parameter(
            "stat_scale",
            0.0,
            "How a player's own statistic in the match (`player_scores`) follows their "
            "performance: its standardised value is z_i = stat_scale (p_i - c) + noise, c "
            "the mean skill of the players whose statistic is known, in standard deviations "
            "of the statistic per performance unit (0: off).",
            "",
            0.0,
            MAX_LENGTH,
        ),
        Parameter(
            "stat_noise",
            1.0,
            "The deviation of that noise, in standard deviations of the statistic.",
            "",
            MIN_LENGTH,
            MAX_LENGTH,
        ),
        Parameter(
            "stat_spread",
            0.0,
            "The statistic's own scale, in its units: z_i = (x_i - mean) / sqrt(sd^2 + "
            "stat_spread^2), sd the deviation of the match's statistics; it steadies "
            "matches of a few points, whose sd is a poor measure (0: sd alone).",
            "",
            0.0,
            MAX_LENGTH,
        ),
    )


ADVANTAGE: Final = Parameter(
    "advantage",
    0.0,
    "What a team with a full advantage share (home ground, first move) adds to its mean "
    "performance, in rating units; 0 turns it off, a negative value is a disadvantage.",
    "",
    -MAX_LENGTH,
    MAX_LENGTH,
)
