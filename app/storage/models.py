"""The tables: ladders, player ratings, matches, participants, rating history, API keys,
the rating buckets that give a player's leaderboard rank without counting, the jobs
that run long re-ratings in the background, and each ladder's running prediction tallies.

Alembic (``migrations/``) is the only source of the schema; these models describe it.
Ratings are Gaussian beliefs (mu, sigma); Elo ladders keep ``sigma`` NULL, and only
Glicko-2 ladders fill ``volatility``. The stored
``conservative`` value (mu - k sigma, or mu for Elo) backs the leaderboard index.
Database triggers on ``ratings`` (migrations 0004 and 0016) keep ``rating_buckets`` and
``rating_blocks`` exact.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.domain.accuracy import FIELDS as TALLY_FIELDS

#: Constraint names follow one pattern, so migrations can name what they alter or drop.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: A number the database accepts as a rating value: finite (NaN compares false too).
FINITE = "BETWEEN -1.0e308 AND 1.0e308"

#: Each sigma is NULL (Elo) or a finite positive number.
SIGMAS_POSITIVE = (
    "(sigma_before IS NULL OR (sigma_before > 0 AND sigma_before <= 1.0e308)) AND "
    "(sigma_after IS NULL OR (sigma_after > 0 AND sigma_after <= 1.0e308))"
)

#: A volatility (Glicko-2) is NULL or a finite positive number.
VOLATILITY_POSITIVE = "{0} IS NULL OR ({0} > 0 AND {0} <= 1.0e308)"

#: An auto-incrementing 64-bit key (SQLite only auto-increments INTEGER PRIMARY KEY).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Ladder(Base):
    """One independent rating pool: an algorithm and its parameters."""

    __tablename__ = "ladders"
    __table_args__ = (
        CheckConstraint(
            "algorithm IN ('trueskill', 'plackett_luce', 'elo', 'glicko2', 'bradley_terry_full', "
            "'bradley_terry_part', 'thurstone_mosteller_full', 'thurstone_mosteller_part')",
            name="algorithm",
        ),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    algorithm: Mapped[str] = mapped_column(String(32))
    #: Every model parameter with its default filled in, plus tau_per_day and conservative_k.
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    #: The width of a rating bucket (a power of two), chosen once at creation from the
    #: model's scale; it only tunes how fast ranks are found, never what they are.
    bucket_width: Mapped[float] = mapped_column(Float, server_default=text("1.0"))
    #: The id of the current season (``seasons``): the first is "1" unless named.
    season: Mapped[str] = mapped_column(String(64), server_default=text("'1'"))
    #: The soft reset's ``keep`` of a new season whose request names none.
    season_keep: Mapped[float] = mapped_column(Float, server_default=text("1.0"))
    #: A player with fewer counted matches in the current season is provisional.
    placement_matches: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    #: The time the stored conservative ratings stand at, each widened for the player's
    #: time away (a ladder that ages ratings; NULL: not aged yet): ``app.services.inactivity``.
    aged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    #: The ladder's tiers (``app.domain.tiers``): [{"name", "min"}], highest first; NULL: none.
    tiers: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    #: While a season opens in steps (``season_openings``): its first history id. A player
    #: with no history row from it on is not reset yet (``app.services.seasons``).
    opening_from: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class PlayerRating(Base):
    """A player's current belief in one ladder."""

    __tablename__ = "ratings"
    __table_args__ = (
        CheckConstraint(f"mu {FINITE}", name="mu_finite"),
        CheckConstraint(f"conservative {FINITE}", name="conservative_finite"),
        CheckConstraint("sigma IS NULL OR (sigma > 0 AND sigma <= 1.0e308)", name="sigma_positive"),
        CheckConstraint("matches >= 0", name="matches_nonnegative"),
        CheckConstraint(VOLATILITY_POSITIVE.format("volatility"), name="volatility"),
    )

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    mu: Mapped[float] = mapped_column(Float)
    sigma: Mapped[float | None] = mapped_column(Float, nullable=True)
    conservative: Mapped[float] = mapped_column(Float)
    #: Glicko-2's volatility; NULL for every other algorithm.
    volatility: Mapped[float | None] = mapped_column(Float, nullable=True)
    matches: Mapped[int] = mapped_column(Integer, default=0)
    #: The counted matches before the current season (its own: ``matches - season_base``).
    season_base: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    last_played_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RatingBucket(Base):
    """How many of a ladder's players have a conservative rating in one bucket.

    Bucket ``b`` holds the ratings c with ``floor(c / bucket_width) = b``, that is
    ``b * width <= c < (b + 1) * width`` (clamped to +-2**53, whose buckets are open-ended).
    Each bucket is split into a few stripes (a hash of the player id) so that concurrent
    writers rarely update the same row; readers add the stripes up. Triggers on ``ratings``
    maintain it; nothing else writes it.
    """

    __tablename__ = "rating_buckets"

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    stripe: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    players: Mapped[int] = mapped_column(BigInteger)


