"""What every repository shares: the dialect, bounded IN lists, bulk updates and inserts
(COPY on PostgreSQL), and JSON text."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Integer,
    String,
    Table,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.types import TypeEngine

from app.domain import jsontext


def dialect_of(session: Session) -> str:
    return session.get_bind().dialect.name


def id_list(session: Session, values: Sequence[str]) -> str | list[str]:
    """Ids for a statement: on PostgreSQL one JSON array (read back with
    ``json_array_elements_text``: psycopg escapes each string of a text array with a
    regular expression, which cost a group of matches a fifth of its CPU), on SQLite a
    list for an expanding ``IN``."""
    if dialect_of(session) == "postgresql":
        return jsontext.compact(list(values))
    return list(values)


#: Values per ``IN (...)`` list on SQLite (far below its limit of 32,766 variables).
SQLITE_IN_CHUNK = 5000


def chunked(values: Sequence[str], session: Session) -> list[Sequence[str]]:
    """PostgreSQL takes any number as one array; SQLite gets bounded ``IN`` lists."""
    if dialect_of(session) == "postgresql" or len(values) <= SQLITE_IN_CHUNK:
        return [values]
    return [values[i : i + SQLITE_IN_CHUNK] for i in range(0, len(values), SQLITE_IN_CHUNK)]


#: From this many rows a PostgreSQL bulk update goes through COPY into a temporary table:
#: long texts (result documents) cost far less to send that way than as array literals.
COPY_UPDATE_ROWS = 1000


_temporary_tables = itertools.count(1)


def _update_through_copy(
    session: Session,
    table: Table,
    keys: Sequence[str],
    names: Sequence[str],
    values: Iterable[Sequence[Any]],
    where: dict[str, Any],
) -> None:
    """``bulk_update`` for many rows on PostgreSQL: COPY them into a temporary table (dropped
    at commit), then one ``UPDATE ... FROM`` it."""
    connection = session.connection()
    dialect = connection.dialect
    scratch = f"bulk_{table.name}_{next(_temporary_tables)}"
    columns = ", ".join(f"{name} {table.c[name].type.compile(dialect=dialect)}" for name in names)
    connection.execute(text(f"CREATE TEMPORARY TABLE {scratch} ({columns}) ON COMMIT DROP"))
    try:
        _copy_rows(connection.connection.cursor(), table, names, values, target=scratch)
    except dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(
            f"COPY {scratch}", None, exc, dialect.loaded_dbapi.Error, dialect=dialect
        ) from exc
    conditions = [f"t.{key} = v.{key}" for key in keys]
    conditions += [f"t.{column} = :w_{column}" for column in where]
    changed = [name for name in names if name not in keys]
    connection.execute(
        text(
            f"UPDATE {table.name} AS t SET "
            + ", ".join(f"{name} = v.{name}" for name in changed)
            + f" FROM {scratch} AS v WHERE "
            + " AND ".join(conditions)
        ),
        {f"w_{column}": value for column, value in where.items()},
    )


def bulk_update(
    *,
    session: Session,
    table: Table,
    keys: Sequence[str],
    rows: Sequence[dict[str, Any]],
    where: dict[str, Any] | None = None,
) -> None:
    """Update many rows, each found by its ``keys`` columns (and the fixed ``where``
    columns), setting its other columns: :func:`bulk_update_values` of dicts."""
    if not rows:
        return
    names = list(rows[0])
    bulk_update_values(
        session=session,
        table=table,
        keys=keys,
        names=names,
        values=[tuple([row[name] for name in names]) for row in rows],
        where=where,
    )


def bulk_update_values(
    *,
    session: Session,
    table: Table,
    keys: Sequence[str],
    names: Sequence[str],
    values: Sequence[Sequence[Any]],
    where: dict[str, Any] | None = None,
) -> None:
    """Update many rows, each a sequence of the values of the columns ``names``, found by
    its ``keys`` columns (and the fixed ``where`` columns), setting its other columns.
    PostgreSQL: ONE statement joining the table with ``unnest`` of one array per column (a
    key that is unchanged needs no foreign key check), or from :data:`COPY_UPDATE_ROWS`
    rows on, with a temporary table filled by COPY. SQLite: one executemany of the
    driver."""
    if not values:
        return
    changed = [name for name in names if name not in keys]
    where = where or {}
    connection = session.connection()
    dialect = connection.dialect
    if dialect.name == "postgresql" and len(values) >= COPY_UPDATE_ROWS:
        _update_through_copy(session, table, keys, names, values, where)
        return
    if dialect.name == "postgresql":
        # A JSON column's values go as their text (an array of JSON is an array of texts).
        json_names = {name for name in names if isinstance(table.c[name].type, JSON)}
        arrays = ", ".join(
            f"CAST(CAST(:a_{name} AS TEXT[]) AS JSON[])"
            if name in json_names
            else f"CAST(:a_{name} AS {table.c[name].type.compile(dialect=dialect)}[])"
            for name in names
        )
        conditions = [f"t.{key} = v.{key}" for key in keys]
        conditions += [f"t.{column} = :w_{column}" for column in where]
        statement = (
            f"UPDATE {table.name} AS t SET "
            + ", ".join(f"{name} = v.{name}" for name in changed)
            + f" FROM unnest({arrays}) AS v({', '.join(names)}) WHERE "
            + " AND ".join(conditions)
        )
        parameters = {
            f"a_{name}": [json_text(row[n]) if name in json_names else row[n] for row in values]
            for n, name in enumerate(names)
        }
        parameters.update({f"w_{column}": value for column, value in where.items()})
        connection.execute(text(statement), parameters)
        return
    fixed = tuple(where.values())
    positions = {name: n for n, name in enumerate(names)}
    order = [positions[name] for name in [*changed, *keys]]
    converters = [(n, _converter(table.c[names[n]].type, dialect)) for n in order]
    sql = (
        f"UPDATE {table.name} SET "
        + ", ".join(f"{name} = ?" for name in changed)
        + " WHERE "
        + " AND ".join(f"{column} = ?" for column in [*keys, *where])
    )
    converted = [
        tuple([row[n] if convert is None else convert(row[n]) for n, convert in converters]) + fixed
        for row in values
    ]
    connection.exec_driver_sql(sql, converted)


def insert_rows(*, session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many rows (dicts with the same keys) in one go: :func:`insert_values`."""
    if not rows:
        return
    names = list(rows[0])
    insert_values(
        session=session,
        table=table,
        names=names,
        values=[tuple([row[name] for name in names]) for row in rows],
    )


