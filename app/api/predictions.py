"""Predictions for proposed teams: match quality, win and draw probabilities."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import READ, LadderPath, SessionDep, answer
from app.api.schemas import QualityOut, QualityRequest
from app.services import predictions

router = APIRouter(prefix="/ladders/{ladder}", tags=["predictions"])


@router.post(
    "/quality",
    response_model=QualityOut,
    summary="Quality of proposed teams (read)",
    dependencies=READ,
)
async def quality(body: QualityRequest, ladder: LadderPath, session: SessionDep) -> Response:
    # Loads the ladder, predicts and commits in one trip to the thread pool.
    return await answer(
        session, ladder, lambda found: predictions.predict(session=session, ladder=found, body=body)
    )
