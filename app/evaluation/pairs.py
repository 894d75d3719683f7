"""The pair measures of one match: ordered pairs counted, and the pair log loss.

``metrics.predict`` measures every pair of teams of every match (``metrics`` says what);
an event of k teams has k (k - 1) / 2 pairs, 125 million for k = 15,794. Here:

- ``count_pairs``: the pairs that drew, that did not, that the strengths order wrongly
  and that they call exactly even. Small matches count pair by pair; larger ones by
  sorting, in O(k log^2 k): the wrongly ordered pairs are those where the stronger team
  finished behind, the pairs concordant in (strength, rank), counted by a bottom-up
  merge sort of the ranks in strength order. Counts are exact either way.
- ``match_pair_loss``: the sum over the decisive pairs of -log P(the better-ranked team beats
  the other), P the model's two-team win probability of the pair alone. For a model with
  the array methods of ``app.rating.pairwise`` (every model of ``app.rating``) it is
  evaluated over blocks of pairs (``pair_blocks``), so memory stays bounded; another
  object with only ``win_probabilities`` is asked pair by pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from app.rating.base import RatingModel, Teams, Weights
from app.rating.pairwise import PairwiseModel, pair_blocks

__all__ = ["EPS", "PairCounts", "count_pairs", "match_pair_loss"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Probabilities are clipped to [EPS, 1 - EPS] inside the logarithm of the log loss.
EPS = 1e-15
#: Up to this many teams pairs are counted one by one (faster than arrays there).
COUNT_ONE_BY_ONE = 32
#: Up to this many teams the pair log loss asks the model pair by pair.
LOSS_ONE_BY_ONE = 8


class PairCounts(NamedTuple):
    """The pairs of teams of one match."""

    #: Pairs that did not draw, ordered wrongly by strength (predicted ties not included).
    wrong: int
    #: Pairs that did not draw whose strengths are exactly equal.
    even: int
    #: Pairs that did not draw.
    pairs: int
    #: Pairs that drew.
    drawn: int


def count_pairs(strength: Sequence[float], ranks: Sequence[float]) -> PairCounts:
    """Count the pairs of teams by outcome and by how ``strength`` orders them.

    A pair that did not draw (different ranks; lower is better) is wrong when the team of
    greater strength finished behind, and even when the strengths are exactly equal.
    """
    k = len(strength)
    if k <= COUNT_ONE_BY_ONE:
        return _count_one_by_one(strength, ranks)
    s = np.asarray(strength, dtype=np.float64)
    r = np.asarray(ranks, dtype=np.float64)
    drawn = _equal_pairs(r)
    both = _equal_pairs(s, r)
    return PairCounts(
        wrong=_concordant_pairs(s, r),
        even=_equal_pairs(s) - both,
        pairs=k * (k - 1) // 2 - drawn,
        drawn=drawn,
    )


def _count_one_by_one(strength: Sequence[float], ranks: Sequence[float]) -> PairCounts:
    k = len(strength)
    bad = even = count = ties = 0
    for a in range(k - 1):
        ra = ranks[a]
        sa = strength[a]
        for b in range(a + 1, k):
            rb = ranks[b]
            if ra == rb:
                ties += 1
                continue
            count += 1
            d = sa - strength[b]
            if d == 0.0:
                even += 1
            elif (d > 0.0) != (ra < rb):
                bad += 1
    return PairCounts(bad, even, count, ties)


def _equal_pairs(*keys: FloatArray) -> int:
    """The pairs of entries equal in every one of ``keys`` (arrays of one length)."""
    order = np.lexsort(keys)
    same = np.ones(len(order) - 1, dtype=bool)
    for key in keys:
        ordered = key[order]
        same &= ordered[1:] == ordered[:-1]
    # Runs of equal entries: a run of n holds n (n - 1) / 2 pairs.
    edges = np.flatnonzero(np.concatenate(([True], ~same, [True])))
    runs = np.diff(edges)
    return int((runs * (runs - 1) // 2).sum())


def _concordant_pairs(x: FloatArray, y: FloatArray) -> int:
    """The pairs (i, j) with x_i < x_j and y_i < y_j.

    In order of x (equal x by decreasing y, so that no pair of equal x counts), they are
    the pairs of positions i < j with y_i < y_j: counted while merge-sorting y.
    """
    order = np.lexsort((-y, x))
    _, dense = np.unique(y[order], return_inverse=True)
    return _ascending_pairs(dense.astype(np.int64).ravel())


def _ascending_pairs(values: IntArray) -> int:
    """The pairs of positions i < j with values[i] < values[j], for values in [0, n).

    Bottom-up merge sort: at width w the array is runs of w sorted values; each value in
    the right run of a block of 2w finds, by binary search, how many of its left run are
    smaller. A block's values are offset by block * span so one global sort merges every
    block and one global search serves them all.
    """
    n = len(values)
    span = int(values.max()) + 1 if n else 1
    position = np.arange(n, dtype=np.int64)
    current = values
    total = 0
    width = 1
    while width < n:
        block = position // (2 * width)
        right = position % (2 * width) >= width
        keyed = block * span + current
        left_keys = keyed[~right]
        # Every block before a right run has a full left run of ``width`` values.
        smaller = np.searchsorted(left_keys, keyed[right], side="left") - block[right] * width
        total += int(smaller.sum())
        current = np.sort(keyed, kind="stable") - block * span
        width *= 2
    return total


def match_pair_loss(
    model: RatingModel,
    teams: Teams,
    ranks: Sequence[float],
    weights: Weights | None,
    advantage: Sequence[float] | None = None,
) -> float:
    """Sum over the pairs a < b that did not draw of -log P(the better-ranked one wins).

    P is the model's win probability of the two teams alone (team a listed first, so
    P(b wins) = 1 - P(a wins)), clipped to [EPS, 1 - EPS]. With two teams it is the log
    loss of ``win_probabilities``. ``advantage``: the teams' shares.
    """
    k = len(teams)
    if k == 2:
        p = model.win_probabilities(teams, weights, advantage)[0]
        return -math.log(_clip(p if ranks[0] < ranks[1] else 1.0 - p))
    if k > LOSS_ONE_BY_ONE and isinstance(model, PairwiseModel):
        return _pair_loss_in_blocks(model, teams, ranks, weights, advantage)
    total = 0.0
    for a in range(k - 1):
        for b in range(a + 1, k):
            if ranks[a] == ranks[b]:
                continue
            w2 = None if weights is None else [weights[a], weights[b]]
            s2 = None if advantage is None else [advantage[a], advantage[b]]
            p = model.win_probabilities([teams[a], teams[b]], w2, s2)[0]
            total -= math.log(_clip(p if ranks[a] < ranks[b] else 1.0 - p))
    return total


def _clip(p: float) -> float:
    return min(max(p, EPS), 1.0 - EPS)


def _pair_loss_in_blocks(
    model: PairwiseModel,
    teams: Teams,
    ranks: Sequence[float],
    weights: Weights | None,
    advantage: Sequence[float] | None,
) -> float:
    strengths = model.team_strengths(teams, weights, advantage)
    r = np.asarray(ranks, dtype=np.float64)
    total = 0.0
    for block in pair_blocks(len(teams)):
        ra = r[block.first]
        rb = r[block.second]
        p = model.pair_win_probabilities(strengths.take(block.first), strengths.take(block.second))
        won = np.clip(np.where(ra < rb, p, 1.0 - p), EPS, 1.0 - EPS)
        total -= float(np.log(won, where=block.upper & (ra != rb), out=np.zeros_like(won)).sum())
    return total
