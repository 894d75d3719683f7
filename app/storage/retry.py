"""Which database errors call for running the whole transaction again, and the mark they
leave on the request they were raised in (``app.api.retry`` runs such a request again).

PostgreSQL aborts one of two transactions that wait on each other (SQLSTATE 40P01) and, at
stricter isolation levels, a transaction whose reads went stale (40001); SQLite answers
"database is locked" when a writer waited longer than the busy timeout.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from prometheus_client import Counter
from sqlalchemy import Engine, event

#: Runs of one transaction in all, the first included.
MAX_ATTEMPTS = 3
#: The pause before a new run is uniform in [0, BACKOFF_S * run number).
BACKOFF_S = 0.05

RETRIES = Counter(
    "ratings_transaction_retries",
    "Transactions run again after they lost a deadlock or serialization conflict.",
    ["reason"],
)

_SQLSTATES = {"40P01": "deadlock", "40001": "serialization_failure"}

#: The mark of the request being run: a dict the ``handle_error`` listener writes the
#: reason into; None outside a request that can be run again.
marks: ContextVar[dict[str, str] | None] = ContextVar("ratings_retry_mark", default=None)


def retry_reason(error: BaseException) -> str | None:
    """Why ``error`` (a DB-API exception) calls for running the transaction again, if it does."""
    state = getattr(error, "sqlstate", None)
    if state in _SQLSTATES:
        return _SQLSTATES[state]
    if type(error).__name__ == "OperationalError" and "database is locked" in str(error):
        return "sqlite_locked"
    return None


def _on_error(context: Any) -> None:
    mark = marks.get()
    if mark is None:
        return
    reason = retry_reason(context.original_exception)
    if reason is not None:
        mark["reason"] = reason


if not event.contains(Engine, "handle_error", _on_error):
    event.listen(Engine, "handle_error", _on_error)
