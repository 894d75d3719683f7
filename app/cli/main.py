"""The ``ratings`` command: serve the API, migrate the database, manage API keys, make,
list, import into and rebuild ladders, open their seasons, evaluate and fit rating
algorithms. One module per command group: ``server`` (serve, migrate), ``keys``,
``ladders`` (ladders create and list, import, rebuild), ``seasons`` (list, start),
``exports`` (export matches, ratings) and, from
``app.cli.evaluate``, evaluate and fit.

Settings come from ``RATINGS_*`` environment variables (see ``app/config.py``);
``--database-url`` overrides ``RATINGS_DATABASE_URL`` for one command. Without either, the
database is ``app.config.default_database_path()``, whatever the working directory; only
``migrate`` and ``serve`` create a database.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from functools import partial

from app.cli import exports, keys, ladders, seasons, server
from app.cli.base import report_errors
from app.cli.evaluate import add_parsers as add_evaluation_parsers
from app.config import default_database_url, get_settings
from app.storage.engine import dispose_engines


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ratings``."""
    parser = argparse.ArgumentParser(
        prog="ratings",
        description="Skill-rating service: serve, migrate, manage API keys, make, list, "
        "import into and rebuild ladders, evaluate and fit rating algorithms on match files.",
    )
    parser.add_argument(
        "--database-url",
        help="SQLAlchemy database URL (default: RATINGS_DATABASE_URL, else "
        f"{default_database_url()}); only migrate and serve create a database",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    server.add_parsers(commands)  # serve, migrate
    keys.add_parsers(commands)  # keys create, list, revoke
    ladders.add_parsers(commands)  # ladders create, list; import, rebuild
    seasons.add_parsers(commands)  # seasons list, start
    exports.add_parsers(commands)  # export matches, ratings
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
        return report_errors(partial(command, args))
    finally:
        dispose_engines()
