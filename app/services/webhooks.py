"""Webhooks: each event a receiver asked for, POSTed to it as JSON, signed, at least once,
in order per ladder, retried with backoff, then given up on.

A receiver stands in each ladder's events at a cursor (the last event it is done with),
which moves only once the events before it were delivered or given up on, in the same
transaction that records their deliveries: so a worker killed mid-delivery loses nothing
(the next one sends again from the cursor: a receiver may get an event twice, and tells by
``Ratings-Event-Id``), and a rolled-back change has no event to send. Delivery reads the
events the outbox wrote: recording never waits for it.

Every worker runs a dispatcher thread that leases the receivers no live worker holds
(``RATINGS_WEBHOOK_LEASE_S``) and sends each one's events from a thread of its own, so a
receiver that hangs (``RATINGS_WEBHOOK_TIMEOUT_S``) or fails holds back only its own
deliveries. An event that fails (an answer other than 2xx, a timeout, a refused
connection) is retried after 1 s, then 2, 4... at most 5 minutes apart, holding back that
receiver's later events of its ladder; once ``RATINGS_WEBHOOK_RETRY_S`` (a day) has
passed since its first attempt it is marked ``failed`` and the next ones go.

Each POST carries the event document (as the feed pages it), ``Content-Type:
application/json``, ``Ratings-Event-Id: <id>`` and ``Ratings-Signature: t=<unix time>,
v1=<hex HMAC-SHA256 of "<t>.<body>" with the receiver's secret>`` (the scheme of Stripe's
and GitHub's webhooks: check it in constant time, and refuse an old ``t``).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import SplitResult, urlsplit

from sqlalchemy.orm import Session

from app.config import get_settings
from app.domain.cursors import decode_cursor, encode_cursor
from app.domain.documents.webhooks import (
    DeliveryOut,
    DeliveryPage,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookOut,
)
from app.domain.times import utc
from app.errors import InvalidInput, NotFound
from app.services.events import event_document
from app.services.periodic import Periodic
from app.storage.repositories import webhooks as hook_repo
from app.storage.repositories.events import EventRow
from app.storage.repositories.webhooks import HookRow
from app.storage.unit_of_work import Transact

#: Events read per receiver and ladder at a time.
BATCH = 500
#: The first retry's wait, doubled each time up to :data:`MAX_BACKOFF`.
FIRST_BACKOFF = timedelta(seconds=1)
MAX_BACKOFF = timedelta(minutes=5)
#: How long an error is kept (characters).
MAX_ERROR = 500


def _hook_out(row: HookRow) -> WebhookOut:
    return WebhookOut(
        id=row.id,
        url=row.url,
        events=row.events,
        ladders=row.ladders,
        created_at=utc(row.created_at),
    )


def create_webhook(*, session: Session, body: WebhookCreate, now: datetime) -> WebhookCreated:
    """Register a receiver; it gets the events written from now on."""
    row = HookRow(
        id=f"wh_{uuid.uuid4().hex[:16]}",
        url=body.url,
        events=list(body.events),
        ladders=body.ladders,
        secret=f"whsec_{secrets.token_urlsafe(32)}",
        created_at=now,
    )
    hook_repo.add(session=session, hook=row)
    return WebhookCreated(**_hook_out(row).model_dump(), secret=row.secret)


def list_webhooks(*, session: Session) -> WebhookList:
    return WebhookList(webhooks=[_hook_out(row) for row in hook_repo.every_hook(session=session)])


def _unknown(hook_id: str) -> NotFound:
    return NotFound(f"webhook: no webhook {hook_id[:64]!r}")


def delete_webhook(*, session: Session, hook_id: str) -> WebhookOut:
    """Delete the receiver: nothing more is sent to it (a POST under way may finish)."""
    row = hook_repo.get(session=session, hook_id=hook_id)
    if row is None or not hook_repo.remove(session=session, hook_id=hook_id):
        raise _unknown(hook_id)
    return _hook_out(row)


def delivery_page(
    *, session: Session, hook_id: str, limit: int, cursor: str | None
) -> DeliveryPage:
    """The receiver's deliveries, the latest attempted first."""
    if hook_repo.get(session=session, hook_id=hook_id) is None:
        raise _unknown(hook_id)
    before = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 3 and isinstance(key[0], str)):
            raise InvalidInput("cursor: not a cursor of this list")
        try:
            before = (datetime.fromisoformat(key[0]), str(key[1]), int(key[2]))
        except (TypeError, ValueError):
            raise InvalidInput("cursor: not a cursor of this list") from None
    rows = hook_repo.deliveries(session=session, hook_id=hook_id, before=before, limit=limit)
    out = [
        DeliveryOut(
            event_id=row.event_id,
            event_type=row.event_type,
            ladder=row.ladder_id,
            status=row.status,
            attempts=row.attempts,
            last_error=row.last_error,
            first_attempt_at=utc(row.first_attempt_at),
            last_attempt_at=utc(row.last_attempt_at),
            next_attempt_at=utc(row.next_attempt_at) if row.next_attempt_at else None,
        )
        for row in rows
    ]
    last = rows[-1] if len(rows) == limit else None
    next_cursor = (
        encode_cursor([utc(last.last_attempt_at).isoformat(), last.ladder_id, last.event_seq])
        if last is not None
        else None
    )
    return DeliveryPage(deliveries=out, next_cursor=next_cursor)


