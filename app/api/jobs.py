"""Jobs: voids and rebuilds too long for one request, run in the background."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Path, Response

from app.api.deps import AdminAccess, NowDep, answer, run
from app.domain.documents.jobs import JobOut
from app.services import jobs
from app.storage import unit_of_work

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
    finished is `failed` and says so: submit the request again. A cancelled one is
    `cancelled` (nothing of it was applied). A key limited to some ladders sees those
    ladders' jobs alone."""
    return await answer(
        replace(access, ladder_from=partial(jobs.ladder_of_job, job_id=job_id)),
        lambda session: jobs.view(
            session=session, job_id=job_id, now=now, transact=unit_of_work.transactor()
        ),
        read_only=True,
    )


@router.delete(
    "/{job_id}",
    response_model=JobOut,
    responses={
        202: {
            "model": JobOut,
            "description": "SQLite: the job was asked to stop and ends `cancelled` at its next "
            "progress report (poll `Location`); nothing of it is applied.",
        },
        409: {"description": "The job has ended already (succeeded, failed or cancelled)."},
    },
    summary="Cancel a queued or running job, nothing of it applied (admin)",
)
async def cancel_job(job_id: JobIdPath, access: AdminAccess, now: NowDep) -> Response:
    """On PostgreSQL the job is `cancelled` at once (200): it cannot commit any more, and
    rolls back at its next progress report or heartbeat. On SQLite, whose one writer a
    running job is, it is asked to stop (202, `Location` to poll) and ends `cancelled`
    at its next progress report. Either way nothing of it is applied."""
    out, ended = await run(
        replace(access, ladder_from=partial(jobs.ladder_of_job, job_id=job_id)),
        lambda session: jobs.cancel(session=session, job_id=job_id, now=now),
        read_only=not jobs.cancel_writes(),
    )
    if ended:
        return Response(content=out.model_dump_json(), media_type="application/json")
    return Response(
        content=out.model_dump_json(),
        status_code=202,
        headers={"Location": f"/v1/jobs/{out.id}", "Retry-After": "1"},
        media_type="application/json",
    )
