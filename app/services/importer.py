"""``ratings import``: load a JSON Lines file of match bodies into a ladder, in chunks.

Each line is exactly the body of ``POST /v1/ladders/{ladder}/matches`` (``.gz`` files are
read compressed). Every chunk is one transaction through the batch path
(``batches.record_matches``), so an import rates exactly as posting the matches would.
While a chunk is written, the next is parsed and rated from the ratings the chunk leaves
(``batches.rate_ahead``); its transaction writes those numbers only if, under the
players' locks, their ratings are the ones they were rated from and none of its match_ids
is recorded, and otherwise records the chunk as usual. Matches already recorded (by
``match_id``, with the same body) are skipped, so an import that stopped can simply be run
again. A bad line stops the import, naming its line number; nothing of its chunk is
written, the chunks before it stay.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TextIO

from sqlalchemy.orm import Session

from app.domain.documents.matches import MAX_BATCH, MAX_BATCH_SLOTS, MatchCreate
from app.domain.ladders import LADDER_ID
from app.domain.match_files import MatchFileError, match_lines, open_match_file
from app.errors import ProblemError
from app.services.batches import Ahead, rate_ahead, ratings_of, record_ahead, record_matches
from app.services.rating import MatchConflict, MatchRefused
from app.storage.models import Ladder
from app.storage.repositories import recording as recording_repo
from app.storage.repositories.ratings import RatingState
from app.storage.unit_of_work import Transact

#: Matches per transaction: the most a batch takes (fewer, larger transactions cost the
#: database less: 9,600 one-on-one matches a second into PostgreSQL against 8,900 at 5,000).
DEFAULT_CHUNK = MAX_BATCH
#: Parsed chunks the reading thread may hold ready ahead of the writer.
READ_AHEAD = 2
#: The interpreter's thread switch interval during an import, in seconds (Python's is
#: 5 ms): the writing thread, which mostly waits for the database, gets the interpreter
#: back soon after each answer instead of after the rating thread's 5 ms, and feeds the
#: database sooner. International football into PostgreSQL: 9,700 -> 10,000 matches a second.
SWITCH_INTERVAL_S = 0.001
#: Chunks handed to the writing thread and not yet committed: the importer rates the next
#: while the writer commits one and has the one after ready.
IN_FLIGHT = 2


class ImportFailed(Exception):
    """The import stopped; the message names the line and says what was kept."""


@dataclass
class Summary:
    """What an import did."""

    read: int = 0
    recorded: int = 0
    skipped: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.read / self.seconds if self.seconds > 0 else 0.0

    def text(self) -> str:
        return (
            f"matches read {self.read:,}, recorded {self.recorded:,}, skipped (already "
            f"recorded) {self.skipped:,}, in {self.seconds:.2f} s, {self.rate:,.0f} matches/s"
        )


def _chunks(lines: TextIO, size: int, path: str) -> Iterator[list[tuple[int, MatchCreate]]]:
    """The file's matches (``app.domain.match_files``: each line read as the API reads a
    match) with their line numbers, ``size`` at a time, and fewer where more would pass a
    batch's bound of player slots (``MAX_BATCH_SLOTS``)."""
    chunk: list[tuple[int, MatchCreate]] = []
    slots = 0
    matches = match_lines(lines, path)
    while True:
        try:
            found = next(matches, None)
        except MatchFileError as exc:
            number = exc.line or 0
            first = chunk[0][0] if chunk else number
            lines_of_chunk = f"lines {first}-{number}" if first < number else f"line {number}"
            raise ImportFailed(
                f"line {number}: {exc.message} (nothing of {lines_of_chunk} was written)"
            ) from None
        if found is None:
            break
        number, body = found
        players = sum(len(team) for team in body.teams)
        if chunk and slots + players > MAX_BATCH_SLOTS:
            yield chunk
            chunk, slots = [], 0
        chunk.append((number, body))
        slots += players
        if len(chunk) == size:
            yield chunk
            chunk, slots = [], 0
    if chunk:
        yield chunk


@dataclass
class _Parsed:
    """A chunk ready to write, and how far into the file its reading got."""

    lines: list[tuple[int, MatchCreate]]
    position: int


class _Reader:
    """Reads and validates chunks in a thread of its own, ``READ_AHEAD`` ahead of the writer.

    Recording a chunk spends much of its time waiting for the database (the COPY, the
    commit), and the driver lets go of the interpreter while it waits: the next chunk is
    parsed in that time instead of after it. What the reader meets (the chunks, then the
    end, a bad line or an unreadable file) reaches the writer in file order, so a bad line
    still stops the import after the chunks before it are written and before its own.
    """

    _END = object()

    def __init__(self, raw: IO[bytes], lines: TextIO, size: int, path: str) -> None:
        self._raw = raw
        self._lines = lines
        self._size = size
        self._path = path
        self._ready: queue.Queue[object] = queue.Queue(maxsize=READ_AHEAD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="import-reader", daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for part in _chunks(self._lines, self._size, self._path):
                if not self._put(_Parsed(part, self._raw.tell())):
                    return
            self._put(self._END)
        except BaseException as exc:  # handed to the writer, which raises it
            self._put(exc)

    def __iter__(self) -> Iterator[_Parsed]:
        while True:
            item = self._ready.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, _Parsed)
            yield item

    def close(self) -> None:
        """Stop reading (the writer stopped early, or finished) and wait for the thread."""
        self._stop.set()
        self._thread.join()


