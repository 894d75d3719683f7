"""Long re-ratings as jobs: a void or a rebuild run in the background, polled by clients.

A re-rating of many matches outlasts a request behind a load balancer's timeout (48,610
matches take about 17 s on PostgreSQL). The route then answers ``202 Accepted`` with a job
(:func:`submit`), and the worker that accepted it runs the re-rating in a thread of its
own (:func:`start`), still as ONE transaction: it commits everything or nothing. A job is
a row of ``jobs``; ``GET /v1/jobs/{id}`` (:func:`view`) reads it from any worker.

While the re-rating's transaction is open its progress (matches re-rated and written, of
how many) and a heartbeat are written from short transactions of their own on PostgreSQL,
so every worker sees them. SQLite has one writer at a time, and the re-rating is it: there
the job is marked running just before its transaction begins, its progress is seen by the
worker running it, and the others see it when it ends.

A job ends ``succeeded`` in the re-rating's own transaction (its result is committed with
what it changed, or not at all), or ``failed`` with the problem document after that
transaction rolled back. A job whose worker died (killed, restarted) is not re-run by
another: its transaction was rolled back by the database, nothing changed, and it is
reported failed, saying so, to whoever reads it next. It is found out by its heartbeat
(PostgreSQL: none for ``RATINGS_JOB_LEASE_S``) or, on SQLite, whose database every worker
shares on one machine, by its worker process being gone. Running it again elsewhere could
apply an old request to a ladder changed meanwhile; the client decides, and submits again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, cast

from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.config import get_settings
from app.domain.documents.fitting import FitOutcome
from app.domain.documents.jobs import JobOut, JobProblem, JobProgress
from app.domain.documents.ladders import LadderUpdate, LadderUpdated
from app.domain.documents.matches import VoidResult
from app.domain.times import utc
from app.errors import Conflict, NotFound, problem_of
from app.services import fitting, ladders, rerate
from app.services.periodic import Periodic
from app.services.rerate import Rerating
from app.storage import cancels
from app.storage.engine import on_postgres
from app.storage.repositories import jobs as job_repo
from app.storage.repositories import sql as sql_repo
from app.storage.repositories.jobs import UNFINISHED, JobRow
from app.storage.unit_of_work import Transact

_log = logging.getLogger("app.jobs")

#: What a job whose worker process has ended says.
ENDED = (
    "job: the worker process running it ended before it finished (restarted or killed); "
    "its transaction was rolled back, so nothing changed: submit the request again"
)
#: What a job says whose worker stopped writing its heartbeat (it may still run, cut off
#: from the database: its transaction cannot commit either way).
SILENT = (
    "job: the worker running it stopped reporting for {seconds:g} s (stopped, or cut off "
    "from the database); its transaction cannot commit, so nothing changed: submit the "
    "request again"
)

#: The progress of the jobs this process runs, by id: (done, total). Also which run here.
_running: dict[str, tuple[int, int | None]] = {}
#: The PostgreSQL server process of each running job's transaction (to cancel its statement).
_backends: dict[str, int] = {}
#: Failures of this process's jobs that could not be written when they happened (the
#: database was gone): the reaper writes them, with their reason, once it is back.
_unwritten: dict[str, dict[str, Any]] = {}
_running_lock = threading.Lock()
_owner: tuple[int, str] | None = None


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the name: state (index 0) ... starttime is the 22nd field of the line.
    return fields[19] if fields[0] != "Z" else None


def owner() -> str:
    """This worker process: host, process id and start time (so a later process given
    the same id is not taken for it)."""
    global _owner
    pid = os.getpid()
    if _owner is None or _owner[0] != pid:
        _owner = (pid, f"{socket.gethostname()[:64]}:{pid}:{_process_start(pid) or '-'}")
    return _owner[1]


def _worker_gone(job_owner: str) -> bool:
    """Whether the process named by ``job_owner`` (:func:`owner`) has ended, as far as
    this machine can tell (a process of another machine is never taken for gone)."""
    host, pid, started = job_owner.rsplit(":", 2)
    if host != socket.gethostname()[:64]:
        return False
    if os.path.exists("/proc/self/stat"):
        now_started = _process_start(int(pid))
        return now_started is None or (started != "-" and now_started != started)
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _stale(session: Session, row: JobRow, now: datetime, *, patience: float = 1.0) -> bool:
    """Whether ``row``, not ended, can no longer end: its worker is gone (on PostgreSQL, a
    worker of another process: no heartbeat for ``patience`` leases)."""
    if row.owner == owner():
        with _running_lock:
            return row.id not in _running
    if sql_repo.others_write_meanwhile(session=session):
        lease = get_settings().job_lease_s * patience
        return utc(row.heartbeat_at) < now - timedelta(seconds=lease)
    return _worker_gone(row.owner)


def _ended_values(session: Session, row: JobRow, now: datetime) -> dict[str, Any]:
    """What a stale job is written as: cancelled if that was asked (SQLite); else failed,
    with the reason this process knows (its own job's failure, not written when it
    happened), or what it can tell (the worker process ended; it stopped reporting)."""
    if cancels.requested(row.id):
        return {"state": "cancelled", "finished_at": now}
    with _running_lock:
        known = _unwritten.get(row.id)
    if known is not None:
        problem = known
    elif row.owner == owner() or not sql_repo.others_write_meanwhile(session=session):
        problem = _problem(ENDED)
    else:
        problem = _problem(SILENT.format(seconds=get_settings().job_lease_s))
    return {"state": "failed", "error": problem, "finished_at": now}


def _live(session: Session) -> bool:
    """Whether progress can be written while the re-rating's transaction is open: not on
    SQLite, whose one writer is that transaction."""
    return sql_repo.others_write_meanwhile(session=session)


# -- submitting ------------------------------------------------------------------------------


def pending(*, session: Session, ladder_id: str, now: datetime) -> bool:
    """Whether the ladder has a job that has not ended (and still can): a re-rating asked
    for now goes behind it as a job too, instead of holding its request while it waits."""
    return any(
        not _stale(session, row, now)
        for row in job_repo.unfinished_jobs(session=session, ladder_id=ladder_id)
    )


def submit(*, session: Session, rerating: Rerating, now: datetime) -> JobOut:
    """A new job for ``rerating``, queued (committed with the request's transaction; then
    :func:`start` it)."""
    row = JobRow(
        id=uuid.uuid4().hex,
        kind=rerating.kind,
        ladder_id=rerating.ladder_id,
        request=rerating.request,
        state="queued",
        done=0,
        total=None,
        result=None,
        error=None,
        owner=owner(),
        created_at=now,
        started_at=None,
        finished_at=None,
        heartbeat_at=now,
    )
    job_repo.add_job(session=session, row=row._asdict())
    return _out(row)


def start(job_id: str, *, transact: Transact) -> None:
    """Run the job submitted as ``job_id`` (committed) in a thread of this process."""
    with _running_lock:
        _running[job_id] = (0, None)
    threading.Thread(
        target=_run, args=(job_id, transact), name=f"job-{job_id[:8]}", daemon=True
    ).start()


# -- running ---------------------------------------------------------------------------------


class _Abandoned(Exception):
    """The job's row ended while it ran (cancelled, or reported failed when its heartbeat
    ran out): roll back."""


class _Cancelled(Exception):
    """The job was asked to stop (SQLite, :mod:`app.storage.cancels`): roll back."""


class _Reporter:
    """The progress callback of a job's re-rating (``rerate.Progress``): kept for this
    process, and on PostgreSQL written into the job's row from a short transaction of its
    own (the first report marks it running)."""

    def __init__(self, job_id: str, live: bool, transact: Transact) -> None:
        self.transact = transact
        self.job_id = job_id
        self.live = live
        self.started = False

    def __call__(self, done: int, total: int) -> None:
        with _running_lock:
            _running[self.job_id] = (done, total)
        if not self.live:
            if cancels.requested(self.job_id):
                raise _Cancelled
            return
        values: dict[str, Any] = {"done": done, "total": total, "heartbeat_at": _now()}
        if not self.started:
            values.update(state="running", started_at=values["heartbeat_at"])
            self.started = True
        if not _write(self.transact, self.job_id, values):  # cancelled, or reported failed
            raise _Abandoned


def _now() -> datetime:
    return datetime.now(UTC)


def _write(
    transact: Transact, job_id: str, values: dict[str, Any], beat_before: datetime | None = None
) -> bool:
    """``values`` into the job if it has not ended, in a short transaction of its own."""
    return transact(
        lambda session: job_repo.update_unfinished_job(
            session=session, job_id=job_id, values=values, beat_before=beat_before
        )
    )


def _cancel_statement(session: Session, *, pid: int) -> None:
    job_repo.cancel_backend_statement(session=session, pid=pid)


def _heartbeat(transact: Transact, job_id: str, stop: threading.Event) -> None:
    """Write the job's heartbeat every third of the lease until ``stop`` (PostgreSQL). A
    row that has ended meanwhile (the job was cancelled) stops the job's statement: its
    transaction fails and rolls back without waiting for its next progress report."""
    interval = get_settings().job_lease_s / 3
    while not stop.wait(interval):
        try:
            if not _write(transact, job_id, {"heartbeat_at": _now()}):
                with _running_lock:
                    pid = _backends.get(job_id)
                if pid is not None:
                    transact(partial(_cancel_statement, pid=pid))
                return
        except Exception as exc:  # a missed beat is retried at the next one
            _log.warning("job %s: heartbeat not written: %s", job_id, type(exc).__name__)


def _rerate(session: Session, now: datetime, *, job: JobRow, progress: _Reporter) -> BaseModel:
    ladder = ladders.get_ladder(session=session, ladder_id=job.ladder_id)
    if job.kind == "void":
        return rerate.void_match(
            session=session,
            ladder=ladder,
            match_id=job.request["match_id"],
            now=now,
            progress=progress,
            patient=True,
        )
    return rerate.update_ladder(
        session=session,
        ladder=ladder,
        body=LadderUpdate.model_validate(job.request),
        rebuild_now=True,
        now=now,
        progress=progress,
        patient=True,
    )


#: What a job's transaction runs: its work, given the session and the time.
_Step = Callable[[Session, datetime], BaseModel]


def _work(
    job: JobRow, reporter: _Reporter, step: _Step, started_at: datetime | None
) -> Callable[[Session], None]:
    """The job's transaction: ``step``, and its success written with what it changed.
    ``started_at``: when the job began, if before this transaction (a fit)."""

    def work(session: Session) -> None:
        now = _now()
        reporter.started = False
        pid = job_repo.backend_pid(session=session)
        if pid is not None:
            with _running_lock:
                _backends[job.id] = pid
        result = step(session, now)
        if not reporter.live and cancels.requested(job.id):
            raise _Cancelled
        with _running_lock:
            done, total = _running.get(job.id, (0, None))
        finished = {
            "state": "succeeded",
            "result": result.model_dump(mode="json"),
            "done": done,
            "total": total if total is not None else done,
            "started_at": now,
            "finished_at": _now(),
        }
        if started_at is not None:
            finished["started_at"] = started_at
        elif reporter.started:
            del finished["started_at"]  # written when it started
        if not job_repo.update_unfinished_job(session=session, job_id=job.id, values=finished):
            raise _Abandoned

    return work


def _run(job_id: str, transact: Transact) -> None:
    """The job's re-rating in one transaction (run again after a lost conflict, like any
    other), its success written in that transaction; a failure after it rolled back."""
    stop = threading.Event()
    try:
        job, live = transact(
            lambda session: (
                job_repo.get_job(session=session, job_id=job_id),
                _live(session),
            ),
            read_only=True,
        )
        if job is None:
            return
        if not live and cancels.requested(job_id):
            raise _Cancelled
        if live:
            threading.Thread(
                target=_heartbeat,
                args=(transact, job_id, stop),
                name=f"beat-{job_id[:8]}",
                daemon=True,
            ).start()
        else:
            _write(transact, job_id, {"state": "running", "started_at": _now()})
        reporter = _Reporter(job_id, live, transact)
        started_at = None
        step: _Step
        if job.kind == "fit":
            # The fit itself runs before the transaction, which only applies it (or not).
            started_at = _now()
            step = fitting.fit_job(
                ladder_id=job.ladder_id, request=job.request, progress=reporter, transact=transact
            )
        else:
            step = partial(_rerate, job=job, progress=reporter)
        transact(_work(job, reporter, step, started_at), bulk=True)
    except _Abandoned:
        _log.warning("job %s: ended by another (cancelled or reported failed); rolled back", job_id)
    except _Cancelled:
        _end(transact, job_id, {"state": "cancelled", "finished_at": _now()})
    except Exception as exc:
        _end(transact, job_id, {"state": "failed", "error": problem_of(exc), "finished_at": _now()})
    finally:
        stop.set()
        with _running_lock:
            _running.pop(job_id, None)
            _backends.pop(job_id, None)
        cancels.forget(job_id)


def _end(transact: Transact, job_id: str, values: dict[str, Any]) -> None:
    """Write how the job ended, after its transaction rolled back; if the database cannot
    take it now, the reaper writes it later, with this reason."""
    try:
        _write(transact, job_id, values)
    except Exception as again:
        _log.error("job %s: how it ended could not be written: %s", job_id, type(again).__name__)
        if values["state"] == "failed":
            with _running_lock:
                _unwritten[job_id] = values["error"]


def ladder_of_job(session: Session, job_id: str) -> str | None:
    """The ladder a job works on (None: no such job), for a key limited to some ladders."""
    row = job_repo.get_job(session=session, job_id=job_id)
    return None if row is None else row.ladder_id


def cancel(*, session: Session, job_id: str, now: datetime) -> tuple[JobOut, bool]:
    """Cancel a job that has not ended: nothing of it is applied. On PostgreSQL it is
    cancelled at once (its row says so; the job rolls back at its next progress report or
    heartbeat, and cannot commit before): ``(job, True)``. On SQLite, where the job is the
    one writer, it is asked to stop and writes its end itself: ``(job, False)``, poll it.
    An unknown job is a 404; one that has ended, a 409."""
    row = job_repo.get_job(session=session, job_id=job_id)
    if row is None:
        raise NotFound(f"job_id: no job {job_id[:64]!r}")
    if row.state not in UNFINISHED:
        raise Conflict(f"job_id: the job has ended ({row.state}); there is nothing to cancel")
    if not _live(session):
        cancels.request(row.id)
        return _out(row), False
    values = {"state": "cancelled", "finished_at": now}
    if not job_repo.update_unfinished_job(session=session, job_id=row.id, values=values):
        raise Conflict("job_id: the job has ended meanwhile; there is nothing to cancel")
    return _out(row._replace(state="cancelled", finished_at=now)), True


def cancel_writes() -> bool:
    """Whether :func:`cancel` writes (PostgreSQL) or only asks the job (SQLite, whose one
    writer a running job is): its request's transaction is a write or a read."""
    return on_postgres(get_settings().database_url)


