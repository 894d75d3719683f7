"""Ladders: independent rating pools, each with its algorithm and parameters (their reads:
``app.api.reads``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.api.deps import (
    ACCEPTED,
    AdminAccess,
    NowDep,
    PreferHeader,
    answer,
    ladder_of,
    rerating,
    run,
)
from app.api.params import LadderPath
from app.domain.documents.ladders import (
    LadderCreate,
    LadderDeleted,
    LadderOut,
    LadderUpdate,
    LadderUpdated,
)
from app.services import ladders, rerate

router = APIRouter(prefix="/ladders", tags=["ladders"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=LadderOut,
    responses={
        200: {
            "model": LadderOut,
            "description": "The ladder exists with this configuration already.",
        }
    },
    summary="Create a ladder (admin)",
)
async def create_ladder(body: LadderCreate, access: AdminAccess, now: NowDep) -> Response:
    ladder, created = await run(
        access, lambda session: ladders.create_ladder(session=session, body=body, now=now)
    )
    return Response(
        content=ladder.model_dump_json(),
        status_code=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        media_type="application/json",
    )


@router.patch(
    "/{ladder}",
    response_model=LadderUpdated,
    responses={409: {"description": "New parameters without `rebuild`."}, **ACCEPTED},
    summary="Change a ladder's parameters (with a rebuild) or description (admin)",
)
async def update_ladder(
    body: LadderUpdate,
    ladder: LadderPath,
    access: AdminAccess,
    now: NowDep,
    rebuild: Annotated[
        bool, Query(description="Change the parameters and replay every match with them.")
    ] = False,
    prefer: PreferHeader = None,
) -> Response:
    """Parameters named in `params` change (the others keep their values). That re-rates
    every recorded match, so it is refused with 409 unless `?rebuild=true` or
    `"rebuild": true` asks for it: then the parameters change and the whole ladder is
    replayed from its matches (voided ones left out, seeds at their places) in one
    transaction. A description alone changes without a rebuild.

    A rebuild of more matches than `RATINGS_REBUILD_INLINE_MAX`, or sent with
    `Prefer: respond-async`, or of a ladder with a job pending, is answered at once with
    `202 Accepted` and a job (`Location: /v1/jobs/{id}`): the parameters change with the
    rebuild when the job succeeds, and its `result` is then this answer."""
    return await rerating(
        access,
        lambda session: rerate.plan_update(
            session=session, ladder=ladder_of(session, ladder), body=body, rebuild_now=rebuild
        ),
        lambda session: rerate.update_ladder(
            session=session,
            ladder=ladder_of(session, ladder),
            body=body,
            rebuild_now=rebuild,
            now=now,
        ),
        prefer=prefer,
        now=now,
    )


@router.delete(
    "/{ladder}",
    response_model=LadderDeleted,
    summary="Delete a ladder and everything recorded in it (admin)",
)
async def delete_ladder(ladder: LadderPath, access: AdminAccess) -> Response:
    """Delete the ladder with its ratings, leaderboard, matches (voided ones too), history
    and jobs, in one transaction; answers what was removed. Matches being recorded in it
    meanwhile finish first and go with it; later ones find no ladder (404). API keys
    belong to no ladder and stay. The id may be used for a new ladder afterwards."""
    return await answer(
        access,
        lambda session: ladders.delete_ladder(session=session, ladder=ladder_of(session, ladder)),
    )