#: What an import reports as it goes: the bytes of the file read so far (compressed bytes
#: for ``.gz``), of how many (the one total known before the end), and a note of the
#: matches recorded.
ImportProgress = Callable[[int, int, str], None]


def _silent(done: int, total: int, note: str) -> None:
    return None


def import_matches(
    *,
    transact: Transact,
    ladder_id: str,
    path: Path,
    chunk: int = DEFAULT_CHUNK,
    on_progress: ImportProgress = _silent,
) -> Summary:
    """Import ``path`` into ``ladder_id``, a transaction of ``transact`` per chunk; tell
    ``on_progress`` how far it is. Raises ``ImportFailed`` on a bad line, after committing
    earlier chunks."""
    if not 1 <= chunk <= MAX_BATCH:
        raise ImportFailed(f"--chunk: must be 1 to {MAX_BATCH}")
    summary = Summary()
    started = time.perf_counter()
    try:
        raw, lines = open_match_file(path)
    except MatchFileError as exc:
        raise ImportFailed(str(exc)) from None
    size = os.fstat(raw.fileno()).st_size
    reader = _Reader(raw, lines, chunk, str(path))
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ratings-import")
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stop = threading.Event()
    pending: deque[Future[_Written]] = deque()
    try:
        ladder, algorithm, params = _ladder(transact, ladder_id)
        known: dict[str, RatingState] = {}
        for parsed in reader:
            bodies = [body for _, body in parsed.lines]
            numbers = [number for number, _ in parsed.lines]
            now = datetime.now(UTC)
            # Rated while the chunks before are written, from the ratings they will leave.
            ahead = rate_ahead(
                ladder=ladder,
                algorithm=algorithm,
                params=params,
                bodies=bodies,
                now=now,
                known=known,
            )
            while len(pending) >= IN_FLIGHT:
                done = _finish(pending.popleft(), summary)
                if done.after is not None:
                    # Recorded as usual: rate this one again from what it left (a chunk
                    # already queued behind it is checked under its locks as any is).
                    known.update(done.after)
                    ahead = rate_ahead(
                        ladder=ladder,
                        algorithm=algorithm,
                        params=params,
                        bodies=bodies,
                        now=now,
                        known=known,
                    )
            if ahead is not None:
                known.update(ahead.after)
            summary.read += len(bodies)
            pending.append(
                writer.submit(_write_chunk, transact, ladder_id, bodies, numbers, now, ahead, stop)
            )
            speed = summary.read / (time.perf_counter() - started)
            on_progress(parsed.position, size, f"{summary.read:,} matches, {speed:,.0f}/s")
        while pending:
            _finish(pending.popleft(), summary)
    finally:
        # Stopped early: the chunks in flight before the failure still commit or fail
        # whole; none after a failed one is written (``stop``).
        for future in pending:
            with contextlib.suppress(Exception):
                future.result()
        writer.shutdown()
        reader.close()
        sys.setswitchinterval(switch_interval)
        lines.close()
        summary.seconds = time.perf_counter() - started
    return summary


def _ladder(transact: Transact, ladder_id: str) -> tuple[Ladder, str, str]:
    """The ladder to import into, with its algorithm and parameters as stored."""
    found = transact(
        lambda session: recording_repo.key_and_ladder(
            session=session,
            key_hash="",
            ladder_id=ladder_id if LADDER_ID.fullmatch(ladder_id) else None,
        )
    )
    if found.algorithm is None or found.params is None:
        raise ImportFailed(f"ladder: no ladder {ladder_id[:64]!r}")
    ladder = Ladder(id=ladder_id, algorithm=found.algorithm, params=json.loads(found.params))
    return ladder, found.algorithm, found.params


@dataclass(frozen=True, slots=True)
class _Written:
    """A chunk's answers, and the ratings it left when it was not the chunk rated ahead
    (None: it was)."""

    results: list[tuple[str, bool]]
    after: dict[str, RatingState] | None


def _write_chunk(
    transact: Transact,
    ladder_id: str,
    bodies: list[MatchCreate],
    numbers: list[int],
    now: datetime,
    ahead: Ahead | None,
    stop: threading.Event,
) -> _Written:
    """One chunk, one transaction (the unit of work's): the ratings computed ahead if the
    players' ratings are still the ones they were computed from, else recorded as usual.
    Nothing after a chunk that failed (``stop`` set)."""
    if stop.is_set():
        raise ImportFailed("an earlier chunk failed")

    def work(session: Session) -> _Written:
        if ahead is not None:
            results = record_ahead(session=session, ahead=ahead)
            if results is not None:
                return _Written(results, None)
        results = record_matches(
            session=session,
            ladder_id=ladder_id,
            bodies=bodies,
            now=now,
            label=lambda index: f"line {numbers[index]}: ",
        )
        players = sorted({player for body in bodies for team in body.teams for player in team})
        return _Written(results, ratings_of(session=session, ladder_id=ladder_id, players=players))

    try:
        return transact(work, bulk=True)
    except (MatchRefused, MatchConflict) as exc:
        stop.set()
        raise ImportFailed(
            f"{exc.detail} (nothing of lines {numbers[0]}-{numbers[-1]} was written)"
        ) from None
    except ProblemError as exc:
        stop.set()
        raise ImportFailed(exc.detail) from None
    except BaseException:
        stop.set()
        raise


def _finish(pending: Future[_Written], summary: Summary) -> _Written:
    """Wait for the chunk in flight and count it."""
    done = pending.result()
    created = sum(1 for _, new in done.results if new)
    summary.recorded += created
    summary.skipped += len(done.results) - created
    return done
