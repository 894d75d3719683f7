"""``ratings export matches | ratings --ladder ID [--output FILE]``: a ladder's counted
matches (each line a body ``ratings import`` reads back) or its ratings, as NDJSON, the
same lines as ``GET /v1/ladders/{ladder}/export/...``."""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, cast

from sqlalchemy.orm import Session

from app.cli.base import CommandError, open_database
from app.services import exports
from app.storage import unit_of_work
from app.storage.engine import session_factory

_LINES: dict[str, Callable[[Session, str], Iterator[bytes]]] = {
    "matches": exports.match_lines,
    "ratings": exports.rating_lines,
}


def _output(path: str | None) -> BinaryIO:
    if path is None or path == "-":
        return sys.stdout.buffer
    target = Path(path)
    try:
        if target.name.endswith(".gz"):
            return cast(BinaryIO, gzip.open(target, "wb"))
        return target.open("wb")
    except OSError as exc:
        raise CommandError(f"{target}: cannot write: {exc.strerror or exc}") from None


def cmd_export(args: argparse.Namespace) -> int:
    lines = _LINES[args.what]
    engine = open_database()
    chunks = unit_of_work.streamed(
        lambda session: lines(session, args.ladder), session_factory=session_factory(engine)
    )
    # The ladder is looked up (a 404 is the operator's error) before the file is made.
    first = next(chunks, None)
    out = _output(args.output)
    try:
        if first is not None:
            out.write(first)
        for chunk in chunks:
            out.write(chunk)
        out.flush()
    finally:
        chunks.close()
        if out is not sys.stdout.buffer:
            out.close()
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``export matches | ratings`` to the ``ratings`` command."""
    export = commands.add_parser(
        "export",
        help="write a ladder's matches (to import again) or ratings as NDJSON",
        description="Write a ladder's matches that count, in the order it rated them, each "
        "line a match body `ratings import` reads back (a new ladder with the same "
        "parameters gets the same ratings), or every player's rating. Read in one "
        "snapshot of the database, a page at a time.",
    )
    export.add_argument("what", choices=sorted(_LINES), help="matches or ratings")
    export.add_argument("--ladder", required=True, help="the ladder's id")
    export.add_argument(
        "--output", "-o", help="the file to write (.gz: gzip-compressed); default stdout"
    )
    export.set_defaults(func=cmd_export)
