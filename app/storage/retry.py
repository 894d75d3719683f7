"""Which database errors call for running the whole transaction again
(``app.storage.unit_of_work`` does), how often, and the counter of such runs.

PostgreSQL aborts one of two transactions that wait on each other (SQLSTATE 40P01) and, at
stricter isolation levels, a transaction whose reads went stale (40001); SQLite answers
"database is locked" when a writer waited longer than the busy timeout.
"""

from __future__ import annotations

from prometheus_client import Counter

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


def retry_reason(error: BaseException) -> str | None:
    """Why ``error`` (a DB-API exception) calls for running the transaction again, if it does."""
    state = getattr(error, "sqlstate", None)
    if state in _SQLSTATES:
        return _SQLSTATES[state]
    if type(error).__name__ == "OperationalError" and "database is locked" in str(error):
        return "sqlite_locked"
    return None
