"""The ``ratings`` command: serve the API, migrate the database, manage API keys.

Settings come from ``RATINGS_*`` environment variables (see ``app/config.py``);
``--database-url`` overrides ``RATINGS_DATABASE_URL`` for one command.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import json
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

import app.blas  # noqa: F401  (first of the app's imports: it must run before numpy loads)
from app.api.metrics import MULTIPROC_ENV
from app.config import GC_TUNING_ENV, get_settings
from app.errors import ProblemError
from app.evaluation.cli import add_parsers as add_evaluation_parsers
from app.services import auth
from app.storage.engine import (
    dispose_engines,
    get_engine,
    schema_is_current,
    session_factory,
    upgrade,
)

#: glibc malloc arenas per serving process unless ``MALLOC_ARENA_MAX`` says otherwise.
DEFAULT_MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's <malloc.h>


class CommandError(Exception):
    """A command could not do its work; the message is for the operator."""


@contextmanager
def _session(*, need_schema: bool = True) -> Iterator[Session]:
    engine = get_engine()
    if need_schema and not schema_is_current(engine):
        raise CommandError(
            "the database schema is not at the newest migration: run `ratings migrate` first"
        )
    session = session_factory(engine)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _stamp(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z") if moment else "-"


def _multiprocess_metrics_dir() -> None:
    # Every worker writes its metrics to files there; /metrics sums them. The directory must
    # start empty, so a fresh one is made per run unless the operator chose one.
    if os.environ.get(MULTIPROC_ENV):
        return
    directory = tempfile.mkdtemp(prefix="ratings-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


def _prepare_to_serve() -> int:
    """Migrate to head and make the first admin key if there is none (``serve``'s first step)."""
    upgrade()
    with _session() as session:
        new = auth.ensure_first_admin_key(session)
    if new is not None:
        print(
            f"No API keys existed, so an admin key named {new.name!r} was made "
            f"(prefix {new.prefix}). It is shown this once; keep it safe:\n{new.key}",
            file=sys.stderr,
            flush=True,
        )
    return 0


def _in_child_process(step: Callable[[], int]) -> int:
    """Run ``step`` in a forked child process and return its exit status.

    Migrating loads Alembic, Mako and the migration scripts (about 12 MB) that a process
    keeps to its end; with one worker the serving process is this one, so the migration
    runs in a child whose memory goes back to the system when it exits.
    """
    if not hasattr(os, "fork"):
        return _report_errors(step)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the parent's code
        status = 1
        try:
            status = _report_errors(step)
        except BaseException:
            traceback.print_exc()
        finally:
            dispose_engines()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status)


