"""Engine, sessions and schema migrations.

A transaction is begun, committed, rolled back and run again in one place,
``app.storage.unit_of_work``; repositories and services only flush.

SQLite: write-ahead log, a busy timeout, foreign keys on, and ``BEGIN IMMEDIATE`` for every
transaction (the SQLAlchemy "pysqlite serializable" recipe), so writers queue for the
database lock instead of failing on upgrade from a read lock. PostgreSQL: psycopg 3, a
sized pool that pings connections which sat idle, a statement timeout, and a bound on every
wait for the server (:class:`BoundedConnection`), so a database or network that freezes
fails the request instead of holding it.
"""

from __future__ import annotations

import ast
import asyncio
import fcntl
import functools
import math
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, InvalidatePoolError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings, get_settings

if TYPE_CHECKING:
    from alembic.config import Config

#: The Alembic scripts (env.py, versions/), shipped inside the package so that an installed
#: copy migrates without the source tree.
MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"

#: A pooled PostgreSQL connection idle for longer than this (seconds) is pinged before use.
PING_AFTER_IDLE_S = 5.0

#: Execution option of a session whose transaction only reads (see :func:`mark_read_only`).
READ_ONLY = "ratings_read_only"
#: Execution option of a session whose transactions are bulk writes (:func:`mark_bulk`).
BULK = "ratings_bulk"

_engines: dict[str, Engine] = {}
_factories: dict[int, sessionmaker[Session]] = {}
_writer_locks: dict[int, TurnLock] = {}
_writer_files: dict[int, int] = {}
_loop_connections: weakref.WeakSet[LoopConnection] = weakref.WeakSet()
_lock = threading.Lock()


def normalize_url(url: str) -> str:
    """A plain ``postgresql://`` URL means psycopg 3 (SQLAlchemy's default is psycopg2)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL as an absolute path (a relative one is taken from the
    working directory, as SQLite does); None for another database, one in memory, or a
    ``file:`` URI."""
    parsed = make_url(normalize_url(url))
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return Path(database).absolute()


def shown_url(url: str) -> str:
    """``url`` as an operator should read it: the password hidden, a SQLite file's path
    made absolute."""
    parsed = make_url(url)
    path = sqlite_file(url)
    if path is not None:
        parsed = parsed.set(database=path.as_posix())
    elif parsed.password is None:
        return url  # rendering would escape a ``file:`` URI's colons
    return parsed.render_as_string(hide_password=True)


def _sqlite_engine(url: str) -> Engine:
    settings = get_settings()
    engine = create_engine(url, connect_args={"check_same_thread": False})
    busy_ms = settings.sqlite_busy_timeout_ms

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Stop pysqlite from issuing its own BEGIN (and COMMIT before DDL): we emit ours.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        # What a change removes (an erased player's id) is overwritten in the file, not
        # left in free space; the default of some builds only (Debian's), so said here.
        cursor.execute("PRAGMA secure_delete = ON")
        if make_url(url).database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode = WAL")
            # WAL's recommended level: no fsync per commit, still safe if the process
            # crashes (a power cut may lose the last commits, never corrupt the file).
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(READ_ONLY):
            # A read: a deferred transaction reads one snapshot of the write-ahead log
            # without the write lock, so reads neither queue behind writers nor hold them up.
            connection.exec_driver_sql("BEGIN")
        else:
            # Take the write lock at the start: one writer at a time, in arrival order.
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


#: SQLite's page cache per connection, in KiB (SQLite's default is about 2,000): a worker
#: holds a connection per busy thread, and the operating system caches the file anyway.
SQLITE_CACHE_KIB = 512


