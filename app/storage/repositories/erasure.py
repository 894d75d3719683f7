"""Erasing a player (their rows renamed or removed) and deleting a ladder with everything
of it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    delete,
    select,
    update,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from app.storage.models import (
    LADDER_ACCURACY,
    Event,
    Job,
    Ladder,
    Match,
    Participant,
    PlayerRating,
    RatingBlock,
    RatingBucket,
    RatingHistory,
)
from app.storage.repositories.sql import SQLITE_IN_CHUNK


def player_match_seqs(*, session: Session, ladder_id: str, player_id: str) -> list[int]:
    """The seqs of every stored match of the player, voided ones included, in order."""
    return list(
        session.scalars(
            select(Participant.match_seq)
            .where(Participant.ladder_id == ladder_id, Participant.player_id == player_id)
            .order_by(Participant.match_seq)
        )
    )


class MatchDocument(NamedTuple):
    """A stored match as erasure rewrites it."""

    seq: int
    request: dict[str, Any]
    result: str


def lock_match_documents(*, session: Session, seqs: Sequence[int]) -> list[MatchDocument]:
    """The stored request and result document of the matches ``seqs``, row-locked, by seq."""
    out: list[MatchDocument] = []
    for start in range(0, len(seqs), SQLITE_IN_CHUNK):
        query = (
            select(Match.seq, Match.request, Match.result)
            .where(Match.seq.in_(list(seqs[start : start + SQLITE_IN_CHUNK])))
            .order_by(Match.seq)
            .with_for_update()
        )
        out.extend(MatchDocument(*row) for row in session.execute(query))
    return out


def match_results(*, session: Session, seqs: Sequence[int]) -> dict[int, str]:
    """The result documents of the matches ``seqs``, by seq."""
    if not seqs:
        return {}
    rows = session.execute(select(Match.seq, Match.result).where(Match.seq.in_(list(seqs))))
    return {seq: result for seq, result in rows}


def rewrite_requests(*, session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Rewrite matches' stored ``request`` and ``body_hash`` (and ``result``, if the rows
    have it) by ``seq``: one executemany of UPDATEs by primary key."""
    if rows:
        session.execute(update(Match), list(rows))


def rename_participant(*, session: Session, ladder_id: str, old: str, new: str) -> int:
    """Name the player ``old`` ``new`` in every participants row of the ladder; the rows."""
    renamed = session.execute(
        update(Participant)
        .where(Participant.ladder_id == ladder_id, Participant.player_id == old)
        .values(player_id=new)
    )
    return int(getattr(renamed, "rowcount", 0) or 0)


class ChangeRow(NamedTuple):
    """Where a player's history row sits and what rating it left."""

    id: int
    match_seq: int | None
    mu_after: float
    sigma_after: float | None
    volatility_after: float | None
    #: A season's soft reset (no match).
    reset: bool = False


def player_changes(*, session: Session, ladder_id: str, player_id: str) -> list[ChangeRow]:
    """Every history row of the player, in id order."""
    query = (
        select(
            RatingHistory.id,
            RatingHistory.match_seq,
            RatingHistory.mu_after,
            RatingHistory.sigma_after,
            RatingHistory.volatility_after,
            RatingHistory.reset,
        )
        .where(RatingHistory.ladder_id == ladder_id, RatingHistory.player_id == player_id)
        .order_by(RatingHistory.id)
    )
    return [ChangeRow(*row) for row in session.execute(query)]


def delete_player_history(*, session: Session, ladder_id: str, player_id: str) -> int:
    """Remove every history row of the player; how many there were."""
    deleted = session.execute(
        delete(RatingHistory).where(
            RatingHistory.ladder_id == ladder_id, RatingHistory.player_id == player_id
        )
    )
    return int(getattr(deleted, "rowcount", 0) or 0)


class LadderRows(NamedTuple):
    """How many rows of each kind deleting a ladder removed."""

    players: int
    matches: int
    history: int


def delete_ladder_rows(*, session: Session, ladder_id: str) -> LadderRows:
    """Remove the ladder and every row of it, children first (the caller holds the ladder's
    row lock, so no writer adds one meanwhile). Its rating buckets and blocks go before its
    ratings: SQLite's triggers then have none left to count down, and PostgreSQL's pending
    bucket changes apply to no ladder at commit. Its jobs go too: one still queued finds
    no ladder and ends with nothing to write to."""

    def gone(statement: Executable) -> int:
        return int(getattr(session.execute(statement), "rowcount", 0) or 0)

    history = gone(delete(RatingHistory).where(RatingHistory.ladder_id == ladder_id))
    gone(delete(Participant).where(Participant.ladder_id == ladder_id))
    matches = gone(delete(Match).where(Match.ladder_id == ladder_id))
    gone(delete(RatingBucket).where(RatingBucket.ladder_id == ladder_id))
    gone(delete(RatingBlock).where(RatingBlock.ladder_id == ladder_id))
    gone(delete(LADDER_ACCURACY).where(LADDER_ACCURACY.c.ladder_id == ladder_id))
    players = gone(delete(PlayerRating).where(PlayerRating.ladder_id == ladder_id))
    gone(delete(Job).where(Job.ladder_id == ladder_id))
    gone(delete(Ladder).where(Ladder.id == ladder_id))
    return LadderRows(players=players, matches=matches, history=history)


def rename_in_events(
    *,
    session: Session,
    ladder_id: str,
    match_seqs: Sequence[int],
    rename: Callable[[str], str],
) -> None:
    """Rewrite the ``data`` of the ladder's events about the matches ``match_seqs`` (their
    ``match.recorded``: a result document) with ``rename``."""
    rows = []
    for start in range(0, len(match_seqs), SQLITE_IN_CHUNK):
        chunk = list(match_seqs[start : start + SQLITE_IN_CHUNK])
        found = session.execute(
            select(Event.seq, Event.data).where(
                Event.ladder_id == ladder_id, Event.match_seq.in_(chunk)
            )
        )
        rows += [{"ladder_id": ladder_id, "seq": seq, "data": rename(data)} for seq, data in found]
    if rows:
        session.execute(update(Event), rows)


def rename_player_events(
    *, session: Session, ladder_id: str, player_id: str, rename: Callable[[str], str]
) -> int:
    """Rewrite the ``data`` of the ladder's events about the player (``player_id``: their
    ``player.tier_changed``) with ``rename``, and let them name nobody; how many."""
    found = session.execute(
        select(Event.seq, Event.data).where(
            Event.ladder_id == ladder_id,
            Event.player_id == player_id,
            Event.type != "player.erased",
        )
    )
    rows = [
        {"ladder_id": ladder_id, "seq": seq, "data": rename(data), "player_id": None}
        for seq, data in found
    ]
    if rows:
        session.execute(update(Event), rows)
    return len(rows)
