"""A ladder's prediction health over its newest matches: accuracy period by period, and
draws against the quality the ladder predicted for each match.

- Periods: the matches, oldest first, cut into runs of equal size, each scored as a
  :class:`app.domain.accuracy.Tally` (the rules of ``GET .../accuracy``). Equal counts
  rather than calendar periods: no period is empty or too small to mean anything, whether
  a ladder plays ten matches a day or ten thousand.
- Draws by quality: TrueSkill's match quality (Herbrich, Minka and Graepel, *TrueSkill™*,
  section 4.1, "Match Quality") is the probability of a draw relative to the most even
  match possible, so a ladder whose quality means something sees more draws where it
  predicted higher quality. Each match counts the fraction of its pairs of teams that drew
  (a two-team match: 1 for a draw, 0 otherwise), as ``app.evaluation.plots`` counts it, so
  that matches of many teams do not dominate. Two views: the share per quality bin, and
  the paper's figure: the matches sorted from the highest quality down, and the draws
  accumulated along that order as a fraction of all draws (a quality that knows nothing
  follows the diagonal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.domain.accuracy import Tally

#: Bins of match quality, equal widths over [0, 1].
QUALITY_BINS = 10
#: At most this many points of the draws curve are drawn (it is smooth: more add nothing).
CURVE_POINTS = 500


def drawn_share(outcome: Sequence[float]) -> float | None:
    """The fraction of the match's pairs of teams that drew (equal outcome values); None for
    a match of fewer than two teams."""
    k = len(outcome)
    if k < 2:
        return None
    drawn = sum(1 for a in range(k - 1) for b in range(a + 1, k) if outcome[a] == outcome[b])
    return drawn / (k * (k - 1) // 2)


@dataclass(frozen=True, slots=True)
class QualityBin:
    """Matches of predicted quality in [low, high) (the last bin closed) and how many of
    them drew (a sum of drawn shares)."""

    low: float
    high: float
    matches: int
    draws: float

    @property
    def share(self) -> float | None:
        return self.draws / self.matches if self.matches else None


def quality_bins(matches: Sequence[tuple[float, float]]) -> list[QualityBin]:
    """The share of draws per bin of quality, over ``matches`` as (quality, drawn share)."""
    counts = [0] * QUALITY_BINS
    draws = [0.0] * QUALITY_BINS
    for quality, drawn in matches:
        b = min(max(int(quality * QUALITY_BINS), 0), QUALITY_BINS - 1)
        counts[b] += 1
        draws[b] += drawn
    return [
        QualityBin(b / QUALITY_BINS, (b + 1) / QUALITY_BINS, counts[b], draws[b])
        for b in range(QUALITY_BINS)
    ]


def draw_curve(matches: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """The paper's figure over ``matches`` as (quality, drawn share): the fraction of
    matches taken, highest quality first, and the fraction of all draws they hold, at most
    :data:`CURVE_POINTS` points, from (0, 0) to (1, 1). Empty when nothing drew."""
    total = sum(drawn for _, drawn in matches)
    if total <= 0:
        return [], []
    # Stable on ties, like the evaluation's figure: equal qualities keep the matches' order.
    ordered = sorted(matches, key=lambda match: -match[0])
    n = len(ordered)
    step = max(1, n // CURVE_POINTS)
    xs, ys = [0.0], [0.0]
    accumulated = 0.0
    for i, (_, drawn) in enumerate(ordered, start=1):
        accumulated += drawn
        if i % step == 0 or i == n:
            xs.append(i / n)
            ys.append(accumulated / total)
    return xs, ys


@dataclass(frozen=True, slots=True)
class Period:
    """A run of consecutive matches (by recording), the first and last played, and the
    tally of their predictions."""

    first: datetime
    last: datetime
    tally: Tally


def periods(
    scored: Sequence[tuple[datetime, Sequence[float], Sequence[float]]], count: int
) -> list[Period]:
    """``scored`` (played_at, win probabilities, outcome; oldest first) cut into at most
    ``count`` runs of equal size (the first ones one longer when it does not divide), each
    tallied."""
    n = len(scored)
    if n == 0 or count <= 0:
        return []
    count = min(count, n)
    size, extra = divmod(n, count)
    out = []
    start = 0
    for p in range(count):
        end = start + size + (1 if p < extra else 0)
        tally = Tally.zero()
        for _, probabilities, outcome in scored[start:end]:
            tally.add_match(probabilities, outcome)
        played = [played_at for played_at, _, _ in scored[start:end]]
        out.append(Period(min(played), max(played), tally))
        start = end
    return out
