"""Jobs: voids and rebuilds too long for one request, run in the background."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from app.api.deps import AdminAccess, NowDep, answer
from app.api.schemas import JobOut
from app.services import jobs

router = APIRouter(prefix="/jobs", tags=["jobs"])

JobIdPath = Annotated[
    str, Path(min_length=1, max_length=64, description="The job's id (from `Location`).")
]


@router.get(
    "/{job_id}",
    response_model=JobOut,
    summary="A void or rebuild running in the background, or its outcome (admin)",
)
async def get_job(job_id: JobIdPath, access: AdminAccess, now: NowDep) -> Response:
    """Poll it (`Retry-After` of the 202 says how often): `queued`, then `running` with
    `progress` (matches re-rated of `total`), then `succeeded` with `result` (what the
    request would have answered inline) or `failed` with `error` (a problem document;
    nothing was changed). A job whose worker stopped (restarted, killed) before it
    finished is `failed` and says so: submit the request again."""
    return await answer(
        access, lambda session: jobs.view(session=session, job_id=job_id, now=now), read_only=True
    )
