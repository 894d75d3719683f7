"""Cancelling a job on SQLite: a flag beside the database file.

On PostgreSQL a cancelled job's row says so at once (``DELETE /v1/jobs/{id}`` writes it in
its own transaction, beside the job's): the job finds it at its next progress report and
rolls back. SQLite has one writer at a time, and a running job is that writer, so nothing
can be written while it runs: the request to stop is a file in a folder beside the
database (every worker of a SQLite deployment shares its machine), which the job looks
for at each progress report, and which it removes when it ends. A database without a file
(in memory) keeps the requests of this process only.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from app.config import get_settings
from app.storage.engine import sqlite_file

_requested: set[str] = set()
_lock = threading.Lock()


def _folder() -> Path | None:
    path = sqlite_file(get_settings().database_url)
    return None if path is None else path.with_name(path.name + "-cancel")


def request(job_id: str) -> None:
    """Ask the job to stop (it rolls back at its next progress report)."""
    with _lock:
        _requested.add(job_id)
    folder = _folder()
    if folder is not None:
        folder.mkdir(exist_ok=True)
        (folder / job_id).touch()


def requested(job_id: str) -> bool:
    """Whether the job was asked to stop."""
    with _lock:
        if job_id in _requested:
            return True
    folder = _folder()
    return folder is not None and (folder / job_id).exists()


def forget(job_id: str) -> None:
    """The job has ended: its request goes."""
    with _lock:
        _requested.discard(job_id)
    folder = _folder()
    if folder is not None:
        with contextlib.suppress(FileNotFoundError):
            (folder / job_id).unlink()
