"""Webhooks as stored: the registrations (``webhooks``), where each stands in each ladder's
events (``webhook_cursors``: the last event it is done with), and its deliveries
(``webhook_deliveries``: one row per event it was sent or is being retried, with its
status, attempts and last error)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.orm import Session

from app.storage.models import (
    LadderEventCounter,
    Webhook,
    WebhookCursor,
    WebhookDelivery,
)
from app.storage.repositories import events as event_repo
from app.storage.repositories.events import EventRow


class HookRow(NamedTuple):
    id: str
    url: str
    events: list[str]
    ladders: list[str] | None
    secret: str
    created_at: datetime


_HOOK_COLUMNS = (
    Webhook.id,
    Webhook.url,
    Webhook.events,
    Webhook.ladders,
    Webhook.secret,
    Webhook.created_at,
)


def add(*, session: Session, hook: HookRow) -> None:
    """Store ``hook``; it starts after every event its ladders have now."""
    session.execute(insert(Webhook).values(**hook._asdict(), owner=None, lease_until=None))
    counters = select(LadderEventCounter.ladder_id, LadderEventCounter.seq)
    if hook.ladders is not None:
        counters = counters.where(LadderEventCounter.ladder_id.in_(hook.ladders))
    rows = [
        {"webhook_id": hook.id, "ladder_id": ladder_id, "after_seq": seq}
        for ladder_id, seq in session.execute(counters)
    ]
    if rows:
        session.execute(insert(WebhookCursor), rows)


def every_hook(*, session: Session) -> list[HookRow]:
    query = select(*_HOOK_COLUMNS).order_by(Webhook.created_at, Webhook.id)
    return [HookRow(*row) for row in session.execute(query)]


def any_hook(*, session: Session) -> bool:
    return session.execute(select(Webhook.id).limit(1)).first() is not None


def get(*, session: Session, hook_id: str) -> HookRow | None:
    row = session.execute(select(*_HOOK_COLUMNS).where(Webhook.id == hook_id)).first()
    return HookRow(*row) if row is not None else None


def remove(*, session: Session, hook_id: str) -> bool:
    """Delete the webhook (its cursors and deliveries go with it); whether there was one."""
    removed = session.execute(delete(Webhook).where(Webhook.id == hook_id))
    return bool(getattr(removed, "rowcount", 0))


def claim(*, session: Session, owner: str, now: datetime, until: datetime) -> list[HookRow]:
    """Lease to ``owner`` until ``until`` every webhook whose lease ran out or is its own;
    the webhooks it holds."""
    session.execute(
        update(Webhook)
        .where(
            or_(Webhook.lease_until.is_(None), Webhook.lease_until < now, Webhook.owner == owner)
        )
        .values(owner=owner, lease_until=until)
    )
    query = select(*_HOOK_COLUMNS).where(Webhook.owner == owner).order_by(Webhook.id)
    return [HookRow(*row) for row in session.execute(query)]


def holds(*, session: Session, hook_id: str, owner: str) -> bool:
    """Whether ``owner`` holds the webhook's lease (row-locked until the commit)."""
    found = session.execute(
        select(Webhook.id).where(Webhook.id == hook_id, Webhook.owner == owner).with_for_update()
    ).first()
    return found is not None


def pending(*, session: Session, hook: HookRow, limit: int) -> list[EventRow]:
    """The first ``limit`` events of each ladder of ``hook`` after its cursor there (a
    ladder it has no cursor in: from its first event), by ladder and number. The ladders
    with events it is not done with are found in one statement (each ladder's newest
    number beside the receiver's cursor), then their events read."""
    behind = select(LadderEventCounter.ladder_id, WebhookCursor.after_seq).outerjoin(
        WebhookCursor,
        (WebhookCursor.ladder_id == LadderEventCounter.ladder_id)
        & (WebhookCursor.webhook_id == hook.id),
    )
    behind = behind.where(
        WebhookCursor.after_seq.is_(None) | (WebhookCursor.after_seq < LadderEventCounter.seq)
    )
    if hook.ladders is not None:
        behind = behind.where(LadderEventCounter.ladder_id.in_(hook.ladders))
    out: list[EventRow] = []
    for ladder_id, after in session.execute(behind.order_by(LadderEventCounter.ladder_id)).all():
        out += event_repo.page(
            session=session, ladder_id=ladder_id, after_seq=after or 0, limit=limit
        )
    return out