RV = TypeVar("RV")


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection that waits for the server at most :attr:`reply_timeout_s` at a
    time (None: without limit), then closes itself and raises ``OperationalError``.

    Every exchange with the server (a statement, its rows, COMMIT, ROLLBACK, a ping, COPY)
    goes through :meth:`wait`. The kernel's TCP timeouts catch a peer that stops
    acknowledging, but not one that keeps acknowledging and never answers (a frozen server
    process on a live host, a proxy or balancer stuck in between), nor a query that never
    reached the server, where ``statement_timeout`` cannot fire: only the client can bound
    those. After such a timeout the connection's state is unknown (its query may still run,
    or have committed), so it is closed: SQLAlchemy then sees a disconnect and drops it
    from the pool, with every other connection opened before it.
    """

    reply_timeout_s: float | None = None

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        bound = self.reply_timeout_s
        if bound is None or timeout is not None:  # a caller with a timeout handles its own
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, bound)
        except psycopg.errors._WaitTimeout:  # psycopg's own, raised by its wait functions
            self.close()
            raise _no_reply(bound) from None


class BoundedAsyncConnection(psycopg.AsyncConnection[Any]):
    """:class:`BoundedConnection` for the event loop (``LoopConnection``). The bound is
    psycopg's own wait timeout, not a cancellation of the waiting task: cancelled, psycopg
    would first try to cancel the query on the server and wait for it, up to 10 s more."""

    reply_timeout_s: float | None = None

    async def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        bound = self.reply_timeout_s
        if bound is None or timeout is not None:
            return await super().wait(gen, interval, timeout)
        try:
            return await super().wait(gen, interval, bound)
        except psycopg.errors._WaitTimeout:
            await self.close()
            raise _no_reply(bound) from None


def _no_reply(bound: float) -> psycopg.OperationalError:
    return psycopg.OperationalError(
        f"no reply from the database within {bound:g} s; connection closed"
    )


def reply_timeout_s(statement_timeout_ms: int, settings: Settings) -> float | None:
    """How long the client waits for any one reply while ``statement_timeout_ms`` is in force
    on the connection: the statement timeout and ``RATINGS_REPLY_GRACE_MS`` more, so that a
    statement that is merely slow is cancelled by the server first (an error that leaves the
    connection usable). None, no bound, when there is no statement timeout."""
    if statement_timeout_ms <= 0:
        return None
    return (statement_timeout_ms + settings.reply_grace_ms) / 1000


def _postgres_connect_args(settings: Settings) -> dict[str, Any]:
    """libpq's parameters: connecting gives up after ``connect_timeout``; the kernel drops a
    connection whose peer stopped acknowledging (keepalive probes while it is idle,
    ``tcp_user_timeout`` while data waits for an acknowledgement)."""
    connect_args: dict[str, Any] = {
        "connect_timeout": settings.connect_timeout_s,
        "keepalives": 1,
        "keepalives_idle": settings.tcp_keepalives_idle_s,
        "keepalives_interval": settings.tcp_keepalives_interval_s,
        "keepalives_count": settings.tcp_keepalives_count,
        "tcp_user_timeout": settings.tcp_user_timeout_ms,
    }
    if settings.database_pooler == "transaction":
        # A pooler in transaction mode refuses the startup parameter "options" and hands a
        # server connection to another client between transactions: no prepared
        # statements (psycopg prepares a statement run five times), and the statement
        # timeout is set in each transaction (``_postgres_engine``).
        connect_args["prepare_threshold"] = None
    elif settings.statement_timeout_ms:
        connect_args["options"] = f"-c statement_timeout={settings.statement_timeout_ms}"
    return connect_args


#: The tables whose lookups have an index to mistake for their key while nothing is known
#: of their contents: a ladder's ratings (its leaderboard's index also starts with the
#: ladder) and matches (so does its index by seq).
KEYED_TABLES = ("ratings", "matches")


#: Plans made for each run of a statement, from the tables' sizes as they are now: a
#: connection's setting, and a transaction's (through a pooler in transaction mode).
PLAN_CACHE_MODE = "plan_cache_mode"
CUSTOM_PLANS = f"SET {PLAN_CACHE_MODE} = force_custom_plan"
CUSTOM_PLANS_LOCAL = f"SET LOCAL {PLAN_CACHE_MODE} = force_custom_plan"


#: How often a process asks whether the tables have statistics yet, in seconds.
UNPLANNED_RECHECK_S = 5.0


class Unplanned:
    """Whether the ladder tables of a new database still have no statistics: then each
    transaction plans its statements afresh (:data:`CUSTOM_PLANS`).

    Unanalyzed, a table's every lookup by its key ties on cost with a scan of another index
    that starts with the same ladder (each is priced at one row), and a plan cached while
    the table was small keeps the wrong index as it grows: psycopg's prepared statements
    (planned once for any parameters after a few runs) and the foreign-key checks of
    PostgreSQL itself, until an ``ANALYZE`` throws them away. A launch would then read its
    whole ladder for every player of every match until autovacuum's first pass. Planned
    for each run, a lookup is priced from the table's size as it is now (its pages), and
    the key wins as soon as the table holds more than a few hundred rows. Once the tables
    have statistics (autovacuum gathers them within its first rounds), the cached plans
    are right and cost nothing to plan: this is asked no more, and each connection set to
    plan afresh is set back when next taken from the pool. Asked every
    :data:`UNPLANNED_RECHECK_S` at most, when a connection is taken from the pool then."""

    def __init__(self) -> None:
        self._settled = False
        self._unplanned = True
        self._asked_at = -math.inf
        self._lock = threading.Lock()

    def custom_plans(self, dbapi_connection: Any) -> bool:
        if self._settled:
            return False
        now = time.monotonic()
        if now - self._asked_at < UNPLANNED_RECHECK_S:
            return self._unplanned
        with self._lock:
            if now - self._asked_at >= UNPLANNED_RECHECK_S:
                self._asked_at = now
                self._unplanned = _unanalyzed(dbapi_connection)
                self._settled = not self._unplanned
        return self._unplanned


def _unanalyzed(dbapi_connection: Any) -> bool:
    """Whether any of :data:`KEYED_TABLES` has no statistics of its ladder column yet (never
    analyzed, analyzed while empty, or not made yet)."""
    statement = (
        "SELECT count(DISTINCT tablename) FROM pg_stats WHERE schemaname = current_schema()"
        " AND tablename = ANY(%s) AND attname = 'ladder_id'"
    )
    try:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(statement, (list(KEYED_TABLES),))
            (analyzed,) = cursor.fetchone()
        finally:
            cursor.close()
    except psycopg.Error as exc:
        raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc
    return bool(analyzed < len(KEYED_TABLES))


def _postgres_engine(url: str) -> Engine:
    settings = get_settings()
    engine = create_engine(
        url,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_size,
        pool_timeout=settings.pool_timeout_s,
        connect_args=_postgres_connect_args(settings),
    )
    default_bound = reply_timeout_s(settings.statement_timeout_ms, settings)

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> BoundedConnection:
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.reply_timeout_s = default_bound
        return connection

    # Every transaction starts with the settings' bound (one may lift it:
    # :func:`lift_reply_bound`); through a pooler in transaction mode, with its statement
    # timeout too (the transaction's first statement: it begins it), and its plans made
    # afresh while the ladder tables have no statistics (``Unplanned``: a connection of its
    # own is set so when it is taken from the pool, below).
    pooled = settings.database_pooler == "transaction"
    per_transaction = (
        f"SET LOCAL statement_timeout = {int(settings.statement_timeout_ms)}"
        if pooled and settings.statement_timeout_ms
        else None
    )
    unplanned = Unplanned()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        dbapi_connection = connection.connection.dbapi_connection
        _bounded(dbapi_connection).reply_timeout_s = default_bound
        statements = [] if per_transaction is None else [per_transaction]
        if pooled and unplanned.custom_plans(dbapi_connection):
            statements.append(CUSTOM_PLANS_LOCAL)
        if statements:
            _execute(dbapi_connection, "; ".join(statements))

    # SQLAlchemy's pool_pre_ping costs a round trip on every checkout, that is on every
    # request. A connection in steady use is known to be alive; one that sat idle in the
    # pool (where a server restart or a failover may have cut it) is pinged first, and a
    # dead one is replaced before the request sees it. The ping waits no longer than a new
    # connection may take; a failed one drops every connection of the pool opened before it
    # (they have most likely lost the same server), and the pool connects anew.
    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since <= PING_AFTER_IDLE_S:
            return
        bounded = _bounded(dbapi_connection)
        bound, bounded.reply_timeout_s = bounded.reply_timeout_s, settings.connect_timeout_s
        try:
            cursor = bounded.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
        except Exception as exc:
            raise InvalidatePoolError("pooled connection is dead") from exc
        finally:
            bounded.reply_timeout_s = bound

    @event.listens_for(engine, "checkout")
    def _plan(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if pooled:
            return
        custom = unplanned.custom_plans(dbapi_connection)
        if record.info.get(CUSTOM_PLANS, False) != custom:
            _execute(dbapi_connection, CUSTOM_PLANS if custom else f"RESET {PLAN_CACHE_MODE}")
            record.info[CUSTOM_PLANS] = custom
        # Whatever was asked or set is committed: the request's transaction starts anew.
        dbapi_connection.commit()

    return engine


def _execute(dbapi_connection: Any, statement: str) -> None:
    """``statement`` on the driver's connection, a failure raised as SQLAlchemy raises one
    (a lost server: ``OperationalError``, answered 503)."""
    try:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(statement)
        finally:
            cursor.close()
    except psycopg.Error as exc:
        raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc


def lift_reply_bound(connection: Connection) -> None:
    """No reply bound for the rest of this transaction on a PostgreSQL connection: it lifted
    its statement timeout (``rerating_repo.lift_statement_timeout``), so a statement may
    legitimately run longer than the bound; the TCP timeouts still catch a lost peer."""
    _bounded(connection.connection.dbapi_connection).reply_timeout_s = None


def _bounded(dbapi_connection: Any) -> BoundedConnection:
    assert isinstance(dbapi_connection, BoundedConnection)
    return dbapi_connection


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: the settings' database URL), made once per URL."""
    url = normalize_url(url or get_settings().database_url)
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            if make_url(url).get_backend_name() == "sqlite":
                engine = _sqlite_engine(url)
            else:
                engine = _postgres_engine(url)
            _engines[url] = engine
        return engine


