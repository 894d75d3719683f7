"""API keys as stored (``api_keys``): only a key's SHA-256 is kept, with its name, scope and
public prefix (``app.services.auth`` makes and checks them)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import DateTime, bindparam, func, select, text
from sqlalchemy.orm import Session

from app.storage.engine import is_read_only, on_replica
from app.storage.models import KEY_ROW, ApiKey, KeyRow, Ladder
from app.storage.repositories.sql import SQLITE_IN_CHUNK, dialect_of


def active_named(*, session: Session, name: str) -> int:
    """How many active keys are named ``name``."""
    found = session.scalar(
        select(func.count())
        .select_from(ApiKey)
        .where(ApiKey.name == name, ApiKey.revoked_at.is_(None))
    )
    return int(found or 0)


def add(
    *,
    session: Session,
    name: str,
    scope: str,
    prefix: str,
    key_hash: str,
    now: datetime,
    ladders: str | None = None,
) -> None:
    session.add(
        ApiKey(
            name=name,
            scope=scope,
            prefix=prefix,
            key_hash=key_hash,
            created_at=now,
            ladders=ladders,
        )
    )
    session.flush()


def missing_ladders(*, session: Session, ladder_ids: Sequence[str]) -> list[str]:
    """Those of ``ladder_ids`` that are no ladder, in their order."""
    found: set[str] = set()
    for start in range(0, len(ladder_ids), SQLITE_IN_CHUNK):
        chunk = list(ladder_ids[start : start + SQLITE_IN_CHUNK])
        found.update(session.scalars(select(Ladder.id).where(Ladder.id.in_(chunk))))
    return [ladder_id for ladder_id in ladder_ids if ladder_id not in found]


def every_key(*, session: Session) -> list[ApiKey]:
    """Every key, revoked ones too, oldest first."""
    return list(session.scalars(select(ApiKey).order_by(ApiKey.created_at, ApiKey.id)))


def active_matching(*, session: Session, name_or_prefix: str) -> list[ApiKey]:
    """The active keys named or prefixed ``name_or_prefix``."""
    return list(
        session.scalars(
            select(ApiKey).where(
                (ApiKey.name == name_or_prefix) | (ApiKey.prefix == name_or_prefix),
                ApiKey.revoked_at.is_(None),
            )
        )
    )


def revoke(*, session: Session, key: ApiKey, now: datetime) -> None:
    key.revoked_at = now
    session.flush()


def any_key(*, session: Session) -> bool:
    """Whether the database holds any key at all."""
    return bool(session.scalar(select(func.count()).select_from(ApiKey)))


def by_hash(*, session: Session, key_hash: str) -> KeyRow | None:
    """The key whose SHA-256 is ``key_hash`` (revoked or not: the caller decides)."""
    row = session.execute(select(*KEY_ROW).where(ApiKey.key_hash == key_hash)).one_or_none()
    return None if row is None else KeyRow(*row)


def takes_writes(*, session: Session) -> bool:
    """Whether the session's transaction may write a key's use: not one on a replica, nor
    a SQLite read (which cannot take the write lock)."""
    if on_replica(session):
        return False
    return session.get_bind().dialect.name == "postgresql" or not is_read_only(session)


_RECORD_USE = text("UPDATE api_keys SET last_used_at = :now WHERE id = :id").bindparams(
    bindparam("now", type_=DateTime(timezone=True))
)
_RECORD_USE_SKIP_LOCKED = text(
    "UPDATE api_keys SET last_used_at = :now WHERE id = "
    "(SELECT id FROM api_keys WHERE id = :id FOR UPDATE SKIP LOCKED)"
).bindparams(bindparam("now", type_=DateTime(timezone=True)))


def record_use(*, session: Session, key_id: int, now: datetime) -> None:
    """Write a key's ``last_used_at`` in the session's transaction (one that
    :func:`takes_writes`). On PostgreSQL it skips a row another request is writing already
    (``SKIP LOCKED``: its use is being recorded, and waiting would make concurrent requests
    of one key queue)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_RECORD_USE_SKIP_LOCKED, {"id": key_id, "now": now})
    else:
        session.execute(_RECORD_USE, {"id": key_id, "now": now})


#: The PostgreSQL advisory lock that serialises first starts of several replicas.
_FIRST_KEY_LOCK = 0x72617469  # "rati"


def serialize_first_start(*, session: Session) -> None:
    """Make replicas starting together take turns until the transaction ends: on
    PostgreSQL a transaction-scoped advisory lock; SQLite's ``BEGIN IMMEDIATE`` already
    serialises them."""
    if dialect_of(session) == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": _FIRST_KEY_LOCK})
