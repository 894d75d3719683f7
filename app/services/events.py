"""Events: what a consumer acts on, written in the same transaction as the change
(:mod:`app.storage.outbox`), and the feed that pages them.

Each is ``{"id", "type", "ladder", "created_at", "data"}``:

- ``match.recorded``: ``data`` is the match's result document, as its recording answered
  it (with its ``seq``);
- ``match.voided``: the void's summary (``match_id``, ``voided_at``, ``matches_rerated``,
  ``players_affected``);
- ``ladder.rebuilt``: the rebuild's summary (``matches_rerated``, ``players``);
- ``season.started``: the season opened (the season document);
- ``player.tier_changed``: a write moved a player to another tier (:class:`TierWatch`);
- ``player.erased``: the erasure's summary, with the erased ``player_id``: the one place
  the id stays, so that the systems that mirror the ladder's events can erase it too,
  until ``RATINGS_ERASURE_NOTICE_S`` (7 days) has passed; then it is null
  (:func:`expire_erasure_notices`, every worker's ``event-chores`` thread).

A ladder's events are numbered in the order their transactions committed; the feed pages
them oldest first after a cursor, which never skips one (the outbox's numbering).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.config import get_settings
from app.domain import jsontext
from app.domain.cursors import decode_cursor, encode_cursor
from app.domain.documents.events import TierCause, TierChange
from app.domain.results import rfc3339
from app.domain.tiers import by_percentile, standing_tier
from app.errors import InvalidInput
from app.services.periodic import Periodic
from app.storage import outbox, versions
from app.storage.models import Ladder
from app.storage.repositories import events as event_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories.ratings import Standing
from app.storage.unit_of_work import Transact


def match_recorded(
    session: Session, *, ladder_id: str, document: str, seq: int, now: datetime
) -> None:
    """A match was recorded: its result document (JSON text, with its seq)."""
    outbox.emit(
        session,
        ladder_id=ladder_id,
        type="match.recorded",
        data=document,
        now=now,
        match_seq=seq,
    )


def changed(
    session: Session,
    *,
    ladder_id: str,
    type: str,
    data: BaseModel,
    now: datetime,
    player_id: str | None = None,
) -> None:
    """A change of the ladder of ``type`` happened, which ``data`` describes."""
    outbox.emit(
        session,
        ladder_id=ladder_id,
        type=type,
        data=data.model_dump_json(),
        now=now,
        player_id=player_id,
    )


@dataclass(frozen=True, slots=True)
class TierWatch:
    """A ladder's tiers by threshold as a write watches them: each write that moves
    ratings compares every moved player's tier before it and after it, by the tiers as
    they stand in the transaction, and writes ``player.tier_changed`` for each that
    differs. A tier is the one the leaderboard shows: by the stored conservative rating,
    none while provisional (placement).

    Tiers by percentile have no such events: their cut points move with every other
    player's result and with the number ranked, so a player's tier changes without any
    write of theirs. A season's opening moves every tier at once and says so with one
    ``season.started``; a change of the ladder's ``tiers`` is the operator's own."""

    ladder_id: str
    tiers: Sequence[Mapping[str, Any]]
    placement: int
    season: str

    def tier(self, standing: Standing | None) -> str | None:
        if standing is None:  # not on the ladder
            return None
        season_matches = standing.matches - standing.season_base
        return standing_tier(self.tiers, self.placement, standing.conservative, season_matches)

    def read(self, session: Session, player_ids: Sequence[str] | None) -> dict[str, Standing]:
        """The players' standings now (None: every player's)."""
        return rating_repo.standings(
            session=session, ladder_id=self.ladder_id, player_ids=player_ids
        )

    def emit_changes(
        self,
        session: Session,
        *,
        before: Mapping[str, Standing],
        after: Mapping[str, Standing],
        cause: TierCause,
        now: datetime,
        match_ids: Mapping[str, str] | None = None,
        match_id: str | None = None,
    ) -> int:
        """Write ``player.tier_changed`` for each player whose tier differs from ``before``
        to ``after`` (a player in neither stands nowhere); how many. ``match_ids``: each
        player's last match of the write, else ``match_id`` for all."""
        changed = 0
        for player in sorted(before.keys() | after.keys()):
            old, new = self.tier(before.get(player)), self.tier(after.get(player))
            if old == new:
                continue
            now_at = after.get(player)
            change = TierChange(
                player_id=player,
                from_tier=old,
                to_tier=new,
                conservative=None if now_at is None else now_at.conservative,
                season=self.season,
                cause=cause,
                match_id=match_ids.get(player) if match_ids is not None else match_id,
            )
            outbox.emit(
                session,
                ladder_id=self.ladder_id,
                type="player.tier_changed",
                data=change.model_dump_json(by_alias=True),
                now=now,
                player_id=player,
            )
            changed += 1
        return changed