def dispose_engines() -> None:
    """Close every pooled connection and every :class:`LoopConnection`'s (tests, and
    workers after a fork)."""
    with _lock:
        for loop_connection in list(_loop_connections):
            loop_connection.close()
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _factories.clear()
        _writer_locks.clear()
        for descriptor in _writer_files.values():
            os.close(descriptor)
        _writer_files.clear()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory bound to ``engine`` (objects stay readable after commit)."""
    with _lock:
        factory = _factories.get(id(engine))
        if factory is None:
            factory = sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)
            _factories[id(engine)] = factory
        return factory


def mark_read_only(session: Session) -> None:
    """Let ``session``'s next transaction begin as a read.

    On SQLite that is a plain deferred ``BEGIN`` instead of ``BEGIN IMMEDIATE``: the
    transaction must then never write (in WAL mode a read transaction cannot always be
    upgraded to a write one). On PostgreSQL nothing changes. No effect on a transaction
    that has begun already.
    """
    session.execution_options = session.execution_options.union({READ_ONLY: True})


def snapshot_reads(session: Session) -> None:
    """Make every statement of ``session``'s transaction, which has not begun, read one
    snapshot: PostgreSQL's ``REPEATABLE READ`` (its default, ``READ COMMITTED``, takes a
    new snapshot for each statement). A SQLite transaction reads one snapshot from its
    first read on already (write-ahead log)."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def is_read_only(session: Session) -> bool:
    """Whether ``session`` was marked with :func:`mark_read_only`."""
    return bool(session.execution_options.get(READ_ONLY))


