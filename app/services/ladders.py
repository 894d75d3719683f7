"""Use cases: create a ladder (or find the identical one), list ladders, find one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain.cursors import decode_cursor, encode_cursor
from app.domain.documents.ladders import (
    LadderCreate,
    LadderDeleted,
    LadderOut,
    LadderPage,
    Tier,
)
from app.domain.documents.seasons import FIRST_SEASON
from app.domain.ladders import (
    LADDER_ID,
    bucket_width,
    full_params,
)
from app.domain.times import utc
from app.errors import Conflict, InvalidInput, NotFound
from app.storage import blocks
from app.storage.models import Ladder
from app.storage.repositories import erasure as erasure_repo
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import rerating as rerating_repo


def create_ladder(*, session: Session, body: LadderCreate, now: datetime) -> tuple[LadderOut, bool]:
    """Create the ladder, or find the identical one. Returns (ladder, created)."""
    params = full_params(body.algorithm, body.params)
    existing = ladder_repo.get_ladder(session=session, ladder_id=body.id)
    if existing is None:
        ladder = Ladder(
            id=body.id,
            algorithm=body.algorithm,
            params=params,
            description=body.description,
            created_at=now,
            bucket_width=bucket_width(body.algorithm, params),
            season=FIRST_SEASON,
            tiers=stored_tiers(body.tiers),
            season_keep=1.0 if body.season_keep is None else body.season_keep,
            placement_matches=body.placement_matches or 0,
        )
        try:
            ladder_repo.add_ladder(session=session, ladder=ladder)
        except IntegrityError:
            existing = ladder_repo.get_ladder(session=session, ladder_id=body.id)
            if existing is None:
                raise
        else:
            return ladder_view(session=session, ladder=ladder), True
    same = existing.algorithm == body.algorithm and existing.params == params
    if body.tiers is not None and stored_tiers(body.tiers) != existing.tiers:
        same = False
    if body.season_keep is not None and body.season_keep != existing.season_keep:
        same = False
    if body.placement_matches is not None and body.placement_matches != existing.placement_matches:
        same = False
    if body.description is not None and body.description != existing.description:
        same = False
    if not same:
        raise Conflict(f"id: ladder {body.id!r} exists with a different configuration")
    return ladder_view(session=session, ladder=existing), False


def ladder_view(*, session: Session, ladder: Ladder) -> LadderOut:
    return _ladder_views(session=session, ladders=[ladder])[0]


def _ladder_views(*, session: Session, ladders: Sequence[Ladder]) -> list[LadderOut]:
    ids = [ladder.id for ladder in ladders]
    players = ladder_repo.count_players(session=session, ladder_ids=ids) if ids else {}
    matches = ladder_repo.count_matches(session=session, ladder_ids=ids) if ids else {}
    return [
        LadderOut(
            id=ladder.id,
            algorithm=ladder.algorithm,
            params=ladder.params,
            description=ladder.description,
            tiers=ladder.tiers,
            season_keep=ladder.season_keep,
            placement_matches=ladder.placement_matches,
            created_at=utc(ladder.created_at),
            players=players.get(ladder.id, 0),
            matches=matches.get(ladder.id, 0),
        )
        for ladder in ladders
    ]


def list_ladders(*, session: Session, limit: int, cursor: str | None) -> LadderPage:
    after = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and isinstance(key[0], str)):
            raise InvalidInput("cursor: not a cursor of this list")
        after = key[0]
    ladders = ladder_repo.list_ladders(session=session, after=after, limit=limit + 1)
    more = len(ladders) > limit
    ladders = ladders[:limit]
    return LadderPage(
        entries=_ladder_views(session=session, ladders=ladders),
        next_cursor=encode_cursor([ladders[-1].id]) if more else None,
    )


def get_ladder(*, session: Session, ladder_id: str, detached: bool = False) -> Ladder:
    """The ladder, or a 404. ``detached``: for a read, which never changes the ladder (see
    :func:`ladder_repo.read_ladder`)."""
    # An id that breaks the id rules cannot exist; it is not even looked up.
    ladder = None
    if LADDER_ID.fullmatch(ladder_id):
        read = ladder_repo.read_ladder if detached else ladder_repo.get_ladder
        ladder = read(session=session, ladder_id=ladder_id)
    if ladder is None:
        raise NotFound(f"ladder: no ladder {ladder_id[:64]!r}")
    return ladder


def cut_rating_blocks(*, session: Session, ladder_id: str) -> int:
    """Cut every full rating block of the ladder (:mod:`app.storage.blocks`); how many."""
    get_ladder(session=session, ladder_id=ladder_id)
    return blocks.cut(session=session, ladder_id=ladder_id)


def delete_ladder(*, session: Session, ladder: Ladder) -> LadderDeleted:
    """Delete the ladder with its ratings, matches, participants, history and rating
    buckets, in one transaction. Its row is locked first, alone: recordings (which
    share-lock it) and re-ratings of the ladder finish before, later ones wait and then
    find no ladder (404), so nothing of it is left behind. API keys belong to no ladder
    and stay."""
    if ladder_repo.lock_ladder(session=session, ladder_id=ladder.id, share=False) is None:
        raise NotFound(f"ladder: no ladder {ladder.id!r}")
    rerating_repo.lift_statement_timeout(session=session)
    removed = erasure_repo.delete_ladder_rows(session=session, ladder_id=ladder.id)
    return LadderDeleted(
        ladder=ladder.id,
        players=removed.players,
        matches=removed.matches,
        history_entries=removed.history,
    )


def hold_ladder(*, session: Session, ladder_id: str, patient: bool = False) -> Ladder:
    """The ladder, held by this transaction alone until it ends: the first step of every
    re-rating (void, rebuild, new parameters) and erasure, before it reads anything else.

    On PostgreSQL the ladder's row is locked ``FOR UPDATE``. Recording a match share-locks
    that row first of all (``recording_repo.key_and_ladder``), as does seeding a rating, so
    re-ratings of one ladder run one after the other, each waits for the matches in flight
    and new matches wait for it; every writer takes the ladder before any rating row, so
    the two cannot deadlock. On SQLite the transaction holds the database already.

    A request waits for the ladder at most the statement timeout (then 503 with
    ``Retry-After``); a job (``patient``) waits its turn behind the others. Once it holds
    the ladder the statement timeout is lifted: re-rating a large ladder legitimately
    takes longer than a request's statement.
    """
    ladder = ladder_repo.hold_ladder_row(session=session, ladder_id=ladder_id, patient=patient)
    if ladder is None:
        raise NotFound(f"ladder: no ladder {ladder_id[:64]!r}")
    rerating_repo.lift_statement_timeout(session=session)
    return ladder


def stored_tiers(tiers: Sequence[Tier] | None) -> list[dict[str, Any]] | None:
    """Tiers as a ladder stores them (None for none)."""
    return [tier.model_dump() for tier in tiers] if tiers else None
