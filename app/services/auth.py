"""API keys: ``Authorization: Bearer <key>``, scopes read < write < admin.

A key looks like ``rk_1a2b3c4d_<43 url-safe characters>``: ``rk_1a2b3c4d`` is its public
prefix (shown in listings, used to revoke it), the rest is 256 random bits from
``secrets``. Only the SHA-256 of the whole key is stored (``api_keys.key_hash``).

Why a plain SHA-256 and not bcrypt/scrypt/argon2: slow, salted hashes exist to make guessing
low-entropy *passwords* expensive. A key here is 256 bits from the operating system's CSPRNG,
so even a leaked hash table cannot be brute-forced, and an unsalted fast hash lets every
request find its key with one indexed equality lookup instead of spending ~100 ms in a
password hash. The digest found is still compared with ``hmac.compare_digest``.

No cache: every request reads the key row, so a revoked key is refused at once, by every
worker and replica. Recording a match reads it in the same statement as the ladder
(:func:`check_key`), the other routes with :func:`authorize`. Keys are never logged;
only names and prefixes appear in output.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from sqlalchemy.orm import Session

from app.domain.documents.keys import KeyCreated, KeyList, KeyOut
from app.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthorized
from app.storage import console_sessions
from app.storage.models import ApiKey, KeyRow, KeySeen
from app.storage.repositories import keys
from app.storage.unit_of_work import Transact

#: The scopes, weakest first; a key may do everything its scope and the weaker ones allow.
SCOPES: tuple[str, ...] = ("read", "write", "admin")
#: Each scope's place in :data:`SCOPES`.
SCOPE_RANK = {scope: rank for rank, scope in enumerate(SCOPES)}

#: ``last_used_at`` is written at most this often per key, so a busy key's row is not a
#: point of contention between workers.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class NewKey:
    """A key just made: the plaintext ``key`` exists only here, once."""

    name: str
    scope: str
    prefix: str
    key: str
    created_at: datetime
    #: The ladders it is limited to (None: every ladder).
    ladders: list[str] | None = None


@dataclass(frozen=True)
class KeyInfo:
    """What may be shown about a key: never its hash or plaintext."""

    name: str
    scope: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    ladders: list[str] | None = None


def generate_key() -> str:
    """A fresh key ``rk_<8 hex>_<secret>`` with 32 + 256 random bits."""
    return f"rk_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"


def key_prefix(key: str) -> str:
    """The public part of ``key`` (``rk_<8 hex>``), at most 16 characters."""
    return key[:11]


def hash_key(key: str) -> str:
    """The SHA-256 hex digest of the whole key, as stored in ``api_keys.key_hash``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _utc(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes even for timezone-aware columns; they are UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _info(row: ApiKey) -> KeyInfo:
    return KeyInfo(
        name=row.name,
        scope=row.scope,
        prefix=row.prefix,
        created_at=_utc(row.created_at),
        revoked_at=_utc(row.revoked_at) if row.revoked_at is not None else None,
        last_used_at=_utc(row.last_used_at) if row.last_used_at is not None else None,
        ladders=limited_to(row.ladders) if row.ladders is not None else None,
    )


#: The most ladders one key may be limited to.
MAX_KEY_LADDERS = 1_000


def create_key(
    session: Session, *, name: str, scope: str, ladders: Sequence[str] | None = None
) -> NewKey:
    """Make and store a key named ``name``, limited to ``ladders`` (None: good for every
    ladder); the returned plaintext is never stored.

    Raises ``InvalidInput`` for an unknown scope, a bad name, or ladders that are none or
    not there, ``Conflict`` when an active key already has that name (names identify keys
    to revoke).
    """
    if scope not in SCOPE_RANK:
        raise InvalidInput(f"scope: must be one of {', '.join(SCOPES)}")
    if not 1 <= len(name) <= 128 or not name.isprintable() or name != name.strip():
        raise InvalidInput("name: 1 to 128 printable characters, no surrounding spaces")
    limited = _key_ladders(session, ladders)
    if keys.active_named(session=session, name=name):
        raise Conflict(f"name: an active key is already named {name!r}")
    key = generate_key()
    prefix = key_prefix(key)
    now = datetime.now(UTC)
    keys.add(
        session=session,
        name=name,
        scope=scope,
        prefix=prefix,
        key_hash=hash_key(key),
        now=now,
        ladders=json.dumps(limited) if limited is not None else None,
    )
    return NewKey(name=name, scope=scope, prefix=prefix, key=key, created_at=now, ladders=limited)


def _key_ladders(session: Session, ladders: Sequence[str] | None) -> list[str] | None:
    """The ladders a new key is limited to, sorted, each once; every one must exist."""
    if ladders is None:
        return None
    limited = sorted(set(ladders))
    if not 1 <= len(limited) <= MAX_KEY_LADDERS:
        raise InvalidInput(
            f"ladders: 1 to {MAX_KEY_LADDERS:,} ladder ids, or null for a key good for every ladder"
        )
    missing = keys.missing_ladders(session=session, ladder_ids=limited)
    if missing:
        raise InvalidInput(f"ladders: no ladder {missing[0][:64]!r}")
    return limited


def list_keys(session: Session) -> list[KeyInfo]:
    """Every key, revoked ones too, oldest first."""
    return [_info(row) for row in keys.every_key(session=session)]


def revoke_key(session: Session, *, name_or_prefix: str, by_prefix: bool = False) -> KeyInfo:
    """Revoke the one active key with this name or prefix (``by_prefix``: this prefix);
    refused from the next request on, by every worker and instance (no key is cached).

    Raises ``NotFound`` when no active key matches, ``Conflict`` when several do.
    """
    rows = [
        row
        for row in keys.active_matching(session=session, name_or_prefix=name_or_prefix)
        if not by_prefix or row.prefix == name_or_prefix
    ]
    if not rows:
        raise NotFound(f"key: no active key is named or prefixed {name_or_prefix!r}")
    if len(rows) > 1:
        raise Conflict(f"key: {len(rows)} active keys match {name_or_prefix!r}; use the prefix")
    row = rows[0]
    keys.revoke(session=session, key=row, now=datetime.now(UTC))
    return _info(row)


def created_document(new: NewKey) -> KeyCreated:
    """What ``POST /v1/keys`` answers: the key, this once."""
    return KeyCreated.model_validate(asdict(new))


def key_document(info: KeyInfo) -> KeyOut:
    """A key as the API lists it."""
    return KeyOut.model_validate(asdict(info))


def key_list(session: Session) -> KeyList:
    """Every key, revoked ones too, oldest first, as the API lists them."""
    return KeyList(keys=[key_document(info) for info in list_keys(session)])


def ensure_first_admin_key(session: Session) -> NewKey | None:
    """On a database with no keys at all, make an admin key named ``admin`` and return it.

    Replicas starting together on PostgreSQL take a transaction-scoped advisory lock first,
    so only one of them makes the key (SQLite's ``BEGIN IMMEDIATE`` already serialises).
    """
    keys.serialize_first_start(session=session)
    if keys.any_key(session=session):
        return None
    return create_key(session, name="admin", scope="admin")


def authorize(
    session: Session,
    key: str,
    needed: str,
    *,
    ladder: str | None = None,
    any_ladder: bool = False,
    transact: Transact | None = None,
) -> KeyRow:
    """The row of ``key`` when it allows ``needed`` on ``ladder`` (:func:`check_key`: else
    its 401 or 403; ``any_ladder``: whatever ladders it is limited to). Its use is recorded
    (at most once per :data:`LAST_USED_RESOLUTION`) in the session's transaction, or, when
    that cannot write (a read on a replica, or SQLite's), in one of ``transact``'s on the
    primary (a caller whose session writes passes none)."""
    digest = hash_key(key)
    row = check_key(
        keys.by_hash(session=session, key_hash=digest),
        digest,
        needed,
        ladder,
        any_ladder=any_ladder,
    )
    now = datetime.now(UTC)
    if use_due(row, now):
        if transact is None or keys.takes_writes(session=session):
            keys.record_use(session=session, key_id=row.id, now=now)
        else:
            key_id = row.id
            transact(lambda own: keys.record_use(session=own, key_id=key_id, now=now))
    return row


def is_active(session: Session, key: str) -> bool:
    """Whether ``key`` is an active key, of any scope (its use recorded, as every check
    records it)."""
    try:
        authorize(session, key, SCOPES[0], any_ladder=True)
    except Unauthorized:
        return False
    return True


#: How long a console session lasts after sign-in (its cookie ends with the browser
#: session sooner, if the browser is closed).
CONSOLE_SESSION = timedelta(hours=12)


def console_token_hash(token: str) -> str:
    """The SHA-256 of a console session's token, as ``console_sessions`` keeps it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def sign_in(session: Session, *, key: str, now: datetime) -> str | None:
    """A console session for an active ``key``: its token (256 random bits, kept only as
    a hash), or None for an unknown or revoked key. The cookie holds the token, so a stolen
    cookie is not a key: it reads until the session expires, is signed out, or the key is
    revoked, and can do nothing else."""
    try:
        row = authorize(session, key, SCOPES[0], any_ladder=True)
    except Unauthorized:
        return None
    token = secrets.token_urlsafe(32)
    console_sessions.add(
        session=session,
        token_hash=console_token_hash(token),
        key_id=row.id,
        now=now,
        expires_at=now + CONSOLE_SESSION,
    )
    return token


def console_key(session: Session, token: str, needed: str, ladder: str | None = None) -> KeyRow:
    """The key of a console session when it allows ``needed`` on ``ladder``: the 401 of an
    unknown session, an expired one or one whose key was revoked, the 403 of a scope too
    small or a ladder outside the key's (:func:`check_key`, the session standing for its
    key)."""
    row = console_sessions.key_of(
        session=session, token_hash=console_token_hash(token), now=datetime.now(UTC)
    )
    return check_key(row, row.key_hash if row is not None else "", needed, ladder)


def sign_out(session: Session, *, token: str) -> None:
    """End a console session (its token no longer reads)."""
    console_sessions.remove(session=session, token_hash=console_token_hash(token))


def unknown_key() -> Unauthorized:
    """The 401 of a key that is unknown or revoked."""
    return Unauthorized(
        "Authorization: the key is unknown or revoked",
        headers={"WWW-Authenticate": 'Bearer realm="ratings", error="invalid_token"'},
    )


def too_weak(prefix: str, scope: str, needed: str) -> Forbidden:
    """The 403 of a valid key whose scope is below ``needed``."""
    return Forbidden(f"Authorization: key {prefix} has scope {scope}; {needed} needed")


#: A key as read to be checked: the whole row, or what a read's validator reads of it.
Key = TypeVar("Key", KeyRow, KeySeen)


def check_key(
    row: Key | None, digest: str, needed: str, ladder: str | None, *, any_ladder: bool = False
) -> Key:
    """The one check of a key: the row found for ``digest`` (:func:`hash_key`; None: none
    found) is active and allows ``needed`` on ``ladder`` (None: a route that is not one
    ladder's), or the 401 or 403. Every request's key goes through it: :func:`authorize`,
    the reads' validator statement (``app.api.reads``) and recording
    (``app.services.recording.record_group``), which read the row in the same statement as
    their own first rows.

    A key limited to some ladders is good for those ladders' routes alone: any other
    ladder's, and every route that is not one ladder's (the ladder list, making a ladder,
    keys, webhooks), is a 403, so it can never make itself a wider key. ``any_ladder``
    skips that (a console sign-in, whose pages are checked one by one)."""
    if row is None or not hmac.compare_digest(row.key_hash, digest) or row.revoked_at is not None:
        raise unknown_key()
    prefix = row.prefix if isinstance(row, KeyRow) else "(this key)"
    if SCOPE_RANK.get(row.scope, -1) < SCOPE_RANK[needed]:
        raise too_weak(prefix, row.scope, needed)
    if row.ladders is not None and not any_ladder:
        limited = limited_to(row.ladders)
        if ladder not in limited:
            raise outside(prefix, limited, ladder)
    return row


def limited_to(stored: str) -> list[str]:
    """The ladders of a limited key, from their stored JSON text."""
    return [str(ladder) for ladder in json.loads(stored)]


def outside(prefix: str, limited: Sequence[str], ladder: str | None) -> Forbidden:
    """The 403 of a key limited to ``limited`` on another ladder, or on a route that is not
    one ladder's (``ladder`` None)."""
    names = ", ".join(limited)
    if ladder is None:
        return Forbidden(
            f"Authorization: key {prefix} is limited to the ladders {names}: good for their "
            "routes alone, not for this one"
        )
    return Forbidden(
        f"Authorization: key {prefix} is limited to the ladders {names}, not {ladder[:64]!r}"
    )


def use_due(row: KeyRow | KeySeen, now: datetime) -> bool:
    """Whether ``last_used_at`` is to be written (at most once per
    :data:`LAST_USED_RESOLUTION` per key)."""
    return row.last_used_at is None or now - _utc(row.last_used_at) >= LAST_USED_RESOLUTION


def record_use(session: Session, *, key_id: int, now: datetime) -> None:
    """Write the key's ``last_used_at`` (``keys.record_use``)."""
    keys.record_use(session=session, key_id=key_id, now=now)