def tier_watch(
    *,
    ladder_id: str,
    tiers: Sequence[Mapping[str, Any]] | None,
    placement: int,
    season: str,
) -> TierWatch | None:
    """The ladder's tiers to watch (None: no tiers by threshold, so no event can come)."""
    if not tiers or by_percentile(tiers):
        return None
    return TierWatch(ladder_id, tiers, placement, season)


def ladder_tier_watch(ladder: Ladder) -> TierWatch | None:
    """:func:`tier_watch` of a ladder's row."""
    return tier_watch(
        ladder_id=ladder.id,
        tiers=ladder.tiers,
        placement=ladder.placement_matches,
        season=ladder.season,
    )


class Stored(Protocol):
    """An event as stored."""

    @property
    def ladder_id(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def data(self) -> str: ...


def event_document(event: Stored) -> str:
    """The event's JSON document, as the feed pages it and a webhook delivers it (its
    ``data`` as stored, byte for byte)."""
    return (
        f'{{"id":"{event.id}","type":"{event.type}","ladder":{jsontext.string(event.ladder_id)},'
        f'"created_at":"{rfc3339(event.created_at)}","data":{event.data}}}'
    )


def _after(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        key = decode_cursor(cursor)
    except InvalidInput:
        key = None
    if not (isinstance(key, list) and len(key) == 1 and isinstance(key[0], int) and key[0] >= 0):
        raise InvalidInput("after: not a cursor of this feed")
    return int(key[0])


def event_page(*, session: Session, ladder: Ladder, limit: int, after: str | None) -> str:
    """The ladder's events after the cursor ``after`` (from the first without one), oldest
    first, as the JSON text of an :class:`EventPage`; ``next_cursor`` is where the next
    page starts, the same cursor again when there was nothing new (poll with it)."""
    start = _after(after)
    rows = event_repo.page(session=session, ladder_id=ladder.id, after_seq=start, limit=limit)
    documents = [event_document(row) for row in rows]
    last = rows[-1].seq if rows else start
    return f'{{"events":[{",".join(documents)}],"next_cursor":"{encode_cursor([last])}"}}'


def expire_erasure_notices(*, session: Session, now: datetime) -> int:
    """Null the erased ids of the ``player.erased`` events older than the notice period
    (``RATINGS_ERASURE_NOTICE_S``); how many."""
    cutoff = now - timedelta(seconds=get_settings().erasure_notice_s)
    rows = event_repo.erasure_notices_before(session=session, cutoff=cutoff)
    expired = []
    for row in rows:
        data = json.loads(row.data)
        data["player_id"] = None
        expired.append((row.ladder_id, row.seq, jsontext.compact(data)))
    event_repo.expire_notices(session=session, rows=expired)
    for ladder_id in {ladder_id for ladder_id, _, _ in expired}:
        versions.touch(session, ladder_id)
    return len(expired)


#: Events deleted per ladder and transaction by :func:`delete_old_events`.
DELETE_STEP = 5_000


def delete_old_events(*, session: Session, now: datetime) -> int:
    """Delete events older than ``RATINGS_EVENT_RETENTION_S`` (at most
    :data:`DELETE_STEP` a ladder); how many."""
    retention = get_settings().event_retention_s
    if not retention:
        return 0
    cutoff = now - timedelta(seconds=retention)
    deleted = event_repo.delete_before(session=session, cutoff=cutoff, limit=DELETE_STEP)
    for ladder_id in deleted:
        versions.touch(session, ladder_id)  # the feed's pages change: so do their validators
    return sum(deleted.values())


#: How often each worker runs its event chores, in seconds.
CHORES_INTERVAL_S = 600.0


def run_event_chores(transact: Transact, now: datetime) -> None:
    """Expire the erasure notices due, then delete the events past their retention, a step
    of each ladder's a transaction, until none is left."""
    transact(lambda session: expire_erasure_notices(session=session, now=now))
    while transact(lambda session: delete_old_events(session=session, now=now)):
        pass


def event_chores(transact: Transact) -> Periodic:
    """The worker's thread that runs :func:`run_event_chores` every
    :data:`CHORES_INTERVAL_S`."""
    return Periodic(
        "event-chores", CHORES_INTERVAL_S, lambda: run_event_chores(transact, datetime.now(UTC))
    )
