"""Predictions for proposed teams: match quality, win and draw probabilities."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import ValidationError

from app.api.deps import LadderPath, ReadAccess, answer, ladder_of
from app.api.schemas import QualityOut, QualityRequest
from app.errors import InvalidInput, validation_detail
from app.services import predictions

router = APIRouter(prefix="/ladders/{ladder}", tags=["predictions"])


@router.post(
    "/quality",
    response_model=QualityOut,
    summary="Quality of proposed teams (read)",
)
async def quality(body: QualityRequest, ladder: LadderPath, access: ReadAccess) -> Response:
    return await answer(
        access,
        lambda session: predictions.predict(
            session=session, ladder=ladder_of(session, ladder), body=body
        ),
    )


#: The longest JSON value of a query parameter of the GET form (256 ids of 128 characters).
MAX_QUERY_JSON = 64 * 1024


def _json_query(name: str, description: str) -> Any:
    return Query(max_length=MAX_QUERY_JSON, description=description)


@router.get(
    "/quality",
    response_model=QualityOut,
    summary="Quality of proposed teams, as a GET a cache can keep (read)",
)
async def quality_get(
    ladder: LadderPath,
    access: ReadAccess,
    teams: Annotated[
        str,
        _json_query("teams", 'The teams as JSON, as in the POST body: `[["a","b"],["c","d"]]`.'),
    ],
    weights: Annotated[
        str | None, _json_query("weights", "Partial play as JSON, in the shape of `teams`.")
    ] = None,
    advantage: Annotated[
        str | None, _json_query("advantage", "Each team's advantage share as JSON: `[1, 0]`.")
    ] = None,
) -> Response:
    """The answer of `POST /v1/ladders/{ladder}/quality` for the body whose fields are the
    query's JSON values (URL-encoded), with an `ETag` like every read: a client or cache
    that asks again with `If-None-Match` gets `304 Not Modified` until the ladder changes."""
    fields: dict[str, Any] = {}
    for name, value in (("teams", teams), ("weights", weights), ("advantage", advantage)):
        if value is not None:
            try:
                fields[name] = json.loads(value)
            except ValueError:
                raise InvalidInput(f"query.{name}: not JSON") from None
    try:
        body = QualityRequest.model_validate(fields)
    except ValidationError as exc:
        raise InvalidInput(validation_detail(exc.errors())) from None
    return await quality(body, ladder, access)
