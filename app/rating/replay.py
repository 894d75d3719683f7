"""Replay: rate a long, time-ordered sequence of matches over a table of ratings.

The result is, to rounding, what rating the matches one by one in list order with
``model.rate(teams, ranks=..., weights=...)`` gives, where before each match a Bayesian
player's belief is first aged for the days since that player's previous match
(``rating-models.md`` section 4, ``app.rating.base.age``). Players are indices into the
table (``mu``, ``sigma``, ``last_day``); the table given is never changed.

"To rounding": the vectorised updates repeat the scalar arithmetic operation by
operation (``erf`` and ``erfc`` are the ``math`` module's, elementwise), but numpy's exp
may differ from the ``math`` module's in the last bit, and a few sums the scalar code
takes with ``math.fsum`` are plain sums here.
Differences stay below 1e-12 (relative, for values far from 0) and do not grow along a
player's history: each update shrinks earlier errors rather than amplifying them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, compress, pairwise, repeat
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from app.rating._vector import (
    DRAWN,
    FIRST_WINS,
    SECOND_WINS,
    Kernel,
    Side,
    kernel_for,
    many_team_quality,
    two_team_quality,
)
from app.rating.base import (
    Rating,
    RatingInputError,
    RatingModel,
    Teams,
    VolatileRating,
    age,
    check_positive,
    check_weights,
    standard_scores,
)
from app.rating.elo import MAX_ABS_RATING

__all__ = ["ReplayMatch", "ReplayResult", "replay"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Replays of fewer matches go one match at a time: the grouping would not pay for itself.
MIN_FAST_MATCHES = 64
#: Two-team matches of one shape in one wave fewer than this are rated one at a time,
#: which is quicker than a vectorised update for a handful of matches (measured: the
#: vectorised update of 8 such matches costs about what 8 scalar ones do).
MIN_BLOCK = 8
#: The same for three or more teams (Plackett-Luce, Elo): each block costs more there.
MIN_BLOCK_MANY = 16
#: TrueSkill's message passing over k >= 3 teams is vectorised for blocks of at least
#: this many matches per team (a block runs as many rounds as its slowest match).
MIN_BLOCK_PER_TEAM_PASSING = 12
#: Pairwise Elo takes one vectorised duel per pair of opponents, so its blocks need at
#: least this many matches per duel of a match (the scalar update of a large match is
#: itself vectorised); measured crossovers: 12 matches for 64 duels, 24 for 96.
MIN_BLOCK_PER_DUEL = 0.25
#: Team sizes up to this are grouped by shape; larger teams go one match at a time.
_MAX_TEAM = 4096
#: Group keys from here up stand for shapes of three or more teams.
_MANY = _MAX_TEAM * _MAX_TEAM


class _Unsupported(Exception):
    """Input the engine does not take; the match-by-match replay handles (or rejects) it."""


@dataclass(frozen=True, slots=True)
class ReplayMatch:
    """One match of a replay.

    ``teams[j][i]`` is a player's index into the ratings table; ``ranks`` lower is better
    (``None``: teams listed winner first); ``weights`` partial play in the shape of
    ``teams`` (``None``: everyone played fully); ``day`` when it was played, in days from
    any fixed epoch (only differences matter, for ``tau_per_day``); ``advantage`` each
    team's share of the model's advantage (``None``: no team has any); ``scores`` the
    teams' scores when the match was given by them (higher is better; ``ranks`` then holds
    them negated), for a model with a ``margin``; ``player_scores`` each player's own
    statistic in the shape of ``teams`` (None: unknown), for a model with a ``stat_scale``.
    """

    teams: Sequence[Sequence[int]]
    ranks: Sequence[float] | None = None
    weights: Sequence[Sequence[float]] | None = None
    day: float = 0.0
    advantage: Sequence[float] | None = None
    scores: Sequence[float] | None = None
    player_scores: Sequence[Sequence[float | None]] | None = None


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The table after a replay and every participant's rating before and after its match.

    ``mu``, ``sigma``, ``last_day``: the final table, one entry per player (``last_day`` NaN
    for a player who never played). ``before_*`` and ``after_*``: one entry per
    participant, in match order, then team order, then player order; "before" is the
    stored rating the match started from (before ageing), "after" the rating it left.
    ``quality``: ``model.quality`` of each match on the aged ratings, when asked for.
    ``start_sigma``: per participant the sigma its update started from, "before" widened
    for time away (equal to ``before_sigma`` without ageing): with ``before_mu`` the
    ratings a prediction of the match is made on.
    ``volatility``, ``before_volatility``, ``after_volatility``: the same for the
    volatility of a model that keeps one (Glicko-2), else ``None``.
    """

    mu: FloatArray
    sigma: FloatArray
    last_day: FloatArray
    before_mu: FloatArray
    before_sigma: FloatArray
    after_mu: FloatArray
    after_sigma: FloatArray
    quality: FloatArray | None
    start_sigma: FloatArray | None = None
    volatility: FloatArray | None = None
    before_volatility: FloatArray | None = None
    after_volatility: FloatArray | None = None


