"""``ratings serve`` and ``ratings migrate``: bring the schema to head, make the first admin
key, and run uvicorn with workers kept small."""

from __future__ import annotations

import argparse
import atexit
import ctypes
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable

from app.api.logs import log_config
from app.api.metrics import MULTIPROC_ENV
from app.cli.base import CommandError, database, report_errors, transaction
from app.config import GC_TUNING_ENV, get_settings
from app.services import auth
from app.storage.engine import (
    current_revisions,
    dispose_engines,
    is_older,
    sqlite_file,
    upgrade,
)

#: glibc malloc arenas per serving process unless ``MALLOC_ARENA_MAX`` says otherwise.
DEFAULT_MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's <malloc.h>


def _multiprocess_metrics_dir() -> None:
    # Every worker writes its metrics to files there; /metrics sums them. The directory must
    # start empty, so a fresh one is made per run unless the operator chose one.
    if os.environ.get(MULTIPROC_ENV):
        return
    directory = tempfile.mkdtemp(prefix="ratings-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


def _migrate(revision: str = "head") -> None:
    """Bring the configured database up to ``revision``, creating it if need be (the folder
    of the default SQLite file too), and say which database it was and what was done."""
    settings = get_settings()
    path = sqlite_file(settings.database_url)
    if path is not None and settings.database_url_is_default:
        path.parent.mkdir(parents=True, exist_ok=True)
    before = current_revisions()
    if revision != "head" and is_older(revision, before):
        raise CommandError(
            f"the database {database()} is at schema {', '.join(sorted(before))}, newer than "
            f"{revision}: migrate only goes up, nothing was done"
        )
    before = upgrade(revision=revision)
    after = current_revisions()
    at = ", ".join(sorted(after)) or "base"
    if after == before:
        print(f"database {database()}: schema at {at} already", file=sys.stderr, flush=True)
    else:
        was = ", ".join(sorted(before)) or "empty"
        print(
            f"database {database()}: schema migrated from {was} to {at}",
            file=sys.stderr,
            flush=True,
        )


def _prepare_to_serve() -> int:
    """Migrate to head and make the first admin key if there is none (``serve``'s first step)."""
    _migrate()
    new = transaction(auth.ensure_first_admin_key)
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
        return report_errors(step)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the parent's code
        status = 1
        try:
            status = report_errors(step)
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
        log_config=log_config(),
        http="app.api.protocol:BoundedHttpToolsProtocol",
        timeout_keep_alive=settings.keep_alive_s,
        # Forwarded headers only from the configured proxies: uvicorn's default believes
        # any peer on 127.0.0.1, so a client there could name any address it liked.
        proxy_headers=bool(settings.trusted_proxies.strip()),
        forwarded_allow_ips=settings.trusted_proxies.strip() or None,
    )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    _migrate(args.revision)
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve`` and ``migrate`` to the ``ratings`` command."""
    serve = commands.add_parser(
        "serve", help="migrate to head, make the first admin key if none, serve HTTP"
    )
    serve.add_argument("--host", help="interface to bind (default: RATINGS_HOST)")
    serve.add_argument("--port", type=int, help="TCP port (default: RATINGS_PORT)")
    serve.add_argument("--workers", type=int, help="worker processes (default: RATINGS_WORKERS)")
    serve.set_defaults(func=cmd_serve)

    migrate = commands.add_parser(
        "migrate",
        help="create the database if need be and bring its schema up to a revision",
    )
    migrate.add_argument("--revision", default="head", help="target revision (default: head)")
    migrate.set_defaults(func=cmd_migrate)
