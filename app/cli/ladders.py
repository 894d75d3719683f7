"""``ratings import`` and ``ratings rebuild``: load a match file into a ladder, replay a
ladder from its first match."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from app.api.schemas import MAX_BATCH, MAX_BATCH_SLOTS
from app.cli.base import CommandError, transaction
from app.storage.engine import get_engine, schema_is_current, session_factory


def cmd_import(args: argparse.Namespace) -> int:
    from app.services.importer import ImportFailed, import_matches

    path = Path(args.file)
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    engine = get_engine()
    if not schema_is_current(engine):
        raise CommandError(
            "the database schema is not at the newest migration: run `ratings migrate` first"
        )
    try:
        summary = import_matches(
            sessions=session_factory(engine),
            ladder_id=args.ladder,
            path=path,
            chunk=args.chunk,
            progress=True if args.progress else None,
        )
    except ImportFailed as exc:
        raise CommandError(f"import stopped: {exc}") from None
    print(summary.text())
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from app.services import ladders, rerate

    now = datetime.now(UTC)
    result = transaction(
        lambda session: rerate.rebuild(
            session=session,
            ladder=ladders.get_ladder(session=session, ladder_id=args.ladder),
            now=now,
        )
    )
    print(
        f"ladder {result.ladder}: {result.matches_rerated:,} matches replayed, "
        f"{result.players:,} players rated"
    )
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import`` and ``rebuild`` to the ``ratings`` command."""
    load = commands.add_parser(
        "import",
        help="record the matches of a JSON Lines file (.gz too) into a ladder",
        description="Each line is the body of POST /v1/ladders/{ladder}/matches. Matches are "
        "applied in file order, a chunk per transaction; matches already recorded (same "
        "match_id and body) are skipped, so a stopped import can be run again. A bad line "
        "stops the import: nothing of its chunk is written, earlier chunks stay.",
    )
    load.add_argument("file", help="JSON Lines file, optionally gzip-compressed (.gz)")
    load.add_argument("--ladder", required=True, help="the ladder's id (it must exist)")
    load.add_argument(
        "--chunk",
        type=int,
        default=MAX_BATCH,
        help=f"matches per transaction, 1 to {MAX_BATCH:,} (the default); a chunk also "
        f"holds at most {MAX_BATCH_SLOTS:,} players in all, as a batch does",
    )
    load.add_argument(
        "--progress",
        action="store_true",
        help="show a progress bar on stderr even when it is not a terminal",
    )
    load.set_defaults(func=cmd_import)

    rebuild = commands.add_parser(
        "rebuild",
        help="replay every match of a ladder from the start (after a parameter change)",
    )
    rebuild.add_argument("--ladder", required=True, help="the ladder's id")
    rebuild.set_defaults(func=cmd_rebuild)
