"""Group commit: the single-match POSTs waiting in a worker are written together.

A transaction costs far more than the matches in it (the round trips, the commit, the
fixed Python of a recording), so a worker writes whatever single matches are waiting, up
to ``RATINGS_WRITE_GROUP_MAX``, in ONE transaction (:func:`app.services.recording.record_group`),
in arrival order. One group is written at a time per worker: while it is, the next
requests queue, and they form the next group. A lone request on an idle worker finds
nobody writing and goes straight through, so grouping adds no wait when there is nothing
to group.

Each request is answered after its own group has committed, with exactly what it would
have got alone; a match that is refused (its key, its ladder, its outcome, another body
under a recorded match_id) is answered with its own error and the others commit. A
match_id that comes twice while both wait goes into the next group, where it finds the
first recorded. A conflict found only when the rows are written (the same match_id
committed meanwhile by another worker, with other players) rolls the group back and its
matches are written one transaction each, so it fails alone. Lost deadlocks and
serialization conflicts run the transaction again (:mod:`app.storage.unit_of_work`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from dataclasses import dataclass, field

from anyio import to_thread
from sqlalchemy.exc import IntegrityError

from app.api.metrics import WRITE_GROUP_SIZE
from app.services import recording
from app.services.recording import Answer, Submitted
from app.storage import consistency, unit_of_work

#: Runs of a lone match whose insert met a match_id committed meanwhile: the next run
#: finds it recorded and answers as a retry or a conflict.
LONE_RUNS = 3


@dataclass(eq=False)
class _Waiting:
    submitted: Submitted
    answer: asyncio.Future[tuple[Answer, int]] = field(repr=False)


def _record(group: list[Submitted]) -> list[Answer]:
    """``group`` in one transaction of the unit of work."""
    return unit_of_work.run(
        lambda session: recording.record_group(session=session, submitted=group)
    )


def _write(group: list[Submitted]) -> list[Answer]:
    """Write ``group`` in one transaction; after a write-time conflict, each alone."""
    try:
        return _record(group)
    except IntegrityError:
        if len(group) == 1:
            raise
    return [_write_alone(submitted) for submitted in group]


def _write_noted(group: list[Submitted]) -> tuple[list[Answer], int]:
    """:func:`_write`, and the log position its writes committed at (their answers'
    consistency token; 0 without a replica)."""
    with consistency.collecting() as written:
        return _write(group), written.position


def _write_alone(submitted: Submitted) -> Answer:
    for run in range(1, LONE_RUNS + 1):
        try:
            (answer,) = _record([submitted])
            return answer
        except IntegrityError:
            if run == LONE_RUNS:
                raise
    raise AssertionError("unreachable")


class GroupWriter:
    """The single-match POSTs of one worker, written in groups of at most ``max_group``."""

    def __init__(self, max_group: int, wait_s: float = 0.0) -> None:
        self.max_group = max_group
        self.wait_s = wait_s
        self._waiting: deque[_Waiting] = deque()
        self._writing = False
        self._task: asyncio.Task[None] | None = None

    async def record(self, submitted: Submitted) -> tuple[str, bool]:
        """Record one match with whatever else is waiting; its (result text, created), or
        its error raised."""
        waiting = _Waiting(submitted, asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        if not self._writing:
            self._writing = True
            # A context of its own: the writer serves every request that comes while it
            # runs, so it must not carry the context of the one that started it.
            self._task = asyncio.get_running_loop().create_task(
                self._drain(), context=contextvars.Context()
            )
        answer, position = await asyncio.shield(waiting.answer)
        if isinstance(answer, Exception):
            raise answer
        consistency.note(position)  # the request's own context: its answer's token
        return answer

    def _next_group(self) -> list[_Waiting]:
        """The first waiting matches, in arrival order, at most ``max_group``, no match_id
        of a ladder twice (a repeat waits for the next group)."""
        group: list[_Waiting] = []
        later: list[_Waiting] = []
        seen: set[tuple[str, str]] = set()
        while self._waiting and len(group) < self.max_group:
            waiting = self._waiting.popleft()
            match_id = waiting.submitted.body.match_id
            if match_id is not None:
                named = (waiting.submitted.ladder_id, match_id)
                if named in seen:
                    later.append(waiting)
                    continue
                seen.add(named)
            group.append(waiting)
        self._waiting.extendleft(reversed(later))
        return group

    async def _drain(self) -> None:
        try:
            busy = False
            while self._waiting:
                if busy and self.wait_s > 0 and len(self._waiting) < self.max_group:
                    # Under load the answers just sent bring their clients' next matches
                    # within a moment: wait for them, so that groups grow and each match
                    # costs less (a lone request never waits: busy is set by a group of two
                    # or more).
                    await asyncio.sleep(self.wait_s)
                group = self._next_group()
                busy = len(group) > 1
                WRITE_GROUP_SIZE.observe(len(group))
                try:
                    answers, position = await to_thread.run_sync(
                        _write_noted, [waiting.submitted for waiting in group]
                    )
                except Exception as exc:  # the database failed the whole group
                    for waiting in group:
                        if not waiting.answer.done():
                            waiting.answer.set_exception(exc)
                    continue
                for waiting, answer in zip(group, answers, strict=True):
                    if not waiting.answer.done():
                        waiting.answer.set_result((answer, position))
        finally:
            self._writing = False
