"""Replaying a match file with a rating model and measuring its predictions.

The measures are those of ``rating-models.md`` section 5 (the TrueSkill paper, section 4.1):

- Prediction error: before each match the teams are ordered by their mean team
  performance sum_i w_i mu_i plus the team's advantage, if any (the mean of t_j in the
  paper's Figure 1; for Elo the sum
  of the members' ratings, the Gaussian Elo's team performance, with which the paper's
  published Elo numbers for team modes are reproduced to 0.01 points, while the team
  mean that Elo's own win probability compares gives 3 to 5 points worse there); over
  every pair of teams that did not draw, the fraction ordered wrongly, pooled over the
  file. A pair whose predicted performances are exactly equal (new players, say) counts
  one half (``tie_weight``; the paper's published numbers match counting it wrong).
- Log loss and Brier score of P(first listed team wins) on decisive two-team matches
  (the model's ``win_probabilities``; p clipped to [1e-15, 1 - 1e-15] in the log).
- Pair log loss (optional, used for fitting): the mean of -log P(a beats b) over every
  decisive pair of teams (a ranked ahead of b), P the model's two-team win probability
  of a and b alone; for two-team matches it is the log loss.
- "Challenged": system A picks the 20% of matches it finds tightest, by its match
  quality before the match (TrueSkill: equation 7; Elo: the same with no uncertainty on
  Elo's team model, each team one entrant rated by its mean, for two teams a monotone
  function of the gap of team means), and system B's prediction error
  is measured on those.

Metrics can be restricted to the matches from ``start`` on (the later part of a file)
while the ratings learn from every match.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from app.evaluation.data import Match
from app.evaluation.pairs import EPS, count_pairs, match_pair_loss
from app.rating.base import Rating, RatingInputError, RatingModel

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The share of matches each system calls tightest in the paper's "challenged" comparison.
CHALLENGE_FRACTION = 0.2
#: How much a pair predicted exactly even counts towards the prediction error.
TIE_WEIGHT = 0.5


@dataclass(slots=True)
class Predictions:
    """What one model predicted before every match of one file (arrays: one per match)."""

    algorithm: str
    params: dict[str, Any]
    #: Wrongly ordered pairs of teams that did not draw (predicted ties not included).
    wrong: FloatArray
    #: Pairs of teams that did not draw whose predicted performances were exactly equal.
    tied: FloatArray
    #: Pairs of teams that did not draw.
    pairs: FloatArray
    #: Pairs of teams that drew.
    drawn: FloatArray
    #: The model's match quality before the match.
    quality: FloatArray
    #: P(first listed team wins): decisive two-team matches only, NaN elsewhere.
    p_first: FloatArray
    #: 1.0 when the first listed team won (decisive two-team matches), NaN elsewhere.
    first_won: FloatArray
    #: Sum over the decisive pairs of -log P(better-ranked team beats the other), or None.
    pair_loss: FloatArray | None
    #: Matches the model refused to rate (predicted, but the ratings stayed as they were).
    unrated: int
    #: Wall-clock and processor time of the replay.
    seconds: float
    cpu_seconds: float
    #: player index -> (match positions, mu after each of that player's matches).
    trajectories: dict[int, tuple[list[int], list[float]]] = field(default_factory=dict)


def predict(
    model: RatingModel,
    matches: Sequence[Match],
    players: int,
    *,
    algorithm: str | None = None,
    track: Iterable[int] = (),
    pair_loss: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> Predictions:
    """Replay ``matches`` in order: predict each from the ratings so far, then rate it.

    ``players`` is the size of the ratings table (every player starts at the prior).
    A match the model refuses (``RatingInputError``, e.g. a tie too large for Elo's
    whole-order update) is still predicted and leaves the ratings unchanged.
    """
    start_time = time.perf_counter()
    start_cpu = time.process_time()
    prior = model.rating()
    table: list[Rating] = [prior] * players
    n = len(matches)
    wrong = np.zeros(n)
    tied = np.zeros(n)
    pairs = np.zeros(n)
    drawn = np.zeros(n)
    quality = np.zeros(n)
    p_first = np.full(n, np.nan)
    first_won = np.full(n, np.nan)
    losses = np.zeros(n) if pair_loss else None
    trajectories: dict[int, tuple[list[int], list[float]]] = {i: ([], []) for i in track}
    unrated = 0
    win_probabilities = model.win_probabilities
    rate = model.rate
    size = float(model.params.get("advantage", 0.0))
    for pos, m in enumerate(matches):
        teams = [[table[i] for i in team] for team in m.teams]
        ranks = m.ranks
        weights = m.weights
        shares = m.advantage
        k = len(teams)
        count = count_pairs(_strengths(teams, weights, shares, size), ranks)
        wrong[pos] = count.wrong
        tied[pos] = count.even
        pairs[pos] = count.pairs
        drawn[pos] = count.drawn
        quality[pos] = model.quality(teams, weights, shares)
        if k == 2 and ranks[0] != ranks[1]:
            p = win_probabilities(teams, weights, shares)[0]
            p_first[pos] = p
            first_won[pos] = 1.0 if ranks[0] < ranks[1] else 0.0
        if losses is not None and count.pairs:
            losses[pos] = match_pair_loss(model, teams, ranks, weights, shares)
        try:
            # Statistics go only where a match has them: a model of another package (the
            # benchmarks' oracles) takes no such argument.
            extra: dict[str, Any] = {}
            if m.player_scores is not None:
                extra["player_scores"] = m.player_scores
            if m.scores is not None:
                new = rate(teams, scores=m.scores, weights=weights, advantage=shares, **extra)
            else:
                new = rate(teams, ranks=ranks, weights=weights, advantage=shares, **extra)
        except RatingInputError:
            unrated += 1
        else:
            _store(table, m.teams, new, pos, trajectories)
        if on_progress is not None and pos % 256 == 0:
            on_progress(pos, n)
    if on_progress is not None:
        on_progress(n, n)
    return Predictions(
        algorithm=algorithm or model.name,
        params=dict(model.params),
        wrong=wrong,
        tied=tied,
        pairs=pairs,
        drawn=drawn,
        quality=quality,
        p_first=p_first,
        first_won=first_won,
        pair_loss=losses,
        unrated=unrated,
        seconds=time.perf_counter() - start_time,
        cpu_seconds=time.process_time() - start_cpu,
        trajectories=trajectories,
    )


def _strengths(
    teams: list[list[Rating]],
    weights: Sequence[Sequence[float]] | None,
    shares: Sequence[float] | None,
    size: float,
) -> list[float]:
    """Each team's mean performance: its members' means (weighted by partial play), and
    its share of the ladder's advantage."""
    if weights is None:
        strength = [sum(r[0] for r in team) for team in teams]
    else:
        strength = [
            sum(w * r[0] for w, r in zip(ws, team, strict=True))
            for ws, team in zip(weights, teams, strict=True)
        ]
    if shares is not None and size:
        strength = [s + size * a for s, a in zip(strength, shares, strict=True)]
    return strength


