"""Seasons: opening or scheduling the next one, cancelling a scheduled one (their reads,
the list and the archived standings: ``app.api.reads``)."""

from __future__ import annotations

from functools import partial

from anyio import to_thread
from fastapi import APIRouter, Response, status

from app.api.deps import AdminAccess, NowDep, answer, ladder_of, run
from app.api.params import LadderPath, SeasonPath
from app.domain.documents.seasons import SeasonCreate, SeasonOut
from app.services import seasons
from app.storage import unit_of_work

router = APIRouter(prefix="/ladders/{ladder}", tags=["seasons"])


@router.post(
    "/seasons",
    response_model=SeasonOut,
    status_code=status.HTTP_201_CREATED,
    summary="Close the current season and open the next, now or at a set time (admin)",
)
async def open_season(
    body: SeasonCreate, ladder: LadderPath, access: AdminAccess, now: NowDep
) -> Response:
    """A short transaction that holds the ladder (matches being recorded finish first, new
    ones wait for it) closes the current season and makes the new one current: matches
    recorded from then on belong to it. Then, in steps of players that matches are
    recorded between, the closed season's final standings are archived (every rated
    player's rating, the season's matches and rank, read at
    `GET .../seasons/{season}/leaderboard`) and every rating is pulled toward the prior by
    `keep` (a history entry of kind `season_reset` for each player; a player a match
    reaches first is reset first). The answer comes when the steps are done; should this
    worker stop before, another takes them over. A season id the ladder has had is a 409.

    With `starts_at` (in the future) the season is scheduled instead (201, `state`
    `scheduled`): the service opens it by itself at that time, within
    `RATINGS_SEASON_CLOCK_S` (a second by default), exactly once whatever the number of
    workers and instances. One season at a time may be scheduled per ladder."""
    owner = seasons.new_owner()
    opened = await run(
        access,
        lambda session: seasons.open_season(
            session=session, ladder=ladder_of(session, ladder), body=body, now=now, owner=owner
        ),
    )
    if opened.opening:
        opened = await to_thread.run_sync(
            partial(
                seasons.settle_opening,
                transact=unit_of_work.transactor(),
                ladder_id=ladder,
                owner=owner,
            )
        )
    return Response(
        content=opened.model_dump_json(),
        status_code=status.HTTP_201_CREATED,
        media_type="application/json",
    )


@router.delete(
    "/seasons/{season}",
    response_model=SeasonOut,
    summary="Cancel a scheduled season (admin)",
)
async def cancel_season(season: SeasonPath, ladder: LadderPath, access: AdminAccess) -> Response:
    """Cancel the ladder's scheduled season: 200 with it. A season that has opened is a
    409 (its matches and resets are history); an unknown one a 404."""
    return await answer(
        access,
        lambda session: seasons.cancel_season(
            session=session, ladder=ladder_of(session, ladder), season=season
        ),
    )
