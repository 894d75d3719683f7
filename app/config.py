"""Settings, read once from ``RATINGS_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: ``ratings serve`` sets it to "1" for its workers unless the operator set it: each
#: worker then tunes its garbage collector when it starts (``app.main.tune_gc``).
GC_TUNING_ENV = "RATINGS_GC_TUNING"

#: The file name of the default SQLite database (:func:`default_database_path`).
DATABASE_FILE = "ratings.db"
#: The folder ``app/`` is in: a source checkout's root, or an installed package's
#: ``site-packages``.
PACKAGE_PARENT = Path(__file__).resolve().parents[1]


def default_database_path() -> Path:
    """The SQLite file used when ``RATINGS_DATABASE_URL`` is not set, the same whatever
    the working directory: ``ratings.db`` at the root of a source checkout (the folder
    holding ``pyproject.toml`` beside ``app/``, where ``scripts/serve`` and the ``ratings``
    command of its ``.venv`` both find it); for an installed package, which has no such
    folder, ``ratings/ratings.db`` in the user's data folder (``$XDG_DATA_HOME``, by
    default ``~/.local/share``)."""
    if (PACKAGE_PARENT / "pyproject.toml").is_file():
        return PACKAGE_PARENT / DATABASE_FILE
    data = Path(os.environ.get("XDG_DATA_HOME") or "~/.local/share").expanduser()
    if not data.is_absolute():  # the XDG rule: a relative value is ignored
        data = Path("~/.local/share").expanduser()
    return data / "ratings" / DATABASE_FILE


def default_database_url() -> str:
    """The SQLAlchemy URL of :func:`default_database_path`."""
    return f"sqlite:///{default_database_path().as_posix()}"


#: The API's reads, as ``RATINGS_CACHE_CONTROL`` names them (``app.api.reads``).
READ_NAMES = (
    "ladders",
    "ladder",
    "leaderboard",
    "player",
    "seasons",
    "season_leaderboard",
    "history",
    "matches",
    "match",
    "accuracy",
    "quality",
    "matchmaking",
    "events",
)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The rate limit of ``RATINGS_RATE_LIMIT_*`` (:attr:`Settings.rate_limit`)."""

    per_second: float = 0.0
    burst: int = 0
    loopback: bool = False
    max_clients: int = 100_000
    #: Redis shared by every worker of every instance (empty: buckets per worker).
    redis_url: str = ""
    #: The prefix of the buckets' Redis keys.
    redis_prefix: str = "ratings:rate:"

    @property
    def capacity(self) -> float:
        """The tokens of a bucket: the burst, or one second's worth (at least 1)."""
        return float(self.burst) if self.burst else max(1.0, self.per_second)


