"""Exports (admin): a ladder's matches, each line a body the API accepts, and its ratings, as
NDJSON streamed a page at a time (``app.services.exports``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse

from app.api.deps import AdminAccess, stream
from app.api.params import LadderPath
from app.services import exports

router = APIRouter(prefix="/ladders/{ladder}/export", tags=["exports"])

NDJSON = "application/x-ndjson"
#: The same bytes, for a client that asks for them so (``Accept``): generators that know
#: no NDJSON type (openapi-python-client) read a body of this type as bytes.
OCTETS = "application/octet-stream"
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "NDJSON: one JSON document per line (labelled "
        "`application/octet-stream` when `Accept` asks for that and not for NDJSON).",
        "content": {
            NDJSON: {"schema": {"type": "string"}},
            OCTETS: {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


def _media_type(accept: str | None) -> str:
    asked = {part.split(";", 1)[0].strip().lower() for part in (accept or "").split(",")}
    return OCTETS if OCTETS in asked and NDJSON not in asked else NDJSON


AcceptHeader = Annotated[str | None, Header(include_in_schema=False)]


@router.get(
    "/matches",
    response_class=StreamingResponse,
    responses=_STREAM,
    summary="Every match that counts, as match bodies to import (admin)",
)
async def export_matches(
    ladder: LadderPath, access: AdminAccess, accept: AcceptHeader = None
) -> StreamingResponse:
    """Every match that counts (voided ones do not), in the order the ladder rated them,
    each line the body that records it (`match_id`, `played_at`, teams, ranks or scores,
    weights, advantage, meta): imported into a new ladder with the same parameters
    (`ratings import`, or batches in this order) they give every rating the matches gave.
    Seeded ratings, season resets and inactivity passes are not matches and are not in it.
    Read in one snapshot, a page at a time: constant memory at any size."""
    return await stream(
        access,
        lambda session: exports.match_lines(session, ladder),
        media_type=_media_type(accept),
    )


@router.get(
    "/ratings",
    response_class=StreamingResponse,
    responses=_STREAM,
    summary="Every player's rating (admin)",
)
async def export_ratings(
    ladder: LadderPath, access: AdminAccess, accept: AcceptHeader = None
) -> StreamingResponse:
    """Every player's stored rating by player id, one per line: `player_id`, `mu`,
    `sigma` (not for Elo), `volatility` (Glicko-2), `conservative`, `matches`,
    `last_played_at`. Read in one snapshot, a page at a time."""
    return await stream(
        access,
        lambda session: exports.rating_lines(session, ladder),
        media_type=_media_type(accept),
    )
