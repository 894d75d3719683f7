"""Use cases: read recorded matches back (one, or a page), as their stored documents."""

from __future__ import annotations

import json

from sqlalchemy.orm import Session

from app.domain.cursors import decode_cursor, encode_cursor
from app.errors import InvalidInput, NotFound
from app.storage.models import Ladder
from app.storage.repositories import matches as match_repo


def match_result(*, session: Session, ladder: Ladder, match_id: str) -> str:
    match = match_repo.find_match(session=session, ladder_id=ladder.id, match_id=match_id)
    if match is None:
        raise NotFound(f"match_id: no match {match_id[:128]!r} in ladder {ladder.id!r}")
    return match.result


def list_matches(
    *,
    session: Session,
    ladder: Ladder,
    player_id: str | None,
    limit: int,
    cursor: str | None,
) -> str:
    """A page of match results, newest first, as JSON text (the stored documents verbatim)."""
    before_seq = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and type(key[0]) is int):
            raise InvalidInput("cursor: not a cursor of this list")
        before_seq = key[0]
    matches = match_repo.list_matches(
        session=session,
        ladder_id=ladder.id,
        player_id=player_id,
        before_seq=before_seq,
        limit=limit + 1,
    )
    more = len(matches) > limit
    matches = matches[:limit]
    next_cursor = encode_cursor([matches[-1].seq]) if more else None
    entries = ",".join(match.result for match in matches)
    return f'{{"entries":[{entries}],"next_cursor":{json.dumps(next_cursor)}}}'
