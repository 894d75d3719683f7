"""Many pairs of teams at once: team strengths, and the bounds past which updates use arrays.

An evaluation file may hold events of thousands of teams (a race of 15,000 runners is
125 million pairs of them). What such a match needs from a model is asked for in arrays:

- ``TeamStrengths``: one entry per team of a match, what the model's two-team win
  probability compares: a mean (the team's location on the rating scale) and a variance
  (its spread, in the model's own terms). A per-team offset on the rating scale, added to
  ``mean``, shifts a team's chances without touching anything else.
- ``PairwiseModel``: ``team_strengths(teams, weights)`` and
  ``pair_win_probabilities(first, second)``, P(first[i] beats second[i]) for every i,
  the same number as ``win_probabilities([team_a, team_b], [w_a, w_b])[0]`` (to the last
  bits of the elementary functions), for whole arrays of pairs.
- ``pair_blocks``: every pair a < b of k teams, in grids of bounded size (rows of teams
  a against columns of teams b), so that no array grows with k^2.

``LARGE_MATCH_TEAMS`` and ``LARGE_MATCH_PLAYERS``: a match with more teams, or more
players, than these is beyond what a ladder records (at most 64 teams of 256 players in
all); the updates whose cost grows with the square of the match size take it with array
arithmetic in blocks of pairs. Every match within the bounds takes the scalar code, which
``app.rating._vector`` repeats bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from app.rating.base import Teams, Weights

__all__ = [
    "LARGE_MATCH_PLAYERS",
    "LARGE_MATCH_TEAMS",
    "PAIR_BLOCK",
    "PairBlock",
    "PairwiseModel",
    "TeamStrengths",
    "pair_blocks",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]

#: More teams than this in one match: updates quadratic in the teams use arrays.
LARGE_MATCH_TEAMS = 64
#: More players than this in one match: updates quadratic in the players use arrays.
LARGE_MATCH_PLAYERS = 256
#: About how many pairs one block of ``pair_blocks`` holds (256 kB per float array: the
#: temporaries of a block stay in the processor's cache).
PAIR_BLOCK = 1 << 15


class TeamStrengths(NamedTuple):
    """Per team of one match, what the model's two-team win probability compares.

    ``mean``: the team's location on the model's rating scale (TrueSkill and the
    Weng-Lin models: sum w mu; Elo: the weight-averaged rating; Glicko-2: the composite
    rating). ``variance``: its spread (TrueSkill: sum w^2 (sigma^2 + beta^2); Weng-Lin:
    sum w^2 sigma^2; Glicko-2: the composite phi^2; Elo: 0).
    """

    mean: FloatArray
    variance: FloatArray

    def take(self, index: IntArray | tuple[slice | None, ...]) -> TeamStrengths:
        """The strengths at ``index`` (an index array, or a ``PairBlock``'s ``first`` or
        ``second``)."""
        return TeamStrengths(self.mean[index], self.variance[index])


@runtime_checkable
class PairwiseModel(Protocol):
    """A model that predicts many pairs of teams of one match at once."""

    def team_strengths(
        self,
        teams: Teams,
        weights: Weights | None = None,
        advantage: Sequence[float] | None = None,
    ) -> TeamStrengths:
        """Each team's strength (its advantage included), checked as ``win_probabilities``
        checks its teams."""
        ...

    def pair_win_probabilities(self, first: TeamStrengths, second: TeamStrengths) -> FloatArray:
        """P(team first[i] beats team second[i]), each pair as ``win_probabilities`` of the
        two teams alone (the first listed first)."""
        ...


class PairBlock(NamedTuple):
    """Teams a in ``rows`` against teams b in ``cols`` of one match, as a rows x cols grid
    (any 1-D per-team array indexed by ``first`` is a column, by ``second`` a row, so they
    broadcast to the grid); the pairs a < b are where ``upper`` is true."""

    rows: slice
    cols: slice
    upper: BoolArray

    @property
    def first(self) -> tuple[slice, None]:
        """Index a per-team array by this for team a of every pair (a column)."""
        return (self.rows, None)

    @property
    def second(self) -> tuple[None, slice]:
        """Index a per-team array by this for team b of every pair (a row)."""
        return (None, self.cols)


def pair_blocks(k: int, size: int = PAIR_BLOCK) -> Iterator[PairBlock]:
    """Every pair (a, b), 0 <= a < b < k, once, in grids of whole rows a of about ``size``
    cells (at least one row) against the columns b > the block's first a, so that memory
    stays bounded whatever k; the few cells b <= a of a grid are masked off by ``upper``."""
    start = 0
    while start < k - 1:
        width = k - 1 - start
        stop = min(k - 1, start + max(1, size // width))
        height = stop - start
        upper = np.arange(width)[None, :] >= np.arange(height)[:, None]
        yield PairBlock(slice(start, stop), slice(start + 1, k), upper)
        start = stop
