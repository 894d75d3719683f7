"""Fitting a ladder's parameters on its own matches, as a job."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import AdminAccess, NowDep, ladder_of, run
from app.api.params import LadderPath
from app.domain.documents.fitting import FitRequest
from app.domain.documents.jobs import JobOut
from app.services import fitting, jobs
from app.storage import unit_of_work

router = APIRouter(prefix="/ladders", tags=["ladders"])


@router.post(
    "/{ladder}/fit",
    status_code=202,
    response_model=JobOut,
    responses={
        202: {
            "description": "The fit runs in the background as a job; poll `Location` "
            "(`GET /v1/jobs/{id}`): its `result` is what it found and applied.",
            "headers": {
                "Location": {
                    "description": "The job: `/v1/jobs/{id}`.",
                    "schema": {"type": "string"},
                }
            },
        },
        501: {"description": "Fitting needs scipy, not installed on this server."},
    },
    summary="Fit the ladder's parameters, or choose its algorithm, on its matches (admin)",
)
async def fit_ladder(
    body: FitRequest, ladder: LadderPath, access: AdminAccess, now: NowDep
) -> Response:
    """Fits on the earlier `train_fraction` of the ladder's matches (in the order it rates
    them, voided ones left out) by minimising the pair log loss there, as `ratings fit`
    does on a file, and measures the later part with the ladder's current parameters and
    the fitted ones. `algorithm`: null for the ladder's own (searched from its current
    parameters), another algorithm (from its defaults), or `auto` (every algorithm; the
    lowest training loss is chosen). With `apply` (the ladder's own algorithm only) the
    fitted parameters replace the current ones and the ladder is rebuilt, in the job's
    one transaction: all or nothing. Always a job (a fit replays the matches tens of
    times): 202 with `Location`. A bad request is answered at once: an unknown ladder
    (404), a split that leaves a part empty or `apply` of another algorithm (422)."""
    out = await run(
        access,
        lambda session: jobs.submit(
            session=session,
            rerating=fitting.plan_fit(
                session=session, ladder=ladder_of(session, ladder), body=body
            ),
            now=now,
        ),
    )
    jobs.start(out.id, transact=unit_of_work.transactor())
    return Response(
        content=out.model_dump_json(),
        status_code=202,
        headers={"Location": f"/v1/jobs/{out.id}", "Retry-After": "1"},
        media_type="application/json",
    )
