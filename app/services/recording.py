"""Use case: recording single matches, written in groups (``record_group``), and the rows
of rated matches that recording and batches write.

A group: check each match's key and ladder, lock the players' ratings in one order, rate
the matches over them in arrival order, then write every match, participant, history row
and rating of the group at once; a match refused fails alone. Nothing is committed here:
the caller's transaction is."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.domain import accuracy as predictions
from app.domain.documents.matches import MatchCreate
from app.domain.ladders import (
    LADDER_ID,
    LadderConfig,
    ladder_config,
)
from app.domain.outcomes import body_hash, canonical_request, dense_ranks, outcome
from app.domain.results import result_parts, with_seq
from app.domain.times import utc
from app.errors import NotFound, ProblemError
from app.services import accuracy, auth, events, seasons
from app.services.rating import (
    FloatArray,
    Label,
    MatchConflict,
    MatchRefused,
    Planned,
    Rated,
    RatingTable,
    day_of,
    rate,
)
from app.storage.models import Ladder
from app.storage.repositories import matches as match_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories import recording as recording_repo
from app.storage.repositories import rerating as rerating_repo
from app.storage.repositories import sql as sql_repo
from app.storage.repositories.ratings import Standing


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
    return [dict(zip(recording_repo.HISTORY_COLUMNS, row, strict=True)) for row in values]


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


def rating_table(config: LadderConfig, states: Sequence[rating_repo.RatingState]) -> RatingTable:
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
    config: LadderConfig, states: Sequence[rating_repo.RatingState]
) -> FloatArray | None:
    """Glicko-2: the stored volatilities (a row without one: the prior's); else ``None``."""
    if not config.volatile:
        return None
    prior = config.model.rating().volatility
    return np.array(
        [prior if state.volatility is None else state.volatility for state in states],
        dtype=np.float64,
    )


@dataclass(frozen=True, slots=True)
class _Incoming:
    index: int
    body: MatchCreate
    match_id: str
    played_at: datetime
    canonical: dict[str, Any]
    digest: str


def incoming_match(index: int, body: MatchCreate, now: datetime) -> _Incoming:
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


def planned_match(incoming: _Incoming) -> Planned:
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
        player_scores=body.player_scores,
    )


def stored_answer(incoming: _Incoming, stored: match_repo.StoredMatch, label: Label) -> str:
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
    document as the text before and after the seq (``recording_repo.write_recorded`` draws
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
    states: Sequence[rating_repo.RatingState],
    planned: Sequence[Planned],
    now: datetime,
    as_of: datetime | None = None,
) -> list[dict[str, Any]]:
    """The table's new ratings of the players who played, with their match counts and
    latest played_at, as rows of ``ratings``; the conservative rating as it stands at
    ``as_of`` (the ladder's ``aged_at``: a match reported after it, played before it,
    leaves its players aged to it as the others are)."""
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
        last = newest if last is None or utc(last) < newest else last
        stored_sigma = sigma[p] if config.bayesian else None
        rows.append(
            {
                "player_id": state.player_id,
                "mu": mu[p],
                "sigma": stored_sigma,
                "conservative": config.standing(mu[p], stored_sigma, last, as_of)[1],
                "matches": state.matches + played[state.player_id],
                "last_played_at": last,
                "updated_at": now,
                "volatility": volatility[p] if volatility is not None else None,
            }
        )
    return rows