class RatingBlock(Base):
    """How many of a bucket's players have an id in one block, per stripe: the players of
    bucket ``bucket`` whose id is at or after ``first_id`` and before the bucket's next
    block's. A bucket's first block starts at ``''``. They count a rank among tied players
    without walking the tie (``count_ahead``). Triggers on ``ratings`` maintain the counts
    (migration 0016); only :mod:`app.storage.blocks` moves the fences, cutting a block
    that grew large into pieces.
    """

    __tablename__ = "rating_blocks"
    __table_args__ = (
        # The blocks due to be cut: a stripe row above FULL_ROW players (app.storage.blocks).
        Index(
            "ix_rating_blocks_full",
            "ladder_id",
            postgresql_where=text("players > 128"),
            sqlite_where=text("players > 128"),
        ),
    )

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    first_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    stripe: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    players: Mapped[int] = mapped_column(BigInteger)


class LadderVersion(Base):
    """One stripe of a ladder's version: how many changing transactions were committed to
    the ladder (``app.storage.versions``). The version is the sum of the stripes."""

    __tablename__ = "ladder_versions"

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    stripe: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(BigInteger)


class RatingBucketDelta(Base):
    """PostgreSQL: bucket and block changes of an open transaction, applied to
    ``rating_buckets`` and ``rating_blocks`` by ordered statements when it commits (a
    deferred trigger), then deleted.

    Taking the bucket rows' locks last, all at once and in key order, is what keeps
    concurrent writers free of deadlocks. Unlogged: rows never outlive their transaction.
    (SQLite, with one writer at a time, updates ``rating_buckets`` directly.)
    """

    __tablename__ = "rating_bucket_deltas"

    txid: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    ladder_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    stripe: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    first_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    players: Mapped[int] = mapped_column(BigInteger)


class RatingBucketCommit(Base):
    """PostgreSQL: one row for each open transaction that changed ratings, whose insert
    fires the deferred trigger applying its deltas once, at commit (then deleted)."""

    __tablename__ = "rating_bucket_commits"

    txid: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)


