"""Players: seeding and erasure (their reads, the card, history and leaderboard:
``app.api.reads``).

The routes are asynchronous and do their database work in one trip to the thread pool
(:func:`app.api.deps.answer`).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import AdminAccess, NowDep, answer, ladder_of
from app.api.params import LadderPath, PlayerIdPath
from app.domain.documents.players import (
    ErasureResult,
    PlayerOut,
    PlayerSeed,
)
from app.services import erasure, players

router = APIRouter(prefix="/ladders/{ladder}", tags=["players"])


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