def _table(name: str, values: npt.ArrayLike, size: int | None) -> FloatArray:
    """A fresh one-dimensional float64 copy of a table column, checked."""
    try:
        out = np.array(values, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise RatingInputError(name, "must be a one-dimensional array of numbers") from None
    if out.ndim != 1:
        raise RatingInputError(name, f"must be one-dimensional, got {out.ndim} dimensions")
    if size is not None and out.shape[0] != size:
        raise RatingInputError(name, f"expected {size} values (one per player), got {out.shape[0]}")
    return out


def _players(index: int, match: ReplayMatch, size: int) -> list[list[int]]:
    """The match's teams as lists of checked player indices (each player at most once)."""
    if not isinstance(match, ReplayMatch):
        raise RatingInputError(f"matches[{index}]", "is not a ReplayMatch")
    teams: list[list[int]] = []
    seen: set[int] = set()
    for j, team in enumerate(match.teams):
        row: list[int] = []
        for p in team:
            if isinstance(p, bool | float):
                raise RatingInputError(
                    f"matches[{index}].teams", f"team {j} holds {p!r}, not a player index"
                )
            try:
                q = operator.index(p)
            except TypeError:
                raise RatingInputError(
                    f"matches[{index}].teams", f"team {j} holds {p!r}, not a player index"
                ) from None
            if not 0 <= q < size:
                raise RatingInputError(
                    f"matches[{index}].teams", f"player {q} is outside the table of {size}"
                )
            if q in seen:
                raise RatingInputError(
                    f"matches[{index}].teams", f"player {q} appears more than once"
                )
            seen.add(q)
            row.append(q)
        teams.append(row)
    return teams


def replay(
    model: RatingModel,
    mu: npt.ArrayLike,
    sigma: npt.ArrayLike,
    matches: Sequence[ReplayMatch],
    *,
    tau_per_day: float = 0.0,
    last_day: npt.ArrayLike | None = None,
    with_quality: bool = False,
    volatility: npt.ArrayLike | None = None,
) -> ReplayResult:
    """Rate ``matches`` in order over the table (``mu``, ``sigma``, ``last_day``).

    A model with a volatility (Glicko-2) also reads and leaves the table's ``volatility``
    (``None``: every player at the model's prior volatility); its ratings enter
    ``model.rate`` as ``VolatileRating``, one match at a time.

    Before each match every participant of a Bayesian model (not Elo, whose tables carry
    sigma 0.0) is aged by ``age(rating, tau_per_day, day - last_day)`` (no ageing for a
    player who never played: ``last_day`` NaN; Glicko-2's deviation up to its prior's,
    ``Glicko2.age``). The inputs are never changed.

    Matches that share no player are independent, so for the three core models the
    matches are grouped into waves (a match's wave is one more than the latest wave of any
    of its players, which keeps every player's matches in order), and within a wave the
    matches of one shape (team sizes) are rated together by the vectorised updates of
    ``app.rating._vector``: two teams for every model, three or more for Plackett-Luce
    and pairwise Elo. The rest (TrueSkill's message passing and whole-order Elo for three
    or more teams, groups under ``MIN_BLOCK``, replays under ``MIN_FAST_MATCHES``, models
    of other classes) goes through ``model.rate`` one match at a time, and so does a
    replay in which an advantage, a margin or statistics count (a model with a nonzero
    ``advantage`` and a match giving shares, a nonzero ``margin`` and a match given by
    scores, or a nonzero ``stat_scale`` and a match giving ``player_scores``).

    Raises ``RatingInputError`` naming the argument: ``mu``, ``sigma``, ``last_day``,
    ``tau_per_day``, or ``matches[i].<argument>`` for match i (its ``teams``, ``ranks``,
    ``weights`` or ``day``, as the model or the table check names it).
    """
    mu_t = _table("mu", mu, None)
    size = mu_t.shape[0]
    sigma_t = _table("sigma", sigma, size)
    if last_day is None:
        day_t = np.full(size, np.nan)
    else:
        day_t = _table("last_day", last_day, size)
        if np.isinf(day_t).any():
            raise RatingInputError("last_day", "every value must be finite or NaN (never played)")
    tau_per_day = check_positive("tau_per_day", tau_per_day, allow_zero=True)
    if model.name == "glicko2":
        prior = model.rating().volatility
        if volatility is None:
            vol_t = np.full(size, prior, dtype=np.float64)
        else:
            vol_t = _table("volatility", volatility, size)
        return _replay_one_by_one(
            model, mu_t, sigma_t, day_t, matches, tau_per_day, with_quality, vol_t
        )
    kernel = kernel_for(model)
    if kernel is not None and _side_information_counts(model, matches, kernel.evidence):
        kernel = None
    if kernel is not None and len(matches) >= MIN_FAST_MATCHES:
        try:
            engine = _Engine(model, kernel, mu_t.copy(), sigma_t.copy(), day_t.copy(), tau_per_day)
            return engine.run(matches, with_quality)
        except (_Unsupported, TypeError, ValueError, ArithmeticError, IndexError):
            # Input the engine does not take, or invalid input: the match-by-match replay
            # below gives the same numbers, or the error naming the first bad match.
            pass
    return _replay_one_by_one(model, mu_t, sigma_t, day_t, matches, tau_per_day, with_quality)


def _side_information_counts(
    model: RatingModel, matches: Sequence[ReplayMatch], evidence: bool = False
) -> bool:
    """Whether a match of ``matches`` gives an advantage, scores or players' statistics
    that ``model`` counts (the statistics not where the kernel takes them: ``evidence``)."""
    params = model.params
    advantage = bool(params.get("advantage"))
    margin = bool(params.get("margin"))
    statistics = bool(params.get("stat_scale")) and not evidence
    return any(
        (advantage and m.advantage is not None)
        or (margin and m.scores is not None)
        or (statistics and m.player_scores is not None)
        for m in matches
    )


def _replay_one_by_one(
    model: RatingModel,
    mu_t: FloatArray,
    sigma_t: FloatArray,
    day_t: FloatArray,
    matches: Sequence[ReplayMatch],
    tau_per_day: float,
    with_quality: bool,
    vol_t: FloatArray | None = None,
) -> ReplayResult:
    """The definition: every match through ``model.rate``, in order (updating the table).

    With ``vol_t`` (Glicko-2) each player enters as a ``VolatileRating`` and leaves its
    new volatility in ``vol_t``."""
    size = mu_t.shape[0]
    ageing = model.name != "elo" and tau_per_day > 0.0
    # Glicko-2 widens a deviation for time away up to the prior's, as Glicko does.
    ceiling = model.rating().sigma if vol_t is not None else None
    before_mu: list[float] = []
    before_sigma: list[float] = []
    start_sigma: list[float] = []
    after_mu: list[float] = []
    after_sigma: list[float] = []
    before_vol: list[float] = []
    after_vol: list[float] = []
    quality: list[float] = []
    for index, match in enumerate(matches):
        players = _players(index, match, size)
        day = match.day
        if isinstance(day, bool) or not isinstance(day, int | float) or not math.isfinite(day):
            raise RatingInputError(f"matches[{index}].day", f"must be a finite number, got {day!r}")
        day = float(day)
        teams: list[list[Rating]] = []
        for row in players:
            team: list[Rating] = []
            for p in row:
                r = Rating(float(mu_t[p]), float(sigma_t[p]))
                before_mu.append(r.mu)
                before_sigma.append(r.sigma)
                if ageing:
                    last = float(day_t[p])
                    if not math.isnan(last):
                        r = age(r, tau_per_day, day - last, ceiling=ceiling)
                start_sigma.append(r.sigma)
                if vol_t is not None:
                    vol = float(vol_t[p])
                    before_vol.append(vol)
                    r = VolatileRating(r.mu, r.sigma, vol)
                team.append(r)
            teams.append(team)
        try:
            if with_quality:
                quality.append(model.quality(teams, match.weights, match.advantage))
            if match.scores is not None:
                new = model.rate(
                    teams,
                    scores=match.scores,
                    weights=match.weights,
                    advantage=match.advantage,
                    player_scores=match.player_scores,
                )
            else:
                new = model.rate(
                    teams,
                    ranks=match.ranks,
                    weights=match.weights,
                    advantage=match.advantage,
                    player_scores=match.player_scores,
                )
        except RatingInputError as exc:
            raise RatingInputError(f"matches[{index}].{exc.argument}", exc.message) from None
        for row, new_row in zip(players, new, strict=True):
            for p, r in zip(row, new_row, strict=True):
                mu_t[p] = r.mu
                sigma_t[p] = r.sigma
                day_t[p] = day
                after_mu.append(r.mu)
                after_sigma.append(r.sigma)
                if vol_t is not None:
                    vol_t[p] = r.volatility
                    after_vol.append(cast(float, r.volatility))
    volatility = None
    if vol_t is not None:
        volatility = (
            vol_t,
            np.array(before_vol, dtype=np.float64),
            np.array(after_vol, dtype=np.float64),
        )
    return ReplayResult(
        mu=mu_t,
        sigma=sigma_t,
        last_day=day_t,
        before_mu=np.array(before_mu, dtype=np.float64),
        before_sigma=np.array(before_sigma, dtype=np.float64),
        after_mu=np.array(after_mu, dtype=np.float64),
        after_sigma=np.array(after_sigma, dtype=np.float64),
        quality=np.array(quality, dtype=np.float64) if with_quality else None,
        start_sigma=np.array(start_sigma, dtype=np.float64),
        volatility=None if volatility is None else volatility[0],
        before_volatility=None if volatility is None else volatility[1],
        after_volatility=None if volatility is None else volatility[2],
    )


def _types_of(values: Sequence[object], kinds: tuple[type, ...]) -> bool:
    """Check that every value is an instance of ``kinds`` and none a bool (else unsupported).

    Returns whether they are all exactly the first kind (plain ``int``, ``float``).
    """
    types = set(map(type, values))
    if types == {kinds[0]}:
        return True
    if not all(issubclass(t, kinds) and not issubclass(t, bool | np.bool_) for t in types):
        raise _Unsupported
    return False


def _given(values: Sequence[object]) -> npt.NDArray[np.bool_]:
    """Which values are not None."""
    return np.fromiter(map(operator.is_not, values, repeat(None)), np.bool_, len(values))


class _Columns:
    """The fields of a match list, flattened: read in chunks of matches, so that each
    match's lists are still in the processor's cache when they are read a second time.
    """

    #: Matches per chunk.
    CHUNK = 4096

    def __init__(self, matches: Sequence[ReplayMatch]) -> None:
        n_teams: list[IntArray] = []
        team_sizes: list[IntArray] = []
        ranks_given: list[npt.NDArray[np.bool_]] = []
        rank_lengths: list[IntArray] = []
        weights_given: list[npt.NDArray[np.bool_]] = []
        self.players: list[int] = []
        self.days: list[float] = []
        self.rank_values: list[float] = []
        for start in range(0, len(matches), self.CHUNK):
            chunk = matches[start : start + self.CHUNK]
            teams = [m.teams for m in chunk]
            n_teams.append(np.fromiter(map(len, teams), np.int64, len(teams)))
            team_lists = list(chain.from_iterable(teams))
            team_sizes.append(np.fromiter(map(len, team_lists), np.int64, len(team_lists)))
            self.players.extend(chain.from_iterable(team_lists))
            self.days.extend([m.day for m in chunk])
            ranks = [m.ranks for m in chunk]
            given = _given(ranks)
            ranks_given.append(given)
            if given.any():
                listed = cast(list[Sequence[float]], list(compress(ranks, given)))
                rank_lengths.append(np.fromiter(map(len, listed), np.int64, len(listed)))
                self.rank_values.extend(chain.from_iterable(listed))
            weights_given.append(_given([m.weights for m in chunk]))
        self.n_teams = _joined(n_teams, np.int64)
        self.team_sizes = _joined(team_sizes, np.int64)
        self.ranks_given = _joined(ranks_given, np.bool_)
        self.rank_lengths = _joined(rank_lengths, np.int64)
        self.weights_given = _joined(weights_given, np.bool_)


def _joined(parts: list[npt.NDArray[Any]], dtype: type) -> npt.NDArray[Any]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


class _Engine:
    """The grouped replay: waves of independent matches, vectorised by shape within a wave.

    Every participant has a slot: its position in the flattened list of all participants
    (match order, then team order, then player order), which is also its position in the
    result's ``before_*`` and ``after_*``.
    """

    def __init__(
        self,
        model: RatingModel,
        kernel: Kernel,
        mu_t: FloatArray,
        sigma_t: FloatArray,
        day_t: FloatArray,
        tau_per_day: float,
    ) -> None:
        self.model = model
        self.kernel = kernel
        self.mu_t = mu_t
        self.sigma_t = sigma_t
        self.day_t = day_t
        self.bayesian = model.name != "elo"
        self.ageing = self.bayesian and tau_per_day > 0.0
        self.tau_per_day = tau_per_day
        # The same constant as ``age`` computes: tau_per_day ** 2.
        self.tau2_per_day = tau_per_day**2

    # -- reading the matches ----------------------------------------------------------

    def run(self, matches: Sequence[ReplayMatch], with_quality: bool) -> ReplayResult:
        if set(map(type, matches)) != {ReplayMatch}:
            raise _Unsupported
        n_matches = len(matches)
        size = self.mu_t.shape[0]
        columns = _Columns(matches)
        n_teams = columns.n_teams
        team_sizes = columns.team_sizes
        if (n_teams < 2).any() or (team_sizes < 1).any():
            raise _Unsupported
        flat = columns.players
        plain_ints = _types_of(flat, (int, np.integer))
        players: IntArray = np.array(flat, dtype=np.int64)
        if players.min() < 0 or players.max() >= size:
            raise _Unsupported
        if not plain_ints:
            flat = players.tolist()
        # Slots: the first slot of each team and of each match, and each match's count.
        team_start = np.zeros(team_sizes.shape[0] + 1, np.int64)
        np.cumsum(team_sizes, out=team_start[1:])
        first_team = np.zeros(n_matches + 1, np.int64)
        np.cumsum(n_teams, out=first_team[1:])
        offsets = team_start[first_team]
        counts = offsets[1:] - offsets[:-1]
        self.players = players
        self.flat = flat
        self.offsets = offsets
        evident = self._statistics(matches, offsets)

        _types_of(columns.days, (int, float))
        days = np.array(columns.days, dtype=np.float64)
        if not np.isfinite(days).all():
            raise _Unsupported
        self.days = days

        two = n_teams == 2
        outcome = self._outcomes(columns, n_teams, two)
        weighted, w_model, w_raw = self._weights(
            matches, columns.weights_given, offsets, counts, players.shape[0]
        )
        self._check_participants(players)

        waves = self._waves(players, flat, counts.tolist(), size)
        # Group key: the shape n_0 * _MAX_TEAM + n_1 of a two-team match, -1 for the rest.
        key = np.full(n_matches, -1, np.int64)
        n0 = team_sizes[first_team[:-1][two]]
        n1 = team_sizes[first_team[:-1][two] + 1]
        key[two] = np.where((n0 < _MAX_TEAM) & (n1 < _MAX_TEAM), n0 * _MAX_TEAM + n1, -1)
        # Three or more teams: _MANY + the index of the shape (the tuple of team sizes).
        shapes: list[tuple[int, ...]] = []
        if self.kernel.many_teams and not two.all():
            shape_id: dict[tuple[int, ...], int] = {}
            sizes = team_sizes.tolist()
            many = np.flatnonzero(~two)
            firsts = first_team[many].tolist()
            lasts = first_team[many + 1].tolist()
            ids = [
                shape_id.setdefault(tuple(sizes[f:e]), len(shape_id))
                for f, e in zip(firsts, lasts, strict=True)
            ]
            key[many] = _MANY + np.asarray(ids, np.int64)
            shapes = list(shape_id)
        if evident is not None:
            # Statistics of three or more teams: one match at a time (``model.rate``).
            key[evident & ~two] = -1
        self.w_model = w_model
        self.w_raw = w_raw
        self.matches = matches
        order = np.lexsort((key, waves))
        w_sorted = waves[order]
        k_sorted = key[order]
        cut = np.flatnonzero((w_sorted[1:] != w_sorted[:-1]) | (k_sorted[1:] != k_sorted[:-1]))
        bounds = [0, *(cut + 1).tolist(), n_matches]

        n_slots = players.shape[0]
        self.before_mu = np.empty(n_slots)
        self.before_sigma = np.empty(n_slots)
        self.start_sigma = np.empty(n_slots)
        self.after_mu = np.empty(n_slots)
        self.after_sigma = np.empty(n_slots)
        self.quality = np.empty(n_matches) if with_quality else None
        for start, end in pairwise(bounds):
            shape = int(k_sorted[start])
            idx = order[start:end]
            teams = (
                shapes[shape - _MANY] if shape >= _MANY else (shape // _MAX_TEAM, shape % _MAX_TEAM)
            )
            if shape < 0 or end - start < self._least(teams):
                for i in idx.tolist():
                    self._rate_one(matches[i], i)
            elif shape >= _MANY:
                self._rate_many_block(idx, teams)
            else:
                self._rate_block(
                    idx,
                    shape // _MAX_TEAM,
                    shape % _MAX_TEAM,
                    outcome[idx],
                    weighted[idx],
                    w_model,
                    w_raw,
                )
        self._check_results()
        return ReplayResult(
            mu=self.mu_t,
            sigma=self.sigma_t,
            last_day=self.day_t,
            before_mu=self.before_mu,
            before_sigma=self.before_sigma,
            after_mu=self.after_mu,
            after_sigma=self.after_sigma,
            quality=self.quality,
            start_sigma=self.start_sigma,
        )

    def _statistics(
        self, matches: Sequence[ReplayMatch], offsets: IntArray
    ) -> npt.NDArray[np.bool_] | None:
        """Each slot's statistic standardised within its match (``self.z``, NaN where
        unknown; None when the kernel takes none or no match gives any), and which matches
        give evidence (None: none)."""
        self.z: FloatArray | None = None
        if not self.kernel.evidence or all(m.player_scores is None for m in matches):
            return None
        spread = float(self.model.params.get("stat_spread", 0.0))
        z = np.full(self.players.shape[0], np.nan)
        evident = np.zeros(len(matches), np.bool_)
        starts = offsets.tolist()
        for i, match in enumerate(matches):
            if match.player_scores is None:
                continue
            found = standard_scores(
                [[Rating(0.0, 1.0)] * len(team) for team in match.teams],
                match.player_scores,
                spread,
            )
            if found is not None:
                flat_z = list(chain.from_iterable(found))
                z[starts[i] : starts[i] + len(flat_z)] = flat_z
                evident[i] = True
        if not evident.any():
            return None
        self.z = z
        return evident

    def _outcomes(
        self, columns: _Columns, n_teams: IntArray, two: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.int8]:
        """Per two-team match: team 0 ranked first (or no ranks), team 1 first, or a draw."""
        outcome = np.full(n_teams.shape[0], FIRST_WINS, np.int8)
        given = np.flatnonzero(columns.ranks_given)
        self.rank_start = np.full(n_teams.shape[0], -1, np.int64)
        self.rank_values = np.zeros(0)
        if given.size == 0:
            return outcome
        lengths = columns.rank_lengths
        if (lengths != n_teams[given]).any():
            raise _Unsupported
        values = columns.rank_values
        _types_of(values, (int, float))
        flat = np.array(values, dtype=np.float64)
        if not np.isfinite(flat).all():
            raise _Unsupported
        start = np.zeros(len(given), np.int64)
        np.cumsum(lengths[:-1], out=start[1:])
        self.rank_start[given] = start
        self.rank_values = flat
        r0 = flat[start]
        r1 = flat[start + 1]
        code = np.where(r1 < r0, SECOND_WINS, np.where(r0 == r1, DRAWN, FIRST_WINS))
        given_two = two[given]
        outcome[given[given_two]] = code[given_two]
        return outcome

    def _weights(
        self,
        matches: Sequence[ReplayMatch],
        given: npt.NDArray[np.bool_],
        offsets: IntArray,
        counts: IntArray,
        n_slots: int,
    ) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]:
        """Per match whether it is weighted; per slot the model's and the given weights."""
        weighted = np.zeros(len(matches), np.bool_)
        w_model = np.ones(n_slots)
        w_raw = np.ones(n_slots)
        index: list[int] = []
        model_values: list[float] = []
        raw_values: list[float] = []
        model_weights = self.kernel.weights
        for i in np.flatnonzero(given).tolist():
            teams = matches[i].teams
            raw = check_weights(cast(Teams, teams), matches[i].weights)
            if raw is None:
                continue
            weighted[i] = True
            start = int(offsets[i])
            index.extend(range(start, start + int(counts[i])))
            raw_values.extend(chain.from_iterable(raw))
            model_values.extend(chain.from_iterable(model_weights(raw)))
        if index:
            w_model[index] = model_values
            w_raw[index] = raw_values
        return weighted, w_model, w_raw

    def _check_participants(self, players: IntArray) -> None:
        """The stored ratings every match starts from are ones ``model.rate`` accepts."""
        played = np.zeros(self.mu_t.shape[0], np.bool_)
        played[players] = True
        mu = self.mu_t[played]
        if not np.isfinite(mu).all():
            raise _Unsupported
        if self.bayesian:
            sigma = self.sigma_t[played]
            if not (np.isfinite(sigma) & (sigma > 0.0)).all():
                raise _Unsupported
        elif (np.abs(mu) > MAX_ABS_RATING).any():
            raise _Unsupported

    @staticmethod
    def _waves(players: IntArray, flat: list[int], counts: list[int], size: int) -> IntArray:
        """Each match's wave: 1 + the latest wave of any of its players (a tight loop).

        Also rejects a match that lists a player twice.
        """
        latest = [0] * size
        waves: list[int] = []
        add = waves.append
        if min(counts) == max(counts) == 2:
            if (players[0::2] == players[1::2]).any():
                raise _Unsupported
            pairs = iter(flat)
            for a, b in zip(pairs, pairs, strict=True):
                w = latest[a]
                wb = latest[b]
                if wb > w:
                    w = wb
                w += 1
                latest[a] = latest[b] = w
                add(w)
            return np.array(waves, dtype=np.int64)
        pos = 0
        get = latest.__getitem__
        for count in counts:
            ps = flat[pos : pos + count]
            pos += count
            if len(set(ps)) != count:
                raise _Unsupported
            w = max(map(get, ps)) + 1
            for p in ps:
                latest[p] = w
            add(w)
        return np.array(waves, dtype=np.int64)

    # -- rating ---------------------------------------------------------------------------

    def _rate_one(self, match: ReplayMatch, index: int) -> None:
        """One match through ``model.rate``, as the definition does.

        Element by element: for the few players of one match that is quicker than
        gathering and scattering index arrays.
        """
        mu_t = self.mu_t
        sigma_t = self.sigma_t
        day_t = self.day_t
        flat = self.flat
        before_mu = self.before_mu
        before_sigma = self.before_sigma
        start_sigma = self.start_sigma
        day = self.days.item(index)
        start = pos = self.offsets.item(index)
        teams: list[list[Rating]] = []
        for team in match.teams:
            row: list[Rating] = []
            for _ in range(len(team)):
                p = flat[pos]
                mu = mu_t.item(p)
                sigma = sigma_t.item(p)
                before_mu[pos] = mu
                before_sigma[pos] = sigma
                r = Rating(mu, sigma)
                if self.ageing:
                    last = day_t.item(p)
                    if not math.isnan(last):
                        r = age(r, self.tau_per_day, day - last)
                start_sigma[pos] = r.sigma
                pos += 1
                row.append(r)
            teams.append(row)
        if self.quality is not None:
            self.quality[index] = self.model.quality(teams, match.weights)
        new = self.model.rate(
            teams, ranks=match.ranks, weights=match.weights, player_scores=match.player_scores
        )
        after_mu = self.after_mu
        after_sigma = self.after_sigma
        pos = start
        for new_row in new:
            for mu, sigma in new_row:
                p = flat[pos]
                mu_t[p] = mu
                sigma_t[p] = sigma
                day_t[p] = day
                after_mu[pos] = mu
                after_sigma[pos] = sigma
                pos += 1

    def _side(
        self, slots: IntArray, days: FloatArray, weights: FloatArray
    ) -> tuple[Side, IntArray]:
        """One team of a block read from the table (recording "before"), aged (recording
        the sigma the update starts from)."""
        ps = self.players[slots]
        mu = self.mu_t[ps]
        sigma = self.sigma_t[ps]
        self.before_mu[slots] = mu
        self.before_sigma[slots] = sigma
        if self.ageing:
            elapsed = days[:, None] - self.day_t[ps]
            widen = elapsed > 0.0  # NaN (never played) compares false
            if widen.any():
                aged = np.sqrt(
                    sigma * sigma + self.tau2_per_day * elapsed, where=widen, out=sigma.copy()
                )
                if not np.isfinite(aged).all():
                    raise _Unsupported
                sigma = aged
        self.start_sigma[slots] = sigma
        z = None if self.z is None else self.z[slots]
        if z is not None and np.isnan(z).all():
            z = None
        return Side(mu, sigma, weights[slots], z), ps

    def _rate_block(
        self,
        idx: IntArray,
        n0: int,
        n1: int,
        outcome: npt.NDArray[np.int8],
        weighted: npt.NDArray[np.bool_],
        w_model: FloatArray,
        w_raw: FloatArray,
    ) -> None:
        """Matches ``idx`` of one wave, all n0 against n1 players, rated together."""
        first = self.offsets[idx][:, None]
        slots_a = first + np.arange(n0)
        slots_b = first + np.arange(n0, n0 + n1)
        days = self.days[idx]
        a, pa = self._side(slots_a, days, w_model)
        b, pb = self._side(slots_b, days, w_model)
        if self.quality is not None:
            self.quality[idx] = two_team_quality(self.kernel, a, b, w_raw[slots_a], w_raw[slots_b])
        mu_a, sigma_a, mu_b, sigma_b = self.kernel.rate(a, b, outcome, weighted)
        for ps, slots, mu, sigma in ((pa, slots_a, mu_a, sigma_a), (pb, slots_b, mu_b, sigma_b)):
            self.mu_t[ps] = mu
            self.sigma_t[ps] = sigma
            self.day_t[ps] = days[:, None]
            self.after_mu[slots] = mu
            self.after_sigma[slots] = sigma

    def _rate_many_block(self, idx: IntArray, shape: tuple[int, ...]) -> None:
        """Matches ``idx`` of one wave, all of k >= 3 teams of the sizes ``shape``."""
        first = self.offsets[idx][:, None]
        days = self.days[idx]
        bounds = np.cumsum((0, *shape)).tolist()
        slots = [first + np.arange(lo, hi) for lo, hi in pairwise(bounds)]
        read = [self._side(sl, days, self.w_model) for sl in slots]
        sides = [side for side, _ in read]
        k = len(shape)
        # The ranks as given; with none, teams are listed winner first.
        ranks = np.broadcast_to(np.arange(k, dtype=np.float64), (idx.shape[0], k)).copy()
        start = self.rank_start[idx]
        ranked = start >= 0
        if ranked.any():
            ranks[ranked] = self.rank_values[start[ranked][:, None] + np.arange(k)]
        if self.quality is not None:
            self.quality[idx] = many_team_quality(
                self.kernel, sides, [self.w_raw[sl] for sl in slots]
            )
        new, skipped = self.kernel.rate_many(sides, ranks)
        for row in np.flatnonzero(skipped).tolist():
            # One match through ``model.rate`` on the same aged ratings.
            match = self.matches[int(idx[row])]
            teams = [
                [
                    Rating(float(mu), float(sigma))
                    for mu, sigma in zip(
                        side.mu[row].tolist(), side.sigma[row].tolist(), strict=True
                    )
                ]
                for side in sides
            ]
            rated = self.model.rate(teams, ranks=match.ranks, weights=match.weights)
            for (mu, sigma), team in zip(new, rated, strict=True):
                mu[row] = [r.mu for r in team]
                sigma[row] = [r.sigma for r in team]
        for (_, ps), sl, (mu, sigma) in zip(read, slots, new, strict=True):
            self.mu_t[ps] = mu
            self.sigma_t[ps] = sigma
            self.day_t[ps] = days[:, None]
            self.after_mu[sl] = mu
            self.after_sigma[sl] = sigma

    def _least(self, teams: tuple[int, ...]) -> int:
        """The fewest matches of this shape in a wave that are rated together."""
        least = MIN_BLOCK if len(teams) == 2 else MIN_BLOCK_MANY
        if len(teams) > 2 and self.kernel.message_passing:
            least = max(least, MIN_BLOCK_PER_TEAM_PASSING * len(teams))
        duels = self.kernel.duels(teams)
        if duels:
            least = max(least, math.ceil(MIN_BLOCK_PER_DUEL * duels))
        return least

    def _check_results(self) -> None:
        """What ``model.rate`` would have rejected on the way, or a result it cannot give."""
        if not (np.isfinite(self.after_mu).all() and np.isfinite(self.after_sigma).all()):
            raise _Unsupported
        if not self.bayesian and (np.abs(self.before_mu) > MAX_ABS_RATING).any():
            raise _Unsupported
