"""A worker's periodic chores (reaping stale jobs, opening due seasons): a thread that runs
one every so often until the worker stops."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from app.config import get_settings

_log = logging.getLogger(__name__)


class Periodic:
    """A daemon thread of the worker that calls ``tick`` every ``interval`` seconds until
    :meth:`stop`. A tick that fails is logged and the next one tries again (the database
    may be away for a while)."""

    def __init__(self, name: str, interval: float, tick: Callable[[], object]) -> None:
        self.name = name
        self.interval = interval
        self.tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stopping(self) -> bool:
        """Whether the worker is stopping: a long tick stops between its steps."""
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception as exc:
                _log.warning("%s: failed: %s", self.name, type(exc).__name__)


def lease() -> timedelta:
    """How long the worker running a scheduled pass in steps (a season's opening, an
    inactivity pass) holds it after its last step: once it has passed, another worker of any
    instance takes the rest over (``RATINGS_SCHEDULED_LEASE_S``)."""
    return timedelta(seconds=get_settings().scheduled_lease_s)
