"""A job's document: a void, a rebuild or a fit run in the background, and its outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from app.domain.documents.fitting import FitOutcome
from app.domain.documents.ladders import LadderUpdated
from app.domain.documents.matches import VoidResult

# -- jobs -----------------------------------------------------------------------------------

JobKind = Literal["void", "rebuild", "fit"]
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobProgress(BaseModel):
    done: int = Field(
        description="Matches re-rated and written so far (a fit: replays of the training part)."
    )
    total: int | None = Field(
        description="Matches the job re-rates (a fit: at most how many replays); null until "
        "it has read them (queued)."
    )


class JobProblem(BaseModel):
    """Why a job failed: the problem document its request would have been answered with."""

    type: str
    title: str
    status: int
    detail: str


class JobOut(BaseModel):
    """A void or a rebuild run in the background, in one transaction: all or nothing."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "3f2c9a7e5b1d4c8e9f0a1b2c3d4e5f60",
                    "kind": "void",
                    "ladder": "halo-ffa",
                    "state": "running",
                    "progress": {"done": 15000, "total": 48610},
                    "result": None,
                    "error": None,
                    "created_at": "2026-11-21T12:00:00Z",
                    "started_at": "2026-11-21T12:00:00.2Z",
                    "finished_at": None,
                },
                {
                    "id": "3f2c9a7e5b1d4c8e9f0a1b2c3d4e5f60",
                    "kind": "void",
                    "ladder": "halo-ffa",
                    "state": "succeeded",
                    "progress": {"done": 48610, "total": 48610},
                    "result": {
                        "match_id": "g-1042",
                        "ladder": "halo-ffa",
                        "voided_at": "2026-11-21T12:00:00.2Z",
                        "already_voided": False,
                        "matches_rerated": 48610,
                        "players_affected": 9140,
                    },
                    "error": None,
                    "created_at": "2026-11-21T12:00:00Z",
                    "started_at": "2026-11-21T12:00:00.2Z",
                    "finished_at": "2026-11-21T12:00:17Z",
                },
            ]
        }
    )

    id: str = Field(description="The job's id: `GET /v1/jobs/{id}`.")
    kind: JobKind = Field(
        description="`void` (DELETE of a match), `rebuild` (PATCH of a ladder with rebuild) "
        "or `fit` (POST of a ladder's fit)."
    )
    ladder: str
    state: JobState = Field(
        description="`queued` (accepted; waiting for the ladder), `running`, `succeeded` "
        "(everything committed) or `failed` (nothing changed)."
    )
    progress: JobProgress
    result: VoidResult | LadderUpdated | FitOutcome | None = Field(
        description="Once succeeded: what the inline answer would have been (the void's "
        "summary, or the ladder and its rebuild); for a fit, what it found and applied."
    )
    error: JobProblem | None = Field(description="Once failed: why; nothing was changed.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
