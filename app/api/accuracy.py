"""A ladder's prediction accuracy: how well its stored pre-match win probabilities did."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.api.deps import LadderPath, ReadAccess, answer, ladder_of
from app.domain.documents.accuracy import AccuracyOut
from app.domain.documents.shared import parse_time
from app.errors import InvalidInput
from app.services import accuracy
from app.services.accuracy import MAX_WINDOW

router = APIRouter(prefix="/ladders/{ladder}", tags=["predictions"])

DESCRIPTION = f"""\
How well the ladder's predictions did: every match is stored with each team's probability
of finishing first, as the ladder's model gave it before the match, and scored against the
outcome (prediction error, log loss, Brier score, calibration). Without parameters the
figures cover every match that counts (voided ones do not), from a running tally kept in
the same transaction as each recording, void and rebuild, so the answer costs no scan.
`window=N` looks at the ladder's N newest matches that count instead (at most
{MAX_WINDOW:,}); `since=T` keeps those of them played at or after T (a window of
{MAX_WINDOW:,} when `window` is not given). Matches recorded before win probabilities were
stored are not scored until the ladder is rebuilt.
"""


@router.get(
    "/accuracy",
    response_model=AccuracyOut,
    summary="Prediction accuracy of the ladder (read)",
    description=DESCRIPTION,
)
async def ladder_accuracy(
    ladder: LadderPath,
    access: ReadAccess,
    window: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_WINDOW,
            description=f"Only the newest N matches that count (1 to {MAX_WINDOW:,}).",
        ),
    ] = None,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Only matches played at or after this time (RFC 3339; a date or a "
            f"time without a zone is UTC), among the newest `window` ({MAX_WINDOW:,} when not "
            "given).",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
) -> Response:
    moment = None if since is None else _moment(since)
    return await answer(
        access,
        lambda session: accuracy.ladder_accuracy(
            session=session, ladder=ladder_of(session, ladder), window=window, since=moment
        ),
    )


def _moment(since: str) -> datetime:
    """``since`` read as ``played_at`` is (``schemas.parse_time``), in UTC."""
    try:
        return parse_time(since, "since")
    except ValueError as exc:
        raise InvalidInput(f"query.{exc}") from None
