"""Ladders: independent rating pools, each with its algorithm and parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.api.deps import ADMIN, LIMIT_DEFAULT, READ, Cursor, LadderDep, Limit, NowDep, SessionDep
from app.api.schemas import LadderCreate, LadderOut, LadderPage, LadderUpdate, LadderUpdated
from app.services import ladders, rerate

router = APIRouter(prefix="/ladders", tags=["ladders"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=LadderOut,
    responses={200: {"description": "The ladder exists with this configuration already."}},
    summary="Create a ladder (admin)",
    dependencies=ADMIN,
)
def create_ladder(
    body: LadderCreate, session: SessionDep, response: Response, now: NowDep
) -> LadderOut:
    ladder, created = ladders.create_ladder(session=session, body=body, now=now)
    if not created:
        response.status_code = status.HTTP_200_OK
    return ladder


@router.get("", response_model=LadderPage, summary="List ladders", dependencies=READ)
def list_ladders(
    session: SessionDep, limit: Limit = LIMIT_DEFAULT, cursor: Cursor = None
) -> LadderPage:
    return ladders.list_ladders(session=session, limit=limit, cursor=cursor)


@router.get(
    "/{ladder}", response_model=LadderOut, summary="A ladder with its counts", dependencies=READ
)
def get_ladder(ladder: LadderDep, session: SessionDep) -> LadderOut:
    return ladders.ladder_view(session=session, ladder=ladder)


@router.patch(
    "/{ladder}",
    response_model=LadderUpdated,
    responses={409: {"description": "New parameters without `rebuild`."}},
    summary="Change a ladder's parameters (with a rebuild) or description (admin)",
    dependencies=ADMIN,
)
def update_ladder(
    body: LadderUpdate,
    ladder: LadderDep,
    session: SessionDep,
    now: NowDep,
    rebuild: Annotated[
        bool, Query(description="Change the parameters and replay every match with them.")
    ] = False,
) -> LadderUpdated:
    """Parameters named in `params` change (the others keep their values). That re-rates
    every recorded match, so it is refused with 409 unless `?rebuild=true` or
    `"rebuild": true` asks for it: then the parameters change and the whole ladder is
    replayed from its matches (voided ones left out, seeds at their places) in one
    transaction. A description alone changes without a rebuild."""
    return rerate.update_ladder(
        session=session, ladder=ladder, body=body, rebuild_now=rebuild, now=now
    )
