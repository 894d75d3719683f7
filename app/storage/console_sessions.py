"""The console's sessions (``console_sessions``, migration 0018): a token's hash, its key
and when it expires."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.storage.models import KEY_ROW, ApiKey, ConsoleSession, KeyRow


def add(
    *, session: Session, token_hash: str, key_id: int, now: datetime, expires_at: datetime
) -> None:
    """A new session; the expired ones of every key go at the same time."""
    session.execute(delete(ConsoleSession).where(ConsoleSession.expires_at <= now))
    session.execute(
        insert(ConsoleSession).values(
            token_hash=token_hash, key_id=key_id, created_at=now, expires_at=expires_at
        )
    )


def key_of(*, session: Session, token_hash: str, now: datetime) -> KeyRow | None:
    """The key of a session that has not expired (revoked or not: the caller decides)."""
    row = session.execute(
        select(*KEY_ROW)
        .join(ConsoleSession, ConsoleSession.key_id == ApiKey.id)
        .where(ConsoleSession.token_hash == token_hash, ConsoleSession.expires_at > now)
    ).one_or_none()
    return None if row is None else KeyRow(*row)


def remove(*, session: Session, token_hash: str) -> None:
    session.execute(delete(ConsoleSession).where(ConsoleSession.token_hash == token_hash))
