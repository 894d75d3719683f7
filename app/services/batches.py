"""Use case: recording a batch, all or nothing (``record_matches``), and a batch rated
ahead of its transaction (``rate_ahead``, ``record_ahead``): what ``POST
.../matches/batch`` and ``ratings import`` run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from app.domain.documents.matches import MatchCreate
from app.domain.ladders import (
    LADDER_ID,
    ladder_config,
)
from app.domain.times import utc
from app.errors import NotFound
from app.services.rating import Label, MatchRefused, rate
from app.services.recording import (
    LadderWork,
    MatchRows,
    RatedLadder,
    in_batch,
    incoming_match,
    ladder_and_config,
    lock_group_players,
    planned_match,
    prior_state,
    rating_table,
    rows_of,
    stored_answer,
    tier_watches,
    watched_tiers,
    write_rated,
)
from app.storage.models import Ladder
from app.storage.repositories import matches as match_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories import recording as recording_repo
from app.storage.repositories import sql as sql_repo


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
    first_at = _match_id_places(bodies, label)
    # The ladder share-locked (a parameter change and its rebuild wait for the batch, and
    # it for them) and the recorded match_ids among the batch's, in one statement.
    found = recording_repo.key_and_ladder(
        session=session,
        key_hash="",
        ladder_id=ladder_id if LADDER_ID.fullmatch(ladder_id) else None,
        match_ids=list(first_at),
    )
    if found.algorithm is None or found.params is None:
        raise NotFound(f"ladder: no ladder {ladder_id[:64]!r}")
    ladder, config = ladder_and_config(ladder_id, found.algorithm, found.params)
    entry = LadderWork(
        ladder,
        config,
        [incoming_match(n, body, now) for n, body in enumerate(bodies)],
        [],
        recorded=found.recorded,
        aged_at=found.aged_at,
        opening_from=found.opening_from,
        watch=watched_tiers(ladder_id, found),
    )
    results: list[tuple[str, bool] | None] = [None] * len(bodies)
    _answer_recorded(entry, results, label)
    if entry.incoming:
        entry.players = sorted({p for m in entry.incoming for team in m.body.teams for p in team})
        states = lock_group_players(session, {ladder_id: entry}, now)[ladder_id]
        if first_at and sql_repo.others_write_meanwhile(session=session):
            # Looked up again under the locks: a concurrent retry may have committed meanwhile.
            entry.recorded = match_repo.find_matches(
                session=session, ladder_id=ladder_id, match_ids=list(first_at)
            )
            _answer_recorded(entry, results, label)
        if entry.incoming:
            for index, text in _apply(session, entry, states, now, label):
                results[index] = (text, True)
    return [result for result in results if result is not None]


def _match_id_places(bodies: Sequence[MatchCreate], label: Label) -> dict[str, int]:
    """Where each match_id of a batch is (a match_id twice is a ``MatchRefused``)."""
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
    return first_at


def _answer_recorded(
    entry: LadderWork, results: list[tuple[str, bool] | None], label: Label
) -> None:
    """Answer the matches of ``entry`` recorded before with their stored results; the
    others stay to be applied."""
    fresh = []
    for m in entry.incoming:
        stored = entry.recorded.get(m.match_id) if m.body.match_id is not None else None
        if stored is None:
            fresh.append(m)
        else:
            results[m.index] = (stored_answer(m, stored, label), False)
    entry.incoming = fresh


def _apply(
    session: Session,
    entry: LadderWork,
    states: list[rating_repo.RatingState],
    now: datetime,
    label: Label,
) -> list[tuple[int, str]]:
    """Rate a batch's new matches over their players' locked ratings, all or nothing, and
    write everything; (index, result document) of each."""
    table = rating_table(entry.config, states)
    fresh = entry.incoming
    planned = [planned_match(m) for m in fresh]
    # Errors name the match by its place in the request, not among the new ones.
    rated = rate(
        ladder=entry.ladder,
        config=entry.config,
        table=table,
        matches=planned,
        label=lambda n: label(fresh[n].index),
    )
    batch = RatedLadder(entry.ladder, entry.config, states, table, fresh, planned, rated)
    return write_rated(session, [batch], lambda _: now, now, tier_watches([entry]))


@dataclass(frozen=True, slots=True)
class Ahead:
    """A batch rated before its transaction, from the ratings its players are expected to
    have then (:func:`rate_ahead`); :func:`record_ahead` writes it if they do."""

    ladder_id: str
    algorithm: str
    params: str
    now: datetime
    entry: LadderWork
    expected: list[rating_repo.RatingState]
    rows: MatchRows
    after: dict[str, rating_repo.RatingState]


def _same(a: rating_repo.RatingState, b: rating_repo.RatingState) -> bool:
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
    known: dict[str, rating_repo.RatingState],
) -> Ahead | None:
    """Rate a batch of new matches (no match_id twice) without the database, from the
    ratings ``known`` (a player not in it: at the prior, not rated yet): what an import
    does with its next chunk while the last one is written. None when the batch cannot be
    rated so (the transaction then records it as usual and says why)."""
    config = ladder_config(ladder.algorithm, ladder.params)
    named = [body.match_id for body in bodies if body.match_id is not None]
    if len(set(named)) != len(named):
        return None
    incoming = [incoming_match(n, body, now) for n, body in enumerate(bodies)]
    players = sorted({p for m in incoming for team in m.body.teams for p in team})
    entry = LadderWork(ladder, config, incoming, players)
    expected = [known.get(p) or prior_state(config, p) for p in players]
    table = rating_table(config, expected)
    planned = [planned_match(m) for m in incoming]
    try:
        rated = rate(ladder=ladder, config=config, table=table, matches=planned, label=in_batch)
    except MatchRefused:
        return None
    batch = RatedLadder(ladder, config, expected, table, incoming, planned, rated)
    rows = rows_of([batch], lambda _: now, now)
    after = {
        row["player_id"]: rating_repo.RatingState(
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
    found = recording_repo.key_and_ladder(
        session=session,
        key_hash="",
        ladder_id=ahead.ladder_id,
        match_ids=[m.match_id for m in entry.incoming if m.body.match_id is not None],
    )
    if (found.algorithm, found.params) != (ahead.algorithm, ahead.params) or found.recorded:
        return None
    # A season opening under way resets the players it has not reached first: then the
    # states differ from those the batch was rated from, and it is rated again.
    entry.opening_from = found.opening_from
    entry.watch = watched_tiers(ahead.ladder_id, found)
    states = lock_group_players(session, {ahead.ladder_id: entry}, ahead.now)[ahead.ladder_id]
    if len(states) != len(ahead.expected) or not all(
        _same(a, b) for a, b in zip(states, ahead.expected, strict=True)
    ):
        return None
    return [(text, True) for _, text in ahead.rows.write(session, tier_watches([entry]))]


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
    found = recording_repo.key_and_ladder(
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
        for state in recording_repo.player_states(
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
) -> dict[str, rating_repo.RatingState]:
    """The ratings of ``players`` as the transaction sees them (locked if it locked them)."""
    return {
        state.player_id: state
        for state in recording_repo.lock_players(
            session=session, ladder_id=ladder_id, player_ids=sorted(players)
        )
    }
