"""Recording matches, one or a batch, and re-rating recorded ones: every path that runs the
replay engine (``app.rating.replay``) over stored ratings and writes what it computed.

A single ``POST .../matches`` is a batch of one: both lock the players' rows in one ordered
``SELECT ... FOR UPDATE``, rate with one ``replay`` call and write the ratings, matches,
participants and history with one executemany each, so a batch gives exactly what posting
its matches one by one gives. ``app.services.rerate`` (void, rebuild) uses the same rating
step and the same result document (``app.domain.results``).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

from app.domain import accuracy as predictions
from app.domain.documents.matches import MatchCreate
from app.domain.ladders import (
    LADDER_ID,
    MAX_FINITE,
    NUMERIC_ERRORS,
    LadderConfig,
    degenerate,
    ladder_config,
)
from app.domain.outcomes import body_hash, canonical_request, dense_ranks, outcome
from app.domain.results import result_parts, with_seq
from app.domain.times import SECONDS_PER_DAY, utc
from app.errors import Conflict, InvalidInput, NotFound, ProblemError
from app.rating.base import Rating, RatingInputError, VolatileRating
from app.rating.replay import ReplayMatch, replay
from app.services import accuracy, auth
from app.storage import repositories
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


# -- rating a sequence of matches over a table -----------------------------------------------


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


# -- the result document ---------------------------------------------------------------------


def history_rows(
    *,
    config: LadderConfig,
    ladder_id: str,
    seq: int,
    match: Planned,
    before: tuple[list[float], list[float]],
    after: tuple[list[float], list[float]],
    offset: int,
    volatility: tuple[list[float], list[float]] | None = None,
) -> list[dict[str, Any]]:
    """The ``rating_history`` rows of one match, as dicts of :data:`HISTORY_COLUMNS`."""
    values: list[tuple[Any, ...]] = []
    _participant_values(
        config=config,
        ladder_id=ladder_id,
        seq=seq,
        match=match,
        before=before,
        after=after,
        offset=offset,
        participants=[],
        history=values,
        volatility=volatility,
    )
    return [dict(zip(repositories.HISTORY_COLUMNS, row, strict=True)) for row in values]


def _participant_values(
    *,
    config: LadderConfig,
    ladder_id: str,
    seq: int,
    match: Planned,
    before: tuple[list[float], list[float]],
    after: tuple[list[float], list[float]],
    offset: int,
    participants: list[tuple[Any, ...]],
    history: list[tuple[Any, ...]] | None = None,
    volatility: tuple[list[float], list[float]] | None = None,
) -> None:
    """Append the ``participants`` rows (:data:`PARTICIPANT_COLUMNS`) of one match and, if
    ``history`` is given, its ``rating_history`` rows (:data:`HISTORY_COLUMNS`), as tuples;
    ``volatility``: the volatilities before and after (Glicko-2), else NULL."""
    bayesian = config.bayesian
    mu_b, sigma_b = before
    mu_a, sigma_a = after
    played_at = match.played_at
    k = offset
    for team in match.teams:
        for player in team:
            mb, ma = mu_b[k], mu_a[k]
            sb, sa = (sigma_b[k], sigma_a[k]) if bayesian else (None, None)
            vb, va = (volatility[0][k], volatility[1][k]) if volatility else (None, None)
            participants.append((seq, player, ladder_id))
            if history is not None:
                history.append((ladder_id, player, seq, played_at, mb, sb, ma, sa, vb, va))
            k += 1


def _table_of(config: LadderConfig, states: Sequence[repositories.RatingState]) -> RatingTable:
    """The rating table of locked ratings, in their (player id) order."""
    return RatingTable(
        players=[state.player_id for state in states],
        mu=np.array([state.mu for state in states], dtype=np.float64),
        sigma=np.array([state.sigma or 0.0 for state in states], dtype=np.float64),
        last_day=np.array(
            [
                day_of(state.last_played_at) if state.last_played_at is not None else math.nan
                for state in states
            ],
            dtype=np.float64,
        ),
        volatility=_volatility_of(config, states),
    )


def _volatility_of(
    config: LadderConfig, states: Sequence[repositories.RatingState]
) -> FloatArray | None:
    """Glicko-2: the stored volatilities (a row without one: the prior's); else ``None``."""
    if not config.volatile:
        return None
    prior = config.model.rating().volatility
    return np.array(
        [prior if state.volatility is None else state.volatility for state in states],
        dtype=np.float64,
    )


# -- recording -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Incoming:
    index: int
    body: MatchCreate
    match_id: str
    played_at: datetime
    canonical: dict[str, Any]
    digest: str


def _incoming(index: int, body: MatchCreate, now: datetime) -> _Incoming:
    """A match as it arrives: its place, its id (one is made if the body has none), when
    it was played (``now`` unless the body says), its canonical form and that form's hash."""
    canonical = canonical_request(body)
    return _Incoming(
        index=index,
        body=body,
        match_id=body.match_id or f"m-{uuid.uuid4().hex}",
        played_at=body.played_at or now,
        canonical=canonical,
        digest=body_hash(canonical),
    )


def _planned(incoming: _Incoming) -> Planned:
    """What the rating step needs of an incoming match."""
    body = incoming.body
    return Planned(
        match_id=incoming.match_id,
        played_at=incoming.played_at,
        teams=body.teams,
        outcome=outcome(body),
        weights=body.weights,
        advantage=body.advantage,
        scores=body.scores,
    )


def _stored(incoming: _Incoming, stored: repositories.StoredMatch, label: Label) -> str:
    """A match_id recorded before: the same body is a retry, another body a conflict."""
    if stored.body_hash != incoming.digest:
        raise MatchConflict(
            f"{label(incoming.index)}match_id: match {incoming.match_id!r} was recorded with a "
            "different body",
            index=incoming.index,
        )
    return stored.result


def single(index: int) -> str:
    """Errors of a lone match name just the field."""
    return ""


def in_batch(index: int) -> str:
    """Errors of a batch name the match's place: ``matches.3.weights: ...``."""
    return f"matches.{index}."


def _match_rows(
    *,
    config: LadderConfig,
    ladder_id: str,
    incoming: _Incoming,
    plan: Planned,
    slot: int,
    now: datetime,
    quality: float,
    before: tuple[list[float], list[float]],
    after: tuple[list[float], list[float]],
    offset: int,
    match_rows: list[tuple[Any, ...]],
    participants: list[tuple[Any, ...]],
    history: list[tuple[Any, ...]],
    volatility: tuple[list[float], list[float]] | None = None,
    win_probabilities: list[float] | None = None,
) -> tuple[str, str]:
    """Append a rated match's row (:data:`MATCH_COLUMNS`), its participants and its history
    rows, with ``slot`` (its place among the rows) where its seq goes and its result
    document as the text before and after the seq (``repositories.write_recorded`` draws
    the seqs); returns those two texts."""
    ranks = dense_ranks(plan.outcome)
    parts = result_parts(
        config=config,
        ladder_id=ladder_id,
        match_id=incoming.match_id,
        played_at=incoming.played_at,
        recorded_at=now,
        quality=quality,
        teams=plan.teams,
        ranks=ranks,
        weights=plan.weights,
        before=before,
        after=after,
        offset=offset,
        meta=incoming.body.meta,
        volatility=volatility,
        win_probabilities=win_probabilities,
    )
    match_rows.append(
        (
            slot,
            ladder_id,
            incoming.match_id,
            incoming.digest,
            incoming.played_at,
            now,
            quality,
            incoming.canonical,
            parts,
            None,
            win_probabilities,
        )
    )
    _participant_values(
        config=config,
        ladder_id=ladder_id,
        seq=slot,
        match=plan,
        before=before,
        after=after,
        offset=offset,
        participants=participants,
        history=history,
        volatility=volatility,
    )
    return parts


def _rating_rows(
    *,
    config: LadderConfig,
    table: RatingTable,
    states: Sequence[repositories.RatingState],
    planned: Sequence[Planned],
    now: datetime,
) -> list[dict[str, Any]]:
    """The table's new ratings of the players who played, with their match counts and
    latest played_at, as rows of ``ratings``."""
    played: dict[str, int] = {}
    latest: dict[str, datetime] = {}
    for match in planned:
        for team in match.teams:
            for player in team:
                played[player] = played.get(player, 0) + 1
                if player not in latest or latest[player] < match.played_at:
                    latest[player] = match.played_at
    mu = table.mu.tolist()
    sigma = table.sigma.tolist()
    volatility = table.volatility.tolist() if table.volatility is not None else None
    rows = []
    for state in states:
        if state.player_id not in played:
            continue
        p = table.index[state.player_id]
        last = state.last_played_at
        newest = latest[state.player_id]
        rows.append(
            {
                "player_id": state.player_id,
                "mu": mu[p],
                "sigma": sigma[p] if config.bayesian else None,
                "conservative": (
                    mu[p] - config.conservative_k * sigma[p] if config.bayesian else mu[p]
                ),
                "matches": state.matches + played[state.player_id],
                "last_played_at": newest if last is None or utc(last) < newest else last,
                "updated_at": now,
                "volatility": volatility[p] if volatility is not None else None,
            }
        )
    return rows


# -- recording single matches in groups ----------------------------------------------------


@lru_cache(maxsize=256)
def _ladder_of(ladder_id: str, algorithm: str, params: str) -> tuple[Ladder, LadderConfig]:
    """A ladder and its configuration by the text of its stored parameters: a change of
    parameters is a new entry, so it is never missed, and an unchanged ladder is not
    parsed again. (The ``Ladder`` is never added to a session.)"""
    ladder = Ladder(id=ladder_id, algorithm=algorithm, params=json.loads(params))
    return ladder, ladder_config(ladder.algorithm, ladder.params)


#: How many players :data:`_rated` holds at most (then it starts afresh): about 4 MB.
RATED_HINTS = 50_000

#: Hashes of (ladder, player) pairs this process has found rated: a hint only. A group of
#: such players locks them at once; a group with others inserts them first (one statement
#: more). A wrong hint (a player since removed by a void, or a hash collision) costs an
#: insert under the locks, never a wrong answer.
_rated: set[int] = set()


@dataclass(frozen=True, slots=True)
class Submitted:
    """One ``POST .../matches``: its ladder, the SHA-256 of its write key, its body and
    the moment it arrived (its ``recorded_at``, and ``played_at`` unless the body has one)."""

    ladder_id: str
    key_digest: str
    body: MatchCreate
    now: datetime


#: What a submitted match gets: (result JSON text, created), or the error to answer with.
Answer = tuple[str, bool] | ProblemError


def _insert_ratings(
    *, session: Session, ladder: Ladder, config: LadderConfig, players: list[str], now: datetime
) -> list[str]:
    """Ratings at the prior for those of ``players`` the ladder does not know yet; returns
    the players created."""
    prior = config.model.rating()
    return repositories.insert_missing_ratings(
        session=session,
        ladder_id=ladder.id,
        player_ids=players,
        mu=prior.mu,
        sigma=config.stored_sigma(prior),
        conservative=config.conservative(prior),
        now=now,
        volatility=prior.volatility,
    )


@dataclass
class _LadderWork:
    """The matches of one ladder in a group, in arrival order."""

    ladder: Ladder
    config: LadderConfig
    incoming: list[_Incoming]
    players: list[str]
    #: Players this transaction created (at the prior): removed again if none of the
    #: ladder's matches in the group is written.
    created: set[str] = field(default_factory=set)
    #: The ladder's matches recorded under the group's match_ids.
    recorded: dict[str, repositories.StoredMatch] = field(default_factory=dict)


def _admit(
    session: Session, submitted: Sequence[Submitted], answers: list[Answer | None]
) -> dict[str, _LadderWork]:
    """Check each match's key and ladder (one statement per key and ladder; on PostgreSQL
    the ladder's row is share-locked, so a parameter change waits for the group and the
    group for it) and sort the admitted matches by ladder. A refused one gets its 401, 403
    or 404 in ``answers``."""
    named: dict[tuple[str, str], list[str]] = {}
    for s in submitted:
        ids = named.setdefault((s.key_digest, s.ladder_id), [])
        if s.body.match_id is not None:
            ids.append(s.body.match_id)
    found: dict[tuple[str, str], repositories.KeyAndLadder] = {}
    for digest, ladder_id in sorted(named):
        found[digest, ladder_id] = repositories.key_and_ladder(
            session=session,
            key_hash=digest,
            ladder_id=ladder_id if LADDER_ID.fullmatch(ladder_id) else None,
            match_ids=named[digest, ladder_id],
        )
    used: set[int] = set()
    work: dict[str, _LadderWork] = {}
    for n, s in enumerate(submitted):
        row = found[s.key_digest, s.ladder_id]
        try:
            key = auth.check_key(row.key, s.key_digest, "write")
            if row.algorithm is None or row.params is None:
                raise NotFound(f"ladder: no ladder {s.ladder_id[:64]!r}")
        except ProblemError as exc:
            answers[n] = exc
            continue
        if key.id not in used and auth.use_due(key, s.now):
            auth.record_use(session, key_id=key.id, now=s.now)
        used.add(key.id)
        ladder, config = _ladder_of(s.ladder_id, row.algorithm, row.params)
        entry = work.setdefault(ladder.id, _LadderWork(ladder, config, [], []))
        entry.incoming.append(_incoming(n, s.body, s.now))
        entry.recorded.update(row.recorded)
    return work


def _lock_players(
    session: Session, work: dict[str, _LadderWork], now: datetime
) -> dict[str, list[repositories.RatingState]]:
    """Lock the ratings of every player of the group, ladder by ladder and player by player
    in id order (the one order every writer takes them in, so writers never deadlock).

    Players not all known to be rated are inserted at the prior first, before any lock is
    held: two groups creating each other's players while holding locks could deadlock.
    SQLite, whose transaction holds the whole database, inserts nobody here: a new player
    is at the prior in the states returned, and is written once, with its new rating
    (``repositories.write_recorded``), so its row and its rank counts change once."""
    if not repositories.others_write_meanwhile(session=session):
        return {
            ladder_id: _with_new_players(
                work[ladder_id],
                repositories.lock_players(
                    session=session, ladder_id=ladder_id, player_ids=work[ladder_id].players
                ),
            )
            for ladder_id in sorted(work)
        }
    for ladder_id in sorted(work):
        entry = work[ladder_id]
        if not all(hash((ladder_id, p)) in _rated for p in entry.players):
            entry.created.update(
                _insert_ratings(
                    session=session,
                    ladder=entry.ladder,
                    config=entry.config,
                    players=entry.players,
                    now=now,
                )
            )
    locked: dict[str, list[repositories.RatingState]] = {}
    for ladder_id in sorted(work):
        entry = work[ladder_id]
        states = repositories.lock_players(
            session=session, ladder_id=ladder_id, player_ids=entry.players
        )
        if len(states) < len(entry.players):
            # A hinted player is gone (removed by a void): rare. Created under the locks;
            # should that deadlock with another writer, the transaction runs again.
            _rated.clear()
            entry.created.update(
                _insert_ratings(
                    session=session,
                    ladder=entry.ladder,
                    config=entry.config,
                    players=entry.players,
                    now=now,
                )
            )
            states = repositories.lock_players(
                session=session, ladder_id=ladder_id, player_ids=entry.players
            )
        locked[ladder_id] = states
    # Bounded whatever a group or batch holds: a batch of new players must not leave the
    # process holding a hint for each of them.
    hints = [hash((ladder_id, p)) for ladder_id in work for p in work[ladder_id].players]
    if len(_rated) + len(hints) > RATED_HINTS:
        _rated.clear()
    if len(hints) <= RATED_HINTS:
        _rated.update(hints)
    return locked


def _with_new_players(
    entry: _LadderWork, states: list[repositories.RatingState]
) -> list[repositories.RatingState]:
    """``states`` with the entry's players the ladder does not know yet at the prior, in
    player id order."""
    if len(states) == len(entry.players):
        return states
    known = {state.player_id for state in states}
    new = [_prior_state(entry.config, p) for p in entry.players if p not in known]
    return sorted([*states, *new], key=lambda state: state.player_id)


def _settle_recorded(entry: _LadderWork, answers: list[Answer | None]) -> list[_Incoming]:
    """Answer the matches whose match_id is recorded already: the same body is a retry,
    another body a conflict. Returns the new ones. (One recorded meanwhile by another
    transaction fails the group's insert: ``app.api.writer`` then writes each alone.)"""
    if not entry.recorded:
        return entry.incoming
    fresh = []
    for m in entry.incoming:
        stored = entry.recorded.get(m.match_id) if m.body.match_id is not None else None
        if stored is None:
            fresh.append(m)
            continue
        try:
            answers[m.index] = (_stored(m, stored, single), False)
        except MatchConflict as exc:
            answers[m.index] = exc
    return fresh


def _rate_each(
    entry: _LadderWork,
    table: RatingTable,
    fresh: list[_Incoming],
    answers: list[Answer | None],
) -> tuple[list[_Incoming], list[Planned], Rated]:
    """Rate the new matches of one ladder in order over ``table`` (updated in place). A match
    the model refuses gets its 422 in ``answers`` and is left out, as if it had never come:
    the others are rated again without it, from the same ratings."""
    kept = list(fresh)
    while True:
        planned = [_planned(m) for m in kept]
        trial = RatingTable(
            players=table.players,
            mu=table.mu.copy(),
            sigma=table.sigma.copy(),
            last_day=table.last_day.copy(),
            volatility=None if table.volatility is None else table.volatility.copy(),
        )
        try:
            rated = rate(
                ladder=entry.ladder, config=entry.config, table=trial, matches=planned, label=single
            )
        except MatchRefused as exc:
            answers[kept[exc.index].index] = exc
            del kept[exc.index]
            continue
        table.mu, table.sigma, table.last_day = trial.mu, trial.sigma, trial.last_day
        table.volatility = trial.volatility
        return kept, planned, rated


@dataclass(frozen=True, slots=True)
class _RatedLadder:
    """The new matches of one ladder rated over its players' locked ratings."""

    ladder: Ladder
    config: LadderConfig
    states: list[repositories.RatingState]
    table: RatingTable
    kept: list[_Incoming]
    planned: list[Planned]
    rated: Rated


@dataclass(frozen=True, slots=True)
class _Rows:
    """Rated matches as the rows storage writes (``repositories.write_recorded``), and
    which match each is (its ``index``) with its result document around its seq."""

    matches: list[tuple[Any, ...]]
    participants: list[tuple[Any, ...]]
    history: list[tuple[Any, ...]]
    ratings: dict[str, list[dict[str, Any]]]
    indexes: list[int]
    parts: list[tuple[str, str]]
    #: What the matches' predictions scored, per ladder (``app.services.accuracy``).
    tallies: dict[str, predictions.Tally] = field(default_factory=dict)

    def write(self, session: Session) -> list[tuple[int, str]]:
        """Write them and add their share to their ladders' accuracy tallies; (index,
        result document) of each, the seqs drawn in index order."""
        seqs = repositories.write_recorded(
            session=session,
            matches=self.matches,
            participants=self.participants,
            history=self.history,
            ratings=self.ratings,
            tallies=accuracy.shares(self.tallies),
            stripe=accuracy.stripe(),
        )
        return [
            (index, with_seq(text, seq))
            for index, seq, text in zip(self.indexes, seqs, self.parts, strict=True)
        ]


def _rows(
    ladders: Sequence[_RatedLadder], now_of: Callable[[int], datetime], latest: datetime
) -> _Rows:
    """The rows of rated matches (a group's or a batch's) with their participants, history
    and the new ratings, in the order the matches came (their ``index``; ``now_of(index)``
    is when each came)."""
    order = sorted(
        (m.index, n, k) for n, rated in enumerate(ladders) for k, m in enumerate(rated.kept)
    )
    numbers = [
        (
            (r.rated.before_mu.tolist(), r.rated.before_sigma.tolist()),
            (r.rated.after_mu.tolist(), r.rated.after_sigma.tolist()),
            r.rated.quality.tolist(),
            r.rated.volatility(),
        )
        for r in ladders
    ]
    rows = _Rows([], [], [], {}, [index for index, _, _ in order], [])
    for r in ladders:
        rows.tallies[r.ladder.id] = r.rated.tally(r.planned)
    for slot, (index, n, k) in enumerate(order):
        r = ladders[n]
        before, after, quality, volatility = numbers[n]
        rows.parts.append(
            _match_rows(
                config=r.config,
                ladder_id=r.ladder.id,
                incoming=r.kept[k],
                plan=r.planned[k],
                slot=slot,
                now=now_of(index),
                quality=quality[k],
                before=before,
                after=after,
                offset=r.rated.offsets[k],
                match_rows=rows.matches,
                participants=rows.participants,
                history=rows.history,
                volatility=volatility,
                win_probabilities=r.rated.win_probabilities[k],
            )
        )
    for r in ladders:
        rows.ratings[r.ladder.id] = _rating_rows(
            config=r.config, table=r.table, states=r.states, planned=r.planned, now=latest
        )
    return rows


def _write_rated(
    session: Session,
    ladders: Sequence[_RatedLadder],
    now_of: Callable[[int], datetime],
    latest: datetime,
) -> list[tuple[int, str]]:
    """Write rated matches: :func:`_rows`, written."""
    return _rows(ladders, now_of, latest).write(session)


def record_group(*, session: Session, submitted: Sequence[Submitted]) -> list[Answer]:
    """Record single matches that arrived together, in arrival order, in the session's one
    transaction; returns each one's answer. Each gets exactly the answer it would have had
    alone, after the ones before it: a later match sees the ratings an earlier one left. A
    match refused (its key, its ladder, its outcome, another body under its match_id) is
    answered with its error and changes nothing; the others are written.

    The match_ids of one ladder must be distinct within a group (a repeat goes into the
    next group, where it finds the first recorded). Nothing is committed here.
    """
    answers: list[Answer | None] = [None] * len(submitted)
    work = _admit(session, submitted, answers)
    for ladder_id in list(work):
        entry = work[ladder_id]
        entry.incoming = _settle_recorded(entry, answers)
        entry.players = sorted({p for m in entry.incoming for team in m.body.teams for p in team})
        if not entry.incoming:
            del work[ladder_id]
    if not work:
        return [answer for answer in answers if answer is not None]
    latest = max(s.now for s in submitted)
    locked = _lock_players(session, work, latest)
    rated_by_ladder = []
    for ladder_id in sorted(work):
        entry = work[ladder_id]
        states = locked[ladder_id]
        table = _table_of(entry.config, states)
        kept, planned, rated = _rate_each(entry, table, entry.incoming, answers)
        if entry.created:
            # Players created for matches that were all refused leave nothing behind.
            playing = {p for m in kept for team in m.body.teams for p in team}
            repositories.delete_ratings(
                session=session, ladder_id=ladder_id, player_ids=sorted(entry.created - playing)
            )
        if kept:
            rated_by_ladder.append(
                _RatedLadder(entry.ladder, entry.config, states, table, kept, planned, rated)
            )
    now_of = [s.now for s in submitted].__getitem__
    for index, text in _write_rated(session, rated_by_ladder, now_of, latest):
        answers[index] = (text, True)
    return [answer for answer in answers if answer is not None]


# -- recording a batch ------------------------------------------------------------------------


def record_matches(
    *,
    session: Session,
    ladder_id: str,
    bodies: Sequence[MatchCreate],
    now: datetime,
    label: Label = in_batch,
) -> list[tuple[str, bool]]:
    """Apply ``bodies`` to the ladder in order, all or nothing; for each, (result JSON
    text, created). The same steps as a group of single matches (:func:`record_group`),
    with a batch's rule for failures: the first match refused fails the whole batch.

    A match_id recorded before with the same body gives its stored result (``created``
    false) and is not applied again; with another body the whole batch is a
    ``MatchConflict``; a match_id twice in ``bodies`` is a ``MatchRefused``. Nothing is
    committed here: the caller's transaction is.
    """
    first_at: dict[str, int] = {}
    for n, body in enumerate(bodies):
        if body.match_id is None:
            continue
        if body.match_id in first_at:
            raise MatchRefused(
                f"{label(n)}match_id: {body.match_id!r} appears twice in the batch "
                f"(first at {label(first_at[body.match_id]).rstrip('.: ')})",
                index=n,
            )
        first_at[body.match_id] = n
    # The ladder share-locked (a parameter change and its rebuild wait for the batch, and
    # it for them) and the recorded match_ids among the batch's, in one statement.
    found = repositories.key_and_ladder(
        session=session,
        key_hash="",
        ladder_id=ladder_id if LADDER_ID.fullmatch(ladder_id) else None,
        match_ids=list(first_at),
    )
    if found.algorithm is None or found.params is None:
        raise NotFound(f"ladder: no ladder {ladder_id[:64]!r}")
    ladder, config = _ladder_of(ladder_id, found.algorithm, found.params)
    entry = _LadderWork(
        ladder,
        config,
        [_incoming(n, body, now) for n, body in enumerate(bodies)],
        [],
        recorded=found.recorded,
    )
    results: list[tuple[str, bool] | None] = [None] * len(bodies)

    def settle() -> None:
        fresh = []
        for m in entry.incoming:
            stored = entry.recorded.get(m.match_id) if m.body.match_id is not None else None
            if stored is None:
                fresh.append(m)
            else:
                results[m.index] = (_stored(m, stored, label), False)
        entry.incoming = fresh

    settle()
    if entry.incoming:
        entry.players = sorted({p for m in entry.incoming for team in m.body.teams for p in team})
        states = _lock_players(session, {ladder_id: entry}, now)[ladder_id]
        if first_at and repositories.others_write_meanwhile(session=session):
            # Looked up again under the locks: a concurrent retry may have committed meanwhile.
            entry.recorded = repositories.find_matches(
                session=session, ladder_id=ladder_id, match_ids=list(first_at)
            )
            settle()
        if entry.incoming:
            for index, text in _apply(session, entry, states, now, label):
                results[index] = (text, True)
    return [result for result in results if result is not None]


def _apply(
    session: Session,
    entry: _LadderWork,
    states: list[repositories.RatingState],
    now: datetime,
    label: Label,
) -> list[tuple[int, str]]:
    """Rate a batch's new matches over their players' locked ratings, all or nothing, and
    write everything; (index, result document) of each."""
    table = _table_of(entry.config, states)
    fresh = entry.incoming
    planned = [_planned(m) for m in fresh]
    # Errors name the match by its place in the request, not among the new ones.
    rated = rate(
        ladder=entry.ladder,
        config=entry.config,
        table=table,
        matches=planned,
        label=lambda n: label(fresh[n].index),
    )
    batch = _RatedLadder(entry.ladder, entry.config, states, table, fresh, planned, rated)
    return _write_rated(session, [batch], lambda _: now, now)


# -- a batch rated ahead of its transaction (imports) -------------------------------------


@dataclass(frozen=True, slots=True)
class Ahead:
    """A batch rated before its transaction, from the ratings its players are expected to
    have then (:func:`rate_ahead`); :func:`record_ahead` writes it if they do."""

    ladder_id: str
    algorithm: str
    params: str
    now: datetime
    entry: _LadderWork
    expected: list[repositories.RatingState]
    rows: _Rows
    after: dict[str, repositories.RatingState]


def _prior_state(config: LadderConfig, player: str) -> repositories.RatingState:
    prior = config.model.rating()
    return repositories.RatingState(
        player, prior.mu, config.stored_sigma(prior), 0, None, prior.volatility
    )


def _same(a: repositories.RatingState, b: repositories.RatingState) -> bool:
    if a.last_played_at is None or b.last_played_at is None:
        same_time = a.last_played_at is None and b.last_played_at is None
    else:
        same_time = utc(a.last_played_at) == utc(b.last_played_at)
    return same_time and (a.player_id, a.mu, a.sigma, a.matches, a.volatility) == (
        b.player_id,
        b.mu,
        b.sigma,
        b.matches,
        b.volatility,
    )


def rate_ahead(
    *,
    ladder: Ladder,
    algorithm: str,
    params: str,
    bodies: Sequence[MatchCreate],
    now: datetime,
    known: dict[str, repositories.RatingState],
) -> Ahead | None:
    """Rate a batch of new matches (no match_id twice) without the database, from the
    ratings ``known`` (a player not in it: at the prior, not rated yet): what an import
    does with its next chunk while the last one is written. None when the batch cannot be
    rated so (the transaction then records it as usual and says why)."""
    config = ladder_config(ladder.algorithm, ladder.params)
    named = [body.match_id for body in bodies if body.match_id is not None]
    if len(set(named)) != len(named):
        return None
    incoming = [_incoming(n, body, now) for n, body in enumerate(bodies)]
    players = sorted({p for m in incoming for team in m.body.teams for p in team})
    entry = _LadderWork(ladder, config, incoming, players)
    expected = [known.get(p) or _prior_state(config, p) for p in players]
    table = _table_of(config, expected)
    planned = [_planned(m) for m in incoming]
    try:
        rated = rate(ladder=ladder, config=config, table=table, matches=planned, label=in_batch)
    except MatchRefused:
        return None
    batch = _RatedLadder(ladder, config, expected, table, incoming, planned, rated)
    rows = _rows([batch], lambda _: now, now)
    after = {
        row["player_id"]: repositories.RatingState(
            row["player_id"],
            row["mu"],
            row["sigma"],
            row["matches"],
            row["last_played_at"],
            row["volatility"],
        )
        for row in rows.ratings[ladder.id]
    }
    return Ahead(ladder.id, algorithm, params, now, entry, expected, rows, after)


def record_ahead(*, session: Session, ahead: Ahead) -> list[tuple[str, bool]] | None:
    """Write a batch rated by :func:`rate_ahead` if, under the players' locks, the
    ladder's parameters and its players' ratings are the ones it was rated from and none of
    its match_ids is recorded; else None, having written nothing (the caller records the
    batch as usual, in the same transaction)."""
    entry = ahead.entry
    found = repositories.key_and_ladder(
        session=session,
        key_hash="",
        ladder_id=ahead.ladder_id,
        match_ids=[m.match_id for m in entry.incoming if m.body.match_id is not None],
    )
    if (found.algorithm, found.params) != (ahead.algorithm, ahead.params) or found.recorded:
        return None
    states = _lock_players(session, {ahead.ladder_id: entry}, ahead.now)[ahead.ladder_id]
    if len(states) != len(ahead.expected) or not all(
        _same(a, b) for a, b in zip(states, ahead.expected, strict=True)
    ):
        return None
    return [(text, True) for _, text in ahead.rows.write(session)]


def batch_ahead(
    *, session: Session, ladder_id: str, bodies: Sequence[MatchCreate], now: datetime
) -> Ahead | None:
    """A batch rated ahead of its transaction (:func:`rate_ahead`), from the ladder and
    ratings ``session`` reads, a read that takes no write lock: so the write holds
    SQLite's one lock (and PostgreSQL's row locks) only to write, not to rate. None when
    it cannot be (an unknown ladder, a recorded match_id, a refused match): the write then
    records the batch as usual and says why (:func:`record_batch`)."""
    if not LADDER_ID.fullmatch(ladder_id):
        return None
    found = repositories.key_and_ladder(
        session=session,
        key_hash="",
        ladder_id=ladder_id,
        match_ids=[body.match_id for body in bodies if body.match_id is not None],
    )
    if found.algorithm is None or found.params is None or found.recorded:
        return None
    ladder = Ladder(id=ladder_id, algorithm=found.algorithm, params=json.loads(found.params))
    players = sorted({p for body in bodies for team in body.teams for p in team})
    known = {
        state.player_id: state
        for state in repositories.player_states(
            session=session, ladder_id=ladder_id, player_ids=players
        )
    }
    return rate_ahead(
        ladder=ladder,
        algorithm=found.algorithm,
        params=found.params,
        bodies=bodies,
        now=now,
        known=known,
    )


def record_batch(
    *,
    session: Session,
    ladder_id: str,
    bodies: Sequence[MatchCreate],
    now: datetime,
    ahead: Ahead | None,
) -> list[tuple[str, bool]]:
    """A batch, all or nothing: what ``ahead`` rated (:func:`batch_ahead`) if its players'
    ratings are still those it was rated from, else :func:`record_matches`."""
    if ahead is not None:
        written = record_ahead(session=session, ahead=ahead)
        if written is not None:
            return written
    return record_matches(session=session, ladder_id=ladder_id, bodies=bodies, now=now)


def ratings_of(
    *, session: Session, ladder_id: str, players: Sequence[str]
) -> dict[str, repositories.RatingState]:
    """The ratings of ``players`` as the transaction sees them (locked if it locked them)."""
    return {
        state.player_id: state
        for state in repositories.lock_players(
            session=session, ladder_id=ladder_id, player_ids=sorted(players)
        )
    }