def advance(*, session: Session, hook_id: str, ladder_id: str, after_seq: int) -> None:
    """The webhook is done with the ladder's events up to ``after_seq``."""
    moved = session.execute(
        update(WebhookCursor)
        .where(WebhookCursor.webhook_id == hook_id, WebhookCursor.ladder_id == ladder_id)
        .values(after_seq=after_seq)
    )
    if not getattr(moved, "rowcount", 0):
        session.execute(
            insert(WebhookCursor).values(
                webhook_id=hook_id, ladder_id=ladder_id, after_seq=after_seq
            )
        )


class DeliveryRow(NamedTuple):
    ladder_id: str
    event_seq: int
    event_id: str
    event_type: str
    status: str
    attempts: int
    last_error: str | None
    first_attempt_at: datetime
    last_attempt_at: datetime
    next_attempt_at: datetime | None


_DELIVERY_COLUMNS = (
    WebhookDelivery.ladder_id,
    WebhookDelivery.event_seq,
    WebhookDelivery.event_id,
    WebhookDelivery.event_type,
    WebhookDelivery.status,
    WebhookDelivery.attempts,
    WebhookDelivery.last_error,
    WebhookDelivery.first_attempt_at,
    WebhookDelivery.last_attempt_at,
    WebhookDelivery.next_attempt_at,
)


def retrying(*, session: Session, hook_id: str) -> dict[str, DeliveryRow]:
    """The webhook's deliveries being retried, by ladder (at most one each: a ladder's
    events go out in order, so one being retried holds back the ones after it)."""
    query = select(*_DELIVERY_COLUMNS).where(
        WebhookDelivery.webhook_id == hook_id, WebhookDelivery.status == "retrying"
    )
    return {row[0]: DeliveryRow._make(row) for row in session.execute(query)}


def record(*, session: Session, hook_id: str, rows: Sequence[dict[str, Any]]) -> None:
    """Write deliveries (by webhook, ladder and event number): first attempts inserted in
    one statement, a later attempt of one being retried updated."""
    first = [{"webhook_id": hook_id, **row} for row in rows if row["attempts"] == 1]
    if first:
        session.execute(insert(WebhookDelivery), first)
    for row in (row for row in rows if row["attempts"] > 1):
        changed = session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.webhook_id == hook_id,
                WebhookDelivery.ladder_id == row["ladder_id"],
                WebhookDelivery.event_seq == row["event_seq"],
            )
            .values(**{k: v for k, v in row.items() if k not in ("ladder_id", "event_seq")})
        )
        if not getattr(changed, "rowcount", 0):
            session.execute(insert(WebhookDelivery).values(webhook_id=hook_id, **row))


def deliveries(
    *, session: Session, hook_id: str, before: tuple[datetime, str, int] | None, limit: int
) -> list[DeliveryRow]:
    """The webhook's deliveries, the latest attempted first."""
    query = select(*_DELIVERY_COLUMNS).where(WebhookDelivery.webhook_id == hook_id)
    if before is not None:
        moment, ladder_id, seq = before
        query = query.where(
            (WebhookDelivery.last_attempt_at < moment)
            | (
                (WebhookDelivery.last_attempt_at == moment)
                & (
                    (WebhookDelivery.ladder_id < ladder_id)
                    | ((WebhookDelivery.ladder_id == ladder_id) & (WebhookDelivery.event_seq < seq))
                )
            )
        )
    query = query.order_by(
        WebhookDelivery.last_attempt_at.desc(),
        WebhookDelivery.ladder_id.desc(),
        WebhookDelivery.event_seq.desc(),
    ).limit(limit)
    return [DeliveryRow._make(row) for row in session.execute(query)]


def delete_deliveries_before(session: Session, *, hook_id: str, cutoff: datetime) -> int:
    """Delete the receiver's deliveries last attempted before ``cutoff``, but those being
    retried (they hold its cursor); how many."""
    deleted = session.execute(
        delete(WebhookDelivery).where(
            WebhookDelivery.webhook_id == hook_id,
            WebhookDelivery.last_attempt_at < cutoff,
            WebhookDelivery.status != "retrying",
        )
    )
    return int(getattr(deleted, "rowcount", 0) or 0)
