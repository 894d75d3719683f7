"""``ratings ladders create | list``: make a ladder and list them, as ``POST /v1/ladders``
and ``GET /v1/ladders`` do; ``ratings ladders blocks``: cut a ladder's full rating blocks;
``ratings import`` and ``ratings rebuild``: load a match file
into a ladder, replay a ladder from its first match."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.cli.base import CommandError, open_database, print_table, transaction
from app.cli.progress import Bars, wanted
from app.domain.documents.ladders import LadderCreate, LadderOut
from app.domain.documents.matches import MAX_BATCH, MAX_BATCH_SLOTS
from app.domain.documents.shared import MAX_PAGE, Algorithm
from app.domain.jsontext import DuplicateKey, unique_keys
from app.domain.ladders import LADDER_ID
from app.errors import InvalidInput, NotFound, validation_detail
from app.services import ladders
from app.storage.engine import session_factory
from app.storage.unit_of_work import transactor

ALGORITHMS: tuple[str, ...] = get_args(Algorithm)


def _params(text: str | None) -> Any:
    """The ``--params`` JSON (an object is expected; the body's schema says what else is
    wrong), read as the API reads a body: a key twice in one object is refused."""
    if text is None:
        return {}
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise InvalidInput(
            f"params: the key {str(exc)[:64]!r} appears twice in one object"
        ) from None
    except ValueError as exc:
        raise InvalidInput(f"params: not valid JSON ({exc})") from None


def _body(args: argparse.Namespace) -> LadderCreate:
    """The body ``POST /v1/ladders`` would take, checked by its own schema."""
    body: dict[str, Any] = {
        "id": args.id,
        "algorithm": args.algorithm,
        "params": _params(args.params),
    }
    if args.description is not None:
        body["description"] = args.description
    try:
        return LadderCreate.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(validation_detail(exc.errors(include_input=False))) from None


def cmd_ladders_create(args: argparse.Namespace) -> int:
    body = _body(args)
    now = datetime.now(UTC)
    ladder, created = transaction(
        lambda session: ladders.create_ladder(session=session, body=body, now=now)
    )
    if created:
        print(f"made ladder {ladder.id!r} ({ladder.algorithm})", file=sys.stderr)
    else:
        print(f"ladder {ladder.id!r} exists with this configuration already", file=sys.stderr)
    print(json.dumps(ladder.model_dump(mode="json"), indent=2))
    return 0


def _every_ladder(session: Session) -> list[LadderOut]:
    """Every ladder, by id, page after page of ``GET /v1/ladders`` in one transaction."""
    entries: list[LadderOut] = []
    cursor = None
    while True:
        page = ladders.list_ladders(session=session, limit=MAX_PAGE, cursor=cursor)
        entries.extend(page.entries)
        if page.next_cursor is None:
            return entries
        cursor = page.next_cursor


def cmd_ladders_list(args: argparse.Namespace) -> int:
    entries = transaction(_every_ladder, read_only=True)
    if args.json:
        print(json.dumps([entry.model_dump(mode="json") for entry in entries], indent=2))
        return 0
    header = ("ID", "ALGORITHM", "PLAYERS", "MATCHES", "CREATED", "DESCRIPTION")
    table = [
        (
            entry.id,
            entry.algorithm,
            f"{entry.players:,}",
            f"{entry.matches:,}",
            entry.created_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
            entry.description or "-",
        )
        for entry in entries
    ]
    print_table(header, table)
    return 0


def _ladder_exists(ladder_id: str) -> None:
    """A ``CommandError`` saying how to make the ladder when there is none of this id."""
    try:
        transaction(
            lambda session: ladders.get_ladder(session=session, ladder_id=ladder_id),
            read_only=True,
        )
    except NotFound:
        if not LADDER_ID.fullmatch(ladder_id):
            raise CommandError(
                f"no ladder {ladder_id[:64]!r}: a ladder id is 1 to 64 of [a-z0-9_-]"
            ) from None
        raise CommandError(
            f"no ladder {ladder_id!r}: make it first with `ratings ladders create "
            f"{ladder_id} --algorithm {'|'.join(ALGORITHMS)}`"
        ) from None


def cmd_import(args: argparse.Namespace) -> int:
    from app.services.importer import ImportFailed, import_matches

    path = Path(args.file)
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    engine = open_database()
    _ladder_exists(args.ladder)
    bars = Bars(unit="B", shown=wanted(args.progress), unit_scale=True, unit_divisor=1024)
    try:
        with bars:
            summary = import_matches(
                transact=transactor(session_factory(engine)),
                ladder_id=args.ladder,
                path=path,
                chunk=args.chunk,
                on_progress=lambda done, total, note: bars("", done, total, note),
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
            patient=True,
        )
    )
    print(
        f"ladder {result.ladder}: {result.matches_rerated:,} matches replayed, "
        f"{result.players:,} players rated"
    )
    return 0


def cmd_ladders_blocks(args: argparse.Namespace) -> int:
    open_database()
    _ladder_exists(args.ladder)
    cut = transaction(
        lambda session: ladders.cut_rating_blocks(session=session, ladder_id=args.ladder)
    )
    print(f"ladder {args.ladder}: {cut:,} rating blocks cut")
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ladders create | list | blocks``, ``import`` and ``rebuild`` to the ``ratings``
    command."""
    group = commands.add_parser("ladders", help="make and list ladders").add_subparsers(
        dest="ladders_command", required=True, metavar="ACTION"
    )
    create = group.add_parser(
        "create",
        help="make a ladder (as POST /v1/ladders); prints it as JSON",
        description="Make a ladder, every parameter not given taking its default; the "
        "ladder is printed as JSON on stdout. The same id with the same configuration "
        "again changes nothing; with another configuration it is refused.",
    )
    create.add_argument("id", metavar="ID", help="the ladder's id: 1 to 64 of [a-z0-9_-]")
    create.add_argument(
        "--algorithm", required=True, metavar="NAME", help=f"one of {', '.join(ALGORITHMS)}"
    )
    create.add_argument(
        "--params",
        metavar="JSON",
        help="a JSON object of parameters, e.g. '{\"draw_probability\": 0.05}' (default: {})",
    )
    create.add_argument("--description", help="what the ladder is, for people")
    create.set_defaults(func=cmd_ladders_create)
    listing = group.add_parser("list", help="list every ladder with its counts")
    listing.add_argument("--json", action="store_true", help="JSON instead of a table")
    listing.set_defaults(func=cmd_ladders_list)
    cut = group.add_parser(
        "blocks",
        help="cut the ladder's full rating blocks (after loading ratings by SQL)",
        description="A rank among many players who share a rating counts them by blocks of "
        "player ids. The service cuts a block that grew large by itself, now and then after "
        "a write; ratings loaded straight into the database wait for the next writes. This "
        "cuts every full block of the ladder at once. The ladder's writers wait meanwhile.",
    )
    cut.add_argument("ladder", metavar="LADDER", help="the ladder's id")
    cut.set_defaults(func=cmd_ladders_blocks)

    load = commands.add_parser(
        "import",
        help="record the matches of a JSON Lines file (.gz too) into a ladder",
        description="Each line is the body of POST /v1/ladders/{ladder}/matches. Matches are "
        "applied in file order, a chunk per transaction; matches already recorded (same "
        "match_id and body) are skipped, so a stopped import can be run again. A bad line "
        "stops the import: nothing of its chunk is written, earlier chunks stay.",
    )
    load.add_argument("file", help="JSON Lines file, optionally gzip-compressed (.gz)")
    load.add_argument(
        "--ladder",
        required=True,
        help="the ladder's id (it must exist: `ratings ladders create` makes it)",
    )
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
