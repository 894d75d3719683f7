"""Storage benchmark: what a recorded match costs on disk, per table and per index.

    .venv/bin/python benchmarks/storage.py [--matches 20000] [--shapes 1v1,ffa8]
        [--football ../shared/data/intl_football.jsonl] [--postgres-url URL]
        [--algorithm trueskill] [--players 5000] [--seed 1] [--chunk 5000]
        [--format table|markdown]

For each shape, a fresh database (a temporary SQLite file; with ``--postgres-url``, also a
scratch PostgreSQL database created through that URL and dropped after), migrated with
Alembic, given one ladder (``bench``), then loaded through ``app.services.importer.import_matches``
(what ``ratings import`` runs: the batch path ``batches.record_matches``, a chunk per
transaction), so the rows are exactly the ones the service writes. Shapes:

- ``1v1``: the first N matches of the international football results (real team names,
  match ids, dates and ``meta``), a JSON Lines file of request bodies; the path is relative
  to the project root and the file is not committed: without it the shape is skipped.
- ``ffa8``: N synthetic 8-player free-for-alls from a seeded generator over a pool of
  players with 16-digit ids (as the Halo 2 data has), scores 0-25 (ties happen), a
  ``meta`` of scores, map and variant, and Halo-like 6-digit match ids.

Measured after the writes: on PostgreSQL after ``VACUUM ANALYZE``, per table
``pg_relation_size`` (main fork), the TOAST table, the free-space and visibility maps,
``pg_indexes_size`` and ``pg_total_relation_size``, and ``pg_relation_size`` per index; on
SQLite after ``PRAGMA wal_checkpoint(TRUNCATE)``, the pages of each b-tree from the
``dbstat`` virtual table (or, if this SQLite lacks it, by walking the b-trees of the file:
said in the output) and the file's size. Everything is printed in bytes per match. A
second table splits the three per-match tables by column: PostgreSQL's
``pg_column_size`` (a datum as stored, compressed if it was), and on SQLite the bytes of
each value in its record (content and type byte; an integral REAL is stored as an
integer, the INTEGER PRIMARY KEY as the cell's rowid).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import struct
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

# benchmarks/http.py would shadow the standard library's ``http``: drop this folder from
# the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import UniqueConstraint  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from app.domain.documents.ladders import LadderCreate  # noqa: E402
from app.services import ladders  # noqa: E402
from app.services.importer import import_matches  # noqa: E402
from app.storage.engine import dispose_engines, get_engine, session_factory, upgrade  # noqa: E402
from app.storage.models import Base  # noqa: E402
from app.storage.unit_of_work import transactor  # noqa: E402
from benchmarks.databases import fresh_database, print_table  # noqa: E402

DEFAULT_FOOTBALL = Path("../shared/data/intl_football.jsonl")
LADDER = "bench"
#: The tables that grow with every match; the others grow with players or not at all.
PER_MATCH = ("matches", "participants", "rating_history")
PER_PLAYER = ("ratings", "rating_buckets")


# -- the matches ------------------------------------------------------------------------------


def football_lines(path: Path, count: int) -> list[str]:
    """The first ``count`` request bodies of the football file, as they are."""
    lines: list[str] = []
    with path.open(encoding="utf-8") as source:
        for line in source:
            if line.strip():
                lines.append(line.rstrip("\n"))
                if len(lines) == count:
                    break
    return lines


def ffa_lines(count: int, players: int, seed: int) -> list[str]:
    """``count`` 8-player free-for-alls over a pool of ``players``, from ``seed``."""
    rng = random.Random(seed)
    pool = [str(rng.randrange(10**15, 10**16)) for _ in range(players)]
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    lines = []
    for n in range(count):
        moment += timedelta(seconds=rng.randrange(30, 300))
        entrants = rng.sample(pool, 8)
        scores = [rng.randrange(0, 26) for _ in entrants]
        order = sorted(set(scores), reverse=True)
        body = {
            "match_id": str(215333 + n),
            "played_at": moment.strftime("%Y-%m-%dT%H:%M:%S"),
            "teams": [[player] for player in entrants],
            "ranks": [order.index(score) + 1 for score in scores],
            "meta": {"scores": scores, "variant": 2, "map": rng.randrange(1, 13)},
        }
        lines.append(json.dumps(body, separators=(",", ":")))
    return lines


# -- the databases ----------------------------------------------------------------------------


@contextmanager
def scratch_postgres(url: str, tag: str) -> Iterator[str]:
    """A new database on the server of ``url`` (connected to as given), dropped after."""
    import psycopg
    from psycopg import sql

    admin = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"ratings_storage_{tag}_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    finally:
        dispose_engines()
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def load(url: str, lines: list[str], algorithm: str, chunk: int, folder: str) -> float:
    """Migrate the database at ``url``, make the ladder and import ``lines``; seconds."""
    path = Path(folder) / "matches.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    upgrade(url)
    sessions = session_factory(get_engine(url))
    with sessions() as session:
        ladders.create_ladder(
            session=session,
            body=LadderCreate(id=LADDER, algorithm=algorithm),
            now=datetime.now(UTC),
        )
        session.commit()
    summary = import_matches(
        transact=transactor(sessions), ladder_id=LADDER, path=path, chunk=chunk
    )
    assert summary.recorded == len(lines), summary
    dispose_engines()
    return summary.seconds


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Measured:
    """Bytes by object (``table``, ``table (part)`` or ``table: index``), rows by table,
    bytes by ``table.column``, and notes on how they were measured."""

    sizes: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    columns: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def measure_postgres(url: str) -> Measured:
    import psycopg

    out = Measured()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        tables = connection.execute(
            "SELECT c.relname, pg_relation_size(c.oid, 'main'),"
            " pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm'),"
            " CASE WHEN c.reltoastrelid <> 0"
            " THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END,"
            " pg_indexes_size(c.oid), pg_total_relation_size(c.oid)"
            " FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchall()
        for name, main, maps, toast, indexes, total in tables:
            out.sizes[f"{name} (table)"] = main
            out.sizes[f"{name} (TOAST)"] = toast
            out.sizes[f"{name} (fsm+vm)"] = maps
            out.sizes[f"{name} (indexes)"] = indexes
            out.sizes[name] = total
            (out.rows[name],) = connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()
        for table, index, size in connection.execute(
            "SELECT t.relname, c.relname, pg_relation_size(c.oid)"
            " FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_class AS t ON t.oid = i.indrelid"
            " JOIN pg_namespace AS n ON n.oid = t.relnamespace WHERE n.nspname = 'public'"
        ):
            out.sizes[f"{table}: {index}"] = size
        for table in PER_MATCH:
            names = [
                row[0]
                for row in connection.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (table,),
                )
            ]
            kinds = dict(
                connection.execute(
                    "SELECT column_name, data_type FROM information_schema.columns"
                    " WHERE table_name = %s",
                    (table,),
                ).fetchall()
            )
            texts = [name for name in names if kinds[name] in ("json", "text")]
            parts = [f'sum(pg_column_size("{name}"))' for name in names]
            parts += [f'sum(octet_length(CAST("{name}" AS text)))' for name in texts]
            values = connection.execute(f"SELECT {', '.join(parts)} FROM {table}").fetchone()
            assert values is not None
            stored = dict(zip(names, values[: len(names)], strict=True))
            as_text = dict(zip(texts, values[len(names) :], strict=True))
            for name in names:
                out.columns[f"{table}.{name}"] = int(stored[name] or 0)
                if name in as_text:
                    out.columns[f"{table}.{name} (text)"] = int(as_text[name] or 0)
    out.notes.append(
        "PostgreSQL: after VACUUM ANALYZE; columns by pg_column_size (as stored, compressed "
        "if compressed), '(text)' the uncompressed text"
    )
    return out


def _varint_bytes(value: str) -> str:
    """SQL for the length of ``value`` as a SQLite varint (a rowid: not negative)."""
    steps = " ".join(f"WHEN {value} < {1 << (7 * n)} THEN {n}" for n in range(1, 9))
    return f"CASE {steps} ELSE 9 END"


def _integer_bytes(value: str) -> str:
    """SQL for the bytes of an integer in a record, as SQLite picks its serial type."""
    steps = [(0, 1, 0), (-128, 127, 1), (-32768, 32767, 2), (-(2**23), 2**23 - 1, 3)]
    steps += [(-(2**31), 2**31 - 1, 4), (-(2**47), 2**47 - 1, 6)]
    cases = " ".join(f"WHEN {value} BETWEEN {low} AND {high} THEN {n}" for low, high, n in steps)
    return f"CASE {cases} ELSE 8 END"


def _record_bytes(column: str) -> str:
    """SQL for what ``column``'s value takes in a SQLite record: its serial type (one byte,
    two for a text or blob over 57 bytes) and its content."""
    text = f"length(CAST({column} AS BLOB))"
    as_integer = f"CAST({column} AS INTEGER)"
    return (
        f"CASE typeof({column}) WHEN 'null' THEN 1"
        f" WHEN 'integer' THEN 1 + {_integer_bytes(column)}"
        # An integral REAL within 2**47 is stored as an integer (and read back as REAL).
        f" WHEN 'real' THEN 1 + CASE WHEN {column} = {as_integer}"
        f" AND {column} BETWEEN {-(2**47)} AND {2**47 - 1}"
        f" THEN {_integer_bytes(as_integer)} ELSE 8 END"
        f" ELSE CASE WHEN {text} > 57 THEN 2 ELSE 1 END + {text} END"
    )


def _index_names(connection: sqlite3.Connection) -> dict[str, str]:
    """SQLite's automatic indexes by the constraint names PostgreSQL gives them."""
    names: dict[str, str] = {}
    for (table,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for _, index, _unique, origin, _partial in connection.execute(
            f'PRAGMA index_list("{table}")'
        ):
            if not index.startswith("sqlite_autoindex_"):
                continue
            columns = [row[2] for row in connection.execute(f'PRAGMA index_info("{index}")')]
            name = f"pk_{table}" if origin == "pk" else index
            model = Base.metadata.tables.get(table)
            for constraint in model.constraints if model is not None else ():
                if (
                    isinstance(constraint, UniqueConstraint)
                    and [c.name for c in constraint.columns] == columns
                ):
                    name = str(constraint.name)
            names[index] = name
    return names


def _pages_by_walking(path: str, roots: dict[str, int]) -> dict[str, int]:
    """Pages of each b-tree (by root page), read from the file itself: interior, leaf
    and overflow pages, as dbstat counts them."""
    data = Path(path).read_bytes()
    page_size = struct.unpack(">H", data[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - data[20]

    def varint(at: int) -> tuple[int, int]:
        value = 0
        for n in range(9):
            byte = data[at + n]
            if n == 8:
                return (value << 8) | byte, 9
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                return value, n + 1
        raise AssertionError("unreachable")

    def overflow_pages(cell: int, payload: int, index: bool) -> int:
        most = usable - 35 if not index else (usable - 12) * 64 // 255 - 23
        if payload <= most:
            return 0
        least = (usable - 12) * 32 // 255 - 23
        local = least + (payload - least) % (usable - 4)
        local = local if local <= most else least
        page, pages = struct.unpack(">I", data[cell + local : cell + local + 4])[0], 0
        while page:
            pages += 1
            start = (page - 1) * page_size
            page = struct.unpack(">I", data[start : start + 4])[0]
        return pages

    def count(page: int) -> int:
        start = (page - 1) * page_size
        head = start + (100 if page == 1 else 0)
        kind = data[head]
        cells = struct.unpack(">H", data[head + 3 : head + 5])[0]
        interior = kind in (2, 5)
        pointers = head + (12 if interior else 8)
        pages = 1
        for n in range(cells):
            cell = start + struct.unpack(">H", data[pointers + 2 * n : pointers + 2 * n + 2])[0]
            if interior:
                pages += count(struct.unpack(">I", data[cell : cell + 4])[0])
                if kind == 2:  # an interior index cell holds a key, maybe overflowing
                    size, used = varint(cell + 4)
                    pages += overflow_pages(cell + 4 + used, size, True)
            elif kind == 13:
                size, used = varint(cell)
                _, used_rowid = varint(cell + used)
                pages += overflow_pages(cell + used + used_rowid, size, False)
            else:
                size, used = varint(cell)
                pages += overflow_pages(cell + used, size, True)
        if interior:
            pages += count(struct.unpack(">I", data[head + 8 : head + 12])[0])
        return pages

    return {name: count(root) * page_size for name, root in roots.items()}


def measure_sqlite(url: str, use_dbstat: bool) -> Measured:
    path = make_url(url).database
    assert path is not None
    out = Measured()
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        objects = connection.execute(
            "SELECT name, tbl_name, type, rootpage FROM sqlite_master WHERE rootpage > 0"
        ).fetchall()
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        pages: dict[str, int] = {}
        if use_dbstat:
            try:
                pages = dict(
                    connection.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
                )
                out.notes.append("SQLite: b-tree sizes from dbstat")
            except sqlite3.OperationalError:
                out.notes.append("SQLite: this build has no dbstat")
        if not pages:
            roots = {name: root for name, _, _, root in objects}
            roots["sqlite_schema"] = 1
            pages = _pages_by_walking(path, roots)
            out.notes.append("SQLite: b-tree sizes by walking the file's pages (no dbstat)")
        renamed = _index_names(connection)
        for name, table, kind, _ in [*objects, ("sqlite_schema", "sqlite_schema", "table", 1)]:
            size = int(pages.get(name, 0))
            if kind == "table":
                out.sizes[f"{table} (table)"] = size
                out.sizes.setdefault(f"{table} (indexes)", 0)
                (out.rows[table],) = connection.execute(
                    f'SELECT count(*) FROM "{table}"'
                ).fetchone()
            else:
                out.sizes[f"{table}: {renamed.get(name, name)}"] = size
                out.sizes[f"{table} (indexes)"] = out.sizes.get(f"{table} (indexes)", 0) + size
            out.sizes[table] = out.sizes.get(table, 0) + size
        out.sizes["(free pages)"] = connection.execute("PRAGMA freelist_count").fetchone()[0] * (
            page_size
        )
        out.sizes["(file)"] = os.path.getsize(path)
        for table in PER_MATCH:
            info = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
            keys = [row for row in info if row[5] > 0]
            rowid = keys[0][1] if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else None
            names = [row[1] for row in info]
            parts = [
                f"sum({_varint_bytes(name) if name == rowid else _record_bytes(name)})"
                for name in names
            ]
            values = connection.execute(f"SELECT {', '.join(parts)} FROM {table}").fetchone()
            for name, value in zip(names, values, strict=True):
                out.columns[f"{table}.{name}"] = int(value or 0)
    finally:
        connection.close()
    out.notes.append(
        "SQLite: after PRAGMA wal_checkpoint(TRUNCATE); page size "
        f"{page_size}; columns as record bytes (serial type and content)"
    )
    return out


# -- the tables -------------------------------------------------------------------------------


def object_order(names: set[str]) -> list[str]:
    """Per-match tables first (total, parts, indexes), then per-player ones, then the rest."""
    tables = [*PER_MATCH, *PER_PLAYER]
    order: list[str] = []
    for table in tables:
        order.append(table)
        for part in ("table", "TOAST", "fsm+vm", "indexes"):
            if f"{table} ({part})" in names:
                order.append(f"{table} ({part})")
        order.extend(sorted(n for n in names if n.startswith(f"{table}: ")))
    rest = sorted(n for n in names if " " not in n and n not in tables and not n.startswith("("))
    order.extend(rest)
    order.extend(sorted(n for n in names if n.startswith("(")))
    return order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matches", type=int, default=20_000)
    parser.add_argument("--shapes", default="1v1,ffa8")
    parser.add_argument(
        "--football",
        type=Path,
        default=DEFAULT_FOOTBALL,
        help="the football matches, relative to the project root (default %(default)s)",
    )
    parser.add_argument("--postgres-url", help="also PostgreSQL: scratch databases made here")
    parser.add_argument("--algorithm", default="trueskill")
    parser.add_argument("--players", type=int, default=5000, help="ffa8: the pool of players")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=5000)
    parser.add_argument("--no-dbstat", action="store_true", help="walk the SQLite file instead")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()

    shapes: dict[str, list[str]] = {}
    for shape in args.shapes.split(","):
        if shape == "1v1":
            football = args.football if args.football.is_absolute() else ROOT / args.football
            if not football.is_file():
                print(f"{args.football}: not found; the 1v1 shape is skipped")
                continue
            shapes[shape] = football_lines(football, args.matches)
        elif shape == "ffa8":
            shapes[shape] = ffa_lines(args.matches, args.players, args.seed)
        else:
            raise SystemExit(f"unknown shape {shape!r}: 1v1 or ffa8")
    kinds = ["sqlite"] + (["postgresql"] if args.postgres_url else [])
    label = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}

    runs: dict[str, Measured] = {}
    counts: dict[str, int] = {}
    notes: list[str] = []
    for kind in kinds:
        for shape, lines in shapes.items():
            column = f"{label[kind]} {shape}"
            with tempfile.TemporaryDirectory() as folder:
                if kind == "sqlite":
                    with fresh_database("sqlite", "", "storage") as url:
                        seconds = load(url, lines, args.algorithm, args.chunk, folder)
                        measured = measure_sqlite(url, not args.no_dbstat)
                else:
                    with scratch_postgres(args.postgres_url, shape) as url:
                        seconds = load(url, lines, args.algorithm, args.chunk, folder)
                        measured = measure_postgres(url)
            runs[column], counts[column] = measured, len(lines)
            notes.extend(note for note in measured.notes if note not in notes)
            print(
                f"{column}: {len(lines):,} matches recorded in {seconds:.1f} s, "
                f"{measured.rows.get('participants', 0):,} participants, "
                f"{measured.rows.get('ratings', 0):,} players",
                file=sys.stderr,
            )

    columns = list(runs)

    def per_match(value: int | None, column: str) -> str:
        return "-" if value is None else f"{value / counts[column]:,.1f}"

    for run in runs.values():
        tables = [name for name in run.rows if name in run.sizes]
        run.sizes["(per-match tables)"] = sum(run.sizes[name] for name in PER_MATCH)
        run.sizes["(all tables)"] = sum(run.sizes[name] for name in tables)
    names = object_order({name for run in runs.values() for name in run.sizes})
    rows = [
        [name] + [per_match(runs[c].sizes.get(name), c) for c in columns]
        for name in names
        if any(runs[c].sizes.get(name) for c in columns)
    ]
    print(f"\nBytes per match ({args.algorithm}, ladder id {LADDER!r}):\n")
    print_table(["object", *columns], rows, args.format)

    print("\nRows per match, and bytes per match by column (row headers not included):\n")
    rows = [
        [f"{table} rows"] + [f"{runs[c].rows.get(table, 0) / counts[c]:g}" for c in columns]
        for table in PER_MATCH
    ]
    column_names: list[str] = []
    for run in runs.values():
        # Each run's names in its order, a name new to the list after the one before it.
        at = 0
        for name in run.columns:
            if name in column_names:
                at = column_names.index(name) + 1
            else:
                column_names.insert(at, name)
                at += 1
    rows += [
        [name] + [per_match(runs[c].columns.get(name), c) for c in columns] for name in column_names
    ]
    print_table(["column", *columns], rows, args.format)
    print()
    for note in notes:
        print(f"- {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
