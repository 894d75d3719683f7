"""A ladder's matches and ratings as NDJSON, a page of rows at a time, so that an export's
memory is one page's whatever the ladder's size.

Every line of :func:`match_lines` is the body of ``POST /v1/ladders/{ladder}/matches`` that
the match was recorded with (its ``match_id``, ``played_at`` as the ladder counted it,
teams, ranks or scores, weights, advantage, meta), for each match that counts (voided ones
do not), in the order the ladder rated them (``seq``). Imported into a new ladder with the
same parameters (``ratings import``, or batches in the same order), they give every rating
the ladder's matches gave. What is not a match is not in it: a seeded rating (``PUT``), a
season's reset, an inactivity pass; a ladder that had any of these is reproduced by the
matches alone only where they did not apply. :func:`rating_lines` gives every player's
stored rating, by player id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy.orm import Session

from app.domain import jsontext
from app.domain.documents.matches import MatchCreate
from app.domain.results import rfc3339
from app.domain.times import utc
from app.services.ladders import get_ladder
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories.rerating import MatchRow, matches_page

#: Rows read per statement (and written per chunk of the stream).
PAGE = 1_000

#: The fields of a stored request that a match body carries as they are.
_BODY_FIELDS = ("teams", "ranks", "scores", "weights", "advantage", "player_scores", "meta")


def match_body(row: MatchRow) -> MatchCreate:
    """The body that records the match ``row`` again: its stored request, its id, and the
    moment the ladder counted it played (the request's, or its arrival when it gave none)."""
    body: dict[str, Any] = {
        "match_id": row.match_id,
        "played_at": utc(row.played_at),
        **{
            field: row.request[field]
            for field in _BODY_FIELDS
            if row.request.get(field) is not None
        },
    }
    return MatchCreate.model_validate(body)


def match_lines(session: Session, ladder_id: str) -> Iterator[bytes]:
    """The ladder's counted matches as NDJSON, a page of lines per chunk; ``NotFound`` (from
    the first step) for an unknown ladder."""
    get_ladder(session=session, ladder_id=ladder_id, detached=True)
    after = -1
    while rows := matches_page(session=session, ladder_id=ladder_id, after_seq=after, limit=PAGE):
        yield b"".join(
            match_body(row).model_dump_json(exclude_none=True).encode() + b"\n" for row in rows
        )
        after = rows[-1].seq


def rating_lines(session: Session, ladder_id: str) -> Iterator[bytes]:
    """Every player's stored rating as NDJSON, by player id: ``player_id``, ``mu``,
    ``sigma`` (absent for Elo), ``volatility`` (Glicko-2), ``conservative``, ``matches``,
    ``last_played_at``."""
    get_ladder(session=session, ladder_id=ladder_id, detached=True)
    after: str | None = None
    while rows := rating_repo.ratings_page(
        session=session, ladder_id=ladder_id, after_player=after, limit=PAGE
    ):
        chunk = []
        for row in rows:
            line: dict[str, Any] = {"player_id": row.player_id, "mu": row.mu}
            if row.sigma is not None:
                line["sigma"] = row.sigma
            if row.volatility is not None:
                line["volatility"] = row.volatility
            line["conservative"] = row.conservative
            line["matches"] = row.matches
            line["last_played_at"] = (
                rfc3339(row.last_played_at) if row.last_played_at is not None else None
            )
            chunk.append(jsontext.compact(line))
        yield ("\n".join(chunk) + "\n").encode()
        after = rows[-1].player_id
