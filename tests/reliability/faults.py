"""Fault injection for the reliability tests; inert unless ``RATINGS_FAULT_HOOK`` names a hook.

``pause-after-history`` holds a transaction open at the worst moment: every
row of a match (the match, its participants, the rating history, the new ratings) has
been written, and the COMMIT has not been sent. It creates the file named by
``RATINGS_FAULT_SIGNAL`` (holding the process id) so that a test knows the moment has come,
then waits until a file of the same name plus ``.release`` exists. A test kills the server
meanwhile (SIGKILL) and checks that nothing of the match survives, or creates the release
file to let the commit go through.

``pause-in-opening-step`` pauses the same way at the commit of a step of a season's opening
(its reset players written, the opening moved on to the next step), for a test that kills
the worker running the opening.

``conflict-after-history`` makes the first ``RATINGS_FAULT_TIMES`` (default 1) transactions
that write a match's history fail right after with a real serialization failure (SQLSTATE
40001; on SQLite "database is locked"), as if they had lost a conflict with another
transaction, to prove that such a transaction is run again (``app/storage/unit_of_work.py``).

It works from SQLAlchemy engine events, so no code path of the service changes: an
``after_cursor_execute`` listener notes on the connection that a match's history or new
ratings were written (see ``_MATCH_WRITES``), and a ``commit`` listener (called before the
COMMIT is sent) pauses such a transaction. The servers the reliability tests start run
``tests.reliability.served:app``, which calls :func:`install_from_environment` (with the
variable unset it installs nothing); the service itself never loads this module.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

#: The environment variable naming the hook to install.
HOOK_ENV = "RATINGS_FAULT_HOOK"
#: The file the hook creates when it pauses (``<file>.release`` lets it go on).
SIGNAL_ENV = "RATINGS_FAULT_SIGNAL"
#: How many transactions ``conflict-after-history`` fails.
TIMES_ENV = "RATINGS_FAULT_TIMES"
#: The hooks.
PAUSE_AFTER_HISTORY = "pause-after-history"
PAUSE_IN_OPENING = "pause-in-opening-step"
CONFLICT_AFTER_HISTORY = "conflict-after-history"
HOOKS = (PAUSE_AFTER_HISTORY, PAUSE_IN_OPENING, CONFLICT_AFTER_HISTORY)

_FLAG = "faults.history_written"
_POLL_SECONDS = 0.02


def _note_history(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> None:
    if _is_history_insert(statement):
        conn.info[_FLAG] = True


#: Statements that write a match's rating history or its new ratings. On PostgreSQL the
#: history rows go in by ``COPY`` on the driver's cursor, which no engine event sees; the
#: ratings UPDATE that follows them in the same transaction is seen on both databases; a
#: group of single matches on PostgreSQL writes all its rows in one statement
#: (``app.storage.repositories.recording.write_recorded``).
_MATCH_WRITES = ("INSERT INTO RATING_HISTORY", "UPDATE RATINGS ", "WITH MATCHES_WRITTEN AS (")


def _is_history_insert(statement: str) -> bool:
    return statement.lstrip()[:64].upper().startswith(_MATCH_WRITES)


def _note_opening_step(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> None:
    """A season opening's step moves the opening on (``seasons.move_opening``)."""
    if statement.lstrip()[:64].upper().startswith("UPDATE SEASON_OPENINGS"):
        conn.info[_FLAG] = True


class _Conflict:
    """The ``after_cursor_execute`` listener failing the first ``times`` match writes."""

    def __init__(self, times: int) -> None:
        self.remaining = times

    def __call__(
        self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        if self.remaining <= 0 or not _is_history_insert(statement):
            return
        self.remaining -= 1
        if conn.dialect.name == "postgresql":
            cursor.execute(
                "DO $$ BEGIN RAISE EXCEPTION 'injected conflict' USING ERRCODE = '40001'; END $$"
            )
        raise conn.dialect.loaded_dbapi.OperationalError("database is locked")


def _forget(conn: Any) -> None:
    conn.info.pop(_FLAG, None)


class _Pause:
    """The ``commit`` listener: signal, then wait for the release file."""

    def __init__(self, signal_file: Path) -> None:
        self.signal_file = signal_file
        self.release_file = signal_file.with_name(signal_file.name + ".release")

    def __call__(self, conn: Any) -> None:
        if not conn.info.pop(_FLAG, False):
            return
        self.signal_file.write_text(str(os.getpid()), encoding="utf-8")
        while not self.release_file.exists():
            time.sleep(_POLL_SECONDS)


_installed: list[tuple[str, Any]] = []


def install(hook: str, signal_file: Path | None = None, times: int = 1) -> None:
    """Install ``hook`` on every engine of this process, replacing any installed before."""
    uninstall()
    listeners: list[tuple[str, Any]]
    pauses = {PAUSE_AFTER_HISTORY: _note_history, PAUSE_IN_OPENING: _note_opening_step}
    if hook in pauses:
        if signal_file is None:
            raise ValueError(f"{SIGNAL_ENV}: must name a file for {hook}")
        listeners = [
            ("after_cursor_execute", pauses[hook]),
            ("rollback", _forget),
            ("commit", _Pause(signal_file)),
        ]
    elif hook == CONFLICT_AFTER_HISTORY:
        listeners = [("after_cursor_execute", _Conflict(times))]
    else:
        raise ValueError(f"{HOOK_ENV}: unknown fault hook {hook!r}; known: {', '.join(HOOKS)}")
    for name, listener in listeners:
        event.listen(Engine, name, listener)
    _installed.extend(listeners)


def uninstall() -> None:
    """Remove the installed hook, if any."""
    while _installed:
        name, listener = _installed.pop()
        event.remove(Engine, name, listener)


def install_from_environment() -> None:
    """Install the hook named by ``RATINGS_FAULT_HOOK``; nothing when it is unset."""
    hook = os.environ.get(HOOK_ENV, "")
    if not hook:
        return
    signal_file = os.environ.get(SIGNAL_ENV, "")
    install(hook, Path(signal_file) if signal_file else None, int(os.environ.get(TIMES_ENV, "1")))