@lru_cache(maxsize=256)
def ladder_and_config(ladder_id: str, algorithm: str, params: str) -> tuple[Ladder, LadderConfig]:
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
    return rating_repo.insert_missing_ratings(
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
class LadderWork:
    """The matches of one ladder in a group, in arrival order."""

    ladder: Ladder
    config: LadderConfig
    incoming: list[_Incoming]
    players: list[str]
    #: Players this transaction created (at the prior): removed again if none of the
    #: ladder's matches in the group is written.
    created: set[str] = field(default_factory=set)
    #: The ladder's matches recorded under the group's match_ids.
    recorded: dict[str, match_repo.StoredMatch] = field(default_factory=dict)
    #: The time the ladder's stored conservative ratings are aged to (None: not aged).
    aged_at: datetime | None = None
    #: While a season opens in steps: its first history id (``ladders.opening_from``).
    opening_from: int | None = None
    #: The ladder's tiers by threshold, for ``player.tier_changed`` (None: none to watch).
    watch: events.TierWatch | None = None


def watched_tiers(ladder_id: str, found: recording_repo.KeyAndLadder) -> events.TierWatch | None:
    """The tiers of a ladder as its key-and-ladder row read them, to watch."""
    return events.tier_watch(
        ladder_id=ladder_id,
        tiers=json.loads(found.tiers) if found.tiers is not None else None,
        placement=found.placement,
        season=found.season,
    )


def tier_watches(entries: Sequence[LadderWork]) -> list[Watched]:
    """The ladders of ``entries`` whose tiers a write watches, with the players it created."""
    return [Watched(e.watch, e.created) for e in entries if e.watch is not None]


def _admit(
    session: Session, submitted: Sequence[Submitted], answers: list[Answer | None]
) -> dict[str, LadderWork]:
    """Check each match's key and ladder (one statement per key and ladder; on PostgreSQL
    the ladder's row is share-locked, so a parameter change waits for the group and the
    group for it) and sort the admitted matches by ladder. A refused one gets its 401, 403
    or 404 in ``answers``."""
    named: dict[tuple[str, str], list[str]] = {}
    for s in submitted:
        ids = named.setdefault((s.key_digest, s.ladder_id), [])
        if s.body.match_id is not None:
            ids.append(s.body.match_id)
    found: dict[tuple[str, str], recording_repo.KeyAndLadder] = {}
    for digest, ladder_id in sorted(named):
        found[digest, ladder_id] = recording_repo.key_and_ladder(
            session=session,
            key_hash=digest,
            ladder_id=ladder_id if LADDER_ID.fullmatch(ladder_id) else None,
            match_ids=named[digest, ladder_id],
        )
    used: set[int] = set()
    work: dict[str, LadderWork] = {}
    for n, s in enumerate(submitted):
        row = found[s.key_digest, s.ladder_id]
        try:
            key = auth.check_key(row.key, s.key_digest, "write", s.ladder_id)
            if row.algorithm is None or row.params is None:
                raise NotFound(f"ladder: no ladder {s.ladder_id[:64]!r}")
        except ProblemError as exc:
            answers[n] = exc
            continue
        if key.id not in used and auth.use_due(key, s.now):
            auth.record_use(session, key_id=key.id, now=s.now)
        used.add(key.id)
        ladder, config = ladder_and_config(s.ladder_id, row.algorithm, row.params)
        entry = work.setdefault(
            ladder.id,
            LadderWork(
                ladder,
                config,
                [],
                [],
                aged_at=row.aged_at,
                opening_from=row.opening_from,
                watch=watched_tiers(ladder.id, row),
            ),
        )
        entry.incoming.append(incoming_match(n, s.body, s.now))
        entry.recorded.update(row.recorded)
    return work


def lock_group_players(
    session: Session, work: dict[str, LadderWork], now: datetime
) -> dict[str, list[rating_repo.RatingState]]:
    """Lock the ratings of every player of the group, ladder by ladder and player by player
    in id order (the one order every writer takes them in, so writers never deadlock).

    Players not all known to be rated are inserted at the prior first, before any lock is
    held: two groups creating each other's players while holding locks could deadlock.
    SQLite, whose transaction holds the whole database, inserts nobody here: a new player
    is at the prior in the states returned, and is written once, with its new rating
    (``recording_repo.write_recorded``), so its row and its rank counts change once."""
    if not sql_repo.others_write_meanwhile(session=session):
        return {
            ladder_id: _with_new_players(
                work[ladder_id],
                _reset_unreached(
                    session,
                    work[ladder_id],
                    recording_repo.lock_players(
                        session=session, ladder_id=ladder_id, player_ids=work[ladder_id].players
                    ),
                    now,
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
    locked: dict[str, list[rating_repo.RatingState]] = {}
    for ladder_id in sorted(work):
        entry = work[ladder_id]
        states = recording_repo.lock_players(
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
            states = recording_repo.lock_players(
                session=session, ladder_id=ladder_id, player_ids=entry.players
            )
        locked[ladder_id] = states
    for ladder_id in sorted(work):
        locked[ladder_id] = _reset_unreached(session, work[ladder_id], locked[ladder_id], now)
    # Bounded whatever a group or batch holds: a batch of new players must not leave the
    # process holding a hint for each of them.
    hints = [hash((ladder_id, p)) for ladder_id in work for p in work[ladder_id].players]
    if len(_rated) + len(hints) > RATED_HINTS:
        _rated.clear()
    if len(hints) <= RATED_HINTS:
        _rated.update(hints)
    return locked


def _reset_unreached(
    session: Session, entry: LadderWork, states: list[rating_repo.RatingState], now: datetime
) -> list[rating_repo.RatingState]:
    """``states`` (locked) with the players a season opening under way has not reached yet
    reset first (``seasons.reset_unreached``); the players this transaction created are
    new to the ladder, not in the season before."""
    if entry.opening_from is None:
        return states
    old = [state for state in states if state.player_id not in entry.created]
    reset = {
        state.player_id: state
        for state in seasons.reset_unreached(
            session=session,
            ladder_id=entry.ladder.id,
            config=entry.config,
            aged_at=entry.aged_at,
            opening_from=entry.opening_from,
            states=old,
            now=now,
        )
    }
    return [reset.get(state.player_id, state) for state in states]


def prior_state(config: LadderConfig, player: str) -> rating_repo.RatingState:
    prior = config.model.rating()
    return rating_repo.RatingState(
        player, prior.mu, config.stored_sigma(prior), 0, None, prior.volatility
    )


def _with_new_players(
    entry: LadderWork, states: list[rating_repo.RatingState]
) -> list[rating_repo.RatingState]:
    """``states`` with the entry's players the ladder does not know yet at the prior, in
    player id order."""
    if len(states) == len(entry.players):
        return states
    known = {state.player_id for state in states}
    new = [prior_state(entry.config, p) for p in entry.players if p not in known]
    return sorted([*states, *new], key=lambda state: state.player_id)


def _settle_recorded(entry: LadderWork, answers: list[Answer | None]) -> list[_Incoming]:
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
            answers[m.index] = (stored_answer(m, stored, single), False)
        except MatchConflict as exc:
            answers[m.index] = exc
    return fresh


def _rate_each(
    entry: LadderWork,
    table: RatingTable,
    fresh: list[_Incoming],
    answers: list[Answer | None],
) -> tuple[list[_Incoming], list[Planned], Rated]:
    """Rate the new matches of one ladder in order over ``table`` (updated in place). A match
    the model refuses gets its 422 in ``answers`` and is left out, as if it had never come:
    the others are rated again without it, from the same ratings."""
    kept = list(fresh)
    while True:
        planned = [planned_match(m) for m in kept]
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
class RatedLadder:
    """The new matches of one ladder rated over its players' locked ratings."""

    ladder: Ladder
    config: LadderConfig
    states: list[rating_repo.RatingState]
    table: RatingTable
    kept: list[_Incoming]
    planned: list[Planned]
    rated: Rated
    aged_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Watched:
    """A ladder's tiers a write watches, and the players the write created (at the prior
    before their first match: in no tier before it)."""

    watch: events.TierWatch
    created: Set[str]

    def before(self, session: Session, players: Sequence[str]) -> dict[str, Standing]:
        found = self.watch.read(session, players)
        return {p: standing for p, standing in found.items() if p not in self.created}


@dataclass(frozen=True, slots=True)
class MatchRows:
    """Rated matches as the rows storage writes (``recording_repo.write_recorded``), and
    which match each is (its ``index``) with its result document around its seq."""

    matches: list[tuple[Any, ...]]
    participants: list[tuple[Any, ...]]
    history: list[tuple[Any, ...]]
    ratings: dict[str, list[dict[str, Any]]]
    indexes: list[int]
    parts: list[tuple[str, str]]
    #: What the matches' predictions scored, per ladder (``app.services.accuracy``).
    tallies: dict[str, predictions.Tally] = field(default_factory=dict)
    #: Each player's last match of the rows, per ladder.
    last_matches: dict[str, dict[str, str]] = field(default_factory=dict)

    def write(self, session: Session, watches: Sequence[Watched] = ()) -> list[tuple[int, str]]:
        """Write them and add their share to their ladders' accuracy tallies; (index,
        result document) of each, the seqs drawn in index order. On the ladders of
        ``watches``, each player the matches move to another tier gets its
        ``player.tier_changed``, after the matches' events."""
        before = {
            w.watch.ladder_id: w.before(session, sorted(self.last_matches[w.watch.ladder_id]))
            for w in watches
            if w.watch.ladder_id in self.last_matches
        }
        seqs = recording_repo.write_recorded(
            session=session,
            matches=self.matches,
            participants=self.participants,
            history=self.history,
            ratings=self.ratings,
            tallies=accuracy.shares(self.tallies),
            stripe=accuracy.stripe(),
        )
        written = []
        for index, seq, text, row in zip(self.indexes, seqs, self.parts, self.matches, strict=True):
            document = with_seq(text, seq)
            written.append((index, document))
            events.match_recorded(session, ladder_id=row[1], document=document, seq=seq, now=row[5])
        for w in watches:
            ladder_id = w.watch.ladder_id
            if ladder_id not in before:
                continue
            was = before[ladder_id]
            w.watch.emit_changes(
                session,
                before=was,
                after={
                    row["player_id"]: Standing(
                        row["conservative"],
                        row["matches"],
                        was[row["player_id"]].season_base if row["player_id"] in was else 0,
                    )
                    for row in self.ratings[ladder_id]
                },
                cause="match.recorded",
                now=self.matches[-1][5],
                match_ids=self.last_matches[ladder_id],
            )
        return written


def rows_of(
    ladders: Sequence[RatedLadder], now_of: Callable[[int], datetime], latest: datetime
) -> MatchRows:
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
    rows = MatchRows([], [], [], {}, [index for index, _, _ in order], [])
    for r in ladders:
        rows.tallies[r.ladder.id] = r.rated.tally(r.planned)
    for slot, (index, n, k) in enumerate(order):
        r = ladders[n]
        before, after, quality, volatility = numbers[n]
        last = rows.last_matches.setdefault(r.ladder.id, {})
        for team in r.planned[k].teams:
            for player in team:
                last[player] = r.kept[k].match_id
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
            config=r.config,
            table=r.table,
            states=r.states,
            planned=r.planned,
            now=latest,
            as_of=r.aged_at,
        )
    return rows


def write_rated(
    session: Session,
    ladders: Sequence[RatedLadder],
    now_of: Callable[[int], datetime],
    latest: datetime,
    watches: Sequence[Watched] = (),
) -> list[tuple[int, str]]:
    """Write rated matches: :func:`rows_of`, written (``watches``: :meth:`MatchRows.write`)."""
    return rows_of(ladders, now_of, latest).write(session, watches)


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
    locked = lock_group_players(session, work, latest)
    rated_by_ladder = []
    for ladder_id in sorted(work):
        entry = work[ladder_id]
        states = locked[ladder_id]
        table = rating_table(entry.config, states)
        kept, planned, rated = _rate_each(entry, table, entry.incoming, answers)
        if entry.created:
            # Players created for matches that were all refused leave nothing behind.
            playing = {p for m in kept for team in m.body.teams for p in team}
            rerating_repo.delete_ratings(
                session=session, ladder_id=ladder_id, player_ids=sorted(entry.created - playing)
            )
        if kept:
            rated_by_ladder.append(
                RatedLadder(
                    entry.ladder, entry.config, states, table, kept, planned, rated, entry.aged_at
                )
            )
    now_of = [s.now for s in submitted].__getitem__
    watches = tier_watches([work[r.ladder.id] for r in rated_by_ladder])
    for index, text in write_rated(session, rated_by_ladder, now_of, latest, watches):
        answers[index] = (text, True)
    return [answer for answer in answers if answer is not None]
