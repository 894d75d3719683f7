"""Create or drop a PostgreSQL database for one test run: ``pgdb.py create|drop URL NAME``."""

from __future__ import annotations

import sys

import psycopg
from psycopg import sql


def main(argv: list[str]) -> int:
    action, url, name = argv
    with psycopg.connect(url, autocommit=True) as conn:
        if action == "create":
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        elif action == "drop":
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        else:
            print(f"unknown action {action!r}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
