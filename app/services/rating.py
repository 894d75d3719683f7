"""Rating matches over a table of ratings: the one step recording, batches, imports and
re-ratings share (``rate``), with what a match the model refuses is answered with."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from app.domain import accuracy as predictions
from app.domain.ladders import (
    MAX_FINITE,
    NUMERIC_ERRORS,
    LadderConfig,
    degenerate,
)
from app.domain.times import SECONDS_PER_DAY, utc
from app.errors import Conflict, InvalidInput
from app.rating.base import Rating, RatingInputError, VolatileRating
from app.rating.replay import ReplayMatch, replay
from app.storage.models import Ladder

FloatArray = npt.NDArray[np.float64]


#: Days for the replay are counted from this instant (only differences matter).
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def day_of(moment: datetime) -> float:
    """``moment`` in days since :data:`EPOCH`: the replay's ``day``."""
    return (utc(moment) - EPOCH).total_seconds() / SECONDS_PER_DAY


class MatchRefused(InvalidInput):
    """A match of a batch cannot be recorded; ``index`` is its place in the batch."""

    def __init__(self, detail: str, *, index: int) -> None:
        super().__init__(detail)
        self.index = index


class MatchConflict(Conflict):
    """A match_id of a batch was recorded with another body; ``index`` is its place."""

    def __init__(self, detail: str, *, index: int) -> None:
        super().__init__(detail)
        self.index = index


@dataclass(frozen=True, slots=True)
class Planned:
    """A match to rate: its players, outcome (lower is better), weights, time, the teams'
    advantage shares and, when the outcome was given by them, the scores."""

    match_id: str
    played_at: datetime
    teams: list[list[str]]
    outcome: list[float]
    weights: list[list[float]] | None
    advantage: list[float] | None = None
    scores: list[float] | None = None
    #: Each player's own statistic, in the shape of ``teams`` (None: unknown).
    player_scores: list[list[float | None]] | None = None


@dataclass
class RatingTable:
    """The ratings a replay reads and leaves: one entry per player, by ``index``.

    ``last_day`` is the latest day the player played (NaN: never), the ``max`` over its
    matches: a match reported late widens nothing and leaves the latest day in place.
    """

    players: list[str]
    mu: FloatArray
    sigma: FloatArray
    last_day: FloatArray
    #: Glicko-2's volatilities; ``None`` for the other algorithms.
    volatility: FloatArray | None = None

    def __post_init__(self) -> None:
        self.index = {player: n for n, player in enumerate(self.players)}


@dataclass(frozen=True, slots=True)
class Rated:
    """What rating ``Planned`` matches gave: per participant (match, team, player order)
    the rating before (as stored, before ageing) and after; per match the quality, the
    teams' win probabilities before it (``app.domain.accuracy``) and the offset of its
    first participant."""

    before_mu: FloatArray
    before_sigma: FloatArray
    after_mu: FloatArray
    after_sigma: FloatArray
    quality: FloatArray
    offsets: list[int]
    win_probabilities: list[list[float] | None]
    #: Glicko-2's volatilities before and after; ``None`` for the other algorithms.
    before_volatility: FloatArray | None = None
    after_volatility: FloatArray | None = None

    def tally(self, matches: Sequence[Planned]) -> predictions.Tally:
        """What these matches' predictions scored (those without any left out)."""
        tally = predictions.Tally.zero()
        for match, chances in zip(matches, self.win_probabilities, strict=True):
            if chances is not None:
                tally.add_match(chances, match.outcome)
        return tally

    def volatility(self) -> tuple[list[float], list[float]] | None:
        """The volatilities before and after as lists, or ``None``."""
        if self.before_volatility is None or self.after_volatility is None:
            return None
        return self.before_volatility.tolist(), self.after_volatility.tolist()


Label = Callable[[int], str]


def _segments(table: RatingTable, matches: Sequence[Planned]) -> list[tuple[int, dict[int, float]]]:
    """Where to cut the sequence so each player's ``last_day`` stays the latest day played.

    ``replay`` keeps the day of a player's last match in list order; a match reported out of
    order (played before that player's latest match) would move it back. The sequence is cut
    after each such match, and the players' latest days are put back: returns the end of each
    piece and the days to restore after it.
    """
    latest: dict[int, float] = {}
    cuts: list[tuple[int, dict[int, float]]] = []
    for n, match in enumerate(matches):
        day = day_of(match.played_at)
        restore: dict[int, float] = {}
        for team in match.teams:
            for player in team:
                p = table.index[player]
                last = latest.get(p)
                if last is None:
                    last = float(table.last_day[p])
                    if math.isnan(last):
                        last = -math.inf
                if last > day:
                    restore[p] = last
                else:
                    latest[p] = day
        if restore:
            cuts.append((n + 1, restore))
    if not cuts or cuts[-1][0] != len(matches):
        cuts.append((len(matches), {}))
    return cuts


def _replay_matches(
    config: LadderConfig, table: RatingTable, matches: Sequence[Planned]
) -> list[ReplayMatch]:
    index = table.index
    return [
        ReplayMatch(
            teams=[[index[player] for player in team] for team in match.teams],
            ranks=match.outcome,
            weights=match.weights,
            day=day_of(match.played_at),
            advantage=match.advantage,
            scores=match.scores,
            player_scores=match.player_scores,
        )
        for match in matches
    ]


