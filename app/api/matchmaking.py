"""Matchmaking: the most balanced split of a pool of players into teams (the GET form,
which a cache can keep: ``app.api.reads``)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import ReadAccess, answer, ladder_of
from app.api.params import LadderPath
from app.domain.documents.matchmaking import MatchmakingOut, MatchmakingRequest
from app.services.matchmaking import matchmake

router = APIRouter(prefix="/ladders/{ladder}", tags=["predictions"])


@router.post(
    "/matchmaking",
    response_model=MatchmakingOut,
    summary="Split players into the most balanced teams (read)",
    name="matchmake",
)
async def matchmaking(body: MatchmakingRequest, ladder: LadderPath, access: ReadAccess) -> Response:
    """Split `players` into `teams` teams of equal size (sizes differ by one where the count
    does not divide) with the highest match quality of the ladder's model.

    Up to 12 players every split is evaluated and the best is returned (`exact: true`).
    Beyond, a heuristic: a snake draft by rating (highest mu first), then pairwise swaps
    between teams (and moves where sizes differ by one) while the quality improves, then a
    few rounds of perturbation and search again from a fixed seed, so the same request
    always gets the same answer. On random pools of up to 12 players it finds the optimum
    almost always (see `benchmarks/README.md`); 100 players into 2 teams take about 10 ms.

    Players the ladder does not know count at its prior. `quality` is exactly what
    `POST /v1/ladders/{ladder}/quality` answers for the returned teams. Nothing is written.
    """
    return await answer(
        access,
        lambda session: matchmake(session=session, ladder=ladder_of(session, ladder), body=body),
    )