def reap(now: datetime, *, transact: Transact) -> int:
    """Write every stale job as ended (:func:`_ended_values`), whoever asks after it; how
    many. On PostgreSQL a job of another process is reaped after two leases without a
    heartbeat, so that its own worker, if it lives, writes the reason it knows first."""
    stale = transact(
        lambda session: [
            (row, _ended_values(session, row, now))
            for row in job_repo.every_unfinished_job(session=session)
            if _stale(session, row, now, patience=1.0 if row.owner == owner() else 2.0)
        ],
        read_only=True,
    )
    for row, values in stale:
        _write(transact, row.id, values)
        with _running_lock:
            _unwritten.pop(row.id, None)
        cancels.forget(row.id)
    return len(stale)


def reaper(transact: Transact) -> Periodic:
    """The worker's thread that reaps stale jobs every third of the lease (:func:`reap`),
    so a job of a dead worker is reported ended without waiting for someone to poll it."""
    return Periodic(
        "job-reaper",
        max(0.5, get_settings().job_lease_s / 3),
        lambda: reap(_now(), transact=transact),
    )


# -- reading ---------------------------------------------------------------------------------


def view(*, session: Session, job_id: str, now: datetime, transact: Transact) -> JobOut:
    """The job; one whose worker is gone is failed (and written so)."""
    row = job_repo.get_job(session=session, job_id=job_id)
    if row is None:
        raise NotFound(f"job_id: no job {job_id[:64]!r}")
    if row.state in UNFINISHED:
        if _stale(session, row, now):
            cutoff = None
            if _live(session):
                cutoff = now - timedelta(seconds=get_settings().job_lease_s)
            _write(transact, row.id, _ended_values(session, row, now), beat_before=cutoff)
            row = cast(JobRow, _reread(transact, row.id))
        else:
            with _running_lock:
                local = _running.get(row.id)
            if local is not None and local[0] >= row.done:
                row = row._replace(done=local[0], total=local[1])
    return _out(row)


def _reread(transact: Transact, job_id: str) -> JobRow | None:
    return transact(
        lambda session: job_repo.get_job(session=session, job_id=job_id), read_only=True
    )


def _problem(detail: str) -> dict[str, Any]:
    return {"type": "/problems/job-abandoned", "title": "Job Abandoned", "status": 503} | {
        "detail": detail
    }


def _out(row: JobRow) -> JobOut:
    result: VoidResult | LadderUpdated | FitOutcome | None = None
    if row.result is not None:
        if row.kind == "void":
            result = VoidResult.model_validate(row.result)
        elif row.kind == "fit":
            result = FitOutcome.model_validate(row.result)
        else:
            result = LadderUpdated.model_validate(row.result)
    return JobOut(
        id=row.id,
        kind=cast(Any, row.kind),
        ladder=row.ladder_id,
        state=cast(Any, row.state),
        progress=JobProgress(done=row.done, total=row.total),
        result=result,
        error=JobProblem.model_validate(row.error) if row.error is not None else None,
        created_at=utc(row.created_at),
        started_at=utc(row.started_at) if row.started_at is not None else None,
        finished_at=utc(row.finished_at) if row.finished_at is not None else None,
    )
