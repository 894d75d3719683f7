"""Predictions for proposed teams: match quality, win and draw probabilities (the GET
form, which a cache can keep: ``app.api.reads``)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import ReadAccess, answer, ladder_of
from app.api.params import LadderPath
from app.domain.documents.predictions import QualityOut, QualityRequest
from app.services import predictions

router = APIRouter(prefix="/ladders/{ladder}", tags=["predictions"])


@router.post(
    "/quality",
    response_model=QualityOut,
    summary="Quality of proposed teams (read)",
    name="predict_quality",
)
async def quality(body: QualityRequest, ladder: LadderPath, access: ReadAccess) -> Response:
    return await answer(
        access,
        lambda session: predictions.predict(
            session=session, ladder=ladder_of(session, ladder), body=body
        ),
    )
