"""The ``/v1`` router: ``api_router`` carries every route of the rating API."""

from fastapi import APIRouter

from app.api import (
    accuracy,
    fitting,
    jobs,
    ladders,
    matches,
    matchmaking,
    players,
    predictions,
)

api_router = APIRouter(prefix="/v1")
api_router.include_router(ladders.router)
api_router.include_router(matches.router)
api_router.include_router(players.router)
api_router.include_router(predictions.router)
api_router.include_router(matchmaking.router)
api_router.include_router(fitting.router)
api_router.include_router(jobs.router)
api_router.include_router(accuracy.router)

__all__ = ["api_router"]