class Match(Base):
    """A recorded match. ``seq`` is the arrival order: matches were applied in ``seq`` order."""

    __tablename__ = "matches"
    __table_args__ = (
        UniqueConstraint("ladder_id", "match_id", name="uq_matches_ladder_match_id"),
        Index("ix_matches_ladder_seq", "ladder_id", "seq"),
        # The voided matches only: a ladder's count is its matches (an index-only scan of
        # the index above) less these.
        Index(
            "ix_matches_voided",
            "ladder_id",
            postgresql_where=text("voided_at IS NOT NULL"),
            sqlite_where=text("voided_at IS NOT NULL"),
        ),
        CheckConstraint("quality IS NULL OR (quality >= 0 AND quality <= 1)", name="quality_range"),
    )

    seq: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    ladder_id: Mapped[str] = mapped_column(String(64), ForeignKey("ladders.id", ondelete="CASCADE"))
    match_id: Mapped[str] = mapped_column(String(128))
    #: sha256 of the canonical request body (without match_id): the idempotency check.
    body_hash: Mapped[str] = mapped_column(String(64))
    played_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    quality: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The canonical request (teams, outcome, weights, meta) so the match can be replayed.
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: The response document: as first sent until a void re-rates the match (a retry gets
    #: these bytes); a voided match's document says so.
    result: Mapped[str] = mapped_column(Text)
    #: Each team's probability of finishing first, from the ratings the match's update
    #: started from (``app.domain.accuracy``); NULL for matches recorded before it was
    #: stored (a rebuild fills it in) and where the model gave none.
    win_probabilities: Mapped[list[float] | None] = mapped_column(JSON, nullable=True)
    #: When the match was voided: it no longer counts; every later match of its players was
    #: re-rated as if it had never happened.
    voided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Participant(Base):
    """One player of one match: what finds a player's matches (``ix_participants_player``),
    voided ones included.

    Nothing more is repeated here: the player's team, place, weight and outcome are in the
    match's request and result document, the rating change in its ``rating_history`` rows
    (while it counts) and its result document.
    """

    __tablename__ = "participants"
    __table_args__ = (Index("ix_participants_player", "ladder_id", "player_id", "match_seq"),)

    match_seq: Mapped[int] = mapped_column(
        BigId, ForeignKey("matches.seq", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    ladder_id: Mapped[str] = mapped_column(String(64))


class RatingHistory(Base):
    """Every change of a player's rating: a match (``match_seq``; its match_id is the
    match's), or an adjustment (a seeded rating: no match).

    ``id`` orders one player's changes: re-rating rewrites rows in place and never renumbers
    them, so an adjustment keeps its place between the player's matches.
    """

    __tablename__ = "rating_history"
    __table_args__ = (
        CheckConstraint(f"mu_before {FINITE} AND mu_after {FINITE}", name="mu_finite"),
        CheckConstraint(SIGMAS_POSITIVE, name="sigma_positive"),
        CheckConstraint(
            f"({VOLATILITY_POSITIVE.format('volatility_before')}) AND "
            f"({VOLATILITY_POSITIVE.format('volatility_after')})",
            name="volatility_positive",
        ),
        ForeignKeyConstraint(
            ["ladder_id", "player_id"],
            ["ratings.ladder_id", "ratings.player_id"],
            ondelete="CASCADE",
            name="fk_rating_history_player_ratings",
        ),
        Index("ix_rating_history_player", "ladder_id", "player_id", "id"),
        Index("ix_rating_history_match_seq", "match_seq"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    ladder_id: Mapped[str] = mapped_column(String(64))
    player_id: Mapped[str] = mapped_column(String(128))
    match_seq: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("matches.seq", ondelete="CASCADE"), nullable=True
    )
    played_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    mu_before: Mapped[float] = mapped_column(Float)
    sigma_before: Mapped[float | None] = mapped_column(Float, nullable=True)
    mu_after: Mapped[float] = mapped_column(Float)
    sigma_after: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Glicko-2's volatility before and after; NULL for every other algorithm.
    volatility_before: Mapped[float | None] = mapped_column(Float, nullable=True)
    volatility_after: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: A season's soft reset (no match): the player's rating carried into the season.
    reset: Mapped[bool] = mapped_column(Boolean, server_default=false())


class Season(Base):
    """One season of a ladder, in order (``ordinal`` from 1). It holds the matches with seq
    from ``first_seq`` and the history rows with id from ``first_history_id``, up to the
    next season's: both drawn while its opening held the ladder alone. ``keep`` is the soft
    reset's factor that opened it (``app.rating.base.soft_reset``); the first season's is
    1 (nothing to reset)."""

    __tablename__ = "seasons"
    __table_args__ = (
        CheckConstraint("keep >= 0 AND keep <= 1", name="keep"),
        UniqueConstraint("ladder_id", "id", name="uq_seasons_ladder_id"),
    )

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    ordinal: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    id: Mapped[str] = mapped_column(String(64))
    keep: Mapped[float] = mapped_column(Float)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    first_seq: Mapped[int] = mapped_column(BigInteger)
    first_history_id: Mapped[int] = mapped_column(BigInteger)


class ScheduledSeason(Base):
    """The season a ladder opens by itself at ``starts_at`` (one at most per ladder): a
    worker's season clock deletes the row in the transaction that opens the season, so it
    opens once, and a crash before the commit leaves it for the next attempt."""

    __tablename__ = "season_schedule"
    __table_args__ = (CheckConstraint("keep >= 0 AND keep <= 1", name="keep"),)

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(64))
    keep: Mapped[float] = mapped_column(Float)
    starts_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AgingPass(Base):
    """The pass under way that brings a ladder's stored conservative ratings to ``as_of``
    (``ladders.aged_at`` is already that time): done through ``after_id`` (player ids in
    order), run by ``owner`` while its lease lasts; another worker takes it over after.
    Deleted when done."""

    __tablename__ = "aging_passes"

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    as_of: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    after_id: Mapped[str] = mapped_column(String(128))
    owner: Mapped[str] = mapped_column(String(64))
    lease_until: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SeasonOpening(Base):
    """The season opening under way on a ladder (one at most): the ladder is in season
    ``season`` already; the closing season's standings are archived and the soft reset
    applied in steps of players by id, done through ``after_id``, then the archive ranked
    in steps (``ranked``). A player is not reset yet while no history row of theirs has an
    id from the ladder's ``opening_from`` (the season's first) on. Run by ``owner`` while
    its lease lasts; another worker takes over after. Deleted when done."""

    __tablename__ = "season_openings"

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    season: Mapped[int] = mapped_column(Integer)
    after_id: Mapped[str] = mapped_column(String(128))
    #: Ranks written through this place of the archive's order (None: still resetting).
    ranked: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    owner: Mapped[str] = mapped_column(String(64))
    lease_until: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RatingTriggerPause(Base):
    """A ladder whose ratings a bulk rewrite is moving in and out of the rank counts itself
    (``app.storage.blocks.rewriting``): SQLite's update trigger skips its rows while the
    row exists, inside that rewrite's transaction alone. Empty between transactions."""

    __tablename__ = "rating_trigger_pauses"

    ladder_id: Mapped[str] = mapped_column(String(64), primary_key=True)


class SeasonStanding(Base):
    """A player's final standing in a closed season: the rating the next season's reset
    started from (its history row's "before"), the season's counted matches, and the rank
    among the season's players (conservative rating, highest first; ties by player id).
    A re-rating that reaches the reset rewrites it."""

    __tablename__ = "season_standings"
    __table_args__ = (
        ForeignKeyConstraint(
            ["ladder_id", "player_id"],
            ["ratings.ladder_id", "ratings.player_id"],
            ondelete="CASCADE",
            name="fk_season_standings_player_ratings",
        ),
        Index("ix_season_standings_rank", "ladder_id", "season", "rank"),
    )

    ladder_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    season: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    player_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    rank: Mapped[int] = mapped_column(BigInteger)
    mu: Mapped[float] = mapped_column(Float)
    sigma: Mapped[float | None] = mapped_column(Float, nullable=True)
    conservative: Mapped[float] = mapped_column(Float)
    volatility: Mapped[float | None] = mapped_column(Float, nullable=True)
    matches: Mapped[int] = mapped_column(Integer)
    last_played_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class LadderEventCounter(Base):
    """The number of a ladder's newest event (``events.seq``): taken under this row's lock
    as a transaction's last statement but its version's, so a ladder's events are
    numbered in the order their transactions commit."""

    __tablename__ = "ladder_event_counters"

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(BigInteger)


class Event(Base):
    """A change a consumer acts on, written in the transaction that made it (the outbox):
    ``seq`` numbers a ladder's events in commit order, ``data`` is its JSON document.
    ``match_seq`` and ``player_id`` name what it is about (erasure rewrites those)."""

    __tablename__ = "events"
    __table_args__ = (
        Index(
            "ix_events_match_seq",
            "match_seq",
            postgresql_where=text("match_seq IS NOT NULL"),
            sqlite_where=text("match_seq IS NOT NULL"),
        ),
        Index(
            "ix_events_player",
            "ladder_id",
            "player_id",
            postgresql_where=text("player_id IS NOT NULL"),
            sqlite_where=text("player_id IS NOT NULL"),
        ),
    )

    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    id: Mapped[str] = mapped_column(String(32))
    type: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    data: Mapped[str] = mapped_column(Text)
    match_seq: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    player_id: Mapped[str | None] = mapped_column(String(128), nullable=True)


class Webhook(Base):
    """A receiver of events (``app.services.webhooks``): its URL, the types and ladders it
    receives, the secret its deliveries are signed with, and the worker that holds it."""

    __tablename__ = "webhooks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(JSON)
    #: The ladders whose events it receives; NULL: every ladder.
    ladders: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    secret: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    #: The worker that sends its events, until ``lease_until``.
    owner: Mapped[str | None] = mapped_column(String(32), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class WebhookCursor(Base):
    """Where a receiver stands in a ladder's events: done with every one up to
    ``after_seq`` (delivered, given up on, or not of a type it receives)."""

    __tablename__ = "webhook_cursors"

    webhook_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("webhooks.id", ondelete="CASCADE"), primary_key=True
    )
    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    after_seq: Mapped[int] = mapped_column(BigInteger)


class WebhookDelivery(Base):
    """An event sent to a receiver: delivered, being retried, or given up on (failed)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_latest", "webhook_id", "last_attempt_at"),
        CheckConstraint("status IN ('delivered', 'retrying', 'failed')", name="status"),
    )

    webhook_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("webhooks.id", ondelete="CASCADE"), primary_key=True
    )
    ladder_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("ladders.id", ondelete="CASCADE"), primary_key=True
    )
    event_seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    event_id: Mapped[str] = mapped_column(String(32))
    event_type: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    first_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ApiKey(Base):
    """A client key. Only its sha256 is stored; ``prefix`` is the public part shown in lists."""

    __tablename__ = "api_keys"
    __table_args__ = (CheckConstraint("scope IN ('read', 'write', 'admin')", name="scope"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    scope: Mapped[str] = mapped_column(String(8))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    #: The JSON text of the ladder ids the key is good for, sorted (None: every ladder).
    ladders: Mapped[str | None] = mapped_column(Text, nullable=True)


class KeyRow(NamedTuple):
    """The columns of an ``api_keys`` row that a request's check reads."""

    id: int
    scope: str
    prefix: str
    key_hash: str
    revoked_at: datetime | None
    last_used_at: datetime | None
    #: The ladders it is limited to, as stored (JSON text; None: every ladder).
    ladders: str | None = None


class KeySeen(NamedTuple):
    """What a read's validator statement reads of the presented key (``app.storage.versions``):
    enough to check it for a read, which every scope allows, and to tell whether its use is
    to be recorded (a transaction that records it reads the whole row). Four columns, not
    the six of a :class:`KeyRow`: the wider list made PostgreSQL grow and trim its heap on
    every read, 0.04 ms of its CPU each."""

    scope: str
    key_hash: str
    revoked_at: datetime | None
    last_used_at: datetime | None
    #: As :attr:`KeyRow.ladders`.
    ladders: str | None = None


#: The columns of a :class:`KeyRow`.
KEY_ROW = (
    ApiKey.id,
    ApiKey.scope,
    ApiKey.prefix,
    ApiKey.key_hash,
    ApiKey.revoked_at,
    ApiKey.last_used_at,
    ApiKey.ladders,
)


class ConsoleSession(Base):
    """A signed-in console session: its cookie holds a random token, never the API key,
    and only the token's sha256 is stored (as a key's is). The session reads with its key's
    scope while the key is active, until ``expires_at`` or sign-out."""

    __tablename__ = "console_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Job(Base):
    """A re-rating (a void, a rebuild with new parameters) or a fit of a ladder's parameters
    (applied with a rebuild when asked) run in the background by the worker that accepted
    it, in one transaction of its own (a fit runs before that transaction, which applies it).

    ``done`` and ``total`` (matches re-rated, of how many) and ``heartbeat_at`` are written
    while that transaction is open, from short transactions of their own; ``result`` (what
    the inline answer would have been) or ``error`` (a problem document) when it ends.
    ``owner`` names the worker process (host, process id, a token of that start), which
    tells whether the job can still end. No foreign key to the ladder: inserting one would
    wait for the very re-rating of that ladder it is queued behind (which holds the ladder's
    row).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("kind IN ('void', 'rebuild', 'fit')", name="kind"),
        CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name="state"
        ),
        Index("ix_jobs_ladder_id", "ladder_id", "state"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    ladder_id: Mapped[str] = mapped_column(String(64))
    #: What to run: ``{"match_id": ...}`` for a void, the PATCH body for a rebuild.
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    done: Mapped[int] = mapped_column(Integer)
    total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    owner: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


#: Each ladder's running tally of how its stored predictions scored
#: (``app.domain.accuracy.Tally``, one integer column per field), over the matches that
#: count. Split into stripes: a recording adds its matches' share to one stripe chosen at
#: random, so concurrent writers of one ladder seldom wait for each other's row; readers
#: add the stripes up. Kept in the transaction of every write that changes it (recording,
#: void, rebuild).
LADDER_ACCURACY = Table(
    "ladder_accuracy",
    Base.metadata,
    Column(
        "ladder_id",
        String(64),
        ForeignKey("ladders.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("stripe", Integer, primary_key=True, autoincrement=False),
    *(Column(name, BigInteger, nullable=False) for name in TALLY_FIELDS),
)


#: The leaderboard order (conservative rating, highest first; ties by player id) as an
#: index, so every leaderboard page is one index range scan. The match counts ride along
#: (after the order): a rank on a ladder with placement or a page with ``min_matches``
#: tells placed and qualified players from the index alone.
Index(
    "ix_ratings_leaderboard",
    PlayerRating.ladder_id,
    PlayerRating.conservative.desc(),
    PlayerRating.player_id,
    PlayerRating.matches,
    PlayerRating.season_base,
)