def mark_bulk(session: Session) -> None:
    """Mark ``session``'s transactions as bulk writes (a batch, an import's chunk, a job):
    on SQLite they take their turn after the small writers waiting (:class:`TurnLock`)."""
    session.execution_options = session.execution_options.union({BULK: True})


def is_bulk(session: Session) -> bool:
    """Whether ``session`` was marked with :func:`mark_bulk`."""
    return bool(session.execution_options.get(BULK))


class _SessionLocal:
    """``SessionLocal()``: a new session on the configured database."""

    def __call__(self) -> Session:
        return session_factory(get_engine())()


SessionLocal = _SessionLocal()


#: ``session.info`` of a session on the read replica.
ON_REPLICA = "on_replica"


class _ReadSession:
    """``ReadSession()``: a new session for a read on the read replica
    (``RATINGS_READ_DATABASE_URL``)."""

    def __call__(self) -> Session:
        session = session_factory(get_engine(get_settings().read_database_url))()
        session.info[ON_REPLICA] = True
        return session


ReadSession = _ReadSession()


def read_session_factory(*, primary: bool = False) -> Callable[[], Session]:
    """Sessions for reads: on the replica when there is one, unless ``primary`` asks for
    the primary (a client reading its own write)."""
    return SessionLocal if primary or not get_settings().read_database_url else ReadSession


