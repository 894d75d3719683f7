"""A minimal progress bar on stderr, drawn only on a terminal or when asked for."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``update(done)`` redraws ``label [#####.....] done/total`` at most ~10 times a second."""

    def __init__(self, total: int, label: str, *, enabled: bool, stream: TextIO | None = None):
        self.total = max(total, 1)
        self.label = label
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._last = 0.0
        self._shown = -1

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done == self._shown or (now - self._last < 0.1 and done < self.total):
            return
        self._last = now
        self._shown = done
        width = 30
        filled = int(width * done / self.total)
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.update(self.total)
            self.stream.write("\n")
            self.stream.flush()


def wanted(flag: bool, stream: TextIO | None = None) -> bool:
    """Draw progress with ``--progress`` or when ``stream`` (default stderr) is a terminal."""
    stream = stream if stream is not None else sys.stderr
    return flag or bool(getattr(stream, "isatty", lambda: False)())