def insert_values(
    *, session: Session, table: Table, names: Sequence[str], values: Iterable[Sequence[Any]]
) -> None:
    """Insert many rows, each a sequence of the values of the columns ``names`` (a JSON
    column's value as the Python value, encoded here), in one go: ``COPY ... FROM STDIN``
    on PostgreSQL, one executemany of the driver on SQLite (values converted by the
    columns' own SQLAlchemy types). ``values`` is read once, row by row: an iterator
    costs no list of its own (on SQLite the converted rows are the one list)."""
    connection = session.connection()
    dialect = connection.dialect
    if dialect.name == "postgresql":
        try:
            _copy_rows(connection.connection.cursor(), table, names, values)
        except dialect.loaded_dbapi.Error as exc:
            # COPY runs on the driver's cursor: wrap its errors as SQLAlchemy does every
            # statement's (a unique match_id raced -> IntegrityError, a lost connection ->
            # OperationalError), so the callers and the error handlers see the usual classes.
            raise DBAPIError.instance(
                f"COPY {table.name}", None, exc, dialect.loaded_dbapi.Error, dialect=dialect
            ) from exc
        return
    converters = [
        (n, convert)
        for n, name in enumerate(names)
        if (convert := _converter(table.c[name].type, dialect)) is not None
    ]
    rows: list[tuple[Any, ...]] = []
    for row in values:
        if converters:
            out = list(row)
            for n, convert in converters:
                out[n] = convert(out[n])
            row = out
        rows.append(tuple(row))
    if not rows:
        return
    placeholders = ", ".join("?" for _ in names)
    statement = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({placeholders})"
    connection.exec_driver_sql(statement, rows)


def _converter(column_type: TypeEngine[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    """What the driver gets for a column's Python value: its type's bind processor (None:
    the value as it is). A time's text is made once per distinct time and offset: the rows
    of a batch share a few (its recorded_at, its matches' played_at), and formatting each
    one cost a batch of 50,000 player slots over half a second on SQLite."""
    convert = column_type.dialect_impl(dialect).bind_processor(dialect)
    if convert is None or not isinstance(column_type, DateTime):
        return convert
    made: dict[tuple[datetime, Any], Any] = {}

    def once(value: Any) -> Any:
        if value is None:
            return convert(value)
        key = (value, value.tzinfo)
        try:
            return made[key]
        except KeyError:
            made[key] = out = convert(value)
            return out

    return once


def _copy_type(column_type: TypeEngine[Any]) -> str:
    """The PostgreSQL type a column's values are sent as in a binary COPY.

    JSON goes as ``text``: its binary form is its text (unlike ``jsonb``), so the JSON text
    encoded here arrives unchanged, as the text format would store it."""
    if isinstance(column_type, JSON | String):
        return "text"
    if isinstance(column_type, DateTime):
        return "timestamptz" if column_type.timezone else "timestamp"
    if isinstance(column_type, Float):
        return "float8"
    if isinstance(column_type, BigInteger):
        return "int8"
    if isinstance(column_type, Integer):
        return "int4"
    if isinstance(column_type, Boolean):
        return "bool"
    raise TypeError(f"no COPY type for {column_type!r}")


def _copy_rows(
    cursor: Any,
    table: Table,
    names: Sequence[str],
    rows: Iterable[Sequence[Any]],
    target: str | None = None,
) -> None:
    """``COPY table (names) FROM STDIN (FORMAT BINARY)`` of ``rows`` (into ``target`` if
    given: a table with those columns). The driver formats the values in C: floats and
    times go as their exact binary values, nothing is parsed back from text."""
    types = [_copy_type(table.c[name].type) for name in names]
    encode = [n for n, name in enumerate(names) if isinstance(table.c[name].type, JSON)]
    columns = ", ".join(f'"{name}"' for name in names)
    try:
        with cursor.copy(
            f"COPY {target or table.name} ({columns}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(types)
            write = copy.write_row
            if not encode:
                for row in rows:
                    write(row)
                return
            for row in rows:
                out = list(row)
                for n in encode:
                    # SQLAlchemy stores None in a JSON column as the JSON null.
                    out[n] = json_text(out[n])
                write(out)
    finally:
        cursor.close()


def json_text(value: Any) -> str:
    """A JSON column's value as text (``None`` is the JSON ``null``, as SQLAlchemy stores it)."""
    return jsontext.compact(value)


def others_write_meanwhile(*, session: Session) -> bool:
    """Whether other transactions can commit while this one runs: PostgreSQL (row locks),
    not SQLite (a writing transaction holds the database from its first statement)."""
    return dialect_of(session) == "postgresql"