class Settings(BaseSettings):
    """The service's configuration; every field is ``RATINGS_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="RATINGS_", extra="ignore")

    #: Any SQLAlchemy URL; a plain ``postgresql://`` URL uses psycopg 3. Unset: the SQLite
    #: file of :func:`default_database_path`, never one relative to the working directory.
    database_url: str = Field(default_factory=default_database_url)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    #: Largest request body accepted, in bytes; larger bodies get 413.
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    #: Largest body of a request without a key (the open queries, the console's sign-in),
    #: in bytes; larger ones get 413. A request that needs a key and has none is refused
    #: before its body is read.
    max_keyless_body_bytes: int = Field(default=256 * 1024, ge=1024)
    #: How long a request's head (request line and headers) may take to arrive, in seconds;
    #: a connection slower than that is closed (``app.api.protocol``).
    header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    #: How long a request's body may take to arrive after its head, in seconds; slower:
    #: 408 and the connection closed.
    body_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    #: How long an idle keep-alive connection is kept open, in seconds (uvicorn's
    #: ``--timeout-keep-alive``).
    keep_alive_s: int = Field(default=5, ge=1, le=3600)
    #: When true, reads need a key of scope ``read`` too (and ``/metrics`` a key or the
    #: metrics token).
    require_read_key: bool = False
    #: A token a scraper may send for ``/metrics`` (``Authorization: Bearer``) instead of an
    #: API key; once set, ``/metrics`` needs it or a key even while reads are open.
    metrics_token: SecretStr | None = None
    #: Connections per worker (PostgreSQL); the pool overflows by the same number.
    pool_size: int = Field(default=10, ge=1, le=200)
    #: PostgreSQL statement timeout in milliseconds (0: none).
    statement_timeout_ms: int = Field(default=10_000, ge=0)
    #: ``transaction``: the database URL is a pooler in transaction mode (PgBouncer's
    #: ``pool_mode = transaction``), whose server connections change hands between
    #: transactions: no startup parameter it refuses, no server-side prepared statement,
    #: and the statement timeout set in each transaction (``SET LOCAL``). Empty: a server.
    database_pooler: Literal["", "transaction"] = ""
    #: How much longer than the statement timeout the service waits for any reply of
    #: PostgreSQL before it closes the connection as frozen, in milliseconds.
    reply_grace_ms: int = Field(default=5_000, ge=0)
    #: How long a new PostgreSQL connection may take, in seconds (libpq's
    #: ``connect_timeout``, per address tried; also the bound of the ping of an idle one).
    connect_timeout_s: int = Field(default=5, ge=2, le=600)
    #: How long a request waits for a free pooled connection, in seconds.
    pool_timeout_s: float = Field(default=10.0, gt=0, le=600)
    #: TCP keepalive on PostgreSQL connections: idle seconds before the first probe, seconds
    #: between probes, and unanswered probes before the kernel drops the connection.
    tcp_keepalives_idle_s: int = Field(default=10, ge=1, le=3600)
    tcp_keepalives_interval_s: int = Field(default=5, ge=1, le=600)
    tcp_keepalives_count: int = Field(default=3, ge=1, le=100)
    #: How long data sent to PostgreSQL may stay unacknowledged before the kernel drops the
    #: connection, in milliseconds (libpq's ``tcp_user_timeout``; 0: the system's default).
    tcp_user_timeout_ms: int = Field(default=20_000, ge=0)
    #: SQLite busy timeout in milliseconds: how long a writer waits for the lock.
    sqlite_busy_timeout_ms: int = Field(default=30_000, ge=0)
    #: Most single-match POSTs a worker writes in one transaction (group commit).
    write_group_max: int = Field(default=16, ge=1, le=256)
    #: How long a busy worker waits for more single matches before it writes the next
    #: group, in milliseconds (0: never waits).
    write_group_wait_ms: float = Field(default=1.0, ge=0, le=100)
    #: Most matches a void or a rebuild re-rates inside its request; a larger one (or one
    #: sent with ``Prefer: respond-async``, or one of a ladder with a job pending) is a job:
    #: ``202 Accepted`` and ``GET /v1/jobs/{id}``.
    rebuild_inline_max: int = Field(default=10_000, ge=0)
    #: Seconds a running job's heartbeat stays good (PostgreSQL): a job whose worker has
    #: not written one for longer is reported failed. Heartbeats go every third of it.
    job_lease_s: float = Field(default=30.0, ge=0.5, le=3600)
    #: How often each worker's season clock looks for a scheduled season that is due, in
    #: seconds: a season opens at most this long after its ``starts_at``.
    season_clock_s: float = Field(default=1.0, ge=0.01, le=3600)
    #: How long the worker running a season's opening or an inactivity pass holds it after
    #: its last step, in seconds: if the worker stops (a crash, a kill -9), another
    #: worker of any instance takes the rest over once this has passed.
    scheduled_lease_s: float = Field(default=60.0, ge=1, le=3600)
    #: How often each worker looks for a ladder whose inactive players are due to be aged
    #: again (or whose pass a stopped worker left half done), in seconds.
    aging_clock_s: float = Field(default=60.0, ge=0.01, le=86_400)
    #: How old the time a ladder's ratings are aged to may grow before a new pass brings
    #: them to now, in seconds (a day: the leaderboard's order is at most a day old).
    aging_every_s: float = Field(default=86_400.0, ge=1, le=30 * 86_400)
    #: How long a ``player.erased`` event keeps the erased id, for the systems that mirror
    #: the ladder's events to erase it too, in seconds (7 days); then its ``player_id`` is
    #: null, and the id is nowhere in the database.
    erasure_notice_s: float = Field(default=7 * 86_400.0, ge=0, le=365 * 86_400)
    #: Webhooks (``app.services.webhooks``): how long a delivery waits for its receiver's
    #: answer, in seconds.
    webhook_timeout_s: float = Field(default=10.0, gt=0, le=300)
    #: How long a failing event is retried (with backoff) before it is marked failed and
    #: the next ones go, in seconds (a day).
    webhook_retry_s: float = Field(default=86_400.0, ge=0, le=30 * 86_400)
    #: How long a worker holds the receivers it sends to before another may take them
    #: over (it renews the lease every poll while it lives), in seconds.
    webhook_lease_s: float = Field(default=30.0, ge=0.5, le=3600)
    #: How often each worker looks for events to send and receivers to take, in seconds.
    webhook_poll_s: float = Field(default=0.5, ge=0.01, le=3600)
    #: Receivers a worker sends to at once, each from a thread of its own.
    webhook_threads: int = Field(default=8, ge=1, le=256)
    #: How long the feed keeps an event, in seconds (30 days; 0: for ever). Each worker's
    #: event chores delete older ones, oldest first, a ladder at a time.
    event_retention_s: float = Field(default=30 * 86_400.0, ge=0, le=10 * 365 * 86_400)
    #: How long ``/readyz`` waits for the database before answering 503, in seconds.
    readiness_timeout_s: float = Field(default=2.0, gt=0, le=60)
    #: uvicorn's log level: critical, error, warning, info, debug or trace.
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = "info"
    #: A streaming replica of ``database_url`` for reads (any SQLAlchemy URL); unset: reads
    #: go to ``database_url``. A read sent with ``Ratings-Read-From: primary`` goes there.
    read_database_url: str | None = None
    #: How long a read sent with a ``Ratings-Consistency-Token`` waits for the replica to
    #: replay that far before it goes to the primary instead, in milliseconds.
    consistency_wait_ms: float = Field(default=250.0, ge=0, le=10_000)
    #: ``Cache-Control`` of the reads: ``*`` for all of them, or a read's name
    #: (``ladders``, ``ladder``, ``leaderboard``, ``player``, ``history``, ``matches``,
    #: ``match``, ``accuracy``, ``quality``) for one; JSON in the environment, e.g.
    #: ``{"leaderboard": "public, max-age=5"}``. Unnamed reads get ``*``'s.
    cache_control: dict[str, str] = Field(default_factory=dict)
    #: Answers of reads a worker keeps for the next request of the same state, in MiB
    #: (0: none).
    read_cache_mb: float = Field(default=32.0, ge=0, le=65536)
    #: FastAPI's OpenTelemetry instrumentation (traces, metrics and logs through the
    #: providers the process configures). Off by default: even with no provider it looks
    #: for one on every request, a tenth of a cached read's cost.
    opentelemetry: bool = False
    #: Rate limiting (``app.api.ratelimit``): sustained requests per second of one client,
    #: per worker (0 turns it off); requests a client may send at once (0: one second's
    #: worth, at least 1); whether loopback clients are limited too; buckets kept per
    #: worker (the least recently seen client is forgotten first).
    rate_limit_per_second: float = Field(default=0.0, ge=0.0, le=1e6)
    rate_limit_burst: int = Field(default=0, ge=0, le=10**6)
    rate_limit_loopback: bool = False
    rate_limit_max_clients: int = Field(default=100_000, ge=1)
    #: The proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed:
    #: addresses or networks, comma-separated (``RATINGS_TRUSTED_PROXIES=10.0.0.5,
    #: 10.1.0.0/16``; ``*`` trusts every peer). Empty (the default): none, a client is the
    #: address it connects from.
    trusted_proxies: str = Field(default="", max_length=4096)
    #: Redis (``redis://host:port/db``) holding the rate limit's buckets, shared by every
    #: worker of every instance; empty: each worker keeps its own.
    redis_url: str = Field(default="", max_length=4096)
    #: The prefix of the rate limit's keys in that Redis (instances of one service share it).
    redis_prefix: str = Field(default="ratings:rate:", max_length=256)
    #: Whether a worker tunes its garbage collector when it starts (``app.main.tune_gc``):
    #: ``ratings serve`` turns it on for its workers unless the operator set it.
    gc_tuning: bool = False

    @property
    def rate_limit(self) -> RateLimit:
        return RateLimit(
            per_second=self.rate_limit_per_second,
            burst=self.rate_limit_burst,
            loopback=self.rate_limit_loopback,
            max_clients=self.rate_limit_max_clients,
            redis_url=self.redis_url,
            redis_prefix=self.redis_prefix,
        )

    @property
    def database_url_is_default(self) -> bool:
        """Whether ``database_url`` is the default (``RATINGS_DATABASE_URL`` not set)."""
        return "database_url" not in self.model_fields_set

    @field_validator("cache_control")
    @classmethod
    def _cache_control_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header in value.items():
            if name != "*" and name not in READ_NAMES:
                raise ValueError(f"{name!r} is not a read: one of *, {', '.join(READ_NAMES)}")
            if not all(" " <= char <= "~" for char in header):
                raise ValueError(f"{name}: a header value is printable ASCII on one line")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_case_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, loaded once."""
    return Settings()
