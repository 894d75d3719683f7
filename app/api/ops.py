"""Operations endpoints: liveness, readiness and Prometheus metrics (outside ``/v1``)."""

from __future__ import annotations

import hmac

import anyio
from anyio import to_thread
from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from app.api.deps import run
from app.api.metrics import METRICS_LADDERS, database_metrics, render_metrics
from app.api.security import Access, Credentials
from app.config import get_settings
from app.errors import ServiceUnavailable, Unauthorized
from app.storage import unit_of_work
from app.storage.engine import get_engine, schema_is_current
from app.storage.repositories import accuracy as accuracy_repo
from app.storage.repositories import ladders as ladder_repo

router = APIRouter(tags=["operations"])


class Status(BaseModel):
    """The answer of a probe that passed."""

    status: str = Field(examples=["ok"])


@router.get("/healthz", summary="Liveness: the process is up")
async def healthz() -> Status:
    """Answers 200 while the process serves requests; touches nothing else."""
    return Status(status="ok")


def _database_ready() -> bool:
    return schema_is_current(get_engine())


@router.get(
    "/readyz",
    summary="Readiness: the database answers and its schema is at the newest migration",
    responses={503: {"description": "Database unreachable, too slow, or schema behind"}},
)
async def readyz() -> Status:
    """200 when the database answers within ``RATINGS_READINESS_TIMEOUT_S`` and its schema
    is at head; otherwise 503 (problem+json) at once, never hanging on a dead database."""
    timeout = get_settings().readiness_timeout_s
    try:
        with anyio.fail_after(timeout):
            current = await to_thread.run_sync(_database_ready, abandon_on_cancel=True)
    except TimeoutError:
        raise ServiceUnavailable(f"database: no answer within {timeout:g} s") from None
    except Exception as exc:
        # The message may name the host or hold credentials: only the kind is reported.
        raise ServiceUnavailable(f"database: unreachable ({type(exc).__name__})") from None
    if not current:
        raise ServiceUnavailable("schema: not at the newest migration; run `ratings migrate`")
    return Status(status="ready")


def _last_match_seq() -> int:
    return unit_of_work.run(
        lambda session: ladder_repo.last_match_seq(session=session), read_only=True, attempts=1
    )


def _ladder_tallies() -> dict[str, list[int]]:
    return unit_of_work.run(
        lambda session: accuracy_repo.tallies(session=session, limit=METRICS_LADDERS),
        read_only=True,
        attempts=1,
    )


def _database_figures() -> tuple[int, dict[str, list[int]]]:
    return _last_match_seq(), _ladder_tallies()


async def _database_figure() -> tuple[int | None, dict[str, list[int]] | None]:
    """The newest match's seq and the ladders' accuracy tallies, or None when the database
    does not answer within ``RATINGS_READINESS_TIMEOUT_S`` (a scrape never hangs on a dead
    database) or fails."""
    try:
        with anyio.fail_after(get_settings().readiness_timeout_s):
            return await to_thread.run_sync(_database_figures, abandon_on_cancel=True)
    except Exception:
        return None, None


async def _metrics_access(presented: str) -> None:
    """Whether the scrape may read the metrics (:func:`metrics`), or its 401."""
    settings = get_settings()
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""
    if not settings.require_read_key and not token:
        return
    if token and presented and hmac.compare_digest(presented.encode(), token.encode()):
        return
    if not presented:
        raise Unauthorized(
            "Authorization: /metrics needs a Bearer key (or the metrics token)",
            headers={"WWW-Authenticate": 'Bearer realm="ratings"'},
        )
    await run(Access(presented, "read"), lambda session: None)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    name="get_metrics",
    response_class=Response,
    responses={
        200: {
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "Prometheus text format",
        },
        401: {
            "description": "With `RATINGS_REQUIRE_READ_KEY` or `RATINGS_METRICS_TOKEN`: no "
            "key or token, or an unknown or revoked one."
        },
        503: {"description": "The key could not be checked: the database is unavailable."},
    },
)
async def metrics(credentials: Credentials) -> Response:
    """Request counts and latencies by route template and status; matches recorded by this
    process through the API (`ratings_matches_recorded_total`) and, read from the database
    at each scrape, by every process (`ratings_database_matches_recorded_total`: the
    newest match's seq, an index lookup; absent while the database does not answer); each
    ladder's prediction accuracy (`ratings_ladder_*{ladder=...}`, from its running tally,
    at most 1,000 ladders).

    Open while reads are; with `RATINGS_REQUIRE_READ_KEY`, or once `RATINGS_METRICS_TOKEN`
    is set, it needs `Authorization: Bearer` with that token or an active API key."""
    await _metrics_access(credentials)
    recorded, tallies = await _database_figure()
    body, content_type = await to_thread.run_sync(render_metrics)
    return Response(content=body + database_metrics(recorded, tallies), media_type=content_type)
