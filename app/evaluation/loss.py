"""The objective of a fit: the pair log loss of a replay, without the rest of ``predict``.

A fit replays the same training matches tens of times, and needs one number from each
replay: the pair log loss (``metrics.pair_log_loss``). ``predict`` computes everything the
evaluation reports (the order of the teams, match quality, the first team's win
probability) one match at a time; here the matches are rated by the replay engine of
``app.rating.replay`` (the ladders' own, vectorised for the core models; the same numbers
to rounding, see its module), which also gives every participant's rating before its
match, and the loss is then summed from those ratings with the model's own two-team
``win_probabilities`` (with the teams' advantage shares), exactly as ``predict`` sums it:
per match, over every decisive pair of teams, -log P(the better-ranked team beats the
other), P clipped to [``EPS``, 1 - ``EPS``]; then the sum over the matches divided by the
number of decisive pairs. A match given by scores is rated from its scores, as
``predict`` rates it (the margin a model may learn from).

When the replay refuses a match (a ``RatingInputError``: ``predict`` then leaves the
ratings as they were and goes on) or its arithmetic fails, the loss is ``predict``'s own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from app.evaluation.data import Match
from app.evaluation.metrics import pair_log_loss, predict
from app.evaluation.pairs import match_pair_loss
from app.rating.base import Rating, RatingInputError, RatingModel
from app.rating.replay import ReplayMatch, replay


class PairLoss:
    """The pair log loss of a model replayed over fixed matches (``players`` of them), from
    every player at the model's prior; built once, called once per candidate model."""

    def __init__(self, matches: Sequence[Match], players: int) -> None:
        self.matches = matches
        self.players = players
        self._replay = [
            ReplayMatch(
                m.teams,
                m.ranks,
                m.weights,
                advantage=m.advantage,
                scores=m.scores,
                player_scores=m.player_scores,
            )
            for m in matches
        ]
        sizes = [sum(len(team) for team in m.teams) for m in matches]
        self._offsets = [0, *np.cumsum(sizes, dtype=np.int64).tolist()]

    def __call__(self, model: RatingModel) -> float:
        """The mean of -log P(a beats b) over the decisive pairs (NaN without any)."""
        prior = model.rating()
        try:
            result = replay(
                model,
                np.full(self.players, prior.mu),
                np.full(self.players, prior.sigma),
                self._replay,
            )
        except (RatingInputError, ArithmeticError, ValueError):
            return pair_log_loss(predict(model, self.matches, self.players, pair_loss=True))
        return self._from_ratings(model, result.before_mu.tolist(), result.before_sigma.tolist())

    def _from_ratings(self, model: RatingModel, mu: list[float], sigma: list[float]) -> float:
        """The loss from every participant's rating before its match (``predict``'s sum)."""
        losses = np.zeros(len(self.matches))
        pairs = 0
        offsets = self._offsets
        for n, m in enumerate(self.matches):
            ranks = m.ranks
            k = len(ranks)
            at = offsets[n]
            teams = []
            for team in m.teams:
                teams.append([Rating(mu[i], sigma[i]) for i in range(at, at + len(team))])
                at += len(team)
            ties = sum(c * (c - 1) // 2 for c in Counter(ranks).values())
            count = k * (k - 1) // 2 - ties
            if count:
                losses[n] = match_pair_loss(model, teams, ranks, m.weights, m.advantage)
            pairs += count
        return float(losses.sum()) / pairs if pairs else math.nan
