"""Predictions for proposed teams: match quality, win and draw probabilities."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ValidationError

from app.api.deps import LadderPath, ReadAccess, answer, ladder_of
from app.api.problems import validation_detail
from app.domain.documents.predictions import QualityOut, QualityRequest
from app.errors import InvalidInput
from app.services import predictions

router = APIRouter(prefix="/ladders/{ladder}", tags=["predictions"])

Body = TypeVar("Body", bound=BaseModel)


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


def query_body(model: type[Body], fields: Mapping[str, str | None]) -> Body:
    """The request body of the GET form of a POST read (quality, matchmaking) whose fields
    are these JSON texts (None: not given), or the 422 of the first that is not JSON or
    not valid."""
    decoded: dict[str, Any] = {}
    for name, value in fields.items():
        if value is not None:
            try:
                decoded[name] = json.loads(value)
            except ValueError:
                raise InvalidInput(f"query.{name}: not JSON") from None
    try:
        return model.model_validate(decoded)
    except ValidationError as exc:
        # Named as FastAPI names a query parameter's errors ("query.teams: ...").
        errors = [{**error, "loc": ("query", *error["loc"])} for error in exc.errors()]
        raise InvalidInput(validation_detail(errors)) from None


def json_query(description: str) -> Any:
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
        str, json_query('The teams as JSON, as in the POST body: `[["a","b"],["c","d"]]`.')
    ],
    weights: Annotated[
        str | None, json_query("Partial play as JSON, in the shape of `teams`.")
    ] = None,
    advantage: Annotated[
        str | None, json_query("Each team's advantage share as JSON: `[1, 0]`.")
    ] = None,
) -> Response:
    """The answer of `POST /v1/ladders/{ladder}/quality` for the body whose fields are the
    query's JSON values (URL-encoded), with an `ETag` like every read: a client or cache
    that asks again with `If-None-Match` gets `304 Not Modified` until the ladder changes."""
    body = query_body(QualityRequest, {"teams": teams, "weights": weights, "advantage": advantage})
    return await quality(body, ladder, access)