def _limit_malloc_arenas() -> None:
    """Cap glibc's malloc arenas for the workers (``MALLOC_ARENA_MAX``, default 2).

    glibc gives each thread that allocates under contention an arena of its own, up to
    eight per core, and each keeps the freed memory of its busiest moment: a worker's
    thread pool grew to 180-200 MB resident that way. Two arenas cost no measurable CPU
    here, since the GIL lets one thread run Python at a time. An operator's own setting
    wins. Worker processes read the variable when they start; this process has started
    already, so glibc is told directly as well (``mallopt``; nothing on other C libraries).
    """
    value = os.environ.setdefault("MALLOC_ARENA_MAX", str(DEFAULT_MALLOC_ARENAS))
    try:
        arenas = int(value)
        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):
        return
    if arenas > 0:
        mallopt(_M_ARENA_MAX, arenas)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = get_settings()
    host = args.host or settings.host
    port = args.port or settings.port
    workers = args.workers or settings.workers
    status = _in_child_process(_prepare_to_serve)
    if status != 0:
        return status
    dispose_engines()  # the server opens its own connections
    _limit_malloc_arenas()
    os.environ.setdefault(GC_TUNING_ENV, "1")  # the workers tune their garbage collector
    if workers > 1:
        _multiprocess_metrics_dir()
    uvicorn.run(
        "app.main:app",
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level,
    )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    upgrade(revision=args.revision)
    print(f"database schema at {args.revision}", file=sys.stderr)
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    with _session() as session:
        new = auth.create_key(session, name=args.name, scope=args.scope)
    print(f"made key {new.name!r}, scope {new.scope}, prefix {new.prefix}", file=sys.stderr)
    print(new.key, flush=True)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    with _session() as session:
        keys = auth.list_keys(session)
    if args.json:
        rows = [
            {
                "name": key.name,
                "scope": key.scope,
                "prefix": key.prefix,
                "created_at": _stamp(key.created_at),
                "last_used_at": _stamp(key.last_used_at) if key.last_used_at else None,
                "revoked_at": _stamp(key.revoked_at) if key.revoked_at else None,
            }
            for key in keys
        ]
        print(json.dumps(rows, indent=2))
        return 0
    header = ("NAME", "SCOPE", "PREFIX", "CREATED", "LAST USED", "REVOKED")
    table = [header] + [
        (
            key.name,
            key.scope,
            key.prefix,
            _stamp(key.created_at),
            _stamp(key.last_used_at),
            _stamp(key.revoked_at),
        )
        for key in keys
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    with _session() as session:
        info = auth.revoke_key(session, name_or_prefix=args.key)
    print(f"revoked key {info.name!r} ({info.prefix})", file=sys.stderr)
    return 0


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

    with _session() as session:
        ladder = ladders.get_ladder(session=session, ladder_id=args.ladder)
        result = rerate.rebuild(session=session, ladder=ladder, now=datetime.now(UTC))
    print(
        f"ladder {result.ladder}: {result.matches_rerated:,} matches replayed, "
        f"{result.players:,} players rated"
    )
    return 0


def _report_errors(step: Callable[[], int]) -> int:
    """Run ``step``; an error meant for the operator is printed on one line, status 1."""
    try:
        return step()
    except (CommandError, ProblemError) as exc:
        print(f"ratings: {exc}", file=sys.stderr)
        return 1
    except OperationalError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[0]
        print(f"ratings: the database is unreachable or refused: {reason}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ratings``."""
    parser = argparse.ArgumentParser(
        prog="ratings",
        description="Skill-rating service: serve, migrate, manage API keys, import and "
        "rebuild ladders, evaluate and fit rating algorithms on match files.",
    )
    parser.add_argument(
        "--database-url", help="SQLAlchemy database URL (default: RATINGS_DATABASE_URL)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve", help="migrate to head, make the first admin key if none, serve HTTP"
    )
    serve.add_argument("--host", help="interface to bind (default: RATINGS_HOST)")
    serve.add_argument("--port", type=int, help="TCP port (default: RATINGS_PORT)")
    serve.add_argument("--workers", type=int, help="worker processes (default: RATINGS_WORKERS)")
    serve.set_defaults(func=cmd_serve)

    migrate = commands.add_parser("migrate", help="bring the database schema up to a revision")
    migrate.add_argument("--revision", default="head", help="target revision (default: head)")
    migrate.set_defaults(func=cmd_migrate)

    keys = commands.add_parser("keys", help="API keys").add_subparsers(
        dest="keys_command", required=True, metavar="ACTION"
    )
    create = keys.add_parser("create", help="make a key; prints it once, alone, on stdout")
    create.add_argument("--scope", required=True, choices=auth.SCOPES)
    create.add_argument("--name", required=True, help="a name to recognise and revoke it by")
    create.set_defaults(func=cmd_keys_create)
    listing = keys.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--json", action="store_true", help="JSON instead of a table")
    listing.set_defaults(func=cmd_keys_list)
    revoke = keys.add_parser("revoke", help="revoke a key at once, by name or prefix")
    revoke.add_argument("key", metavar="NAME_OR_PREFIX")
    revoke.set_defaults(func=cmd_keys_revoke)

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
        default=5000,
        help="matches per transaction, 1 to 10,000 (default 5000)",
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

    add_evaluation_parsers(commands)  # evaluate, fit
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ratings`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.database_url:
        os.environ["RATINGS_DATABASE_URL"] = args.database_url
        get_settings.cache_clear()
    command: Callable[[argparse.Namespace], int] = args.func
    try:
        return _report_errors(partial(command, args))
    finally:
        dispose_engines()


if __name__ == "__main__":
    sys.exit(main())
