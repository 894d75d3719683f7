"""Players, their history, and the leaderboard.

The routes are asynchronous and do their database work in one trip to the thread pool
(:func:`app.api.deps.answer`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api.deps import (
    LIMIT_DEFAULT,
    AdminAccess,
    Cursor,
    LadderPath,
    Limit,
    NowDep,
    ReadAccess,
    answer,
    ladder_of,
)
from app.domain.documents.players import (
    ErasureResult,
    HistoryPage,
    LeaderboardPage,
    PlayerOut,
    PlayerSeed,
)
from app.domain.documents.shared import ID_PATTERN
from app.services import erasure, players

router = APIRouter(prefix="/ladders/{ladder}", tags=["players"])

PlayerIdPath = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="The player id.")
]


@router.get(
    "/leaderboard",
    response_model=LeaderboardPage,
    summary="Players by conservative rating, highest first",
)
async def leaderboard(
    ladder: LadderPath,
    access: ReadAccess,
    limit: Limit = LIMIT_DEFAULT,
    cursor: Cursor = None,
    min_matches: Annotated[
        int, Query(ge=0, le=2**31 - 1, description="Only players with this many matches.")
    ] = 0,
) -> Response:
    return await answer(
        access,
        lambda session: players.leaderboard(
            session=session,
            ladder=ladder_of(session, ladder),
            limit=limit,
            cursor=cursor,
            min_matches=min_matches,
        ),
    )


@router.get("/players/{player_id}", response_model=PlayerOut, summary="A player's rating")
async def get_player(player_id: PlayerIdPath, ladder: LadderPath, access: ReadAccess) -> Response:
    return await answer(
        access,
        lambda session: players.get_player(
            session=session, ladder=ladder_of(session, ladder), player_id=player_id
        ),
    )


@router.put(
    "/players/{player_id}",
    response_model=PlayerOut,
    summary="Seed or import a player's rating (admin)",
)
async def seed_player(
    player_id: PlayerIdPath, body: PlayerSeed, ladder: LadderPath, access: AdminAccess, now: NowDep
) -> Response:
    return await answer(
        access,
        lambda session: players.seed_player(
            session=session,
            ladder=ladder_of(session, ladder),
            player_id=player_id,
            body=body,
            now=now,
        ),
    )


@router.delete(
    "/players/{player_id}",
    response_model=ErasureResult,
    summary="Erase a player: a data-protection request (admin)",
)
async def erase_player(
    player_id: PlayerIdPath, ladder: LadderPath, access: AdminAccess
) -> Response:
    """Erase the player from this ladder, in one transaction: their rating, leaderboard
    entry and history go; in every stored match (voided ones too) their id is replaced by a
    pseudonym, the same in all of them (`erased/` and 32 random hex digits, unrelated to the
    id, never a valid posted id, never on the leaderboard). Every other rating, history
    entry and number stays as it is, and later voids and rebuilds rate the others exactly
    as before. `meta` and match ids are kept as sent.

    A player the ladder does not know (or erased before) is a 404. A match posted later
    naming the old id starts a new player at the prior."""
    return await answer(
        access,
        lambda session: erasure.erase_player(
            session=session, ladder=ladder_of(session, ladder), player_id=player_id
        ),
    )


@router.get(
    "/players/{player_id}/history",
    response_model=HistoryPage,
    summary="A player's rating changes, newest first",
)
async def player_history(
    player_id: PlayerIdPath,
    ladder: LadderPath,
    access: ReadAccess,
    limit: Limit = LIMIT_DEFAULT,
    cursor: Cursor = None,
) -> Response:
    return await answer(
        access,
        lambda session: players.player_history(
            session=session,
            ladder=ladder_of(session, ladder),
            player_id=player_id,
            limit=limit,
            cursor=cursor,
        ),
    )
