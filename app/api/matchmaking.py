"""Matchmaking: the most balanced split of a pool of players into teams."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Response

from app.api.deps import LadderPath, ReadAccess, answer, ladder_of
from app.api.predictions import json_query, query_body
from app.domain.documents.matchmaking import MatchmakingOut, MatchmakingRequest
from app.services.matchmaking import matchmake

router = APIRouter(prefix="/ladders/{ladder}", tags=["predictions"])


@router.post(
    "/matchmaking",
    response_model=MatchmakingOut,
    summary="Split players into the most balanced teams (read)",
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


@router.get(
    "/matchmaking",
    response_model=MatchmakingOut,
    summary="Split players into the most balanced teams, as a GET a cache can keep (read)",
)
async def matchmaking_get(
    ladder: LadderPath,
    access: ReadAccess,
    players: Annotated[str, json_query('The players as JSON, as in the POST body: `["a","b"]`.')],
    teams: Annotated[str | None, json_query("How many teams (JSON: `2`; default 2).")] = None,
) -> Response:
    """The answer of `POST /v1/ladders/{ladder}/matchmaking` for the body whose fields are
    the query's JSON values (URL-encoded), with an `ETag` like every read: a client or
    cache that asks again with `If-None-Match` gets `304 Not Modified` until the ladder
    changes."""
    body = query_body(MatchmakingRequest, {"players": players, "teams": teams})
    return await matchmaking(body, ladder, access)