def rate(
    *,
    ladder: Ladder,
    config: LadderConfig,
    table: RatingTable,
    matches: Sequence[Planned],
    label: Label,
    start: int = 0,
) -> Rated:
    """Rate ``matches`` in order over ``table`` (updated in place to the ratings after).

    A match the model refuses, or whose numbers break down, is a ``MatchRefused`` naming
    it by ``label(start + n)``.
    """
    pieces: list[Any] = []
    begin = 0
    for end, restore in _segments(table, matches):
        part = matches[begin:end]
        try:
            result = replay(
                config.model,
                table.mu,
                table.sigma,
                _replay_matches(config, table, part),
                tau_per_day=config.tau_per_day,
                last_day=table.last_day,
                with_quality=True,
                volatility=table.volatility,
            )
        except (RatingInputError, *NUMERIC_ERRORS):
            _locate_failure(ladder, config, table, part, label, start + begin)
            raise
        table.mu, table.sigma, table.last_day = result.mu, result.sigma, result.last_day
        if config.volatile:
            table.volatility = result.volatility
        for p, day in restore.items():
            table.last_day[p] = max(float(table.last_day[p]), day)
        pieces.append(result)
        begin = end
    sizes = [sum(len(team) for team in match.teams) for match in matches]
    offsets = [0, *np.cumsum(sizes).tolist()]

    def joined(name: str) -> FloatArray:
        arrays = [getattr(piece, name) for piece in pieces]
        return np.concatenate(arrays) if arrays else np.empty(0)

    volatile = config.volatile
    before_mu = joined("before_mu")
    before_volatility = joined("before_volatility") if volatile else None

    rated = Rated(
        before_mu=before_mu,
        before_sigma=joined("before_sigma"),
        after_mu=joined("after_mu"),
        after_sigma=joined("after_sigma"),
        quality=joined("quality"),
        offsets=offsets,
        win_probabilities=_win_probabilities(
            config, matches, before_mu, joined("start_sigma"), before_volatility
        ),
        before_volatility=before_volatility,
        after_volatility=joined("after_volatility") if volatile else None,
    )
    _check_numbers(ladder, config, rated, label, start)
    return rated


def _win_probabilities(
    config: LadderConfig,
    matches: Sequence[Planned],
    mu: FloatArray,
    sigma: FloatArray,
    volatility: FloatArray | None,
) -> list[list[float] | None]:
    """Each match's win probabilities on the ratings its update started from: per
    participant the stored mu and the sigma after widening for time away (and Glicko-2's
    volatility), as the replay reports them."""
    model = config.model
    mus = mu.tolist()
    sigmas = sigma.tolist()
    vols = volatility.tolist() if volatility is not None else None
    out: list[list[float] | None] = []
    k = 0
    for match in matches:
        teams: list[list[Rating]] = []
        for team in match.teams:
            end = k + len(team)
            if vols is None:
                teams.append([Rating(m, s) for m, s in zip(mus[k:end], sigmas[k:end], strict=True)])
            else:
                teams.append(
                    [
                        VolatileRating(m, s, v)
                        for m, s, v in zip(mus[k:end], sigmas[k:end], vols[k:end], strict=True)
                    ]
                )
            k = end
        out.append(predictions.win_probabilities(model, teams, match.weights, match.advantage))
    return out


def _locate_failure(
    ladder: Ladder,
    config: LadderConfig,
    table: RatingTable,
    matches: Sequence[Planned],
    label: Label,
    start: int,
) -> None:
    """The replay of ``matches`` failed: replay them one at a time to name the match and
    raise its ``MatchRefused`` (the table is left as it was)."""
    mu, sigma, last_day = table.mu, table.sigma, table.last_day
    volatility = table.volatility
    for n, one in enumerate(_replay_matches(config, table, matches)):
        try:
            result = replay(
                config.model,
                mu,
                sigma,
                [one],
                tau_per_day=config.tau_per_day,
                last_day=last_day,
                volatility=volatility,
            )
        except RatingInputError as exc:
            argument = exc.argument.split(".", 1)[1] if "." in exc.argument else exc.argument
            raise MatchRefused(
                f"{label(start + n)}{argument}: {exc.message}", index=start + n
            ) from None
        except NUMERIC_ERRORS as exc:
            raise _refused(ladder, exc, label, start + n) from None
        mu, sigma, volatility = result.mu, result.sigma, result.volatility
        last_day = np.fmax(result.last_day, last_day)


def _refused(ladder: Ladder, exc: Exception, label: Label, index: int) -> MatchRefused:
    return MatchRefused(f"{label(index)}{degenerate(ladder.id, exc).detail}", index=index)


def _check_numbers(
    ladder: Ladder, config: LadderConfig, rated: Rated, label: Label, start: int
) -> None:
    """Every quality in [0, 1] and every new rating storable (finite; sigma > 0 if Bayesian)."""
    quality = rated.quality
    bad_quality = ~((quality >= 0.0) & (quality <= 1.0))
    lowest = math.ulp(0.0) if config.bayesian else 0.0
    with np.errstate(invalid="ignore"):
        bad_rating = ~(
            (np.abs(rated.after_mu) <= MAX_FINITE)
            & (rated.after_sigma >= lowest)
            & (rated.after_sigma <= MAX_FINITE)
        )
    first = len(quality)
    if bad_quality.any():
        first = int(np.argmax(bad_quality))
    if bad_rating.any():
        participant = int(np.argmax(bad_rating))
        match = int(np.searchsorted(rated.offsets, participant, side="right")) - 1
        first = min(first, match)
    if first < len(quality):
        raise _refused(ladder, ArithmeticError("not storable"), label, start + first)