# -- sending -----------------------------------------------------------------------------------


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``Ratings-Signature`` of ``body`` sent at ``timestamp`` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


#: Sends one event: (receiver, event id, body) -> None when delivered, else the error.
Send = Callable[[HookRow, str, bytes], str | None]


class _Connections(threading.local):
    """A thread's kept-alive connections, by scheme, host and port."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, str, int | None], http.client.HTTPConnection] = {}


def http_sender(timeout_s: float) -> Send:
    """POSTs over the standard library's HTTP client, a connection kept alive per thread
    and receiver (a third of httpx's cost a request, which bounds the pace of one
    receiver's events, sent one after the other). ``timeout_s`` bounds the connection and
    each wait for the receiver. A kept-alive connection the receiver closed meanwhile is
    opened again once."""
    connections = _Connections()

    def post(url: SplitResult, body: bytes, headers: dict[str, str]) -> int:
        key = (url.scheme, url.hostname or "", url.port)
        target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        for attempt in (1, 2):
            link = connections.open.get(key)
            if link is None:
                kind = (
                    http.client.HTTPSConnection if key[0] == "https" else http.client.HTTPConnection
                )
                link = connections.open[key] = kind(key[1], key[2], timeout=timeout_s)
            try:
                link.request("POST", target, body=body, headers=headers)
                response = link.getresponse()
                response.read()
            except BaseException as exc:
                link.close()
                del connections.open[key]
                stale = isinstance(
                    exc, http.client.RemoteDisconnected | BrokenPipeError | ConnectionResetError
                )
                if stale and attempt == 1:
                    continue  # a kept-alive connection the receiver had closed: once more
                raise
            if response.will_close:
                link.close()
                del connections.open[key]
            return response.status
        raise AssertionError("unreachable")

    def send(hook: HookRow, event_id: str, body: bytes) -> str | None:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "ratings-webhooks/1",
            "Ratings-Event-Id": event_id,
            "Ratings-Signature": signature(hook.secret, int(time.time()), body),
        }
        try:
            status = post(urlsplit(hook.url), body, headers)
        except (OSError, http.client.HTTPException) as exc:
            kind = "Timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
            return f"{kind}: {exc}"[:MAX_ERROR]
        if 200 <= status < 300:
            return None
        return f"HTTP {status}"

    return send


def _backoff(attempts: int) -> timedelta:
    wait: timedelta = min(FIRST_BACKOFF * (2 ** max(attempts - 1, 0)), MAX_BACKOFF)
    return wait


def deliver(
    *,
    transact: Transact,
    hook: HookRow,
    owner: str,
    send: Send,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    stopping: Callable[[], bool] = lambda: False,
) -> int:
    """Send ``hook`` its events, ladder by ladder in order, until none is due or ``owner``
    no longer holds it; how many were delivered."""
    delivered = 0
    while not stopping():
        events, retrying = transact(partial(_due, hook=hook), read_only=True)
        moved = False
        for ladder_id, ladder_events in events.items():
            held = retrying.get(ladder_id)
            if held is not None and held.next_attempt_at and utc(held.next_attempt_at) > clock():
                continue  # its retry is not due yet: the ladder's later events wait for it
            sent = _send_in_order(hook, ladder_events, held, send, clock)
            if not sent.rows and sent.done is None:
                continue
            settled = transact(
                partial(
                    _settle,
                    hook_id=hook.id,
                    owner=owner,
                    ladder_id=ladder_id,
                    sent=sent,
                )
            )
            if not settled:
                return delivered  # another worker holds the receiver now
            delivered += sent.delivered
            moved = moved or sent.done is not None
        if not moved:
            return delivered
    return delivered


def _due(
    session: Session, *, hook: HookRow
) -> tuple[dict[str, list[EventRow]], dict[str, hook_repo.DeliveryRow]]:
    """The receiver's events after its cursors, by ladder, and its deliveries being
    retried, by ladder."""
    events: dict[str, list[EventRow]] = {}
    for event in hook_repo.pending(session=session, hook=hook, limit=BATCH):
        events.setdefault(event.ladder_id, []).append(event)
    return events, hook_repo.retrying(session=session, hook_id=hook.id)


@dataclass
class Sent:
    """What sending a ladder's events did: the deliveries to record, the last event the
    receiver is done with (None: none), and how many were delivered."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    done: int | None = None
    delivered: int = 0


def _send_in_order(
    hook: HookRow,
    events: list[EventRow],
    held: hook_repo.DeliveryRow | None,
    send: Send,
    clock: Callable[[], datetime],
) -> Sent:
    """Send the events in order, up to the first that fails (to be retried) or the last.
    An event of a type the receiver does not take is done with at once."""
    retry_for = timedelta(seconds=get_settings().webhook_retry_s)
    sent = Sent()
    for event in events:
        if event.type not in hook.events:
            sent.done = event.seq
            continue
        previous = held if held is not None and held.event_seq == event.seq else None
        error = send(hook, event.id, event_document(event).encode())
        now = clock()
        attempts = (previous.attempts if previous else 0) + 1
        first = utc(previous.first_attempt_at) if previous else now
        row: dict[str, Any] = {
            "ladder_id": event.ladder_id,
            "event_seq": event.seq,
            "event_id": event.id,
            "event_type": event.type,
            "attempts": attempts,
            "first_attempt_at": first,
            "last_attempt_at": now,
            "last_error": error,
            "next_attempt_at": None,
        }
        if error is None:
            sent.rows.append({**row, "status": "delivered"})
            sent.delivered += 1
        elif now - first >= retry_for:
            sent.rows.append({**row, "status": "failed"})
        else:
            sent.rows.append(
                {**row, "status": "retrying", "next_attempt_at": now + _backoff(attempts)}
            )
            break
        sent.done = event.seq
    return sent


def _settle(session: Session, *, hook_id: str, owner: str, ladder_id: str, sent: Sent) -> bool:
    """Record the deliveries and move the cursor, if ``owner`` still holds the receiver."""
    if not hook_repo.holds(session=session, hook_id=hook_id, owner=owner):
        return False
    hook_repo.record(session=session, hook_id=hook_id, rows=sent.rows)
    if sent.done is not None:
        hook_repo.advance(
            session=session, hook_id=hook_id, ladder_id=ladder_id, after_seq=sent.done
        )
    return True


#: How often a worker deletes the deliveries of the receivers it holds that are past the
#: events' retention.
PRUNE_EVERY = timedelta(minutes=10)


def prune_deliveries(*, transact: Transact, hooks: list[HookRow], now: datetime) -> int:
    """Delete the receivers' deliveries (not those being retried) last attempted longer
    ago than the events' retention (``RATINGS_EVENT_RETENTION_S``; 0 keeps them); how
    many."""
    retention = get_settings().event_retention_s
    if not retention:
        return 0
    cutoff = now - timedelta(seconds=retention)
    return sum(
        transact(partial(hook_repo.delete_deliveries_before, hook_id=hook.id, cutoff=cutoff))
        for hook in hooks
    )


class Dispatcher:
    """A worker's deliveries: every ``RATINGS_WEBHOOK_POLL_S`` it leases the receivers no
    live worker holds (renewing its own) and sends each one's events from a thread of its
    own (one receiver at a time per thread, at most ``RATINGS_WEBHOOK_THREADS``)."""

    def __init__(self, transact: Transact, send: Send | None = None) -> None:
        settings = get_settings()
        self.transact = transact
        self.send = send or http_sender(settings.webhook_timeout_s)
        self.owner = f"{uuid.uuid4().hex[:16]}"
        self.lease = timedelta(seconds=settings.webhook_lease_s)
        self._pool = ThreadPoolExecutor(settings.webhook_threads, thread_name_prefix="webhook")
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self.clock = Periodic("webhook-dispatcher", settings.webhook_poll_s, self.tick)
        self._pruned_at: datetime | None = None

    def start(self) -> None:
        self.clock.start()

    def stop(self) -> None:
        self.clock.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def tick(self) -> None:
        if not self.transact(lambda session: hook_repo.any_hook(session=session), read_only=True):
            return  # no receiver: no write transaction every poll
        now = datetime.now(UTC)
        hooks = self.transact(
            lambda session: hook_repo.claim(
                session=session, owner=self.owner, now=now, until=now + self.lease
            )
        )
        for hook in hooks:
            with self._lock:
                if hook.id in self._busy:
                    continue
                self._busy.add(hook.id)
            self._pool.submit(self._run, hook)
        if self._pruned_at is None or now - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = now
            prune_deliveries(transact=self.transact, hooks=hooks, now=now)

    def _run(self, hook: HookRow) -> None:
        try:
            deliver(
                transact=self.transact,
                hook=hook,
                owner=self.owner,
                send=self.send,
                stopping=self.clock.stopping,
            )
        except Exception:  # the database away: the next tick tries again
            pass
        finally:
            with self._lock:
                self._busy.discard(hook.id)
