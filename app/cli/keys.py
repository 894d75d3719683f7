"""``ratings keys create | list | revoke``: API keys, never shown again after they are made."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from app.cli.base import print_table, transaction
from app.services import auth


def _stamp(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z") if moment else "-"


def cmd_keys_create(args: argparse.Namespace) -> int:
    new = transaction(
        lambda session: auth.create_key(
            session, name=args.name, scope=args.scope, ladders=args.ladders
        )
    )
    limited = f", limited to {', '.join(new.ladders)}" if new.ladders is not None else ""
    print(
        f"made key {new.name!r}, scope {new.scope}, prefix {new.prefix}{limited}", file=sys.stderr
    )
    print(new.key, flush=True)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    keys = transaction(auth.list_keys, read_only=True)
    if args.json:
        rows = [
            {
                "name": key.name,
                "scope": key.scope,
                "prefix": key.prefix,
                "created_at": _stamp(key.created_at),
                "last_used_at": _stamp(key.last_used_at) if key.last_used_at else None,
                "revoked_at": _stamp(key.revoked_at) if key.revoked_at else None,
                "ladders": key.ladders,
            }
            for key in keys
        ]
        print(json.dumps(rows, indent=2))
        return 0
    header = ("NAME", "SCOPE", "PREFIX", "CREATED", "LAST USED", "REVOKED", "LADDERS")
    table = [
        (
            key.name,
            key.scope,
            key.prefix,
            _stamp(key.created_at),
            _stamp(key.last_used_at),
            _stamp(key.revoked_at),
            ",".join(key.ladders) if key.ladders is not None else "all",
        )
        for key in keys
    ]
    print_table(header, table)
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    info = transaction(lambda session: auth.revoke_key(session, name_or_prefix=args.key))
    print(f"revoked key {info.name!r} ({info.prefix})", file=sys.stderr)
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``keys create | list | revoke`` to the ``ratings`` command."""
    keys = commands.add_parser("keys", help="API keys").add_subparsers(
        dest="keys_command", required=True, metavar="ACTION"
    )
    create = keys.add_parser("create", help="make a key; prints it once, alone, on stdout")
    create.add_argument("--scope", required=True, choices=auth.SCOPES)
    create.add_argument("--name", required=True, help="a name to recognise and revoke it by")
    create.add_argument(
        "--ladder",
        dest="ladders",
        action="append",
        metavar="LADDER",
        help="limit the key to this ladder's routes (repeat for several; default: every ladder)",
    )
    create.set_defaults(func=cmd_keys_create)
    listing = keys.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--json", action="store_true", help="JSON instead of a table")
    listing.set_defaults(func=cmd_keys_list)
    revoke = keys.add_parser("revoke", help="revoke a key at once, by name or prefix")
    revoke.add_argument("key", metavar="NAME_OR_PREFIX")
    revoke.set_defaults(func=cmd_keys_revoke)
