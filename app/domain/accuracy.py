"""How well a ladder predicts its matches: each match's pre-match win probabilities, and the
figures they are scored by.

Every match is stored with the probability of each team finishing first, as the ladder's
model gave it on the ratings the match's update started from (:func:`win_probabilities`:
the one place the service asks a model for them). A :class:`Tally` sums what those
predictions scored against the outcomes:

- Prediction error: over every pair of teams that did not draw, the fraction ordered
  wrongly by their win probabilities (the team with the higher probability finished
  behind); a pair predicted exactly even counts one half, as ``app.evaluation.metrics``
  counts it. Matches of any number of teams take part, each with all its pairs.
- Log loss: -log P(winner), over the matches with a single winner (one team alone at the
  best rank: a decisive two-team match, or a free-for-all whose first place is not
  shared), P the winner's stored probability of finishing first, clipped to
  [1e-15, 1 - 1e-15] (the clip of ``app.evaluation.metrics``). For decisive two-team
  matches this is the log loss of ``ratings evaluate``; a free-for-all of k teams starts
  from log k, not log 2, so compare ladders of one shape. A match without a single winner
  (a draw, a tie for first) is left out of the log loss, the Brier score and the
  calibration, not of the prediction error.
- Brier score: half the sum over the teams of (p_j - y_j)^2, y_j 1 for the winner and 0
  for the others, over the same matches: for two teams exactly (p - y)^2 of the first
  team, the Brier score of ``ratings evaluate``; always in [0, 1].
- Calibration: every team of those matches as one prediction (p_j, y_j), in ten bins of
  p_j ([0, 0.1), [0.1, 0.2), ..., [0.9, 1]); per bin the count, the mean predicted
  probability and the observed frequency of finishing first. (Both teams of a two-team
  match are in it, so its table is symmetric: bin 9 mirrors bin 0.)

A tally holds integers only: pair counts in halves, and the sums of log losses, Brier
scores and predicted probabilities in units of 1e-9 (:data:`UNIT`), each match's share
rounded once. Adding a match's share and taking it away again (a void, a re-rating) is
then exact, and a tally kept up to date match by match equals one summed afresh from the
stored matches to the last digit, whatever the order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.rating.base import RatingInputError, RatingModel, Teams, Weights

#: The fixed-point unit of a tally's sums of real numbers.
UNIT = 1_000_000_000
#: Bins of the calibration table, equal widths over [0, 1].
CALIBRATION_BINS = 10
#: Probabilities are clipped to [EPS, 1 - EPS] inside the logarithm of the log loss.
EPS = 1e-15

#: What a tally holds, in order: the columns of its stored form too.
FIELDS: tuple[str, ...] = (
    "matches",
    "pairs",
    "wrong_halves",
    "decided",
    "log_loss",
    "brier",
    *(f"bin{b}_count" for b in range(CALIBRATION_BINS)),
    *(f"bin{b}_predicted" for b in range(CALIBRATION_BINS)),
    *(f"bin{b}_won" for b in range(CALIBRATION_BINS)),
)
_MATCHES, _PAIRS, _WRONG, _DECIDED, _LOG_LOSS, _BRIER = range(6)
_BIN_COUNT = 6
_BIN_PREDICTED = _BIN_COUNT + CALIBRATION_BINS
_BIN_WON = _BIN_PREDICTED + CALIBRATION_BINS

_log = math.log
_isfinite = math.isfinite


def win_probabilities(
    model: RatingModel,
    teams: Teams,
    weights: Weights | None,
    advantage: Sequence[float] | None = None,
) -> list[float] | None:
    """Each team's probability of finishing first, as the ladder stores it with a match:
    ``model.win_probabilities`` on ``teams``, the ratings the match's update starts from
    (after any widening for time away), with the match's partial-play ``weights`` and
    advantage shares.

    ``None`` when the model gives none to store (it refuses the ratings, or a value is
    not a probability): the match is rated and stored all the same, without them.
    """
    try:
        probabilities = model.win_probabilities(teams, weights, advantage)
    except (RatingInputError, ArithmeticError, ValueError):
        return None
    for p in probabilities:
        if not (_isfinite(p) and 0.0 <= p <= 1.0):
            return None
    return probabilities


def _units(value: float) -> int:
    return round(value * UNIT)


@dataclass(slots=True)
class Tally:
    """Sums of what stored predictions scored (the module docstring), in the order of
    :data:`FIELDS`; :meth:`add_match` adds (or with ``sign`` -1 takes away) one match."""

    values: list[int]

    @classmethod
    def zero(cls) -> Tally:
        return cls([0] * len(FIELDS))

    @classmethod
    def of(cls, values: Sequence[int]) -> Tally:
        if len(values) != len(FIELDS):
            raise ValueError(f"a tally has {len(FIELDS)} values, got {len(values)}")
        return cls([int(v) for v in values])

    def add(self, other: Tally, sign: int = 1) -> None:
        values = self.values
        for n, v in enumerate(other.values):
            values[n] += sign * v

    def add_match(
        self, probabilities: Sequence[float], outcome: Sequence[float], sign: int = 1
    ) -> None:
        """Score one match: its teams' stored win probabilities and its outcome (one value
        per team, lower is better, equal is a draw)."""
        v = self.values
        k = len(probabilities)
        if len(outcome) != k:
            raise ValueError(f"{k} probabilities for {len(outcome)} teams")
        v[_MATCHES] += sign
        pairs = halves = 0
        for a in range(k - 1):
            oa = outcome[a]
            pa = probabilities[a]
            for b in range(a + 1, k):
                ob = outcome[b]
                if oa == ob:
                    continue
                pairs += 1
                pb = probabilities[b]
                if pa == pb:
                    halves += 1
                elif (pa > pb) != (oa < ob):
                    halves += 2
        v[_PAIRS] += sign * pairs
        v[_WRONG] += sign * halves
        best = min(outcome)
        winner = -1
        for j, o in enumerate(outcome):
            if o == best:
                if winner >= 0:
                    return  # first place shared: no single winner
                winner = j
        v[_DECIDED] += sign
        p_win = min(max(probabilities[winner], EPS), 1.0 - EPS)
        v[_LOG_LOSS] += sign * _units(-_log(p_win))
        squares = 0.0
        for j, p in enumerate(probabilities):
            y = 1.0 if j == winner else 0.0
            squares += (p - y) * (p - y)
            b = min(int(p * CALIBRATION_BINS), CALIBRATION_BINS - 1)
            v[_BIN_COUNT + b] += sign
            v[_BIN_PREDICTED + b] += sign * _units(p)
            if j == winner:
                v[_BIN_WON + b] += sign
        v[_BRIER] += sign * _units(0.5 * squares)

    # -- the figures -------------------------------------------------------------------

    @property
    def matches(self) -> int:
        return self.values[_MATCHES]

    @property
    def pairs(self) -> int:
        return self.values[_PAIRS]

    @property
    def decided(self) -> int:
        return self.values[_DECIDED]

    @property
    def wrong_pairs(self) -> float:
        """Pairs ordered wrongly, an even pair counting one half."""
        return self.values[_WRONG] / 2

    @property
    def log_loss_sum(self) -> float:
        return self.values[_LOG_LOSS] / UNIT

    @property
    def brier_sum(self) -> float:
        return self.values[_BRIER] / UNIT

    def prediction_error(self) -> float | None:
        pairs = self.values[_PAIRS]
        return self.values[_WRONG] / (2 * pairs) if pairs > 0 else None

    def log_loss(self) -> float | None:
        decided = self.values[_DECIDED]
        return self.values[_LOG_LOSS] / UNIT / decided if decided > 0 else None

    def brier(self) -> float | None:
        decided = self.values[_DECIDED]
        return self.values[_BRIER] / UNIT / decided if decided > 0 else None

    def calibration(self) -> list[CalibrationBin]:
        v = self.values
        out = []
        for b in range(CALIBRATION_BINS):
            count = v[_BIN_COUNT + b]
            out.append(
                CalibrationBin(
                    low=b / CALIBRATION_BINS,
                    high=(b + 1) / CALIBRATION_BINS,
                    count=count,
                    mean_predicted=v[_BIN_PREDICTED + b] / UNIT / count if count > 0 else None,
                    observed=v[_BIN_WON + b] / count if count > 0 else None,
                )
            )
        return out


@dataclass(frozen=True, slots=True)
class CalibrationBin:
    """One bin of predicted probabilities: [low, high) (the last one closed)."""

    low: float
    high: float
    count: int
    mean_predicted: float | None
    observed: float | None