def _store(
    table: list[Rating],
    teams: Sequence[Sequence[int]],
    new: Sequence[Sequence[Rating]],
    pos: int,
    trajectories: dict[int, tuple[list[int], list[float]]],
) -> None:
    """The match's new ratings into ``table``; the tracked players' means into their
    trajectories."""
    for team, new_team in zip(teams, new, strict=True):
        for i, r in zip(team, new_team, strict=True):
            table[i] = r
            if i in trajectories:
                trajectories[i][0].append(pos)
                trajectories[i][1].append(r[0])


def _mask(n: int, start: int, mask: BoolArray | None) -> BoolArray:
    out: BoolArray = np.arange(n) >= start
    if mask is not None:
        out &= mask
    return out


def prediction_error(
    p: Predictions, mask: BoolArray | None = None, *, tie_weight: float = TIE_WEIGHT
) -> float:
    """Wrongly ordered pairs / pairs that did not draw, over the matches in ``mask``.

    A pair predicted exactly even counts ``tie_weight`` (1/2 by default; 1 counts it
    wrong, as the paper's published numbers appear to, see ``docs/evaluation.md``).
    """
    sel = np.ones(len(p.wrong), dtype=bool) if mask is None else mask
    total = float(p.pairs[sel].sum())
    bad = float(p.wrong[sel].sum()) + tie_weight * float(p.tied[sel].sum())
    return bad / total if total else math.nan


