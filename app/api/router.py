"""``api_router``: every route of the rating API, under ``/v1`` (its reads declared in
``app.api.reads``)."""

from fastapi import APIRouter

from app.api import (
    exports,
    fitting,
    jobs,
    keys,
    ladders,
    matches,
    matchmaking,
    players,
    predictions,
    seasons,
    webhooks,
)
from app.api.reads import read_routes

api_router = APIRouter()
for router in (
    ladders.router,
    matches.router,
    players.router,
    seasons.router,
    predictions.router,
    matchmaking.router,
    fitting.router,
    jobs.router,
    keys.router,
    exports.router,
    webhooks.router,
):
    api_router.include_router(router, prefix="/v1")
api_router.include_router(read_routes())

__all__ = ["api_router"]
