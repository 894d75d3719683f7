"""The HTTP parameters of the API: the path's ids, and each read's query as one pydantic
model, which FastAPI documents and validates and the read path (``app.api.reads``) reads
the query with, so both read it by the same rules."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from fastapi import Path
from pydantic import BaseModel, Field, ValidationError

from app.domain.documents.matchmaking import MatchmakingRequest
from app.domain.documents.predictions import QualityRequest
from app.domain.documents.seasons import MAX_SEASON_ID
from app.domain.documents.shared import (
    DEFAULT_PAGE,
    ID_PATTERN,
    MAX_ID_LENGTH,
    MAX_PAGE,
    parse_time,
)
from app.errors import InvalidInput, validation_detail
from app.services.accuracy import MAX_WINDOW

Body = TypeVar("Body", bound=BaseModel)

# -- the path ----------------------------------------------------------------------------------

#: The ladder's id from the path (loaded in the route's transaction: ``deps.ladder_of``).
LadderPath = Annotated[str, Path(description="The ladder's id.")]


def _id_path(description: str) -> Any:
    return Path(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN, description=description)


PlayerIdPath = Annotated[str, _id_path("The player id.")]
MatchIdPath = Annotated[str, _id_path("The match id.")]
SeasonPath = Annotated[
    str,
    Path(min_length=1, max_length=MAX_SEASON_ID, pattern=ID_PATTERN, description="The season id."),
]

#: The path parameters of the API's routes, by name.
PATH_PARAMS: dict[str, Any] = {
    "ladder": LadderPath,
    "player_id": PlayerIdPath,
    "match_id": MatchIdPath,
    "season": SeasonPath,
}

# -- the queries -------------------------------------------------------------------------------


class ReadQuery(BaseModel):
    """A read's query parameters, each a field."""

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments the read's service takes for this query (a 422,
        ``InvalidInput``, for a value the fields' types cannot refuse alone)."""
        return self.model_dump()


def _limit() -> Any:
    return Field(
        DEFAULT_PAGE, ge=1, le=MAX_PAGE, description=f"Entries per page (at most {MAX_PAGE})."
    )


def _cursor() -> Any:
    return Field(None, max_length=1024, description="`next_cursor` of the previous page.")


class PageQuery(ReadQuery):
    """A page of a list: its size and where it starts."""

    limit: int = _limit()
    cursor: str | None = _cursor()


class EventsQuery(ReadQuery):
    """A page of a ladder's events: its size and the cursor it starts after."""

    limit: int = Field(
        DEFAULT_PAGE, ge=1, le=MAX_PAGE, description=f"Events per page (at most {MAX_PAGE})."
    )
    after: str | None = Field(
        None,
        max_length=1024,
        description="`next_cursor` of the previous page; from the first event without it.",
    )


class LeaderboardQuery(PageQuery):
    min_matches: int = Field(
        0, ge=0, le=2**31 - 1, description="Only players with this many matches."
    )
    around: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description="A player id: the page of `limit` entries centred on that player "
        "(`prev_cursor` and `next_cursor` page on both ways). Not with `cursor` or `tier`.",
    )
    tier: str | None = Field(
        None,
        min_length=1,
        max_length=32,
        description="A tier's name: that tier's players alone, ranked on the whole leaderboard.",
    )
    include_provisional: bool = Field(
        False,
        description="Show the provisional players too (still placing: see the ladder's "
        "`placement_matches`), without a rank; the ranks count the ranked players only.",
    )


class MatchesQuery(ReadQuery):
    # The service's name for it; the query's is ``player``.
    player_id: str | None = Field(
        None,
        alias="player",
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description="Only this player's.",
    )
    limit: int = _limit()
    cursor: str | None = _cursor()


class AccuracyQuery(ReadQuery):
    window: int | None = Field(
        None,
        ge=1,
        le=MAX_WINDOW,
        description=f"Only the newest N matches that count (1 to {MAX_WINDOW:,}).",
    )
    # Documented as the text it is sent as; read as the time it names (``played_at``'s rules).
    since: str | None = Field(
        None,
        max_length=64,
        description="Only matches played at or after this time (RFC 3339; a date or a "
        f"time without a zone is UTC), among the newest `window` ({MAX_WINDOW:,} when not "
        "given).",
        json_schema_extra={"format": "date-time"},
    )

    def arguments(self) -> dict[str, Any]:
        try:
            since = None if self.since is None else parse_time(self.since, "since")
        except ValueError as exc:
            raise InvalidInput(f"query.{exc}") from None
        return {"window": self.window, "since": since}


#: The longest JSON value of a query parameter of the GET form (256 ids of 128 characters).
MAX_QUERY_JSON = 64 * 1024


def _json_field(description: str, *, required: bool = False) -> Any:
    if required:
        return Field(max_length=MAX_QUERY_JSON, description=description)
    return Field(None, max_length=MAX_QUERY_JSON, description=description)


class QualityQuery(ReadQuery):
    """The GET form of the quality query: the POST body's fields as JSON texts."""

    teams: str = _json_field(
        'The teams as JSON, as in the POST body: `[["a","b"],["c","d"]]`.', required=True
    )
    weights: str | None = _json_field("Partial play as JSON, in the shape of `teams`.")
    advantage: str | None = _json_field("Each team's advantage share as JSON: `[1, 0]`.")

    def arguments(self) -> dict[str, Any]:
        # The body as JSON text: hashable, a part of the key of the bodies kept.
        return {"body": query_body(QualityRequest, self.model_dump()).model_dump_json()}


class MatchmakingQuery(ReadQuery):
    """The GET form of the matchmaking query: the POST body's fields as JSON texts."""

    players: str = _json_field(
        'The players as JSON, as in the POST body: `["a","b"]`.', required=True
    )
    teams: str | None = _json_field("How many teams (JSON: `2`; default 2).")

    def arguments(self) -> dict[str, Any]:
        # The body as JSON text: hashable, a part of the key of the bodies kept.
        return {"body": query_body(MatchmakingRequest, self.model_dump()).model_dump_json()}


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