def log_loss(p: Predictions, mask: BoolArray | None = None) -> float:
    """Mean -[y log p + (1 - y) log(1 - p)] over decisive two-team matches in ``mask``."""
    sel = ~np.isnan(p.p_first) if mask is None else mask & ~np.isnan(p.p_first)
    if not sel.any():
        return math.nan
    q = np.clip(p.p_first[sel], EPS, 1.0 - EPS)
    y = p.first_won[sel]
    return float(-np.mean(y * np.log(q) + (1.0 - y) * np.log1p(-q)))


def brier(p: Predictions, mask: BoolArray | None = None) -> float:
    """Mean (p - y)^2 over decisive two-team matches in ``mask``."""
    sel = ~np.isnan(p.p_first) if mask is None else mask & ~np.isnan(p.p_first)
    if not sel.any():
        return math.nan
    return float(np.mean((p.p_first[sel] - p.first_won[sel]) ** 2))


def pair_log_loss(p: Predictions, mask: BoolArray | None = None) -> float:
    """Mean -log P(a beats b) over the decisive pairs of the matches in ``mask``."""
    if p.pair_loss is None:
        raise ValueError("these predictions were made without pair_loss=True")
    sel = np.ones(len(p.wrong), dtype=bool) if mask is None else mask
    total = float(p.pairs[sel].sum())
    return float(p.pair_loss[sel].sum()) / total if total else math.nan


def tightest(
    quality: FloatArray, mask: BoolArray, fraction: float = CHALLENGE_FRACTION
) -> BoolArray:
    """The ``fraction`` of the matches in ``mask`` with the highest quality.

    ceil(fraction * matches) of them; equal qualities are taken in match order (a stable
    sort), so the choice is reproducible.
    """
    candidates = np.flatnonzero(mask)
    take = math.ceil(fraction * len(candidates))
    order = np.argsort(-quality[candidates], kind="stable")[:take]
    out = np.zeros(len(quality), dtype=bool)
    out[candidates[order]] = True
    return out


def summarize(
    runs: Sequence[Predictions], *, start: int = 0, tie_weight: float = TIE_WEIGHT
) -> list[dict[str, Any]]:
    """One result dictionary per run (all runs over the same matches).

    ``challenged`` maps each other run's name to this run's prediction error on the 20%
    of matches that run finds tightest; ``tightest_error`` is this run's error on its own.
    """
    out: list[dict[str, Any]] = []
    if not runs:
        return out
    n = len(runs[0].wrong)
    base = _mask(n, start, None)
    tight = {r.algorithm: tightest(r.quality, base) for r in runs}
    for r in runs:
        row: dict[str, Any] = {
            "algorithm": r.algorithm,
            "params": r.params,
            "prediction_error": prediction_error(r, base, tie_weight=tie_weight),
            "log_loss": log_loss(r, base),
            "brier": brier(r, base),
            "matches": int(base.sum()),
            "pairs": int(r.pairs[base].sum()),
            "predicted_even_pairs": int(r.tied[base].sum()),
            "two_team_decisive": int((base & ~np.isnan(r.p_first)).sum()),
            "unrated": r.unrated,
            "seconds": r.seconds,
            "cpu_seconds": r.cpu_seconds,
            "tightest_error": prediction_error(r, tight[r.algorithm], tie_weight=tie_weight),
            "challenged": {
                other: prediction_error(r, sel, tie_weight=tie_weight)
                for other, sel in tight.items()
                if other != r.algorithm
            },
        }
        if r.pair_loss is not None:
            row["pair_log_loss"] = pair_log_loss(r, base)
        out.append(row)
    return out


def json_safe(value: Any) -> Any:
    """NaN and infinities become None, recursively (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