def on_replica(session: Session) -> bool:
    """Whether ``session`` reads from the replica (it must not write)."""
    return bool(session.info.get(ON_REPLICA))


def read_url(*, primary: bool = False) -> str:
    """The URL of the read database: the replica's when there is one, unless ``primary``."""
    settings = get_settings()
    if primary or not settings.read_database_url:
        return settings.database_url
    return settings.read_database_url


@functools.cache
def on_postgres(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (asked for every statement: kept)."""
    return make_url(normalize_url(url)).get_backend_name() == "postgresql"


#: The event loop's connection plans its statement once, for any parameters: the reads'
#: validator looks rows up by primary and unique keys (ladders, api_keys, ladder_versions),
#: whatever the values, so the generic plan is the custom one without the planning.
GENERIC_PLANS = "-c plan_cache_mode=force_generic_plan"


class LoopConnection:
    """PostgreSQL's single read statements on the event loop, without a thread: one
    autocommit psycopg ``AsyncConnection`` to the read database (:func:`read_url`), opened
    when first used on an event loop and again after a failure. A worker's thread hand-off
    for a statement costs more than the statement, and its threads then contend with the
    event loop for the interpreter; here the loop sends the statement and goes on serving.

    One statement at a time (its user, :class:`app.api.reads.Gathered`, sends one at a
    time; psycopg would queue another). Bounded as the pool's connections are: libpq's
    connect timeout and TCP settings, the statement timeout, and the reply bound
    (:class:`BoundedAsyncConnection`) after which it is closed. A failure comes out as SQLAlchemy's
    ``OperationalError``, as from a session, and the next statement connects anew."""

    def __init__(self, *, primary: bool) -> None:
        self.primary = primary
        self._connection: BoundedAsyncConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        with _lock:
            _loop_connections.add(self)

    async def run(self, statement: Callable[[psycopg.AsyncConnection[Any]], Awaitable[RV]]) -> RV:
        try:
            return await statement(await self._connected())
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self.close()
            raise _as_sqlalchemy(exc, psycopg) from exc

    async def _connected(self) -> BoundedAsyncConnection:
        loop = asyncio.get_running_loop()
        if self._connection is not None and (self._loop is not loop or self._connection.closed):
            self.close()  # a new event loop (a test client's), or a connection that failed
        if self._connection is None:
            settings = get_settings()
            url = make_url(normalize_url(read_url(primary=self.primary)))
            conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
            arguments = _postgres_connect_args(settings)
            if settings.database_pooler != "transaction":
                # Its one statement (the reads' validator) is planned once, generically:
                # PostgreSQL planned it anew for every read, half of its 0.15 ms there. (A
                # pooler in transaction mode refuses startup options: planned each time.)
                arguments["options"] = f"{arguments.get('options', '')} {GENERIC_PLANS}".strip()
            connection = await BoundedAsyncConnection.connect(
                conninfo, autocommit=True, **arguments
            )
            connection.reply_timeout_s = reply_timeout_s(settings.statement_timeout_ms, settings)
            self._connection, self._loop = connection, loop
        return self._connection

    def close(self) -> None:
        """Close the connection at once (libpq's own close: it needs no event loop)."""
        connection, self._connection = self._connection, None
        if connection is not None and not connection.closed:
            connection.pgconn.finish()

    def __del__(self) -> None:  # an app dropped (a test's) takes its connection with it
        self.close()


@contextmanager
def read_connection(*, primary: bool = False) -> Iterator[tuple[Any, str]]:
    """A pooled DB-API connection of the read database (as :func:`read_session_factory`
    chooses it) and its dialect's name, for single statements of a read without a session:
    each runs in autocommit (its own snapshot, no COMMIT to send). PostgreSQL's reply bound
    is the settings' (``BoundedConnection``). A driver's ``OperationalError`` comes out as
    SQLAlchemy's, as from a session, and the connection is dropped from the pool."""
    settings = get_settings()
    engine = get_engine(read_url(primary=primary))
    driver = engine.dialect.loaded_dbapi
    lost = (driver.OperationalError, driver.InterfaceError)
    try:
        pooled = engine.raw_connection()
    except lost as exc:
        raise _as_sqlalchemy(exc, driver) from exc
    dbapi = pooled.dbapi_connection
    bounded = dbapi if isinstance(dbapi, BoundedConnection) else None
    try:
        if bounded is not None:
            bounded.reply_timeout_s = reply_timeout_s(settings.statement_timeout_ms, settings)
            if bounded.info.transaction_status != TransactionStatus.IDLE:
                bounded.rollback()  # the checkout's ping of an idle connection began one
            bounded.autocommit = True
        yield dbapi, engine.dialect.name
    except lost as exc:
        pooled.invalidate()
        raise _as_sqlalchemy(exc, driver) from exc
    finally:
        if bounded is not None and not bounded.closed:
            bounded.autocommit = False  # as the pool's other users expect it
        pooled.close()


def _as_sqlalchemy(exc: Exception, driver: Any) -> DBAPIError:
    """A driver's error as SQLAlchemy raises it from a session (what the handlers know)."""
    kind = InterfaceError if isinstance(exc, driver.InterfaceError) else OperationalError
    return kind(None, None, exc)


class TurnLock:
    """The writers' turn within a process: small writes go before bulk ones.

    A bulk write (a batch, an import's chunk, a job's re-rating) holds SQLite's one write
    lock for long; a single match waiting behind a queue of them would wait for all of
    them. So a bulk writer takes its turn only when no small writer waits: a small one
    waits at most for the bulk write under way. Among writers of one kind, the order is
    the lock's."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._held = False
        self._small_waiting = 0

    def acquire(self, *, bulk: bool, timeout: float) -> bool:
        """Take the turn within ``timeout`` seconds; whether it was taken."""
        deadline = time.monotonic() + timeout
        with self._condition:
            if not bulk:
                self._small_waiting += 1
            try:
                while self._held or (bulk and self._small_waiting):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._condition.wait(left)
                self._held = True
                return True
            finally:
                if not bulk:
                    self._small_waiting -= 1
                    self._condition.notify_all()  # a bulk writer may go now

    def release(self) -> None:
        with self._condition:
            self._held = False
            self._condition.notify_all()

    def locked(self) -> bool:
        """Whether a writer holds the turn."""
        return self._held


def _writer_lock(engine: Engine) -> TurnLock:
    with _lock:
        lock = _writer_locks.get(id(engine))
        if lock is None:
            lock = _writer_locks[id(engine)] = TurnLock()
        return lock


#: The longest pause between two tries of another process's writer lock file.
_FILE_TURN_POLL_S = 0.002


def _writer_file(engine: Engine) -> int | None:
    """An open descriptor of the lock file beside the engine's SQLite database
    (``<database>-writer``), made on first use; None for a database in memory or a file
    that cannot be opened (then only SQLite's own lock orders the processes)."""
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    with _lock:
        descriptor = _writer_files.get(id(engine))
        if descriptor is None:
            try:
                descriptor = os.open(
                    f"{database}-writer", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644
                )
            except OSError:
                return None
            _writer_files[id(engine)] = descriptor
        return descriptor


def _take_file_turn(descriptor: int, deadline: float) -> bool:
    """The advisory lock on the writer lock file, tried until ``deadline`` in pauses
    growing from 0.1 to 2 ms (no blocking wait: it could not give up at the deadline)."""
    pause = 0.0001
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, _FILE_TURN_POLL_S)


@contextmanager
def writer_turn(session: Session) -> Iterator[None]:
    """Around a whole write transaction (``BEGIN IMMEDIATE`` to its commit or rollback, both
    inside): on SQLite, writers take their turns on locks of their own.

    A writer that finds SQLite's write lock taken sleeps in SQLite's busy handler, in steps
    growing to 100 ms, and may lose many rounds to writers that came later. Instead the
    writers of a process queue on a lock of the process, and the one whose turn it is then
    takes an advisory lock (``flock``) on a file beside the database, which orders the
    processes serving it (``ratings serve --workers N``); it tries that lock every 2 ms at
    most, so the next writer starts within about 2 ms of the last one's commit. The turn is
    given back however the block ends (an error, a cancelled request); a writer that waited
    a whole busy timeout for its turn goes on without it and waits in SQLite as before.
    Nothing on PostgreSQL, which locks rows, or for a read (:func:`mark_read_only`).
    """
    bind = session.get_bind()
    if bind.dialect.name != "sqlite" or is_read_only(session):
        yield
        return
    timeout = max(get_settings().sqlite_busy_timeout_ms, 0) / 1000
    deadline = time.monotonic() + timeout
    lock = _writer_lock(bind.engine)
    turn = lock.acquire(bulk=is_bulk(session), timeout=timeout)
    descriptor = _writer_file(bind.engine) if turn else None
    file_turn = descriptor is not None and _take_file_turn(descriptor, deadline)
    try:
        yield
    finally:
        if file_turn and descriptor is not None:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
        if turn:
            lock.release()


# Alembic (with Mako and Pygments) is imported only by the functions that migrate: a worker
# serving requests never needs it, and it would cost every worker about 12 MB.


def alembic_config(url: str | None = None) -> Config:
    """The Alembic configuration for ``url`` (default: the settings' database URL).

    Built here rather than read from alembic.ini, which serves the ``alembic`` command in a
    source tree (new revisions) and is not installed: upgrading needs only the scripts."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["url"] = normalize_url(url or get_settings().database_url)
    return config


def upgrade(url: str | None = None, revision: str = "head") -> set[str]:
    """Migrate the database at ``url`` up to ``revision`` (``alembic upgrade``); the
    revisions it found the schema at (none: empty), read under the migration's lock (on
    PostgreSQL an instance that waited for another finds that one's)."""
    from alembic import command

    config = alembic_config(url)
    command.upgrade(config, revision)
    return set(config.attributes.get("found", ()))


def downgrade(url: str | None, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision`` (``"base"``: drop everything)."""
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def _revisions(source: str) -> tuple[str | None, tuple[str, ...]]:
    """A migration file's ``revision`` and the revisions it follows (``down_revision``)."""
    revision: str | None = None
    parents: tuple[str, ...] = ()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        if target.id == "revision":
            revision = ast.literal_eval(value)
        elif target.id == "down_revision":
            down = ast.literal_eval(value)
            parents = (down,) if isinstance(down, str) else tuple(down or ())
    return revision, parents


def _parents() -> dict[str, tuple[str, ...]]:
    """Each migration's revision and the revisions it follows, from the files."""
    parents: dict[str, tuple[str, ...]] = {}
    for path in (MIGRATIONS / "versions").glob("*.py"):
        revision, follows = _revisions(path.read_text(encoding="utf-8"))
        if revision is not None:
            parents[revision] = follows
    return parents


def current_revisions(url: str | None = None) -> set[str]:
    """The schema revisions the database at ``url`` is at (none: never migrated)."""
    engine = get_engine(url)
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return set()
        return set(connection.scalars(text("SELECT version_num FROM alembic_version")))


def is_older(revision: str, than: set[str]) -> bool:
    """Whether ``revision`` comes before one of ``than`` in the migrations' order."""
    parents = _parents()
    stack = [parent for current in than for parent in parents.get(current, ())]
    seen: set[str] = set()
    while stack:
        node = stack.pop()
        if node == revision:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(parents.get(node, ()))
    return False


def migration_heads() -> set[str]:
    """The newest revisions of ``app/migrations/versions`` (the ones no migration follows),
    read from the files themselves, as ``alembic heads`` would list them."""
    parents = _parents()
    return set(parents) - {parent for follows in parents.values() for parent in follows}


def schema_is_current(engine: Engine) -> bool:
    """Whether the database's schema revision is the newest migration (for ``/readyz``):
    read as a read (on SQLite without the write lock, so a long write never makes an
    instance look unready)."""
    with engine.connect().execution_options(**{READ_ONLY: True}) as connection:
        if not inspect(connection).has_table("alembic_version"):
            return False
        current = set(connection.scalars(text("SELECT version_num FROM alembic_version")))
    return current == migration_heads()
