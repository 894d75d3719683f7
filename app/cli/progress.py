"""How the command line shows progress: on standard error, with ``--progress`` or when
standard error is a terminal. Progress bars (tqdm) count what a long command has done; a
fit reports each replay of a candidate. Commands pass these down as callbacks: nothing
below the command line prints."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

from tqdm import tqdm


def wanted(flag: bool | None) -> bool:
    """Whether to show progress: ``--progress``, or standard error is a terminal."""
    return bool(flag) or sys.stderr.isatty()


class Bars:
    """Progress bars on standard error, one per label, each closed when the next label
    comes (nothing at all when not ``shown``). Called as ``(label, done, total, note)``:
    how much is done (not how much more), of how much."""

    def __init__(self, *, unit: str, shown: bool, **options: Any) -> None:
        self.unit = unit
        self.shown = shown
        self.options = options
        self._label: str | None = None
        self._bar: tqdm[Any] | None = None

    def __call__(self, label: str, done: int, total: int | None, note: str = "") -> None:
        if not self.shown:
            return
        if label != self._label:
            self.close()
            self._label = label
            self._bar = tqdm(
                total=total, desc=label, unit=self.unit, file=sys.stderr, **self.options
            )
        assert self._bar is not None
        if note:
            self._bar.set_postfix_str(note, refresh=False)
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._label = None

    def __enter__(self) -> Bars:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


#: What a fit reports after each replay of a candidate: its name, the replay's number,
#: the values tried and the log loss they gave.
EvaluationReport = Callable[[str, int, dict[str, float], float], None]


def evaluation_reporter(shown: bool) -> EvaluationReport | None:
    """What ``--progress`` prints after each replay of a candidate (None: nothing)."""
    if not shown:
        return None

    def report(name: str, count: int, values: dict[str, float], loss: float) -> None:
        prefix = f"{name} " if name else ""
        described = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
        print(f"  {prefix}evaluation {count}: {described}: log loss {loss:.5f}", file=sys.stderr)

    return report
