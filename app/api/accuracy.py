"""A ladder's prediction accuracy: how well its stored pre-match win probabilities did."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.api.deps import LadderPath, ReadAccess, answer, ladder_of
from app.api.schemas.accuracy import AccuracyOut
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
        datetime | None,
        Query(
            description="Only matches played at or after this time (RFC 3339; no zone is UTC), "
            f"among the newest `window` ({MAX_WINDOW:,} when not given)."
        ),
    ] = None,
) -> Response:
    return await answer(
        access,
        lambda session: accuracy.ladder_accuracy(
            session=session, ladder=ladder_of(session, ladder), window=window, since=since
        ),
    )
