"""Match files: JSON Lines, one match per line, each line exactly the body of
``POST /v1/ladders/{ladder}/matches`` (:class:`MatchCreate`), plain or gzip-compressed (a
name ending in ``.gz``). Blank lines are skipped.

The one reader of them: ``ratings import`` records what it reads, ``ratings evaluate`` and
``ratings fit`` rate it, and all three refuse a line the API would refuse, naming it, with
the API's reason. Offline (``bounded=False``: evaluate and fit) a match may be larger than
one request may be (64 teams, 256 players): a season of mass events of thousands of
entrants is evaluated, though it cannot be posted.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, ClassVar

from pydantic import Field, ValidationError

from app.domain.documents.matches import MatchCreate
from app.domain.documents.shared import REPEATED_PLAYER, PlayerId
from app.errors import validation_detail


class MatchFileError(ValueError):
    """A match file that cannot be read; the message names the file and the line."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class _OfflineMatch(MatchCreate):
    """A match as the API reads it, without the bounds of one request on its size."""

    max_players: ClassVar[int | None] = None
    teams: list[Annotated[list[PlayerId], Field(min_length=1)]] = Field(min_length=2)


def open_match_file(path: Path) -> tuple[IO[bytes], io.TextIOWrapper]:
    """The raw file (its position measures progress) and a text reader over it."""
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise MatchFileError(str(path), None, f"cannot open: {exc.strerror or exc}") from None
    if path.name.endswith(".gz"):
        return raw, io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8")
    return raw, io.TextIOWrapper(raw, encoding="utf-8")


def _repeats_a_player(exc: ValidationError) -> bool:
    """Whether the API refused the line only because a player appears twice in it."""
    return all(error.get("type") == REPEATED_PLAYER for error in exc.errors())


def match_lines(
    lines: IO[str], path: str, *, repeated: list[int] | None = None, bounded: bool = True
) -> Iterator[tuple[int, MatchCreate]]:
    """Each match of ``lines`` (a match file read as text: :func:`open_match_file`), with
    its line number. A line the API refuses stops the reading: :class:`MatchFileError`
    naming ``path``, the line and why. With ``repeated``, a match refused only because a
    player appears in it twice is left out instead and its line number noted there (a
    model of one belief per player cannot rate it: the shared drives of Formula 1). Not
    ``bounded``: a match may name more teams and players than a request may."""
    model = MatchCreate if bounded else _OfflineMatch
    number = 0
    while True:
        try:
            line = lines.readline()
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else f"cannot read: {exc}"
            raise MatchFileError(path, number + 1, reason) from None
        if not line:
            return
        number += 1
        if not line.strip():
            continue
        try:
            body = model.model_validate_json(line)
        except ValidationError as exc:
            if repeated is not None and _repeats_a_player(exc):
                repeated.append(number)
                continue
            raise MatchFileError(
                path, number, validation_detail(exc.errors(include_input=False))
            ) from None
        yield number, body
