"""``ratings seasons list | start``: a ladder's seasons, and opening the next one with the
soft reset, as ``GET`` and ``POST /v1/ladders/{ladder}/seasons`` do."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.cli.base import print_table, transaction, transactor
from app.domain.documents.seasons import SeasonCreate, SeasonOut
from app.errors import InvalidInput, validation_detail
from app.services import ladders, seasons


def _every_season(session: Session, ladder_id: str) -> list[SeasonOut]:
    """Every season of the ladder, newest first, page after page in one transaction."""
    ladder = ladders.get_ladder(session=session, ladder_id=ladder_id, detached=True)
    entries: list[SeasonOut] = []
    cursor = None
    while True:
        page = seasons.list_seasons(session=session, ladder=ladder, limit=1000, cursor=cursor)
        entries.extend(page.entries)
        cursor = page.next_cursor
        if cursor is None:
            return entries


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def cmd_seasons_list(args: argparse.Namespace) -> int:
    entries = transaction(lambda session: _every_season(session, args.ladder), read_only=True)
    if args.json:
        print(json.dumps([entry.model_dump(mode="json") for entry in entries], indent=2))
        return 0
    header = ("ID", "STATE", "KEEP", "STARTED", "ENDED", "MATCHES", "PLAYERS")
    table = [
        (
            entry.id,
            entry.state,
            f"{entry.keep:g}",
            _when(entry.started_at),
            _when(entry.ended_at),
            f"{entry.matches:,}",
            f"{entry.players:,}",
        )
        for entry in entries
    ]
    print_table(header, table)
    return 0


def cmd_seasons_start(args: argparse.Namespace) -> int:
    try:
        body = SeasonCreate.model_validate({"id": args.id, "keep": args.keep})
    except ValidationError as exc:
        raise InvalidInput(validation_detail(exc.errors(include_input=False))) from None
    now = datetime.now(UTC)

    owner = seasons.new_owner()

    def work(session: Session) -> SeasonOut:
        ladder = ladders.get_ladder(session=session, ladder_id=args.ladder)
        return seasons.open_season(session=session, ladder=ladder, body=body, now=now, owner=owner)

    season = transaction(work)
    if season.opening:
        season = seasons.settle_opening(transact=transactor(), ladder_id=args.ladder, owner=owner)
    print(
        f"opened season {season.id!r} of ladder {args.ladder!r}: {season.players:,} ratings "
        f"reset with keep {season.keep:g}",
        file=sys.stderr,
    )
    print(json.dumps(season.model_dump(mode="json"), indent=2))
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``seasons list | start`` to the ``ratings`` command."""
    group = commands.add_parser(
        "seasons", help="list a ladder's seasons, open the next"
    ).add_subparsers(dest="seasons_command", required=True, metavar="ACTION")
    listing = group.add_parser("list", help="list a ladder's seasons, newest first")
    listing.add_argument("ladder", metavar="LADDER", help="the ladder's id")
    listing.add_argument("--json", action="store_true", help="JSON instead of a table")
    listing.set_defaults(func=cmd_seasons_list)
    start = group.add_parser(
        "start",
        help="close the current season and open the next (as POST .../seasons)",
        description="Close the ladder's current season, archive its standings and open the "
        "next: every rating is pulled toward the prior by KEEP (mu' = mu0 + keep (mu - mu0), "
        "sigma'^2 = keep sigma^2 + (1 - keep) sigma0^2). The season is printed as JSON. The "
        "ladder's writers wait meanwhile.",
    )
    start.add_argument("ladder", metavar="LADDER", help="the ladder's id")
    start.add_argument("id", metavar="SEASON", help="the new season's id (unique in the ladder)")
    start.add_argument(
        "--keep",
        type=float,
        default=None,
        help="how much of each rating carries over, 0 to 1 (default: the ladder's "
        "season_keep, itself 1: unchanged)",
    )
    start.set_defaults(func=cmd_seasons_start)
